"""The records that cross the storage seam, and the writer a collection's update gets.

Rows read (`DocRow`, `FileRow`, `KnownFile`, `Removed`, `Totals`), writes prepared (`DocumentWrite`,
`ChunkVector`), queries (`TextQuery`), vector spaces (`VectorModel`), reports (`IndexCheck`,
`RebuildReport`) and `CollectionWriter`. `IndexBackend` (base.py) and the SQL both
backends speak (sql.py) are written in them; the rest of qmd imports them from base.py.
"""

from __future__ import annotations

import abc
from collections.abc import Callable, Sequence

from qmd.core.records import field, record

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
class Removed:
    """A document whose file was gone at an update (kept, inactive, until `cleanup`)."""

    collection: str
    path: str
    hash: str
    removed_at: str | None  # when that update ran (ISO-8601 UTC); None for a row removed before qmd recorded it


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
    collection_documents: dict[str, int] = field(default_factory=dict)  # active, per collection
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


class CollectionWriter(abc.ABC):
    """The writes of one collection's update, applied atomically when the block ends."""

    @abc.abstractmethod
    def known(self) -> dict[str, KnownFile]:
        """Every file of the collection the index has a row for (active or not), by path."""

    @abc.abstractmethod
    def put(self, doc: DocumentWrite, replaces: int | None) -> None:
        """Store a new file (`replaces=None`) or a changed one (its row id)."""

    @abc.abstractmethod
    def touch(self, row_id: int, size: int, mtime_ns: int) -> None:
        """Remember a new stat for unchanged content, so the next update skips the file."""

    @abc.abstractmethod
    def deactivate(self, row_id: int) -> None:
        """Soft-delete a file that is gone (`cleanup` drops it)."""

    @abc.abstractmethod
    def issues(self) -> dict[str, tuple[str, str]]:
        """The collection's recorded (severity, reason) by path, before this update."""

    @abc.abstractmethod
    def set_issues(self, issues: Sequence[tuple[str, str, str]]) -> None:
        """Replace the collection's (path, severity, reason) list; severity is skipped|warning."""
