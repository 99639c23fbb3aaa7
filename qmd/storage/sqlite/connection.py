"""The SQLite connection (apsw), its pragmas, and the schema as named migrations."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import apsw

from qmd.core.clock import now_iso
from qmd.core.errors import QmdError

Connection = apsw.Connection

# Each migration is applied once, in order, inside one transaction, and recorded by name
# in schema_migrations; `pending_migrations` lets doctor say "schema behind" read-only.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        """
        CREATE TABLE content (
            hash TEXT PRIMARY KEY,
            doc TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE documents (
            id INTEGER PRIMARY KEY,
            collection TEXT NOT NULL,
            path TEXT NOT NULL,
            title TEXT NOT NULL,
            hash TEXT NOT NULL,
            size INTEGER NOT NULL,
            mtime_ns INTEGER NOT NULL,
            body_line INTEGER NOT NULL DEFAULT 1,
            tags TEXT,
            created_at TEXT NOT NULL,
            modified_at TEXT NOT NULL,
            active INTEGER NOT NULL DEFAULT 1,
            UNIQUE (collection, path)
        );
        CREATE INDEX documents_hash ON documents (hash);
        CREATE VIRTUAL TABLE documents_fts USING fts5 (
            filepath, title, body,
            tokenize = 'porter unicode61',
            content = '',
            contentless_delete = 1
        );
        INSERT INTO documents_fts (documents_fts, rank) VALUES ('rank', 'bm25(1.5, 4.0, 1.0)');
        CREATE TABLE collection_state (
            name TEXT PRIMARY KEY,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE file_issues (
            collection TEXT NOT NULL,
            path TEXT NOT NULL,
            severity TEXT NOT NULL CHECK (severity IN ('skipped', 'warning')),
            reason TEXT NOT NULL,
            PRIMARY KEY (collection, path)
        );
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
        """,
    ),
    (
        "0002_vectors",
        """
        CREATE TABLE embed_models (
            id INTEGER PRIMARY KEY,
            fingerprint TEXT NOT NULL UNIQUE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE chunks (
            id INTEGER PRIMARY KEY,
            model_id INTEGER NOT NULL,
            hash TEXT NOT NULL,
            seq INTEGER NOT NULL,
            start INTEGER NOT NULL,
            end INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            UNIQUE (model_id, hash, seq)
        );
        CREATE INDEX chunks_hash ON chunks (hash);
        CREATE TABLE embedded (
            model_id INTEGER NOT NULL,
            hash TEXT NOT NULL,
            chunks INTEGER NOT NULL,
            embedded_at TEXT NOT NULL,
            PRIMARY KEY (model_id, hash)
        ) WITHOUT ROWID;
        """,
    ),
    (
        "0003_llm_cache",
        """
        CREATE TABLE llm_cache (
            key TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
        """,
    ),
]


BUSY_TIMEOUT_MS = 5000


def connect(path: Path, *, create: bool) -> apsw.Connection:
    """Open the index at `path` (WAL, short busy timeout) and bring its schema up to date.

    `create=False` refuses to make a new file, so a read of a missing index is an error
    naming the fix instead of an empty database left behind.
    """
    if not create and not path.exists():
        raise QmdError(f"no index at {path}", "add a collection first: qmd collection add DIR --name NAME")
    if create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise QmdError(f"cannot create the index folder {path.parent}: {exc}", "set XDG_CACHE_HOME or INDEX_PATH to a writable place") from exc
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(BUSY_TIMEOUT_MS)
        conn.execute("PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16000")
        if conn.execute("PRAGMA journal_mode").fetchall()[0][0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        migrate(conn)
    except apsw.Error as exc:
        raise QmdError(f"cannot open the index {path}: {exc}", "check the file; `qmd doctor` can rebuild a broken index") from exc
    return conn


def applied_migrations(conn: apsw.Connection) -> set[str]:
    exists = conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchall()
    if not exists:
        return set()
    return {row[0] for row in conn.execute("SELECT name FROM schema_migrations")}


def pending_migrations(conn: apsw.Connection) -> list[str]:
    """Names of migrations not yet applied (read-only)."""
    done = applied_migrations(conn)
    return [name for name, _ in MIGRATIONS if name not in done]


def migrate(conn: apsw.Connection) -> list[str]:
    """Apply pending migrations; returns the names applied."""
    pending = pending_migrations(conn)
    if not pending:
        return []
    with conn:
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = applied_migrations(conn)  # re-read inside the write transaction
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            conn.execute(sql)
            conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (?, ?)", (name, now_iso()))
    return pending


@contextmanager
def transaction(conn: apsw.Connection) -> Iterator[None]:
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception."""
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
    except BaseException:
        conn.execute("ROLLBACK")
        raise
    conn.execute("COMMIT")


def scalar(conn: apsw.Connection, sql: str, params: tuple[apsw.SQLiteValue, ...] = ()) -> apsw.SQLiteValue:
    """The first column of the first row, or None."""
    for row in conn.execute(sql, params):
        return row[0]
    return None


def as_int(value: apsw.SQLiteValue) -> int:
    """An INTEGER column's value as an int (0 for NULL)."""
    return int(value) if isinstance(value, (int, float, str)) else 0


def count(conn: apsw.Connection, sql: str, params: tuple[apsw.SQLiteValue, ...] = ()) -> int:
    """An integer result (a count); 0 when the query returns nothing or NULL."""
    value = scalar(conn, sql, params)
    return int(value) if isinstance(value, (int, float, str)) else 0

