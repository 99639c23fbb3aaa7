"""The storage seam: everything an index keeps, behind one interface.

`Store`, the indexer, `embed` and the search pipeline call only what `IndexBackend`
declares; no SQL, PRAGMA, FTS5 MATCH string or vec0 statement exists above it. It is an
abstract base class with two subclasses: SQLite (apsw + FTS5 + sqlite-vec,
`qmd/backends/sqlite/`) and PostgreSQL (psycopg + pgvector, `qmd/backends/postgres/`). What
both do alike lives here and in `sql.py`; neither backend's package imports the other's.

What a backend stores:
- documents: one row per (collection, path), soft-deleted when the file goes, pointing at
  content by its sha256 (identical files share one content row and their vectors);
- full-text fields (filepath, title, body) ranked by BM25 with column weights 1.5 / 4 / 1;
- chunk vectors per embedding fingerprint (one vector space each), keyed by content hash;
- per-collection state (when last indexed) and the files skipped or warned about;
- an LLM cache (expansions, rerank scores), written best-effort;
- its schema as named migrations, and one writer lock (readers never wait).

Document ids (`DocRow.id`) are opaque integers, stable while the document exists.

Filters (`where`, qmd/core/filters.py) reach the backend as a tree of typed metadata
conditions and date ranges, never as query text: each backend compiles it to its own
language and applies it inside the search, so a filtered top-k is exact.
"""

from __future__ import annotations

import abc
import functools
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from contextvars import ContextVar
from pathlib import Path
from types import FunctionType

from qmd.backends import sql
from qmd.backends.owner import META_KEY, Owner, decide
from qmd.backends.rows import (  # the records of the seam, imported by the rest of qmd from here
    METADATA_VERSION,
    MIN_DOCID,
    ChunkVector,
    CollectionWriter,
    DocRow,
    DocumentWrite,
    FieldsFor,
    FileRow,
    IndexCheck,
    KnownFile,
    Nearest,
    RebuildReport,
    Removed,
    SearchFields,
    Term,
    TextQuery,
    Totals,
    VectorModel,
)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.errors import QmdError
    from qmd.core.filters import Filter
    from qmd.backends.recall import Recall
    from qmd.backends.parts import CacheSql, Connection, DocumentsSql, FulltextSql, VectorsSql


VECTOR_INDEX_ENV = "QMD_VECTOR_INDEX"
VECTOR_INDEX_MODES = ("exact", "approx", "auto")


_FORCED_MODE: ContextVar[str | None] = ContextVar("qmd_vector_index", default=None)


@contextmanager
def forced_vector_index(mode: str) -> Iterator[None]:
    """`vector_index_mode()` answers `mode` inside the block (this thread or task only):
    measuring an index's recall searches it both ways (qmd/backends/recall.py)."""
    token = _FORCED_MODE.set(mode)
    try:
        yield
    finally:
        _FORCED_MODE.reset(token)


def vector_index_mode() -> str:
    """exact | approx | auto, from QMD_VECTOR_INDEX (a bad value: an error naming the choices).
    exact: every vector search computes all distances, on both backends (recall 1.0; a
    near-uniform set beats every approximate structure measured: docs/performance.md);
    auto (default): SQLite's approximate index from APPROX_MIN_CHUNKS, PostgreSQL's HNSW past
    its exact sizes, each only while its measured recall stands at RECALL_TARGET
    (qmd/backends/recall.py); approx: the approximate index whenever it is built (SQLite: at
    any size), whatever it measured."""
    import os

    forced = _FORCED_MODE.get()
    if forced is not None:
        return forced
    value = os.environ.get(VECTOR_INDEX_ENV, "auto").strip().lower() or "auto"
    if value not in VECTOR_INDEX_MODES:
        from qmd.core.errors import QmdError

        raise QmdError(f"{VECTOR_INDEX_ENV}={value!r} is not one of {', '.join(VECTOR_INDEX_MODES)}", f"set {VECTOR_INDEX_ENV} to exact, approx or auto (the default), or unset it")
    return value


class IndexBackend(abc.ABC):
    """Where one index lives. Opened lazily; every method opens it when needed.

    What the backends do the same way is written here once: every public method's driver
    errors become one QmdError (`_failure`; see `_guard_methods`), the owner check, the reads
    and writes whose SQL both speak (qmd/backends/sql.py), and the calls that pass straight to
    the backend's own modules (`DOCUMENTS`, `FULLTEXT`, `CACHE`, and `_vectors()`, which
    imports its module when first needed; mypy checks each against its protocol in
    qmd/backends/parts.py). A backend implements the abstract methods: its connection and
    lifecycle, the writer lock, cleanup and the repairs.
    """

    FOREIGN_HINT = ""  # what to do when the index belongs to another config (owner.decide)
    UNGUARDED = frozenset({"close", "inspect"})  # public methods whose errors pass as raised (`inspect` reports them as data)
    CONTEXTS = frozenset({"collection_writer", "bulk_vectors", "writer_lock"})  # return context managers: errors in the with-body are translated too

    BYTE_ORDER = ""  # appended to a text column to sort it in byte order (SQLite's default order; PostgreSQL's needs COLLATE "C")
    DOCUMENTS: DocumentsSql  # the backend's documents module (imported with it)
    FULLTEXT: FulltextSql  # the backend's full-text module
    CACHE: CacheSql  # the backend's LLM-cache module

    owner: Owner | None = None  # the config this index belongs to (qmd/backends/owner.py); None: unchecked
    _claim = False  # the owner record is to be written by the next write (open(create=True))

    def __init_subclass__(cls) -> None:
        super().__init_subclass__()
        _guard_methods(cls)

    # --- what each backend supplies ---------------------------------------------------

    @abc.abstractmethod
    def connection(self) -> Connection:
        """The open connection (opened on first use; never creates the index)."""

    @abc.abstractmethod
    def _failure(self, exc: Exception) -> QmdError | None:
        """The QmdError a driver's error means for a person (a damaged file, the server gone),
        or None: it is raised as it is."""

    @abc.abstractmethod
    def _vectors(self) -> VectorsSql:
        """The backend's vectors module (imported when first needed)."""

    # --- lifecycle --------------------------------------------------------------------

    @property
    @abc.abstractmethod
    def location(self) -> str:
        """A path or URL for messages."""

    @abc.abstractmethod
    def exists(self) -> bool:
        """Whether the index was ever created (a read of a missing one is an error naming the fix)."""

    @abc.abstractmethod
    def open(self, *, create: bool) -> None:
        """Connect (creating the index when `create`) and apply pending migrations."""

    @abc.abstractmethod
    def close(self) -> None: ...

    @abc.abstractmethod
    def follow(self) -> bool:
        """Reconnect on next use when the index at `location` is no longer the one open (its
        file deleted or replaced under the same path); True if so. A server's stale view
        must not outlive the index it was opened on."""

    @abc.abstractmethod
    def size_bytes(self) -> int: ...

    @abc.abstractmethod
    def change_token(self) -> object:
        """A value that changes whenever another connection commits (cheap; for caches)."""

    @abc.abstractmethod
    def writer_lock(self, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """One writer at a time (update, embed, cleanup, repairs); readers never wait.

        A held lock calls `on_wait` once, then waits up to `timeout` seconds (None: as long
        as it takes; 0: not at all) before IndexBusyError names the holder.
        """

    def _check_owner(self, create: bool) -> None:
        """On connecting: refuse an index another config owns (ForeignIndexError), and claim an
        unclaimed one, now when `create`, else at the next `open(create=True)`. An index
        refused stays closed to this backend."""
        if self.owner is None:
            return
        try:
            self._claim = decide(self.meta_values(META_KEY).get(META_KEY), self.owner, self.location, self.FOREIGN_HINT)
            if create and self._claim:
                self._write_owner()
        except BaseException:
            self.close()
            raise

    def _write_owner(self) -> None:
        assert self.owner is not None
        self.set_meta(META_KEY, self.owner.to_text())
        self._claim = False

    # --- documents --------------------------------------------------------------------

    def documents(self, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
        """Rows and texts of the given document ids (the search hot path: one query)."""
        return self.DOCUMENTS.documents(self.connection(), ids)

    def find(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
        """Active documents matching every given field, by collection then path."""
        return sql.find(self.connection(), self.BYTE_ORDER, collection=collection, path=path, hash_prefix=hash_prefix)

    def removed(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[Removed]:
        """Documents whose file was gone at an update (soft-deleted, until cleanup) matching
        every given field, each with when that update ran when known."""
        return sql.removed(self.connection(), self.BYTE_ORDER, collection=collection, path=path, hash_prefix=hash_prefix) if self.exists() else []

    def content(self, content_hash: str) -> str | None:
        return sql.content(self.connection(), content_hash)

    def docid_lengths(self, hashes: Sequence[str]) -> dict[str, int]:
        """How many hex digits make each content hash's docid unique among active documents (≥ 6)."""
        return self.DOCUMENTS.docid_lengths(self.connection(), hashes)

    def files(self, collection: str, under: str = "") -> list[FileRow]:
        """Active files of a collection, optionally under a sub-path, by path."""
        return sql.files(self.connection(), self.BYTE_ORDER, collection, under)

    def collection_counts(self) -> dict[str, int]:
        """Active documents per collection."""
        return sql.collection_counts(self.connection()) if self.exists() else {}

    def collection_updated(self) -> dict[str, str]:
        """When each indexed collection was last updated (ISO-8601 UTC)."""
        return sql.collection_updated(self.connection()) if self.exists() else {}

    def indexed_collections(self) -> set[str]:
        """Every collection name the index holds rows of (documents, state or file issues)."""
        return sql.indexed_collections(self.connection()) if self.exists() else set()

    def file_issues(self) -> list[tuple[str, str, str, str]]:
        """(collection, path, severity, reason) of every skipped or warned-about file."""
        return sql.file_issues(self.connection(), self.BYTE_ORDER) if self.exists() else []

    def totals(self) -> Totals:
        return sql.totals(self.connection()) if self.exists() else Totals(0, 0, 0)

    def metadata_keys(self, collection: str | None = None) -> list[tuple[str, str, int]]:
        """(key, type, active documents having it) of the metadata, by key then type."""
        return sql.metadata_keys(self.connection(), self.BYTE_ORDER, collection) if self.exists() else []

    def count_matching(self, where: Filter, collections: list[str] | None = None, only: Sequence[int] | None = None) -> int:
        """Active documents (in `collections`; None: all; among the ids `only` when given) that match a filter."""
        return self.DOCUMENTS.count_matching(self.connection(), where, collections, only) if self.exists() else 0

    def collection_writer(self, collection: str) -> AbstractContextManager[CollectionWriter]:
        """One collection's update as one transaction: a crash leaves the previous state."""
        self.open(create=True)
        return self.DOCUMENTS.collection_writer(self.connection(), collection)

    @abc.abstractmethod
    def atomic(self) -> AbstractContextManager[None]:
        """One transaction around many writes (collection writers nest inside it): an import
        replacing collections is all or nothing, even when interrupted part way."""

    def after_atomic(self, documents: int) -> None:
        """`documents` documents were written inside `atomic` and committed: do what a large
        write is followed by but no transaction may run (PostgreSQL: VACUUM and ANALYZE, as
        after an update, so the planner has statistics at once). Best effort: the data is
        committed, so a failure here is not the write's. Nothing by default."""

    def drop_collection(self, name: str) -> int:
        """Delete every row of a collection; returns the documents dropped."""
        return self.DOCUMENTS.drop_collection(self.connection(), name)

    def meta_values(self, prefix: str) -> dict[str, str]:
        """The index's own records (`meta` rows) whose key starts with `prefix`."""
        return sql.meta_values(self.connection(), prefix)

    def set_meta(self, key: str, value: str | None) -> None:
        """Write (None: delete) one of the index's own records; the caller holds the writer lock."""
        sql.set_meta(self.connection(), key, value)

    def rename_collection(self, old: str, new: str, fields: FieldsFor) -> None:
        """Move a collection's rows to a new name (its full-text filepaths change)."""
        self.DOCUMENTS.rename_collection(self.connection(), old, new, fields)

    @abc.abstractmethod
    def cleanup(self) -> tuple[int, int]:
        """Drop soft-deleted documents, unused content and their vectors, then compact.

        Returns (documents dropped, content rows dropped).
        """

    # --- full text --------------------------------------------------------------------

    def bm25(
        self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
    ) -> list[tuple[int, float]]:
        """(document id, raw BM25 score, more negative is better) best first, without `exclude`.

        `collections=None` searches everything; `limit=None` returns every match; `where`
        keeps only documents matching the filter, inside the query (the top-k is exact).
        """
        return self.FULLTEXT.bm25(self.connection(), query, limit, collections, exclude, where)

    @abc.abstractmethod
    def repair_fulltext(self, fields: FieldsFor) -> int:
        """Rewrite every full-text row from the stored content; returns the rows written."""

    # --- vectors ----------------------------------------------------------------------

    def vector_model(self, fingerprint: str) -> VectorModel | None:
        return sql.model_row(self.connection(), fingerprint)

    def vector_models_named(self, model: str) -> list[VectorModel]:
        """Every vector space of the model named `model` (one per fingerprint), oldest first."""
        return sql.models_named(self.connection(), model)

    def ensure_vector_model(self, fingerprint: str, model: str, dims: int) -> VectorModel:
        """The vector space of a fingerprint, created on first use."""
        return self._vectors().ensure_model(self.connection(), fingerprint, model, dims)

    def reset_vector_model(self, model: VectorModel, dims: int) -> VectorModel:
        """Recreate the vector table of `model` with `dims`, its vectors dropped: the recovery of
        a space whose stored dims are not its model's (see `vector_dims_mismatch`)."""
        return self._vectors().reset_model(self.connection(), model, dims)

    def pending_embeddings(self, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
        """(content hash, title) of active documents in `collections` without vectors for the model,
        or whose vectors were cut otherwise than wanted: by syntax (chunker `ast`, or `ast!` for
        a file that did not parse) for a path ending in one of `ast[collection]`'s extensions,
        by regex (`regex`, or `ast!`) for every other. Content in several documents is chunked
        by syntax when any of them wants it."""
        return sql.pending_hashes(self.connection(), model_id, collections, ast)

    def embedded_hashes(self, model_ids: Sequence[int], hashes: Sequence[str]) -> set[str]:
        """The contents among `hashes` with vectors of any of `model_ids` (see sql.embedded_hashes)."""
        return sql.embedded_hashes(self.connection(), model_ids, hashes)

    def pending_per_collection(self, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> dict[str, int]:
        """collection → its active documents whose content `pending_embeddings` lists (those
        with none left out): what an embed of `collections` is about to do, per collection."""
        return sql.pending_per_collection(self.connection(), model_id, collections, ast)

    def without_vectors(self, model: VectorModel, ids: Sequence[int]) -> set[int]:
        """The documents among `ids` whose current content has no vectors for `model` (changed
        or added since the last embed, or never embedded): a query counts their absence from
        the vector lists as no evidence, not as a miss."""
        return sql.without_vectors(self.connection(), model.id, ids)

    def orphaned_hashes(self, model: VectorModel, limit: int = 500) -> list[str]:
        """Content hashes holding chunks of `model` that no document uses any more (searched by
        nobody; `cleanup` drops them), at most `limit`."""
        return sql.orphaned_hashes(self.connection(), model.id, limit)

    def write_vectors(self, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None) -> int:
        """Replace the chunks of each content hash in `batch`, in one transaction; returns chunks
        written. `chunkers`: how each hash was cut (`regex` when absent)."""
        return self._vectors().write_batch(self.connection(), model, batch, chunkers)

    def set_chunkers(self, model: VectorModel, chunkers: Mapping[str, str]) -> None:
        """Record how already embedded content was cut (its chunks did not change)."""
        self._vectors().set_chunkers(self.connection(), model, chunkers)

    def chunking_fallbacks(self, model_id: int | None) -> list[tuple[str, str]]:
        """(collection, path) of active documents meant to be cut by syntax whose file did not
        parse (chunker `ast!`: cut by regex)."""
        return sql.chunking_fallbacks(self.connection(), model_id)

    def drop_vectors(self, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
        """Forget the vectors of one fingerprint: of the given content hashes, or all (`embed -f`)."""
        self._vectors().drop_all(self.connection(), model, hashes)

    def bulk_vectors(self, model: VectorModel, documents: int) -> AbstractContextManager[None]:
        """Entered around writing the vectors of `documents` documents in many batches (one embed
        run). A backend whose vector index is costly to keep up row by row may build it once at
        the end instead (PostgreSQL's HNSW), searches staying exact meanwhile. Default: nothing."""
        from contextlib import nullcontext

        return nullcontext()

    def check_vector_settings(self) -> None:
        """Raise the QmdError of a bad vector-search setting (QMD_VECTOR_INDEX, read by both
        backends) before `qmd embed` spends hours embedding."""
        vector_index_mode()

    def vector_index_due(self, model: VectorModel) -> bool:
        """Whether `qmd embed` has work on `model`'s approximate vector index: the settings want
        one that is not built (or not finished), or its recall is not measured for what it
        holds now (`vector_recall_due`)."""
        return self._structure_due(model) or self.vector_recall_due(model)

    def _structure_due(self, model: VectorModel) -> bool:
        """Whether the settings want an approximate structure for `model` that is not built or
        not finished. Default: the backend has none to build."""
        return False

    def vector_index_status(self) -> list[dict[str, object]]:
        """Per vector space with chunks: its recorded approximate structure against its rows,
        for doctor (keys: model, structure, state, chunks, floats, codes, due, recall,
        recall_due). Default: none."""
        return []

    def build_vector_index(self, model: VectorModel) -> int:
        """Build or finish the approximate vector index (resumable, readers never wait), then
        measure its recall when due; returns the chunks it coded."""
        coded = self._build_structure(model)
        if self.vector_recall_due(model):
            self.measure_vector_recall(model)
        return coded

    def _build_structure(self, model: VectorModel) -> int:
        """Build or finish the approximate structure itself; chunks coded. Default: nothing."""
        return 0

    def _approx_identity(self, model: VectorModel) -> tuple[str, int] | None:
        """(identity, rows) of the approximate index a search of `model` would take were its
        recall trusted: words that change when it is rebuilt or retrained, and the vectors it
        holds; None when searches of this space are exact anyway (small, none built)."""
        return None

    def vector_recall(self, model: VectorModel) -> Recall | None:
        """The last measurement of `model`'s approximate index (qmd/backends/recall.py)."""
        from qmd.backends import recall

        return recall.parse(self.meta_values(recall.key(model.id)).get(recall.key(model.id)))

    def vector_recall_due(self, model: VectorModel) -> bool:
        """Whether the approximate index a search would take has no measurement that stands for
        it (so searches under auto stay exact): `qmd embed` measures it. Never under exact."""
        return self._recall_state(model)[1]

    def recall_status(self, model: VectorModel) -> dict[str, object]:
        """For `vector_index_status`: `recall` (the last measurement's recall@10, or None),
        `recall_words` (what it measured), `recall_due` (none stands for the index now: searches
        under auto are exact until `qmd embed` measures it) and `recall_trusted` (auto searches
        take the index; under QMD_VECTOR_INDEX=approx whatever it measured), `recall_target`
        (what a measurement must show) and `vector_mode`."""
        from qmd.backends.recall import RECALL_TARGET

        check, due, trusted = self._recall_state(model)
        mode = vector_index_mode()
        return {
            "recall": check.recall if check else None, "recall_words": check.words() if check else None, "recall_due": due,
            "recall_trusted": trusted or (mode == "approx" and not due), "recall_target": RECALL_TARGET, "vector_mode": mode,
        }

    def _recall_state(self, model: VectorModel) -> tuple[Recall | None, bool, bool]:
        """(the last measurement, whether one is due, whether auto searches take the index)."""
        check = self.vector_recall(model)
        found = self._approx_identity(model) if vector_index_mode() != "exact" else None
        if found is None:
            return check, False, False
        identity, rows = found
        return check, check is None or not check.stands(rows, identity), check is not None and check.trusted(rows, identity)

    def measure_vector_recall(self, model: VectorModel) -> Recall | None:
        """Measure recall@10 of `model`'s approximate index against exact search (see
        qmd/backends/recall.py) and keep it; None when searches of the space are exact anyway.
        Reads only, then one small write: the caller holds the writer lock."""
        from qmd.backends import recall
        from qmd.core.clock import now_iso

        found = self._approx_identity(model)
        samples = self.vector_sample(model, recall.RECALL_QUERIES) if found else []
        if found is None or not samples:
            return None
        with forced_vector_index("approx"):  # each sample's nearest other document, through the index (a miss only moves the queries farther)
            neighbours = self.nearest_many(model, samples, 2, None)
        cosine = round(recall.query_cosine([[hit[1] for hit in page] for page in neighbours]), 4)
        queries = recall.queries_near(samples, model.id, cosine)
        with forced_vector_index("exact"):
            exact = self.nearest_many(model, queries, recall.RECALL_K, None)
        with forced_vector_index("approx"):
            approx = self.nearest_many(model, queries, recall.RECALL_K, None)
        value, low, counted = recall.overlap([[hit[0] for hit in page] for page in exact], [[hit[0] for hit in page] for page in approx])
        check = recall.Recall(round(value, 4), counted, found[1], found[0], now_iso(), round(low, 4), cosine, recall.METHOD)
        with self.atomic():
            self.set_meta(recall.key(model.id), check.to_text())
        return check

    def nearest_documents(
        self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
    ) -> list[Nearest]:
        """The active documents in `scope` (None: all) and matching `where` whose best chunk is
        nearest, best first; exact (a selective filter still fills `limit` when it can)."""
        return self._vectors().nearest_documents(self.connection(), model, query, limit, scope, where)

    def nearest_many(
        self, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = None,
    ) -> list[list[Nearest]]:
        """`nearest_documents` of each query, the same answers, the work shared where the backend
        can (SQLite: one pass over the vectors for all; a hybrid query's sub-queries)."""
        return self._vectors().nearest_many(self.connection(), model, queries, limit, scope, where)

    def vector_counts(self, model_id: int | None) -> tuple[int, int]:
        """(chunks, embedded content of active documents) of one vector space (zeros for None)."""
        return sql.vector_counts(self.connection(), model_id)

    def embedded_in(self, model_id: int | None, collections: Sequence[str]) -> int:
        """Distinct content of the active documents of `collections` with vectors in this vector space."""
        return sql.embedded_in(self.connection(), model_id, collections)

    def embedded_per_collection(self, model_id: int) -> dict[str, int]:
        """Active documents of each collection with vectors in this vector space."""
        return sql.embedded_per_collection(self.connection(), model_id)

    def chunk_spans(self, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        """(start, end) of each content hash's chunks, in order."""
        return self._vectors().chunk_spans(self.connection(), model, hashes)

    def chunk_vectors(self, model: VectorModel, hashes: Sequence[str]) -> dict[str, tuple[str, list[ChunkVector]]]:
        """Each embedded content hash among `hashes`: how it was cut (its chunker) and its chunks
        with their vectors, in order (what `qmd export` carries to another index)."""
        return self._vectors().chunk_vectors(self.connection(), model, hashes)

    def vector_sample(self, model: VectorModel, size: int) -> list[Sequence[float]]:
        """Up to `size` chunk vectors of one vector space, the same ones on every call while
        the index is unchanged (spread over the chunks by a hash of their ids): what a cosine
        means in this index, for the confidence (qmd/search/confidence.py)."""
        return self._vectors().vector_sample(self.connection(), model, size)

    # --- the LLM cache ----------------------------------------------------------------

    def cache_get(self, keys: Sequence[str]) -> dict[str, object]:
        return self.CACHE.get_many(self.connection(), list(keys))

    def cache_put(self, kind: str, items: dict[str, object]) -> bool:
        """Store values; False (and nothing stored) when the index is busy: never fails a query."""
        return self.CACHE.put_many(self.connection(), kind, items)

    # --- schema and integrity ---------------------------------------------------------

    @abc.abstractmethod
    def lock_holder(self) -> str | None:
        """Who holds the writer lock (pid, command, since when), or None when nobody does."""

    @abc.abstractmethod
    def inspect(self, *, quick: bool = False) -> IndexCheck:
        """Read-only health: never migrates (`quick` skips the expensive scan)."""

    @abc.abstractmethod
    def backup(self) -> Path:
        """A verified copy beside the index; QmdError when the copy is not sound."""

    @abc.abstractmethod
    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        """Fill a fresh index with `build(fresh)` (returns its documents), then swap it in.

        From a sound old index the vectors of unchanged content come over (they are keyed by
        content hash and fingerprint) and the old copy is kept as a backup; a corrupted one
        is kept aside as broken and nothing is taken from it.
        """


def _guard_methods(cls: type[IndexBackend]) -> None:
    """Wrap every public method of a backend class (its own and those it inherits) so that a
    driver's error leaves it as the QmdError `_failure` says it means: no caller above the
    seam needs to know apsw or psycopg. Methods returning a context manager (CONTEXTS) have
    what runs inside the `with` translated too."""
    seen: set[str] = set()
    for klass in cls.__mro__:
        for name, member in vars(klass).items():
            if name in seen:
                continue
            seen.add(name)
            if name.startswith("_") or name in cls.UNGUARDED or not isinstance(member, FunctionType):
                continue
            if getattr(member, "__isabstractmethod__", False) or getattr(member, "guarded", False):
                continue
            setattr(cls, name, _guarded(member, name in cls.CONTEXTS))


def _guarded(method: Callable[..., object], context: bool) -> Callable[..., object]:
    @functools.wraps(method)
    def guarded(self: IndexBackend, *args: object, **kwargs: object) -> object:
        try:
            result = method(self, *args, **kwargs)
        except Exception as exc:
            meaning = self._failure(exc)
            if meaning is None:
                raise
            raise meaning from exc
        return _translated(result, self) if context else result  # type: ignore[arg-type]

    guarded.guarded = True  # type: ignore[attr-defined]
    return guarded


@contextmanager
def _translated(manager: AbstractContextManager[object], backend: IndexBackend) -> Iterator[object]:
    try:
        with manager as value:
            yield value
    except Exception as exc:
        meaning = backend._failure(exc)
        if meaning is None:
            raise
        raise meaning from exc
