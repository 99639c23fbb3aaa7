"""The PostgreSQL implementation of the storage seam: one schema of one database per index.

Selected by `database: postgresql://…` in the index config or `QMD_DATABASE_URL`
(qmd/store/store.py). Keyword search is FTS5's BM25 computed in SQL (fulltext.py), vectors
live in pgvector with an HNSW index (vectors.py), the writer lock is an advisory lock
(locks.py) and readers never wait (MVCC, autocommit reads).
"""

from __future__ import annotations

import functools
import os
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from types import FunctionType

import psycopg

from qmd.core.errors import QmdError
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
from qmd.storage.postgres import documents, fulltext
from qmd.storage.owner import META_KEY, Owner, decide
from qmd.storage.postgres.connection import adopt_schema, connect, count, migrate, quote_ident, redact, schema_exists, schema_for, split_url

FOREIGN_HINT = "give each index its own schema: drop ?schema= from `database:` or QMD_DATABASE_URL (each index then gets one of its own), or name another schema"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TypeVar

    from qmd.core.filters import Filter

    T = TypeVar("T")
    C = TypeVar("C", bound=type)


# Methods whose result is a context manager: errors raised inside the `with` are translated too.
_CONTEXTS = frozenset({"collection_writer", "bulk_vectors", "writer_lock"})
# Not wrapped: they report connection trouble as data (inspect) or only close.
_UNWRAPPED = frozenset({"close", "inspect", "location"})


def _meaning(exc: psycopg.Error, location: str) -> QmdError | None:
    """The QmdError a psycopg error means for a person: the server gone, or a value it refuses."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return QmdError(f"lost the connection to the database at {location}: {first}", "check that the database server is running, then run the command again")
    if isinstance(exc, (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)):
        return QmdError(f"the index at {location} has not been built (its tables are gone: {first})", "run: qmd update")
    if isinstance(exc, psycopg.DataError):
        return QmdError(f"the database at {location} refused a value: {first}", "remove the character it names (PostgreSQL text cannot hold NUL) and try again")
    return None


@contextmanager
def _translating(backend: PostgresBackend) -> Iterator[None]:
    """A psycopg error raised inside becomes its QmdError (`_meaning`), the broken connection forgotten."""
    try:
        yield
    except psycopg.Error as exc:
        meaning = _meaning(exc, backend.location)
        if meaning is None:
            raise
        backend._drop_broken()
        raise meaning from exc


@contextmanager
def _translated(manager: AbstractContextManager[T], backend: PostgresBackend) -> Iterator[T]:
    with _translating(backend), manager as value:
        yield value


def _wrap(name: str, method: Callable[..., object]) -> Callable[..., object]:
    @functools.wraps(method)
    def wrapped(self: PostgresBackend, *args: object, **kwargs: object) -> object:
        with _translating(self):
            result = method(self, *args, **kwargs)
        return _translated(result, self) if name in _CONTEXTS else result  # type: ignore[arg-type]

    return wrapped


def errors_are_qmd_errors(cls: C) -> C:
    """Wrap every public method (and what its context managers run) so that the server going
    away mid-command, or a value PostgreSQL refuses, is one QmdError naming the database,
    never a traceback: the CLI exits 1 and the HTTP server answers 400."""
    for name, member in list(vars(cls).items()):
        if not name.startswith("_") and name not in _UNWRAPPED and isinstance(member, FunctionType):
            setattr(cls, name, _wrap(name, member))
    return cls


@errors_are_qmd_errors
class PostgresBackend(IndexBackend):
    """An index in schema `schema` of the database at `url` (a libpq URL or conninfo)."""

    def __init__(self, url: str, schema: str | None = None, *, index_name: str = "index", owner: Owner | None = None, adopt: tuple[str, frozenset[str]] | None = None) -> None:
        libpq, named = split_url(url)
        self.url = libpq
        self.schema = schema or named or schema_for(index_name)
        self.index_name = index_name
        self.owner = owner  # the config this index belongs to (qmd/storage/owner.py); None: unchecked
        self.adopt = adopt  # (the schema an older qmd gave this index, this config's collections): see adopt_schema
        self._conn: psycopg.Connection | None = None
        self._opened = False  # migrated on this connection (open() need not ask again)
        self._claim = False  # the owner record is to be written by the next write (open(create=True))

    # --- lifecycle --------------------------------------------------------------------

    @property
    def location(self) -> str:
        return f"{redact(self.url)} (schema {self.schema})"

    def _connect(self) -> psycopg.Connection:
        from qmd.core.process import own_command

        return connect(self.url, self.schema, application=f"qmd:{os.getpid()}:{own_command()}")

    def connection(self) -> psycopg.Connection:
        """The open connection; reconnects once when the server dropped it, and when a
        command is still in progress on it (Ctrl-C landed between sending a query and reading
        its result: the cleanup that follows must not queue behind, or on, that command)."""
        if self._conn is not None and not self._conn.closed and self._conn.pgconn.transaction_status == psycopg.pq.TransactionStatus.ACTIVE:
            stale, self._conn = self._conn, None
            try:
                stale.cancel_safe(timeout=2.0)
            except Exception:  # noqa: BLE001 - best effort: the connection is dropped either way
                pass
            stale.close()
        if self._conn is not None and self._conn.closed:
            self._conn = None
        if self._conn is None:
            self._conn = self._connect()
        return self._conn

    def exists(self) -> bool:
        # Once opened and migrated, the schema is taken to stay (a rebuild swaps in another
        # under the same name): no catalog round trip on every call of a search.
        return self._opened or schema_exists(self.connection(), self.schema)

    def open(self, *, create: bool) -> None:
        if self._opened and self._conn is not None and not self._conn.closed:
            if create and self._claim:
                self._write_owner()
            return
        conn = self.connection()
        if create and self.adopt is not None and not schema_exists(conn, self.schema):
            adopt_schema(conn, self.adopt[0], self.schema, self.adopt[1])  # a write only: a read never renames
            self.adopt = None
        if create:
            migrate(conn, self.schema)
        elif not schema_exists(conn, self.schema):
            raise QmdError(f"no index at {self.location}", "add a collection first: qmd collection add DIR --name NAME")
        else:
            migrate(conn, self.schema)
        if self.owner is not None:
            self._claim = decide(self.meta_values(META_KEY).get(META_KEY), self.owner, self.location, FOREIGN_HINT)
            if create and self._claim:
                self._write_owner()
        self._opened = True

    def _write_owner(self) -> None:
        assert self.owner is not None
        self.set_meta(META_KEY, self.owner.to_text())
        self._claim = False

    def follow(self) -> bool:
        """A database is reached by its URL, not a file that can be swapped underneath: nothing to follow."""
        return False

    def close(self) -> None:
        self._opened = False
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def _drop_broken(self) -> None:
        """After an error: forget a connection the server dropped (the next call reconnects)."""
        if self._conn is not None and (self._conn.closed or self._conn.broken):
            self._conn = None
            self._opened = False

    def size_bytes(self) -> int:
        sql = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'm')"
        )
        return count(self.connection(), sql, (self.schema,))

    def change_token(self) -> object:
        # The next transaction id: it moves whenever any transaction that wrote has started
        # since (a superset of "another connection committed"; never stale).
        return count(self.connection(), "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")

    def writer_lock(self, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        from qmd.storage.postgres.locks import writer_lock

        return writer_lock(self.url, self.schema, self.location, timeout=timeout, on_wait=on_wait)

    def lock_holder(self) -> str | None:
        from qmd.storage.postgres.locks import describe_holder

        return describe_holder(self.url, self.schema)

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
        return documents.count_matching(self.connection(), where, collections)

    def collection_writer(self, collection: str) -> AbstractContextManager[CollectionWriter]:
        self.open(create=True)
        return documents.collection_writer(self.connection(), collection)

    def meta_values(self, prefix: str) -> dict[str, str]:
        rows = self.connection().execute("SELECT key, value FROM meta WHERE starts_with(key, %s)", (prefix,))
        return {str(k): str(v) for k, v in rows}

    def set_meta(self, key: str, value: str | None) -> None:
        if value is None:
            self.connection().execute("DELETE FROM meta WHERE key = %s", (key,))
        else:
            self.connection().execute(
                "INSERT INTO meta (key, value) VALUES (%s, %s) ON CONFLICT (key) DO UPDATE SET value = EXCLUDED.value", (key, value),
            )

    def drop_collection(self, name: str) -> int:
        return documents.drop_collection(self.connection(), name)

    def rename_collection(self, old: str, new: str, fields: FieldsFor) -> None:
        documents.rename_collection(self.connection(), old, new, fields)

    def cleanup(self) -> tuple[int, int]:
        from qmd.storage.postgres import vectors

        conn = self.connection()
        with conn.transaction():
            dropped = documents.drop_inactive(conn)
            vectors.drop_orphans(conn)
        conn.execute("VACUUM (ANALYZE) documents")
        conn.execute("VACUUM (ANALYZE) fts_postings")
        return dropped

    # --- full text --------------------------------------------------------------------

    def bm25(
        self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
    ) -> list[tuple[int, float]]:
        return fulltext.bm25(self.connection(), query, limit, collections, exclude, where)

    def repair_fulltext(self, fields: FieldsFor) -> int:
        from qmd.storage.postgres import integrity

        conn = self.connection()
        with conn.transaction():
            return integrity.repair_fts(conn, fields)

    # --- vectors ----------------------------------------------------------------------

    def vector_model(self, fingerprint: str) -> VectorModel | None:
        from qmd.storage.postgres import vectors

        return vectors.model_row(self.connection(), fingerprint)

    def ensure_vector_model(self, fingerprint: str, model: str, dims: int) -> VectorModel:
        from qmd.storage.postgres import vectors

        return vectors.ensure_model(self.connection(), fingerprint, model, dims)

    def pending_embeddings(self, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
        from qmd.storage.postgres import chunkers as cut

        return cut.pending_hashes(self.connection(), model_id, collections, ast)

    def write_vectors(self, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None) -> int:
        from qmd.storage.postgres import chunkers as cut, vectors

        conn = self.connection()
        with conn.transaction():
            written = vectors.write_batch(conn, model, batch)
            cut.set_chunkers(conn, model, {h: c for h, c in (chunkers or {}).items() if c != "regex"})
        return written

    def set_chunkers(self, model: VectorModel, chunkers: Mapping[str, str]) -> None:
        from qmd.storage.postgres import chunkers as cut

        cut.set_chunkers(self.connection(), model, chunkers)

    def chunking_fallbacks(self, model_id: int | None) -> list[tuple[str, str]]:
        from qmd.storage.postgres import chunkers as cut

        return cut.chunking_fallbacks(self.connection(), model_id)

    def drop_vectors(self, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
        from qmd.storage.postgres import vectors

        vectors.drop_all(self.connection(), model, hashes)

    def bulk_vectors(self, model: VectorModel, documents: int) -> AbstractContextManager[None]:
        from qmd.storage.postgres import vectors

        return vectors.bulk_writes(self.connection, model, documents)

    def nearest_documents(
        self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
    ) -> list[Nearest]:
        from qmd.storage.postgres import vectors

        return vectors.nearest_documents(self.connection(), model, query, limit, scope, where)

    def vector_counts(self, model_id: int | None) -> tuple[int, int]:
        from qmd.storage.postgres import vectors

        return vectors.counts(self.connection(), model_id)

    def embedded_per_collection(self, model_id: int) -> dict[str, int]:
        from qmd.storage.postgres import vectors

        return vectors.embedded_per_collection(self.connection(), model_id)

    def chunk_spans(self, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
        from qmd.storage.postgres import vectors

        return vectors.chunk_spans(self.connection(), model, hashes)

    # --- the LLM cache ----------------------------------------------------------------

    def cache_get(self, keys: Sequence[str]) -> dict[str, object]:
        from qmd.storage.postgres import cache

        return cache.get_many(self.connection(), list(keys))

    def cache_put(self, kind: str, items: dict[str, object]) -> bool:
        from qmd.storage.postgres import cache

        return cache.put_many(self.connection(), kind, items)

    # --- schema and integrity ---------------------------------------------------------

    def inspect(self, *, quick: bool = False) -> IndexCheck:
        from qmd.storage.postgres import integrity

        try:
            conn = self.connection()
        except QmdError as exc:
            return IndexCheck(self.location, False, error=exc.message)
        return integrity.inspect(conn, self.schema, self.location, quick=quick)

    def backup(self) -> Path:
        """`pg_dump` of the schema into the cache dir (`<index>.pg-backup-<time>.dump`), verified
        by `pg_restore --list`; QmdError when no pg_dump recent enough is found (backup.py)."""
        from qmd.core.paths import cache_dir
        from qmd.storage.postgres import backup

        major = count(self.connection(), "SELECT current_setting('server_version_num')::int / 10000")
        return backup.dump(self.url, self.schema, major, cache_dir(), self.index_name, self.location)

    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        """Fill a fresh schema, copy the vectors of unchanged content over, then rename the
        schemas in one transaction (readers see the old index or the new one, never neither);
        the old schema is kept as `<schema>_bak_<time>`."""
        from qmd.storage.postgres import integrity

        started = time.perf_counter()
        sound = self.exists() and not self.inspect().corrupted
        tmp = f"{self.schema[:40]}_rebuild_{os.getpid()}"
        kept = f"{self.schema[:40]}_bak_{time.strftime('%Y%m%d%H%M%S')}"
        conn = self.connection()
        conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(tmp)} CASCADE")
        fresh = PostgresBackend(self.url, tmp, owner=self.owner)
        try:
            built = build(fresh)
            fresh.open(create=True)
            fresh.close()
            with conn.transaction():
                vectors_kept = integrity.copy_vectors(conn, self.schema, tmp) if sound else 0
                if self.exists():
                    conn.execute(f"ALTER SCHEMA {quote_ident(self.schema)} RENAME TO {quote_ident(kept)}")
                conn.execute(f"ALTER SCHEMA {quote_ident(tmp)} RENAME TO {quote_ident(self.schema)}")
        except BaseException:
            fresh.close()
            conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(tmp)} CASCADE")
            raise
        self.close()
        return RebuildReport(self.location, f"schema {kept}", built, time.perf_counter() - started, vectors_kept)
