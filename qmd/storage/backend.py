"""The storage seam: everything an index keeps, behind one interface.

`Store`, the indexer, `embed` and the search pipeline call only what `IndexBackend`
declares; no SQL, PRAGMA, FTS5 MATCH string or vec0 statement exists above it. SQLite
(apsw + FTS5 + sqlite-vec, `qmd/storage/sqlite/`) is the first implementation; another
database implements the same methods and the rest of qmd does not change.

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

from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager
from qmd.core.records import field, record
from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Protocol

    from qmd.core.filters import Filter
else:
    Protocol = object  # the protocols below are for the type checker; typing costs 5 ms of every CLI call

MIN_DOCID = 6  # hex digits of the content hash shown as a docid
METADATA_VERSION = 3  # how files are read (2: YAML 1.2 scalars in metadata; 3: binary content beyond NUL bytes skipped, UTF-16/32 with a BOM decoded); rows written before it are read again by `update`


@record(frozen=True)
class DocRow:
    """An active document as stored."""

    id: int
    collection: str
    path: str
    title: str
    hash: str
    body_line: int
    size: int
    mtime_ns: int
    metadata: dict[str, object] | None = None  # typed front-matter metadata (None: none)

    @property
    def docid(self) -> str:
        return self.hash[:MIN_DOCID]


@record(frozen=True)
class FileRow:
    """One line of `qmd ls`."""

    collection: str
    path: str
    size: int
    mtime_ns: int
    hash: str
    title: str


@record(frozen=True)
class KnownFile:
    """What the index remembers of a file, to decide whether it must be read again."""

    id: int
    hash: str
    size: int
    mtime_ns: int
    active: bool
    current: bool = True  # False: stored before this qmd's metadata extraction (read the file again)


@record(frozen=True)
class SearchFields:
    """The full-text columns of a document: its collection/path, title (+ tags) and body."""

    filepath: str
    title: str
    body: str


FieldsFor = Callable[[str, str, str], SearchFields]  # (collection, path, text) → fields


@record(frozen=True)
class DocumentWrite:
    """A new or changed file, read and prepared, to be stored."""

    path: str
    text: str
    hash: str
    title: str
    tags: list[str]
    body_line: int
    size: int
    mtime_ns: int
    fields: SearchFields
    metadata: dict[str, object] = field(default_factory=dict)  # typed values: str, int/float, bool or lists of them
    dated_ns: int | None = None  # the front matter's date/updated (epoch ns); None: the file's mtime dates it


@record(frozen=True)
class Term:
    """A keyword-query term: a word (matched as a prefix) or a quoted phrase."""

    text: str
    phrase: bool = False  # written in quotes: exact phrase, no prefix


@record(frozen=True)
class TextQuery:
    """A keyword search for the backend: every term (`require_all`) or any of them, minus `negated`."""

    terms: tuple[Term, ...]
    negated: tuple[Term, ...] = ()
    require_all: bool = True


@record(frozen=True)
class VectorModel:
    """One vector space: an embedding fingerprint and its dimensions."""

    id: int
    fingerprint: str
    model: str
    dims: int


@record(frozen=True)
class ChunkVector:
    """One embedded chunk of a content hash: its span in the text and its vector."""

    hash: str
    seq: int
    start: int
    end: int
    tokens: int
    vector: Sequence[float]


Nearest = tuple[int, float, tuple[int, int]]  # (document id, cosine similarity, best chunk (start, end))


@record(frozen=True)
class Totals:
    """Row counts for `status`."""

    active: int
    inactive: int
    content: int


@record
class IndexCheck:
    """What `inspect` found. `error` is set when the index cannot be read at all."""

    path: str
    exists: bool
    error: str | None = None
    quick_check: list[str] | None = None  # ["ok"] when sound; None when skipped
    pending_migrations: list[str] = field(default_factory=list)
    unknown_migrations: list[str] = field(default_factory=list)  # written by a newer qmd
    documents: int = 0  # active
    inactive: int = 0
    fts_rows: int = 0
    fts_missing: int = 0  # active documents without a full-text row
    fts_extra: int = 0  # full-text rows of no active document
    content_rows: int = 0
    orphan_content: int = 0  # content no document (active or not) uses
    chunks: int = 0
    orphan_chunks: int = 0  # chunks of content no document uses
    vector_models: list[tuple[str, str, int]] = field(default_factory=list)  # (fingerprint, model, documents embedded)

    @property
    def corrupted(self) -> bool:
        return self.error is not None or (self.quick_check is not None and self.quick_check != ["ok"])

    @property
    def fts_drift(self) -> int:
        return self.fts_missing + self.fts_extra


@record
class RebuildReport:
    path: str
    kept: str | None  # where the old file was put
    documents: int
    seconds: float
    vectors_kept: int = 0  # documents whose vectors came over from a sound old index


class CollectionWriter(Protocol):
    """The writes of one collection's update, applied atomically when the block ends."""

    def known(self) -> dict[str, KnownFile]:
        """Every file of the collection the index has a row for (active or not), by path."""
        ...

    def put(self, doc: DocumentWrite, replaces: int | None) -> None:
        """Store a new file (`replaces=None`) or a changed one (its row id)."""
        ...

    def touch(self, row_id: int, size: int, mtime_ns: int) -> None:
        """Remember a new stat for unchanged content, so the next update skips the file."""
        ...

    def deactivate(self, row_id: int) -> None:
        """Soft-delete a file that is gone (`cleanup` drops it)."""
        ...

    def issues(self) -> dict[str, tuple[str, str]]:
        """The collection's recorded (severity, reason) by path, before this update."""
        ...

    def set_issues(self, issues: Sequence[tuple[str, str, str]]) -> None:
        """Replace the collection's (path, severity, reason) list; severity is skipped|warning."""
        ...


class IndexBackend(Protocol):
    """Where one index lives. Opened lazily; every method opens it when needed."""

    @property
    def location(self) -> str:
        """A path or URL for messages."""
        ...

    def exists(self) -> bool:
        """Whether the index was ever created (a read of a missing one is an error naming the fix)."""
        ...

    def open(self, *, create: bool) -> None:
        """Connect (creating the index when `create`) and apply pending migrations."""
        ...

    def close(self) -> None: ...

    def follow(self) -> bool:
        """Reconnect on next use when the index at `location` is no longer the one open (its
        file deleted or replaced under the same path); True if so. A server's stale view
        must not outlive the index it was opened on."""
        ...

    def size_bytes(self) -> int: ...

    def change_token(self) -> object:
        """A value that changes whenever another connection commits (cheap; for caches)."""
        ...

    def writer_lock(self, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        """One writer at a time (update, embed, cleanup, repairs); readers never wait.

        A held lock calls `on_wait` once, then waits up to `timeout` seconds (None: as long
        as it takes; 0: not at all) before IndexBusyError names the holder.
        """
        ...

    # --- documents --------------------------------------------------------------------

    def documents(self, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
        """Rows and texts of the given document ids (the search hot path: one query)."""
        ...

    def find(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
        """Active documents matching every given field, by collection then path."""
        ...

    def content(self, content_hash: str) -> str | None: ...

    def docid_lengths(self, hashes: Sequence[str]) -> dict[str, int]:
        """How many hex digits make each content hash's docid unique among active documents (≥ 6)."""
        ...

    def files(self, collection: str, under: str = "") -> list[FileRow]:
        """Active files of a collection, optionally under a sub-path, by path."""
        ...

    def collection_counts(self) -> dict[str, int]:
        """Active documents per collection."""
        ...

    def collection_updated(self) -> dict[str, str]:
        """When each indexed collection was last updated (ISO-8601 UTC)."""
        ...

    def indexed_collections(self) -> set[str]:
        """Every collection name the index holds rows of (documents, state or file issues)."""
        ...

    def file_issues(self) -> list[tuple[str, str, str, str]]:
        """(collection, path, severity, reason) of every skipped or warned-about file."""
        ...

    def totals(self) -> Totals: ...

    def metadata_keys(self, collection: str | None = None) -> list[tuple[str, str, int]]:
        """(key, type, active documents having it) of the metadata, by key then type."""
        ...

    def count_matching(self, where: Filter, collections: list[str] | None = None) -> int:
        """Active documents (in `collections`; None: all) that match a filter."""
        ...

    def collection_writer(self, collection: str) -> AbstractContextManager[CollectionWriter]:
        """One collection's update as one transaction: a crash leaves the previous state."""
        ...

    def drop_collection(self, name: str) -> int:
        """Delete every row of a collection; returns the documents dropped."""
        ...

    def meta_values(self, prefix: str) -> dict[str, str]:
        """The index's own records (`meta` rows) whose key starts with `prefix`."""
        ...

    def set_meta(self, key: str, value: str | None) -> None:
        """Write (None: delete) one of the index's own records; the caller holds the writer lock."""
        ...

    def rename_collection(self, old: str, new: str, fields: FieldsFor) -> None:
        """Move a collection's rows to a new name (its full-text filepaths change)."""
        ...

    def cleanup(self) -> tuple[int, int]:
        """Drop soft-deleted documents, unused content and their vectors, then compact.

        Returns (documents dropped, content rows dropped).
        """
        ...

    # --- full text --------------------------------------------------------------------

    def bm25(
        self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
    ) -> list[tuple[int, float]]:
        """(document id, raw BM25 score, more negative is better) best first, without `exclude`.

        `collections=None` searches everything; `limit=None` returns every match; `where`
        keeps only documents matching the filter, inside the query (the top-k is exact).
        """
        ...

    def repair_fulltext(self, fields: FieldsFor) -> int:
        """Rewrite every full-text row from the stored content; returns the rows written."""
        ...

    # --- vectors ----------------------------------------------------------------------

    def vector_model(self, fingerprint: str) -> VectorModel | None: ...

    def ensure_vector_model(self, fingerprint: str, model: str, dims: int) -> VectorModel:
        """The vector space of a fingerprint, created on first use."""
        ...

    def pending_embeddings(self, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
        """(content hash, title) of active documents in `collections` without vectors for the model,
        or whose vectors were cut otherwise than wanted: by syntax (chunker `ast`, or `ast!` for
        a file that did not parse) for a path ending in one of `ast[collection]`'s extensions,
        by regex (`regex`, or `ast!`) for every other. Content in several documents is chunked
        by syntax when any of them wants it."""
        ...

    def write_vectors(self, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None) -> int:
        """Replace the chunks of each content hash in `batch`, in one transaction; returns chunks
        written. `chunkers`: how each hash was cut (`regex` when absent)."""
        ...

    def set_chunkers(self, model: VectorModel, chunkers: Mapping[str, str]) -> None:
        """Record how already embedded content was cut (its chunks did not change)."""
        ...

    def chunking_fallbacks(self, model_id: int | None) -> list[tuple[str, str]]:
        """(collection, path) of active documents meant to be cut by syntax whose file did not
        parse (chunker `ast!`: cut by regex)."""
        ...

    def drop_vectors(self, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
        """Forget the vectors of one fingerprint: of the given content hashes, or all (`embed -f`)."""
        ...

    def bulk_vectors(self, model: VectorModel, documents: int) -> AbstractContextManager[None]:
        """Entered around writing the vectors of `documents` documents in many batches (one embed
        run). A backend whose vector index is costly to keep up row by row may build it once at
        the end instead (PostgreSQL's HNSW), searches staying exact meanwhile. Default: nothing."""
        from contextlib import nullcontext

        return nullcontext()

    def nearest_documents(
        self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
    ) -> list[Nearest]:
        """The active documents in `scope` (None: all) and matching `where` whose best chunk is
        nearest, best first; exact (a selective filter still fills `limit` when it can)."""
        ...

    def vector_counts(self, model_id: int | None) -> tuple[int, int]:
        """(chunks, embedded content of active documents) of one vector space (zeros for None)."""
        ...

    def embedded_per_collection(self, model_id: int) -> dict[str, int]:
        """Active documents of each collection with vectors in this vector space."""
        ...

    def chunk_spans(self, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        """(start, end) of each content hash's chunks, in order."""
        ...

    # --- the LLM cache ----------------------------------------------------------------

    def cache_get(self, keys: Sequence[str]) -> dict[str, object]: ...

    def cache_put(self, kind: str, items: dict[str, object]) -> bool:
        """Store values; False (and nothing stored) when the index is busy: never fails a query."""
        ...

    # --- schema and integrity ---------------------------------------------------------

    def lock_holder(self) -> str | None:
        """Who holds the writer lock (pid, command, since when), or None when nobody does."""
        ...

    def inspect(self, *, quick: bool = False) -> IndexCheck:
        """Read-only health: never migrates (`quick` skips the expensive scan)."""
        ...

    def backup(self) -> Path:
        """A verified copy beside the index; QmdError when the copy is not sound."""
        ...

    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        """Fill a fresh index with `build(fresh)` (returns its documents), then swap it in.

        From a sound old index the vectors of unchanged content come over (they are keyed by
        content hash and fingerprint) and the old copy is kept as a backup; a corrupted one
        is kept aside as broken and nothing is taken from it.
        """
        ...
