"""The PostgreSQL implementation of the storage seam: one schema of one database per index.

Selected by `database: postgresql://…` in the index config or `QMD_DATABASE_URL`
(qmd/store/store.py). Keyword search is FTS5's BM25 computed in SQL (fulltext.py), vectors
live in pgvector with an HNSW index (vectors.py), the writer lock is an advisory lock
(locks.py) and readers never wait (MVCC, autocommit reads).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from pathlib import Path

import psycopg

from qmd.core.errors import QmdError
from qmd.backends.base import FieldsFor, IndexBackend, IndexCheck, RebuildReport, VectorModel
from qmd.backends.owner import Owner
from qmd.backends.postgres import cache, documents, fulltext
from qmd.backends.postgres.connection import adopt_schema, connect, disk_full, migrate, quote_ident, redact, schema_exists, schema_for, split_url
from qmd.backends.sql import count, drop_inactive

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.backends.parts import VectorsSql


def _meaning(exc: psycopg.Error, location: str, *, dropped: bool = False) -> QmdError | None:
    """The QmdError a psycopg error means for a person: the server's disk full, the server gone,
    or a value it refuses. `dropped`: the connection did not survive the error."""
    first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:300]
    if isinstance(exc, psycopg.errors.DiskFull):
        return disk_full(first, location, dropped)
    if isinstance(exc, (psycopg.OperationalError, psycopg.InterfaceError)):
        return QmdError(f"lost the connection to the database at {location}: {first}", "check that the database server is running, then run the command again")
    if isinstance(exc, (psycopg.errors.UndefinedTable, psycopg.errors.InvalidSchemaName)):
        return QmdError(f"the index at {location} has not been built (its tables are gone: {first})", "run: qmd update")
    if isinstance(exc, psycopg.DataError):
        return QmdError(f"the database at {location} refused a value: {first}", "remove the character it names (PostgreSQL text cannot hold NUL) and try again")
    return None


class PostgresBackend(IndexBackend):
    """An index in schema `schema` of the database at `url` (a libpq URL or conninfo)."""

    FOREIGN_HINT = "give each index its own schema: drop ?schema= from `database:` or QMD_DATABASE_URL (each index then gets one of its own), or name another schema"
    BYTE_ORDER = ' COLLATE "C"'
    DOCUMENTS = documents
    FULLTEXT = fulltext
    CACHE = cache

    def __init__(self, url: str, schema: str | None = None, *, index_name: str = "index", owner: Owner | None = None, adopt: tuple[str, frozenset[str]] | None = None) -> None:
        libpq, named = split_url(url)
        self.url = libpq
        self.schema = schema or named or schema_for(index_name)
        self.index_name = index_name
        self.owner = owner
        self.adopt = adopt  # (the schema an older qmd gave this index, this config's collections): see adopt_schema
        self._conn: psycopg.Connection | None = None
        self._opened = False  # migrated on this connection (open() need not ask again)

    def _failure(self, exc: Exception) -> QmdError | None:
        """The server going away mid-command, its disk full, or a value PostgreSQL refuses: one
        QmdError naming the database, never a traceback (the CLI exits 1, the HTTP server answers
        400); a connection the server dropped is forgotten (the next call reconnects)."""
        if not isinstance(exc, psycopg.Error):
            return None
        dropped = self._conn is not None and (self._conn.closed or self._conn.broken)
        meaning = _meaning(exc, self.location, dropped=dropped)
        if meaning is not None and dropped:
            self._conn = None
            self._opened = False
        return meaning

    def _vectors(self) -> VectorsSql:
        from qmd.backends.postgres import vectors  # numpy: only where vectors are read or written

        return vectors

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
        self._check_owner(create)
        self._opened = True

    def follow(self) -> bool:
        """A database is reached by its URL, not a file that can be swapped underneath: nothing to follow."""
        return False

    def close(self) -> None:
        self._opened = False
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def size_bytes(self) -> int:
        query = (
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0)::bigint FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace"
            " WHERE n.nspname = %s AND c.relkind IN ('r', 'm')"
        )
        return count(self.connection(), query, (self.schema,))

    def change_token(self) -> object:
        # The next transaction id: it moves whenever any transaction that wrote has started
        # since (a superset of "another connection committed"; never stale).
        return count(self.connection(), "SELECT pg_snapshot_xmax(pg_current_snapshot())::text::bigint")

    def writer_lock(self, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> AbstractContextManager[None]:
        from qmd.backends.postgres.locks import writer_lock

        return writer_lock(self.url, self.schema, self.location, timeout=timeout, on_wait=on_wait)

    def lock_holder(self) -> str | None:
        from qmd.backends.postgres.locks import describe_holder

        return describe_holder(self.url, self.schema)

    def atomic(self) -> AbstractContextManager[None]:
        from contextlib import contextmanager

        self.open(create=True)
        conn = self.connection()

        @contextmanager
        def outer() -> Iterator[None]:
            with conn.transaction():
                yield

        return outer()

    def after_atomic(self, documents: int) -> None:
        if documents < fulltext.OPTIMIZE_AFTER:  # as an update's collection writer decides (documents.py)
            return
        try:
            conn = self.connection()
            if conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:
                fulltext.optimize(conn)
        except (psycopg.Error, QmdError):  # autovacuum catches up; the import is done
            pass

    def cleanup(self) -> tuple[int, int]:
        from qmd.backends.postgres import vectors

        conn = self.connection()
        with conn.transaction():
            dropped = drop_inactive(conn)
            vectors.drop_orphans(conn)
        conn.execute("VACUUM (ANALYZE) documents")
        conn.execute("VACUUM (ANALYZE) fts_postings")
        return dropped

    def repair_fulltext(self, fields: FieldsFor) -> int:
        from qmd.backends.postgres import integrity

        conn = self.connection()
        with conn.transaction():
            return integrity.repair_fts(conn, fields)

    def bulk_vectors(self, model: VectorModel, documents: int) -> AbstractContextManager[None]:
        from qmd.backends.postgres import vectors

        return vectors.bulk_writes(self.connection, model, documents)

    def vector_index_status(self) -> list[dict[str, object]]:
        """The HNSW indexes an earlier qmd built at a smaller ef_construction (see
        vectors.outdated_hnsw), then each other one searches would take, with its recall."""
        from qmd.backends.postgres import vectors

        conn = self.connection()
        out = vectors.outdated_hnsw(conn, self.schema, redact(self.url))
        seen = {str(space["model"]) for space in out}
        for model_id, fp, name, dims in conn.execute("SELECT id, fingerprint, model, dims FROM embed_models ORDER BY id").fetchall():
            model = VectorModel(int(model_id), str(fp), str(name), int(dims))
            space = vectors.Space.read(conn, model)
            if space.identity is None or model.model in seen:
                continue
            out.append({
                "model": model.model, "structure": f"hnsw (m {vectors.HNSW_M}, ef_construction {vectors.hnsw_ef_construction(conn, model.id)})",
                "state": "ready", "current": True, "chunks": space.rows, "floats": space.rows, "codes": space.rows, "lists": True,
                "retraining": None, "retrain_due": None, "due": False, **self.recall_status(model),
            })
        return out

    def _approx_identity(self, model: VectorModel) -> tuple[str, int] | None:
        from qmd.backends.postgres import vectors

        space = vectors.Space.read(self.connection(), model)
        return None if space.identity is None else (space.identity, space.rows)

    # --- schema and integrity ---------------------------------------------------------

    def inspect(self, *, quick: bool = False) -> IndexCheck:
        from qmd.backends.postgres import integrity

        try:
            conn = self.connection()
        except QmdError as exc:
            return IndexCheck(self.location, False, error=exc.message)
        return integrity.inspect(conn, self.schema, self.location, quick=quick)

    def backup(self) -> Path:
        """`pg_dump` of the schema into the cache dir (`<index>.pg-backup-<time>.dump`), verified
        by `pg_restore --list`; QmdError when no pg_dump recent enough is found (backup.py)."""
        from qmd.core.paths import cache_dir
        from qmd.backends.postgres import backup

        major = count(self.connection(), "SELECT current_setting('server_version_num')::int / 10000")
        return backup.dump(self.url, self.schema, major, cache_dir(), self.index_name, self.location)

    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        """Fill a fresh schema, copy the vectors of unchanged content over, then rename the
        schemas in one transaction (readers see the old index or the new one, never neither);
        the old schema is kept as `<schema>_bak_<time>`."""
        from qmd.backends.postgres import integrity

        started = time.perf_counter()
        sound = self.exists() and not self.inspect().corrupted
        tmp = f"{self.schema[:40]}_rebuild_{os.getpid()}"
        conn = self.connection()
        kept = stamp = f"{self.schema[:40]}_bak_{time.strftime('%Y%m%d%H%M%S')}"
        n = 1
        while conn.execute("SELECT 1 FROM pg_namespace WHERE nspname = %s", (kept,)).fetchone():  # a rebuild earlier in the same second
            n += 1
            kept = f"{stamp}_{n}"
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
