"""POST /cli: the hits `qmd search`, `qmd vsearch` and `qmd query` print, from a warm server.

The CLI (qmd/cli/remote.py) sends the command and the exact Store call it would make
in-process; the server runs that call on its Store (its models already loaded) and returns
the hits whole (every SearchHit field) with what the CLI prints beside them: notices,
stages, sub-queries, timings, the vsearch model and pending count, and the roots of the
hit collections (for --full-path and terminal links). The CLI renders them with its own
renderers (qmd/cli/formats.py), so the output is the same bytes as an in-process run.

Body: {command: search|vsearch|query, text, options: {...Store keyword arguments},
build_id, identity} (identity: qmd/serve/identity.py). Answers:

    200  {hits, roots, notices, stages, searches, timings_ms, model, pending}
    400  a malformed body, an unknown option, or the Store's own QmdError (bad filter, …)
    403  a scoped token: this route reads the whole index, as the CLI does
    409  another build of qmd, or another index than the caller's (identity differs)
    503  the server stayed busy with another search for BUSY_WAIT_S seconds

The CLI treats every answer but 200 as "run in-process", so the server never has to be
right about an error: the local run reproduces it.
"""

from __future__ import annotations

import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.serve.service import ToolService
    from qmd.store.store import Store

BUSY_WAIT_S = 2.0  # how long a CLI request waits behind another search before it is told to run locally

_COMMON: dict[str, tuple[type, ...]] = {
    "limit": (int, type(None)), "collections": (list, type(None)), "min_score": (int, float), "snippet_chars": (int,),
    "filter": (str, type(None)), "since": (str, type(None)), "until": (str, type(None)),
}
OPTIONS: dict[str, dict[str, tuple[type, ...]]] = {
    "search": {**_COMMON, "full": (bool,), "line_numbers": (bool,)},
    "vsearch": {**_COMMON, "full": (bool,), "line_numbers": (bool,)},
    "query": {
        **_COMMON, "candidates": (int,), "intent": (str, type(None)), "rerank": (bool,), "expand": (bool, type(None)),
        "explain": (bool,), "keyword": (bool,), "full": (bool,),
    },
}


class RouteError(Exception):
    def __init__(self, status: int, error: str, hint: str = "") -> None:
        super().__init__(error)
        self.status, self.error, self.hint = status, error, hint


def parse(body: Any) -> tuple[str, str, dict[str, Any], str, str]:
    """(command, text, options, build_id, identity) of a /cli body; RouteError(400) when malformed."""
    if not isinstance(body, dict):
        raise RouteError(400, "the body must be a JSON object")
    unknown = set(body) - {"command", "text", "options", "build_id", "identity"}
    if unknown:
        raise RouteError(400, f"unknown field {sorted(unknown)[0][:60]!r}", "fields: command, text, options, build_id, identity")
    command, text, options = body.get("command"), body.get("text"), body.get("options", {})
    build, identity = body.get("build_id"), body.get("identity")
    if command not in OPTIONS:
        raise RouteError(400, "command must be one of search, vsearch, query")
    if not isinstance(text, str) or not isinstance(build, str) or not isinstance(identity, str) or not isinstance(options, dict):
        raise RouteError(400, "text, build_id and identity must be strings, options an object")
    allowed = OPTIONS[command]
    for name, value in options.items():
        kinds = allowed.get(name)
        if kinds is None:
            raise RouteError(400, f"unknown option {name[:60]!r} for {command}", f"options: {', '.join(allowed)}")
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise RouteError(400, f"option {name} has the wrong type")
        if name == "collections" and isinstance(value, list) and not all(isinstance(c, str) for c in value):
            raise RouteError(400, "collections must be a list of strings")
    return command, text, options, build, identity


def answer(service: ToolService, body: Any, scope: frozenset[str] | None) -> tuple[int, dict[str, Any], str]:
    """(status, JSON body, log summary) of one POST /cli request to `service`."""
    from qmd.core.errors import QmdError

    try:
        command, text, options, build, identity = parse(body)
        if scope is not None:
            raise RouteError(403, "a token scoped to collections cannot use /cli (it reads the whole index, as the CLI does)", "use /query, or an unscoped token")
        if build != service._build_id():
            raise RouteError(409, f"this server runs build {service._build_id()}, the client {build[:80]}", "restart the server: qmd mcp stop, then start it again")
        if identity != service.identity():
            raise RouteError(409, "the client reads another index than this server (index path, database, config or models differ)")
        if not service._lock.acquire(timeout=BUSY_WAIT_S):
            raise RouteError(503, f"busy with another search for {BUSY_WAIT_S:g} s", "run it in-process (the CLI does)")
        try:
            service._refresh()
            payload = run(service.store, command, text, dict(options))
        except QmdError as exc:
            raise RouteError(400, exc.message, exc.cli_hint or "") from exc
        finally:
            service._last_model_use = time.monotonic()
            service._lock.release()
    except RouteError as exc:
        return exc.status, {"error": exc.error, "hint": exc.hint}, f"{exc.status} {exc.error[:80]}"
    return 200, payload, f"{command} → {len(payload['hits'])} hits"


def run(store: Store, command: str, text: str, options: dict[str, Any]) -> dict[str, Any]:
    """The Store call the CLI would make in-process, and what it prints beside the hits."""
    from qmd.core.results import SearchHit

    payload: dict[str, Any] = {"notices": [], "stages": {}, "searches": [], "timings_ms": {}, "model": "", "pending": 0}
    if command == "search":
        hits = store.search(text, **options)
    elif command == "vsearch":
        found = store.vsearch(text, **options)
        hits, payload["model"], payload["pending"] = found.hits, found.model, found.pending
    else:
        fill = options.pop("full", False)
        result = store.query(text, **options)
        hits = result.hits
        if fill:  # query --full: each hit's whole document (the CLI's shape_hits numbers it)
            for hit in hits:
                hit.body = store.get(hit.uri).text
        payload.update(notices=result.notices, stages=result.stages, searches=result.searches, timings_ms=result.timings_ms)
    wanted = {h.collection for h in hits}
    payload["roots"] = {c.name: c.path for c in store.collections() if c.name in wanted}
    fields = list(SearchHit.__annotations__)
    payload["hits"] = [{name: getattr(h, name) for name in fields} for h in hits]
    return payload
