"""Text → vectors through an OpenAI-compatible `/embeddings` endpoint."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from qmd.core.cancel import checkpoint
from qmd.core.errors import QmdError
from qmd.core.records import record
from qmd.llm.families import Family, family_for
from qmd.llm.gguf_info import ModelInfo
from qmd.llm.models import RemoteSpec
from qmd.llm.remote.http import Endpoint, EndpointError
from qmd.llm.remote.tokens import RemoteTokenizer

__all__ = ["RemoteEmbedder", "RemoteInfo", "guess_family"]

_BERT_NAMES = ("minilm", "bge", "e5", "gte", "mpnet", "bert", "nomic", "arctic", "mxbai", "snowflake", "granite-embedding")


@record(frozen=True)
class RemoteInfo:
    """Who a remote model is: its name on the server and the identity that names its outputs."""

    name: str
    identity: str
    uri: str


def guess_family(model: str) -> str:
    """The input format a model's name suggests: bert (no prompts) unless it names Gemma or Qwen3."""
    name = model.lower()
    if "gemma" in name:
        return "embeddinggemma"
    if "qwen3" in name:
        return "qwen3-embedding"
    return "bert"  # BERT-like and unknown models: plain text, no instruction prefix


def remote_family(spec: RemoteSpec) -> tuple[Family, int]:
    """The family (templates, chunk size) and context of a remote embedder, from the config alone.

    Nothing is asked of the server: the family and the chunk size are part of the embedding
    fingerprint, which `status` computes without a network round trip. `context` defaults
    to 512 for BERT-like models (chunks of 256 tokens, as local 512-position BERTs) and 2048
    for the others (chunks of 900 tokens).
    """
    name = spec.family or guess_family(spec.model)
    context = spec.context or (512 if name == "bert" else 2048)
    arch = {"bert": "bert", "qwen3-embedding": "qwen3"}.get(name, "gemma-embedding")
    label = spec.model if name != "qwen3-embedding" else f"{spec.model} qwen3 embed"
    info = ModelInfo(path=Path(spec.uri), arch=arch, name=label, context_length=context, embedding_length=spec.dims, pooling=None)
    return family_for(info), context


class RemoteEmbedder:
    """The embed role served remotely: same members as the local `Embedder`.

    Vectors are L2-normalised here (llama-cpp-python's server returns them raw); every
    answer is checked: one finite vector per input, in `index` order, all of `dims` length
    (the config's `dims`, else the index's vectors for this endpoint, else the first answer).
    """

    def __init__(self, spec: RemoteSpec, known_dims: int | None = None) -> None:
        self.spec = spec
        self.endpoint = Endpoint(spec, "embed")
        self.tokenizer = RemoteTokenizer(self.endpoint)
        self.family, self.n_ctx = remote_family(spec)
        self.info = RemoteInfo(spec.model, spec.identity, spec.uri)
        self._dims = spec.dims or known_dims
        self.index_dims = known_dims if not spec.dims else None

    @property
    def dims(self) -> int:
        """Vector length: pinned by the config or the index, else asked of the server once."""
        if self._dims is None:
            self.embed([self.family.query("dimensions")])
        assert self._dims is not None
        return self._dims

    @property
    def batch_tokens(self) -> int:
        """One request's worth of full chunks (`batch` inputs per request)."""
        return self.spec.batch * self.n_ctx

    def load(self) -> None:
        """Nothing to load here: the endpoint serves the model."""

    def count_tokens(self, text: str) -> int:
        """How many tokens `text` takes (the server's tokenizer, else an estimate)."""
        return self.tokenizer.count(self.family.normalise(text))

    def fit(self, text: str, limit: int) -> str:
        """`text` cut to at most `limit` tokens."""
        return self.tokenizer.fit(text, limit)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalised vectors for already formatted inputs, `batch` texts per request."""
        out: list[list[float]] = []
        for i in range(0, len(texts), self.spec.batch):
            checkpoint()
            out += self._request([self.family.normalise(t) for t in texts[i : i + self.spec.batch]])
        return out

    def embed_query(self, query: str) -> list[float]:
        """The vector of a search question in the family's query format."""
        return self.embed([self.fit(self.family.query(query), self.n_ctx - 4)])[0]

    def _request(self, inputs: list[str]) -> list[list[float]]:
        answer = self.endpoint.post("/embeddings", {"model": self.spec.model, "input": inputs})
        data = answer.get("data") if isinstance(answer, dict) else None
        if not isinstance(data, list) or len(data) != len(inputs):
            got = len(data) if isinstance(data, list) else "no"
            raise EndpointError(f"the embed endpoint {self.spec.uri} answered {got} vectors for {len(inputs)} inputs; nothing was stored", "is it an embedding model? (llama.cpp: --embedding; llama-cpp-python: --embedding true)")
        ordered = sorted(data, key=lambda d: d.get("index", 0) if isinstance(d, dict) else 0)
        vectors = []
        for text, item in zip(inputs, ordered):
            raw = item.get("embedding") if isinstance(item, dict) else None
            if isinstance(raw, list) and raw and isinstance(raw[0], list):
                raw = raw[0]  # a server that returns one vector per token pooled to one row
            vectors.append(self._checked(text, raw))
        return vectors

    def _checked(self, text: str, raw: object) -> list[float]:
        where = self.spec.uri
        if not isinstance(raw, list) or not raw or not all(isinstance(x, (int, float)) and not isinstance(x, bool) for x in raw):
            raise EndpointError(f"the embed endpoint {where} answered no vector for {text[:40]!r} (a base64 or token-level answer?); nothing was stored", "serve an embedding model that answers float vectors")
        vector = [float(x) for x in raw]
        if not all(math.isfinite(x) for x in vector):
            raise QmdError(f"the embed endpoint {where} returned NaN or infinite values (for {text[:40]!r}); nothing was stored", "check the model the server runs, then: qmd embed")
        if self._dims is None:
            self._dims = len(vector)
        elif len(vector) != self._dims:
            if self.spec.dims:
                why = f"models.embed.dims says {self._dims}"
                hint = "fix or remove dims under models.embed in the index config"
            elif self.index_dims:
                why = f"the index's vectors for this endpoint and model have {self._dims}: the server now runs another model under that name"
                hint = f"serve the model the index was embedded with, or pin the new one with dims: {len(vector)} under models.embed (a new vector space: qmd embed embeds everything again)"
            else:
                why = f"its first answer had {self._dims}"
                hint = "check the model the server runs"
            raise QmdError(f"the embed endpoint {where} returned {len(vector)}-dim vectors, but {why}; nothing was stored", hint)
        norm = math.sqrt(sum(x * x for x in vector))
        if norm == 0.0:
            raise QmdError(f"the embed endpoint {where} returned a zero vector (for {text[:40]!r}); nothing was stored", "check the model the server runs")
        return [x / norm for x in vector]

    def close(self) -> None:
        """Close the kept-alive connection."""
        self.endpoint.close()


TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.llm.roles import EmbeddingModel

    _is_an_embedding_model: type[EmbeddingModel] = RemoteEmbedder
