"""Is a remote model there? What doctor asks of an `openai:BASE_URL#MODEL` role.

Three questions, each answered with what the server said: does the endpoint answer
(`GET /models`), does it serve the named model (its list of model ids), and for the embed
role, does a real embedding come back with the length of the index's vectors for this
endpoint and model. Short timeouts and no retries: doctor reports, it does not wait.
"""

from __future__ import annotations

import time

from qmd.core.errors import QmdError
from qmd.core.records import record, field
from qmd.llm.models import RemoteSpec
from qmd.llm.remote.http import Endpoint, EndpointError

PROBE_TIMEOUT_S = 10.0


@record
class ModelProbe:
    """What one remote role's endpoint said: `status` ok | warn | fail, a detail and the fix."""

    role: str
    uri: str
    status: str
    detail: str
    hint: str | None = None
    served: list[str] = field(default_factory=list)
    dims: int | None = None
    index_dims: int | None = None
    ms: float = 0.0


def serves(model: str, ids: list[str]) -> bool:
    """Whether `model` is among a server's model ids (Ollama adds `:latest`; llama.cpp may list a file path)."""
    for served in ids:
        base = served.rsplit("/", 1)[-1]
        if model in (served, base, base.rsplit(".gguf", 1)[0]) or served == f"{model}:latest" or (":" not in model and served.split(":", 1)[0] == model):
            return True
    return False


def probe(role: str, spec: RemoteSpec, model: object = None, index_dims: int | None = None) -> ModelProbe:
    """Ask the endpoint of `role` (see the module doc); `model` is the role's client, for a real call."""
    started = time.perf_counter()
    result = ModelProbe(role, spec.uri, "ok", "", index_dims=index_dims)

    def done(status: str, detail: str, hint: str | None = None) -> ModelProbe:
        result.status, result.detail, result.hint = status, detail, hint
        result.ms = (time.perf_counter() - started) * 1000
        return result

    endpoint = Endpoint(spec, role)
    timeout = min(spec.timeout_s, PROBE_TIMEOUT_S)
    try:
        listing = endpoint.get("/models", timeout=timeout, retries=0)
    except EndpointError as exc:
        if exc.status != 404:
            return done("fail", exc.message, exc.hint)
        listing = None  # no model list: the real call below still tells
    finally:
        endpoint.close()
    data = listing.get("data") if isinstance(listing, dict) else None
    result.served = [str(d.get("id")) for d in data if isinstance(d, dict) and d.get("id")] if isinstance(data, list) else []
    named = ""
    warning = None
    if listing is not None and not serves(spec.model, result.served):
        if len(result.served) != 1:
            return done("fail", f"{spec.base_url} answers but does not serve {spec.model!r} (it serves {', '.join(result.served) or 'nothing'})", f"load the model on the server (ollama pull {spec.model}), or name a served one after # in models.{role}")
        warning = f"the server lists only {result.served[0]!r}, not {spec.model!r} (a one-model server answers any name: check it is the model you mean)"
    else:
        named = f"serves {spec.model}"
    try:
        what = _call(role, model, timeout)
    except QmdError as exc:
        return done("fail", exc.message, exc.hint)
    if role == "embed":
        result.dims = getattr(model, "dims", None)
        if index_dims:
            what += ", as the index's vectors for it"
    detail = "; ".join(x for x in (f"{spec.base_url} answers", named, what, warning) if x)
    return done("warn" if warning else "ok", detail, f"check the server's model, or name its id after # in models.{role}" if warning else None)


def _call(role: str, model: object, timeout: float) -> str:
    """One real request through the role's client (embed, rerank); what came back."""
    if model is None:
        return ""
    endpoint = getattr(model, "endpoint", None)
    if isinstance(endpoint, Endpoint):  # doctor's short timeout, no retries
        endpoint.timeout_s, endpoint.retries = timeout, 0
    if role == "embed":
        vector = model.embed(["qmd doctor probe"])[0]  # type: ignore[attr-defined]
        return f"{len(vector)}-dim vectors"
    if role == "rerank":
        score = model.scores("qmd doctor probe", ["qmd doctor probe"])[0]  # type: ignore[attr-defined]
        return f"reranks (score {score:.2f})"
    return ""
