"""The SQLite implementation of the storage seam: one file (apsw + FTS5 + sqlite-vec)."""

from __future__ import annotations

import functools
import os
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FunctionType

import apsw

from qmd.storage.backend import (
    ChunkVector,
    CollectionWriter,
    DocRow,
    FieldsFor,
    FileRow,
    IndexBackend,
    IndexCheck,
    Nearest,
    RebuildReport,
    TextQuery,
    Totals,
    VectorModel,
)
from qmd.storage.owner import META_KEY, Owner, decide
from qmd.storage.sqlite import documents, fulltext
from qmd.storage.sqlite.connection import connect, count, scalar, transaction, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Concatenate, ParamSpec, TypeVar

    from qmd.core.filters import Filter

    P = ParamSpec("P")
    R = TypeVar("R")
    B = TypeVar("B", bound="SqliteBackend")
    C = TypeVar("C", bound=type)

FOREIGN_HINT = "give each config its own index file: point INDEX_PATH elsewhere for this one (or unset it), remove the link that leads to this file, or delete a copy that came with a project (then: qmd update)"

# Not wrapped: they raise no damage of this file (`inspect` reports it as data; `rebuild`
# reads a fresh file, whose errors are not this one's).
UNGUARDED = frozenset({"close", "exists", "inspect", "rebuild", "writer_lock", "lock_holder"})


def _guarded(method: Callable[Concatenate[B, P], R]) -> Callable[Concatenate[B, P], R]:
    @functools.wraps(method)
    def guarded(self: B, *args: P.args, **kwargs: P.kwargs) -> R:
        try:
            return method(self, *args, **kwargs)
        except apsw.Error as exc:
            meaning = translate(self.path, exc)
            if meaning is None:
                raise
            raise meaning from exc

    return guarded


def damage_is_an_error(cls: C) -> C:
    """Wrap every public method of the backend class so apsw's "corrupt" and "not a
    database" errors leave it as IndexDamagedError naming the file and `qmd doctor --fix`:
    no caller above the seam needs to know apsw."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and name not in UNGUARDED and isinstance(member, FunctionType):
            setattr(cls, name, _guarded(member))
    return cls


@damage_is_an_error
class SqliteBackend(IndexBackend):
    """An index in one SQLite file, WAL mode; the writer lock is `{file}.lock` beside it."""

    def __init__(self, path: str | Path, owner: Owner | None = None) -> None:
        self.path = Path(path)
        self.owner = owner  # the config this index belongs to (qmd/storage/owner.py); None: unchecked
        self._conn: apsw.Connection | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file `_conn` has open
        self._claim = False  # the owner record is to be written by the next write (open(create=True))

    # --- lifecycle --------------------------------------------------------------------

    @property
    def location(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return self.path.exists()

    def open(self, *, create: bool) -> None:
        if self._conn is None:
            self._connect(create=create)
        elif create and self._claim:
            self._write_owner()

    def connection(self) -> apsw.Connection:
        """The open connection (opened on first use; never creates the file)."""
        return self._conn if self._conn is not None else self._connect(create=False)

    def _connect(self, *, create: bool) -> apsw.Connection:
        conn = self._conn = connect(self.path, create=create)
        self._file = self._identity()  # what `follow` compares the path with
        if self.owner is not None:
            try:
                self._claim = decide(self.meta_values(META_KEY).get(META_KEY), self.owner, self.location, FOREIGN_HINT)
                if create and self._claim:
                    self._write_owner()
            except BaseException:
                self.close()  # another config's index stays closed to this one
                raise
        return conn

    def _write_owner(self) -> None:
        assert self.owner is not None
        self.set_meta(META_KEY, self.owner.to_text())
        self._claim = False

    def _identity(self) -> tuple[int, int] | None:
        try:
            st = os.stat(self.path)
        except OSError:
            return None
        return (st.st_dev, st.st_ino)

    def follow(self) -> bool:
        """Close the connection when the file at `path` is no longer the one it has open
        (deleted, or replaced by another file: a rebuild, `rm` and a new `update`), so the
        next read opens what is there now; True if it closed. A long-running server calls
        this before each request instead of answering from a file nobody else sees."""
        if self._conn is None or self._identity() == self._file:
            return False
        self.close()
        return True

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None
            self._file = None

    def size_bytes(self) -> int:
        return sum(p.stat().st_size for p in (self.path, Path(f"{self.path}-wal")) if p.exists())

    def change_token(self) -> object:
        conn = self.connection()  # sets _file: a replaced file is another index, whatever its counter says
        return (self._file, scalar(conn, "PRAGMA data_version"))

    def writer_lock(self, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        from qmd.core.locks import writer_lock

        return writer_lock(self.path, timeout=timeout, on_wait=on_wait)

    def lock_holder(self) -> str | None:
        from qmd.core.locks import describe_holder

        return describe_holder(self.path)

    # --- documents --------------------------------------------------------------------

    def documents(self, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
        return documents.documents(self.connection(), ids)

    def find(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
        return documents.find(self.connection(), collection=collection, path=path, hash_prefix=hash_prefix)

    def docid_lengths(self, hashes: Sequence[str]) -> dict[str, int]:
        return documents.docid_lengths(self.connection(), hashes)

    def content(self, content_hash: str) -> str | None:
        return documents.content(self.connection(), content_hash)

    def files(self, collection: str, under: str = "") -> list[FileRow]:
        return documents.files(self.connection(), collection, under)

    def collection_counts(self) -> dict[str, int]:
        return documents.collection_counts(self.connection()) if self.exists() else {}

    def collection_updated(self) -> dict[str, str]:
        return documents.collection_updated(self.connection()) if self.exists() else {}

    def indexed_collections(self) -> set[str]:
        return documents.indexed_collections(self.connection()) if self.exists() else set()

    def file_issues(self) -> list[tuple[str, str, str, str]]:
        return documents.file_issues(self.connection()) if self.exists() else []

    def totals(self) -> Totals:
        return documents.totals(self.connection()) if self.exists() else Totals(0, 0, 0)

    def metadata_keys(self, collection: str | None = None) -> list[tuple[str, str, int]]:
        return documents.metadata_keys(self.connection(), collection) if self.exists() else []

    def count_matching(self, where: Filter, collections: list[str] | None = None) -> int:
        return documents.count_matching(self.connection(), where, collections) if self.exists() else 0

    @contextmanager
    def _collection_writer(self, collection: str) -> Iterator[CollectionWriter]:
        self.open(create=True)
        try:
            with documents.collection_writer(self.connection(), collection) as writer:
                yield writer
        except apsw.Error as exc:  # raised in the caller's with-body, past the method wrapper
            meaning = translate(self.path, exc)
            if meaning is None:
                raise
            raise meaning from exc

    def collection_writer(self, collection: str) -> AbstractContextManager[CollectionWriter]:
        return self._collection_writer(collection)

    def meta_values(self, prefix: str) -> dict[str, str]:
        rows = self.connection().execute("SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))
        return {str(k): str(v) for k, v in rows}

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.connection().execute("DELETE FROM meta WHERE key = ?", (key,))
        else:
            self.connection().execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))

    def drop_collection(self, name: str) -> int:
        return documents.drop_collection(self.connection(), name)

    def rename_collection(self, old: str, new: str, fields: FieldsFor) -> None:
        documents.rename_collection(self.connection(), old, new, fields)

    def cleanup(self) -> tuple[int, int]:
        from qmd.storage.sqlite import vectors

        conn = self.connection()
        with transaction(conn):
            dropped = documents.drop_inactive(conn)
            if count(conn, "SELECT count(*) FROM embed_models"):
                vectors.ensure_vec(conn)
                vectors.drop_orphans(conn)
        conn.execute("VACUUM")
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return dropped

    # --- full text --------------------------------------------------------------------

    def bm25(
        self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
    ) -> list[tuple[int, float]]:
        return fulltext.bm25(self.connection(), query, limit, collections, exclude, where)

    def repair_fulltext(self, fields: FieldsFor) -> int:
        from qmd.storage.sqlite import integrity

        conn = self.connection()
        with transaction(conn):
            return integrity.repair_fts(conn, fields)

    # --- vectors ----------------------------------------------------------------------

    def vector_model(self, fingerprint: str) -> VectorModel | None:
        from qmd.storage.sqlite import vectors

        return vectors.model_row(self.connection(), fingerprint)

    def ensure_vector_model(self, fingerprint: str, model: str, dims: int) -> VectorModel:
        from qmd.storage.sqlite import vectors

        return vectors.ensure_model(self.connection(), fingerprint, model, dims)

    def pending_embeddings(self, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
        from qmd.storage.sqlite import vectors

        return vectors.pending_hashes(self.connection(), model_id, collections, ast)

    def write_vectors(self, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None) -> int:
        from qmd.storage.sqlite import vectors

        return vectors.write_batch(self.connection(), model, batch, chunkers)

    def set_chunkers(self, model: VectorModel, chunkers: Mapping[str, str]) -> None:
        from qmd.storage.sqlite import vectors

        vectors.set_chunkers(self.connection(), model, chunkers)

    def chunking_fallbacks(self, model_id: int | None) -> list[tuple[str, str]]:
        from qmd.storage.sqlite import vectors

        return vectors.chunking_fallbacks(self.connection(), model_id)

    def drop_vectors(self, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
        from qmd.storage.sqlite import vectors

        vectors.drop_all(self.connection(), model, hashes)

    def nearest_documents(
        self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
    ) -> list[Nearest]:
        from qmd.storage.sqlite import vectors

        return vectors.nearest_documents(self.connection(), model, query, limit, scope, where)

    def vector_counts(self, model_id: int | None) -> tuple[int, int]:
        from qmd.storage.sqlite import vectors

        return vectors.counts(self.connection(), model_id)

    def embedded_per_collection(self, model_id: int) -> dict[str, int]:
        from qmd.storage.sqlite import vectors

        return vectors.embedded_per_collection(self.connection(), model_id)

    def chunk_spans(self, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        from qmd.storage.sqlite import vectors

        return vectors.chunk_spans(self.connection(), model, hashes)

    # --- the LLM cache ----------------------------------------------------------------

    def cache_get(self, keys: Sequence[str]) -> dict[str, object]:
        from qmd.storage.sqlite import cache

        return cache.get_many(self.connection(), list(keys))

    def cache_put(self, kind: str, items: dict[str, object]) -> bool:
        from qmd.storage.sqlite import cache

        return cache.put_many(self.connection(), kind, items)

    # --- schema and integrity ---------------------------------------------------------

    def inspect(self, *, quick: bool = False) -> IndexCheck:
        from qmd.storage.sqlite import integrity

        return integrity.inspect(self.path, quick=quick)

    def backup(self) -> Path:
        from qmd.storage.sqlite import integrity

        return integrity.verified_backup(self.connection(), self.path)

    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        from qmd.storage.sqlite import integrity, vectors

        sound = self.exists() and not integrity.inspect(self.path).corrupted

        def fill(tmp: Path) -> tuple[int, int]:
            fresh = SqliteBackend(tmp, self.owner)
            try:
                documents_built = build(fresh)
                fresh.open(create=True)
                kept = vectors.copy_from(fresh.connection(), self.path) if sound else 0
                fresh.connection().execute("PRAGMA journal_mode = DELETE")  # one self-contained file to swap in
                return documents_built, kept
            finally:
                fresh.close()

        self.close()
        return integrity.rebuild(self.path, fill, "bak" if sound else "broken")


