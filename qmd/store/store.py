"""The public entry point: one index (its backend and its YAML config) and what it can do.

`Store` is a façade (where the index lives: locate.py): each method delegates to one part —
`Collections` (qmd/store/collections.py: collections, contexts, `update`),
`Reader` (reading.py: search, vsearch, query, get, multi-get, ls),
`Models` (models.py: the three model roles, their caches, `embed`) and
`Maintenance` (maintenance.py: status, cleanup, integrity, rebuild) —
all sharing one `IndexState` (the config and the storage backend, qmd/backends/base.py).
"""

from __future__ import annotations

import os
from collections.abc import Callable
from functools import cached_property
from pathlib import Path
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms of every CLI call)

from qmd.core.config import DEFAULT_PATTERN, Config
from qmd.core.requests import Outcome, QueryRequest, SearchRequest, checked, request_for
from qmd.core.results import (
    CleanupReport,
    CollectionInfo,
    ContextInfo,
    Document,
    FileEntry,
    ModelStatus,
    MultiGetItem,
    Overlap,
    QueryResult,
    SearchHit,
    StatusInfo,
    UpdateReport,
    VectorSearch,
    VectorStatus,
)
from qmd.store.locate import backend_for
from qmd.store.state import IndexState

MULTI_GET_MAX_BYTES = 64 * 1024

if TYPE_CHECKING:
    from qmd.backends.base import IndexBackend, IndexCheck, RebuildReport
    from qmd.store.collections import Collections
    from qmd.store.maintenance import Maintenance
    from qmd.store.models import Models
    from qmd.store.reading import Reader
    from qmd.store.refresh import RefreshReport
    from qmd.store.transfer import ExportReport, ImportReport
    from qmd.index.embed_progress import OnEmbedProgress
    from qmd.index.embedding import EmbedReport
    from qmd.index.indexer import Progress
    from qmd.llm.models import ModelRef
    from qmd.llm.remote.probe import ModelProbe
    from qmd.llm.roles import EmbeddingModel, ExpansionModel, RerankModel
    from qmd.core.filters import Filter
    from qmd.core.query import SubQuery
    from typing import Any

__all__ = ["MULTI_GET_MAX_BYTES", "Store", "open_index"]


class Store:
    """One qmd index. Nothing is assumed: the caller names the index file and config file.

    Library code never prints: long operations report through optional callbacks.
    `backend` replaces the default SQLite file at `index_path` with another storage backend;
    `config` is the config at `config_path` as the caller already read it (it is read once).
    """

    def __init__(
        self, index_path: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None, *, backend: IndexBackend | None = None, config: Config | None = None,
    ) -> None:
        self.index_path = Path(index_path)
        self.config_path = Path(config_path) if config_path else self.index_path.with_suffix(".yml")
        config = config if config is not None else Config.load(self.config_path)
        self.backend: IndexBackend = backend if backend is not None else backend_for(self.index_path, self.config_path, config)
        self._state = IndexState(self.config_path, self.backend, config)
        self._storage_key: object = None if backend is not None else ()  # None: a backend given, never moved; (): not yet taken

    # Each part is built on first use, so `qmd search` never imports the indexer, the
    # embedding pipeline or the maintenance code (process start is most of a CLI search).

    @cached_property
    def _collections(self) -> Collections:
        from qmd.store.collections import Collections

        return Collections(self._state)

    @cached_property
    def _models(self) -> Models:
        from qmd.store.models import Models

        return Models(self._state)

    @cached_property
    def _reader(self) -> Reader:
        from qmd.store.reading import Reader

        return Reader(self._state, lambda: self._models)

    @cached_property
    def _maintenance(self) -> Maintenance:
        from qmd.store.maintenance import Maintenance

        return Maintenance(self._state, self._collections, self._models)

    # --- lifecycle ------------------------------------------------------------------

    @property
    def config(self) -> Config:
        """The index's YAML config as last read (see `refresh_config`)."""
        return self._state.config

    def loaded_models(self) -> list[str]:
        """Roles (embed, rerank, generate) whose model is loaded in this process."""
        return self._models.loaded() if "_models" in self.__dict__ else []

    def release_models(self) -> list[str]:
        """Free every loaded model and return their roles; the connection stays open.

        The next search that needs a model loads it again (a long-running server calls
        this after an idle period).
        """
        return self._models.release() if "_models" in self.__dict__ else []

    def refresh_config(self) -> bool:
        """Re-read the config file if it changed on disk since it was read; True if it did.

        For long-running processes (the MCP server): collections and contexts added with
        another `qmd` command are seen without a restart.
        """
        return self._state.refresh_config()

    def storage_moved(self) -> bool:
        """Whether the index now lives elsewhere than this Store opened it: the config's
        `database:` edited, its approval given or revoked (a project's `qmd trust`), or
        `QMD_DATABASE_URL` changed. A long-running server asks before each request and
        reopens (qmd/serve/service.py) instead of reading storage the config no longer names.
        The first call takes the baseline (a server calls it when it starts); then one `stat`
        of the config and of the trust file while nothing changed."""
        if self._storage_key is None:
            return False
        key = self._state.storage_key()
        if key == self._storage_key or self._storage_key == ():  # the first call takes the baseline
            self._storage_key = key
            return False
        self._storage_key = key
        from qmd.core.errors import QmdError

        try:
            return backend_for(self.index_path, self.config_path).location != self.backend.location
        except QmdError:
            return True  # it cannot be opened as configured now: reopening says why

    def close(self) -> None:
        self.release_models()
        self.backend.close()

    def warm_reader(self) -> None:
        """Make now what a first keyword search makes before it reads: the reader, the model
        table, the query pipeline's modules and the index's connection. A server does it in
        the idle time between its handshake and its client's first call; the answers do not
        change (each part is what that call would build). QmdError when the index cannot be read."""
        import qmd.llm.models  # the rerank model lookup of a query
        import qmd.search.hybrid
        import qmd.search.narrowed  # noqa: F401

        from qmd.core.cancel import without_waiting

        self._reader, self._models  # noqa: B018 - built on first use (see above)
        if self._state.backend.exists():
            with without_waiting():  # a locked index: the call opens it (and says why it cannot)
                self._state.db()

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- collections and contexts (collections.py) ----------------------------------

    def add_collection(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        pattern: str = DEFAULT_PATTERN,
        ignore: list[str] | None = None,
        update_command: str | None = None,
        *,
        index: bool = True,
        progress: Progress | None = None,
        exist_ok: bool = False,
        on_saved: Callable[[], None] | None = None,
    ) -> UpdateReport | None:
        """Add a folder as a collection and (by default) index it at once.

        `exist_ok=True`: a collection of that name on the same folder is kept (and updated,
        unless `index=False`) instead of an error, so a script can run twice. `on_saved` runs
        once the config names it, before it is indexed. A collection that cannot be indexed
        is not left in the config."""
        return self._collections.add(path, name, pattern, ignore, update_command, index=index, progress=progress, exist_ok=exist_ok, on_saved=on_saved)

    def set_update_command(self, name: str, command: str | None) -> None:
        """The shell command run in the collection's folder before each update (None clears it)."""
        self._collections.set_update_command(name, command)

    def remove_collection(self, name: str) -> int:
        """Forget a collection: its config entry and its rows. Files on disk are untouched."""
        return self._collections.remove(name)

    def rename_collection(self, old: str, new: str) -> None:
        self._collections.rename(old, new)

    def set_include_by_default(self, name: str, include: bool) -> None:
        """`include`/`exclude`: whether searches without -c look in this collection."""
        self._collections.set_include_by_default(name, include)

    def config_warnings(self) -> list[str]:
        """Keys of the config qmd does not know (typos), each with a did-you-mean."""
        return self._state.config.warnings()

    def orphaned_collections(self) -> list[str]:
        """Collections the index still holds rows of but the config no longer names (they are
        never served; the next `update` or `cleanup` drops them)."""
        return self._collections.orphaned()

    def collections(self) -> list[CollectionInfo]:
        return self._collections.infos()

    def overlapping_collections(self, name: str | None = None) -> list[Overlap]:
        """Collections over the same files (the same folder, or one inside another), each with
        the files indexed by both: a search shows each of those twice. `name`: its pairs only."""
        return self._collections.overlaps(name)

    def collection_folders(self) -> dict[str, Path]:
        """Each collection's folder as `update` reads it (a project-local config's relative
        paths taken from the project root; what the trust gate skips left out); no index read."""
        return {name: Path(coll.path) for name, coll in self._state.collections().items()}

    def collection(self, name: str) -> CollectionInfo:
        self._state.collection(name)
        return next(c for c in self.collections() if c.name == name)

    def add_context(self, target: str, text: str, cwd: str | None = None) -> ContextInfo:
        """Attach `text` to `/` (everything), a collection (qmd://name/) or a folder in one."""
        return self._collections.add_context(target, text, cwd)

    def contexts(self) -> list[ContextInfo]:
        return self._collections.contexts()

    def remove_context(self, target: str, cwd: str | None = None) -> None:
        self._collections.remove_context(target, cwd)

    def update(
        self,
        collections: list[str] | None = None,
        *,
        progress: Progress | None = None,
        run_commands: bool = True,
        on_command: Callable[[str, str], None] | None = None,
        on_wait: Callable[[], None] | None = None,
        wait: float | None = None,
    ) -> UpdateReport:
        """Re-index collections (all by default) under the index's writer lock.

        A collection's `update:` command runs first, in its folder; its failure is
        reported and the folder is still indexed as it is on disk. When another process
        writes the index, `on_wait` is called and the update waits: as long as it takes
        (`wait=None`), not at all (0) or `wait` seconds, then IndexBusyError names the holder.
        """
        return self._collections.update(collections, progress=progress, run_commands=run_commands, on_command=on_command, on_wait=on_wait, wait=wait)

    def refresh(
        self, collections: list[str] | None = None, *, progress: Progress | None = None, run_commands: bool = True, on_command: Callable[[str, str], None] | None = None,
        on_wait: Callable[[], None] | None = None, wait: float | None = None, on_updated: Callable[[UpdateReport], None] | None = None, embed_progress: OnEmbedProgress | None = None,
    ) -> RefreshReport:
        """`update`, then `embed` what updated cleanly; no embedding model at all skips the embed
        (`embed_skipped`), a failed embed is kept beside the update's report (qmd/store/refresh.py).
        `on_updated` sees the update's report before the embed starts; `embed_progress` hears
        the embed as `embed`'s `progress` does, its plan naming the documents the update added
        or changed."""
        from qmd.store.refresh import embed_updated

        update = self.update(collections, progress=progress, run_commands=run_commands, on_command=on_command, on_wait=on_wait, wait=wait)
        if on_updated is not None:
            on_updated(update)
        return embed_updated(self._models, collections, update, embed_progress, on_wait, wait)

    def lock_holder(self) -> str | None:
        """Who is writing the index right now (pid, command, since when), or None."""
        return self.backend.lock_holder()

    # --- reading (reading.py) -------------------------------------------------------

    def search(self, request: str | SearchRequest, /, **settings: Any) -> list[SearchHit]:
        """BM25 keyword search: a SearchRequest, or the text and any of its fields as keywords
        (`limit=None` returns every match). See search/fts.py.

        `filter` (JSON text, its decoded object, or a tree from qmd/core/filters.py) keeps
        documents whose metadata matches; `since` / `until` (ISO date or 7d, 2w) by date.
        Both apply inside the search: the top `limit` is exact. A bad filter is a QmdError.
        `match="all"` keeps only the documents holding every term.
        """
        found = request_for(SearchRequest, request, settings)
        if found.vector:
            raise TypeError("a request with vector=True is vsearch's: call Store.vsearch (or Store.answer)")
        return self._reader.search(found, self.where(found.filter, found.since, found.until))

    def vsearch(self, request: str | SearchRequest, /, **settings: Any) -> VectorSearch:
        """Nearest documents by meaning (cosine similarity of each document's best chunk);
        the request and `filter`, `since`, `until` as for `search` (an exact filtered nearest search)."""
        from qmd.core.records import replace

        found = request_for(SearchRequest, request, settings)
        return self._reader.vsearch(found if found.vector else replace(found, vector=True), self.where(found.filter, found.since, found.until))

    def query(self, request: str | QueryRequest, /, *, progress: Callable[[str], None] | None = None, **settings: Any) -> QueryResult:
        """Hybrid search: expansion, BM25 + vector lists, RRF, rerank, blend (search/hybrid.py):
        a QueryRequest, or the text and any of its fields as keywords.

        Missing models skip their stage; the result's `stages` and `notices` say which.
        `expand=None` expands only with a model trained for it (Generator.tuned); True with
        any generate model; False never.
        `keyword=False` searches vectors only (vsearch --expand).
        `filter`, `since`, `until` as for `search`: every list is filtered before fusion and rerank.
        """
        asked = request_for(QueryRequest, request, settings)
        return self._reader.query(asked, progress, self.where(asked.filter, asked.since, asked.until))

    def answer(self, request: SearchRequest | QueryRequest, progress: Callable[[str], None] | None = None) -> Outcome:
        """What a search command prints for `request`: its hits and what goes beside them
        (the same record a warm server answers the CLI with, qmd/cli/remote.py)."""
        if not isinstance(request, (SearchRequest, QueryRequest)):
            raise TypeError(f"expected a SearchRequest or a QueryRequest, not {type(request).__name__}")
        checked(request)
        return self._reader.answer(request, progress, self.where(request.filter, request.since, request.until))

    @staticmethod
    def where(filter: object = None, since: str | None = None, until: str | None = None) -> Filter | None:
        """The filter tree of a metadata filter and a date range (None: no filter); QmdError when bad.

        Grammar and semantics: qmd/core/filters.py (upstream qmd's `--filter`).
        """
        if filter is None and not since and not until:
            return None
        from qmd.core.filters import build

        return build(filter, since, until)

    def metadata_keys(self, collection: str | None = None) -> list[tuple[str, str, int]]:
        """(key, type, documents) of the typed metadata in the index, or in one collection."""
        if collection is not None:
            self._state.collection(collection)
        return self.backend.metadata_keys(collection)

    def get(self, ref: str, from_line: int | None = None, max_lines: int | None = None, cwd: str | None = None) -> Document:
        """One document (or `from_line`.. `max_lines` of it) by path, qmd:// URI or #docid.

        `path:from:count` in `ref` sets the range when the arguments do not.
        """
        return self._reader.get(ref, from_line, max_lines, cwd)

    def multi_get(self, pattern: str, max_lines: int | None = None, max_bytes: int = MULTI_GET_MAX_BYTES, cwd: str | None = None) -> list[MultiGetItem]:
        """Several documents: a glob over collection/path, a comma-separated list, or docids.

        Documents larger than `max_bytes` are listed as skipped with the reason.
        """
        return self._reader.multi_get(pattern, max_lines, max_bytes, cwd)

    def ls(self, target: str | None = None) -> list[FileEntry]:
        """Files of a collection (optionally under a sub-path): `name`, `name/sub`, `qmd://name/sub`.

        A sub-path that is no folder or file lists the files whose path starts with it (as the
        original); one matching nothing is a NotFoundError naming close folders."""
        return self._reader.ls(target)

    # --- models and vectors (models.py) -----------------------------------------------

    def model(self, role: str) -> ModelRef:
        """The model serving `role` (embed, rerank, generate) and where the choice came from."""
        return self._models.model(role)

    def models(self) -> list[ModelStatus]:
        return self._models.statuses()

    def embedder(self) -> EmbeddingModel:
        """The loaded embedding model (kept for the Store's lifetime; a remote endpoint's
        client for an `openai:` spec). Never downloads."""
        return self._models.embedder()

    def reranker(self) -> RerankModel:
        """The loaded rerank model (cross-encoder, yes/no form or a remote endpoint). Never downloads."""
        return self._models.reranker()

    def generator(self) -> ExpansionModel:
        """The loaded generate (query expansion) model, or a remote endpoint's client. Never downloads."""
        return self._models.generator()

    def probe_model(self, role: str) -> ModelProbe:
        """Ask a remote role's endpoint (`openai:…`) whether it answers, serves the named
        model and (embed) gives vectors of the index's length; short timeouts (doctor)."""
        return self._models.probe(role)

    def expand(self, question: str, generator: ExpansionModel | None = None) -> list[SubQuery]:
        """Typed expansion lines for `question`, from the index's cache when present."""
        return self._models.expand(question, generator)

    def rerank(self, query: str, texts: list[str], reranker: RerankModel | None = None) -> list[float]:
        """Relevance in [0, 1] of each text to `query`, cached per (model, query, text)."""
        return self._models.rerank(query, texts, reranker)

    def chunks_for(self, hashes: list[str]) -> dict[str, list[tuple[int, int]]]:
        """(start, end) of each document's chunks under the current embed model ({} if none)."""
        return self._models.chunks_for(hashes)

    def embed_collections(self, collections: list[str] | None = None) -> tuple[list[str], list[str]]:
        """(collections to embed, collections skipped because of `embed: false`)."""
        return self._state.embeddable(collections)

    def unconfigured_embedding(self) -> str | None:
        """Why this index has no embedding model at all (none configured, the built-in default
        never downloaded), or None. Unattended embedding (the updater) skips such an index
        instead of failing; a configured model that is missing is still an error."""
        return self._models.unconfigured_embedding()

    def embed(
        self, *, force: bool = False, collections: list[str] | None = None, progress: OnEmbedProgress | None = None,
        on_wait: Callable[[], None] | None = None, wait: float | None = None, chunk_strategy: str | None = None,
    ) -> EmbedReport:
        """Embed every document without vectors for the current embed model (writer lock held).

        `chunk_strategy` (regex, auto) overrides every collection's `chunk_strategy:` for this run.
        `progress` is called with an `EmbedProgress` at every step: first the plan per
        collection and the model loading, then the documents chunked, then the chunks and
        tokens embedded with the time left (`ProgressLines` writes it as lines).

        `force` drops this model's vectors of `collections` first (of every collection when
        None) and embeds them again; `embed: false` collections are skipped. The writer lock
        is taken for each batch's write only, so an update can run between two batches;
        with nothing to embed it is not taken at all. `wait` as for `update`.
        """
        return self._models.embed(force, collections, progress, on_wait, wait, chunk_strategy)

    def vector_status(self, collections: list[str] | None = None) -> VectorStatus:
        """Vectors of the current embed model and documents still needing `qmd embed`.

        Reads the model file's header only: never loads llama.cpp.
        """
        return self._models.vector_status(collections)

    # --- maintenance (maintenance.py) -------------------------------------------------

    def cleanup(self, *, wait: float | None = None, on_wait: Callable[[], None] | None = None) -> CleanupReport:
        """Drop soft-deleted documents and content no document uses, then compact (`wait` as for `update`)."""
        return self._maintenance.cleanup(wait, on_wait)

    def check(self, *, quick: bool = False) -> IndexCheck:
        """Read-only health of the index: opens, integrity scan (unless `quick`), schema,
        full-text rows against active documents, orphans, vector models. Never migrates."""
        return self._maintenance.check(quick)

    def vector_index_status(self) -> list[dict[str, object]]:
        """Each vector space's approximate index (issue 31) against its rows, for doctor."""
        return self._state.backend.vector_index_status()

    def vector_dims_mismatch(self) -> str | None:
        """The line saying the current embed model's vectors are stored with other dims than
        its file's header says (an earlier import's lie; `qmd embed` recreates them), else None.
        Reads the header only; a remote model is not asked."""
        dims = self._header_dims()
        model = self._models.current_vector_space() if dims else None
        if model is None or not dims or model.dims == dims:
            return None
        from qmd.search.vector import dims_mismatch

        return dims_mismatch(model, dims)

    def _header_dims(self) -> int | None:
        """The dims the embed model's file header says; None without a local model file (or a
        remote model's, unknown without a request)."""
        probe = self._models.embed_probe()
        dims = None if probe is None else getattr(probe.info, "embedding_length", None)
        return int(dims) if dims else None

    def repair_fts(self) -> int:
        """Rewrite the full-text rows from the stored content (they drifted); returns rows written."""
        return self._maintenance.repair_fts()

    def backup(self) -> Path:
        """A verified copy of the index beside it (`<name>.backup-<time>`, integrity checked)."""
        return self._maintenance.backup()

    def rebuild(self, progress: Progress | None = None) -> RebuildReport:
        """Build the index anew from the config's collections into a new file and swap it in
        atomically; the old (broken) file is kept beside it. Vectors need `embed` again."""
        return self._maintenance.rebuild(progress)

    def export(self, path: str | os.PathLike[str], collections: list[str] | None = None, progress: Callable[[int, int], None] | None = None) -> ExportReport:
        """Write the collections (None: all indexed) with their documents and the current embed
        model's vectors to one portable file (qmd/store/bundle.py), atomically. Refused, nothing
        written, when those vectors have other dims than the model's header says (poisoned)."""
        from qmd.store.transfer import export_index

        return export_index(self._state, self._models.current_vector_space(), Path(path), collections, progress, self._header_dims())

    def import_file(
        self, path: str | os.PathLike[str], *, places: dict[str, str | os.PathLike[str]] | None = None, root: str | os.PathLike[str] | None = None,
        force_model: bool = False, replace: bool = False, wait: float | None = None, on_wait: Callable[[], None] | None = None,
        progress: Callable[[str], None] | None = None,
    ) -> ImportReport:
        """Import a file of `export` (writer lock held): each collection placed at `places[name]`,
        else `root`/its folder's name (root: the current folder). Refuses another embed model
        (unless `force_model`: the vectors are kept under their own fingerprint, unused) and a
        collection name already here (unless `replace`). See qmd/store/transfer.py."""
        from qmd.index.embedding import fingerprint
        from qmd.store.transfer import import_index

        probe = self._models.embed_probe()
        here = None if probe is None else (fingerprint(probe), probe.info.name, getattr(probe.info, "embedding_length", None) or None)
        self._state.writes += 1
        with self.backend.writer_lock(timeout=wait, on_wait=on_wait):
            return import_index(
                self._state, Path(path), places={k: Path(v).expanduser() for k, v in (places or {}).items()}, root=Path(root or os.getcwd()).expanduser(),
                here=here, force_model=force_model, replace=replace, progress=progress,
            )

    def last_updated(self) -> str | None:
        """When a collection was last indexed (ISO-8601 UTC), or None if never: one cheap query
        (here, not in maintenance.py: every MCP answer's freshness asks, and importing that
        part loads the collections and model code a keyword query never uses)."""
        if not self._state.backend.exists():
            return None
        updated = self._state.db().collection_updated().values()
        return max(updated) if updated else None

    def document_count(self) -> int:
        """Active documents in the index (0 if it was never built)."""
        if not self._state.backend.exists():
            return 0
        return sum(self._state.db().collection_counts().values())

    def status(self, grammars: bool = True) -> StatusInfo:
        """The index's status; `grammars=False`: without the tree-sitter grammars (`grammars`
        left empty), which are the costly part of a small index's status."""
        return self._maintenance.status(grammars)


def open_index(name: str | None = None) -> Store:
    """The Store of the named index (default `index`) at its default paths (see `resolve_index`)."""
    from qmd.core.paths import resolve_index

    paths = resolve_index(name)
    return Store(paths.index_path, paths.config_path)
