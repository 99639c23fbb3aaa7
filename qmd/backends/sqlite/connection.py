"""The SQLite connection (apsw), its pragmas, and the schema as named migrations."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
import time
from pathlib import Path

import apsw

from qmd.core.clock import now_iso
from qmd.core.errors import IndexAccessError, IndexBusyError, IndexDamagedError, QmdError
from qmd.core.cancel import waiting
from qmd.backends.sql import CONTENT_TABLE, LLM_CACHE_TABLE, STATE_TABLES
from qmd.backends.sqlite import access

TYPE_CHECKING = False
if TYPE_CHECKING:
    from weakref import WeakKeyDictionary

# Each migration is applied once, in order, inside one transaction, and recorded by name
# in schema_migrations; `pending_migrations` lets doctor say "schema behind" read-only.
MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        CONTENT_TABLE
        + """
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
        """
        + STATE_TABLES,
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
    ("0003_llm_cache", LLM_CACHE_TABLE),
    (
        # Typed front-matter metadata per document, one row per value (an array field has
        # several; `value` has no declared type, so 3, 3.5, 'x' keep their storage class),
        # and each document's date for --since/--until. Rows written before this have
        # meta_version 0: the next `update` reads those files again and fills them in.
        "0004_metadata",
        """
        ALTER TABLE documents ADD COLUMN metadata TEXT;
        ALTER TABLE documents ADD COLUMN dated_ns INTEGER;
        ALTER TABLE documents ADD COLUMN when_ns INTEGER;
        ALTER TABLE documents ADD COLUMN meta_version INTEGER NOT NULL DEFAULT 0;
        UPDATE documents SET when_ns = mtime_ns;
        CREATE INDEX documents_when ON documents (when_ns);
        CREATE TABLE document_meta (
            doc_id INTEGER NOT NULL,
            key TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('string', 'number', 'boolean')),
            value NOT NULL,
            PRIMARY KEY (doc_id, key, type, value)
        ) WITHOUT ROWID;
        CREATE INDEX document_meta_lookup ON document_meta (key, type, value);
        """,
    ),
    (
        # How each content's chunks were cut: `regex` (markdown break points), `ast` (a source
        # file by its syntax tree), `ast!` (meant by syntax, did not parse: cut by regex).
        "0005_embedded_chunker",
        """
        ALTER TABLE embedded ADD COLUMN chunker TEXT NOT NULL DEFAULT 'regex';
        """,
    ),
]


BUSY_TIMEOUT_MS = 5000


def busy_timeout_ms() -> int:
    """How long a statement waits on another process's lock here: BUSY_TIMEOUT_MS, none inside
    `without_waiting()` (qmd/core/cancel.py), where a locked index is said busy at once."""
    return BUSY_TIMEOUT_MS if waiting() else 0


_FOREIGN_SCHEMA = r"no such (table|column)|cannot (modify|UPSERT|insert|update|delete)\b.*\bview|has no column named|may not be modified"  # compiled by re's cache when an error is read

HEADER_MAGIC = b"SQLite format 3\x00"
FRESH_FILE_WAIT_S = 0.05  # a file another process has just created is empty for a moment
REBUILD_HINT = "run: qmd doctor --fix  (rebuilds it from your notes; the damaged file is kept beside it as .broken-<time>)"


def locked(path: Path, exc: apsw.Error) -> IndexBusyError:
    """The error a lock another process holds past the busy timeout becomes: never "damaged"
    (a rebuild would move a sound file aside and drop its vectors)."""
    return IndexBusyError(f"the index {path} is locked by another process ({exc}); the file is not damaged", f"retry when that process is done (fuser {path} names it)")


def damaged(path: Path, detail: str) -> IndexDamagedError:
    """The error every damaged-index case becomes: names the file and the fix."""
    return IndexDamagedError(f"the index {path} is damaged: {detail}", REBUILD_HINT)


def _not_a_file(path: Path) -> str | None:
    """Why what is at `path` is not a regular file (a folder, a FIFO, a device), or None (a
    file, or nothing there). SQLite and a plain read both wait forever on a FIFO nobody writes."""
    import stat

    try:
        mode = path.stat().st_mode
    except OSError:
        return None
    if stat.S_ISDIR(mode):
        return "a folder"
    return None if stat.S_ISREG(mode) else "a pipe, a device or a socket"


def _header_problem(path: Path) -> str | None:
    """One look at the file's first 100 bytes and its size (no SQLite involved)."""
    import os

    from qmd.core.fileio import NotRegularFile, open_regular

    try:
        with open_regular(path) as f:  # never waits: a FIFO, a device or a folder is refused
            size = os.fstat(f.fileno()).st_size
            header = f.read(100)
    except NotRegularFile:
        return f"it is {_not_a_file(path) or 'not a regular file'}, not a file"
    except OSError as exc:
        return None if isinstance(exc, FileNotFoundError) else f"it cannot be read ({exc.strerror or exc})"
    if size == 0:
        return "the file is empty (0 bytes)"
    if not header.startswith(HEADER_MAGIC):
        return f"it is not a SQLite database (starts with {header[:16]!r})"
    if len(header) < 100:
        return f"the file is cut short ({size} bytes, less than a SQLite header)"
    raw_page = int.from_bytes(header[16:18], "big")
    page_size = 65536 if raw_page == 1 else raw_page
    if page_size < 512 or page_size & (page_size - 1):
        return f"its header names an impossible page size ({raw_page})"
    pages = int.from_bytes(header[28:32], "big")
    counter_valid = header[24:28] == header[92:96]  # else the header's page count is stale: SQLite ignores it
    if pages and counter_valid and size < pages * page_size:
        return f"the file is cut short: {size} bytes, its header counts {pages} pages of {page_size} bytes ({pages * page_size} bytes)"
    return None


def _wal_has_frames(path: Path) -> bool:
    try:
        return Path(f"{path}-wal").stat().st_size > 0
    except OSError:
        return False


def _wal_pages(path: Path, page_size: int) -> set[int]:
    """The pages the -wal beside `path` holds in its committed frames (those of its current
    salt, up to the last commit frame), read from the frame headers alone; empty when it has
    none or is not a WAL of this page size."""
    import struct

    pages: set[int] = set()
    try:
        with open(f"{path}-wal", "rb") as wal:
            head = wal.read(32)
            if len(head) < 32 or struct.unpack(">I", head[:4])[0] not in (0x377F0682, 0x377F0683) or struct.unpack(">I", head[8:12])[0] != page_size:
                return pages
            salts, pending = head[16:24], set()
            while True:
                frame = wal.read(24)
                if len(frame) < 24 or frame[8:16] != salts:
                    return pages
                page, size_after = struct.unpack(">II", frame[:8])
                pending.add(page)
                if size_after:  # a commit frame: what came before it is committed
                    pages |= pending
                    pending = set()
                wal.seek(page_size, 1)
    except OSError:
        return pages


def _wal_holds_the_rest(path: Path) -> bool:
    """Whether the pages a cut-short file lacks are all in its -wal's committed frames: a
    checkpoint stopped part way (the disk filled, the process died) after writing the header's
    new page count, and SQLite reads those pages from the WAL. That file is sound."""
    import os

    try:
        with open(path, "rb") as f:
            size = os.fstat(f.fileno()).st_size
            header = f.read(100)
    except OSError:
        return False
    if len(header) < 100:
        return False
    raw_page = int.from_bytes(header[16:18], "big")
    page_size = 65536 if raw_page == 1 else raw_page
    pages = int.from_bytes(header[28:32], "big")
    missing = range(size // page_size + 1, pages + 1)
    held = _wal_pages(path, page_size)
    return bool(held) and all(page in held for page in missing)


def file_problem(path: Path) -> str | None:
    """Why the file at `path` cannot be a sound index, from its header and size alone; None if it may be.

    A missing file is no problem here (the callers say "not built"). A problem is looked at
    twice, a moment apart, when it could be a writer caught mid-step: a file just created
    (empty until its first pragma) or a checkpoint growing the file (header first, pages after).
    A file cut short whose -wal holds every page it lacks is sound: a checkpoint stopped part
    way (a full disk) and SQLite reads them from the WAL (it was called damaged, and doctor
    --fix moved the sound index aside).
    """
    problem = _header_problem(path)
    if problem is None:
        return None
    time.sleep(FRESH_FILE_WAIT_S)
    problem = _header_problem(path)
    if problem and "cut short" in problem and _wal_has_frames(path):
        time.sleep(FRESH_FILE_WAIT_S * 4)  # a checkpoint may still be writing the pages
        problem = _header_problem(path)
        if problem and "cut short" in problem and _wal_holds_the_rest(path):
            return None
    return problem


def translate(path: Path, exc: apsw.Error) -> QmdError | None:
    """The QmdError an apsw error on `path` means (damage, or a file this user may not read or
    write: `access.IndexAccessError`, never "damaged"), or None when it is neither."""
    if isinstance(exc, (apsw.ReadOnlyError, apsw.CantOpenError)):
        denied = access.problem(path, write=isinstance(exc, apsw.ReadOnlyError))
        if denied is not None:
            return denied
        if isinstance(exc, apsw.ReadOnlyError):
            return QmdError(f"the index {path} cannot be written: SQLite says: {exc}", "check that it, its -wal and -shm files and its folder are writable by you")
        return None
    if isinstance(exc, apsw.FullError) or (isinstance(exc, apsw.IOError) and access.short_of_space(path)):
        return access.disk_full(path, exc)  # SQLite rolled the write back: nothing is damaged
    if isinstance(exc, (apsw.CorruptError, apsw.NotADBError)):
        return damaged(path, f"SQLite says: {exc}")
    if isinstance(exc, apsw.IOError) and "short read" in str(exc).lower():
        return damaged(path, f"SQLite says: {exc}")
    if isinstance(exc, apsw.SQLError) and re.search(_FOREIGN_SCHEMA, str(exc), re.IGNORECASE):
        # tables qmd's migrations made are missing or replaced (a view, other columns): the
        # file was changed by something else (a repository can ship one)
        return damaged(path, f"its tables are not the ones qmd writes (SQLite says: {exc})")
    return None


def connect(path: Path, *, create: bool) -> apsw.Connection:
    """Open the index at `path` (WAL, short busy timeout) and bring its schema up to date.

    `create=False` refuses to make a new file, so a read of a missing index is an error
    naming the fix instead of an empty database left behind. An existing file is looked
    at before SQLite opens it: an empty, cut-short or foreign file is IndexDamagedError,
    never an empty index with fresh tables written into it.
    """
    if not create and not os.path.lexists(path):  # a link that leads nowhere: access.problem below says so
        raise QmdError(f"no index at {path}", "add a collection first: qmd collection add DIR --name NAME")
    kind = _not_a_file(path)
    if kind:  # a FIFO would make SQLite (and the header's read) wait forever
        raise QmdError(f"the index path {path} is {kind}, not an index file", f"move {'the folder' if kind == 'a folder' else 'it'} aside (mv {path} {path}.moved-aside), or set INDEX_PATH to a file")
    denied = access.problem(path, write=create)  # a file this user may not read is not a damaged one
    if denied is not None:
        raise denied
    if path.exists() or path.is_symlink():
        problem = file_problem(path)
        if problem:
            raise damaged(path, problem)
    elif create:
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as exc:
            raise QmdError(f"cannot create the index folder {path.parent}: {exc}", "set XDG_CACHE_HOME or INDEX_PATH to a writable place") from exc
    flags = apsw.SQLITE_OPEN_READWRITE | (apsw.SQLITE_OPEN_CREATE if create else 0)
    conn: apsw.Connection | None = None
    unmade = access.unmade_sidecars(path)  # a read-only index: SQLite makes them read-only too
    try:
        conn = apsw.Connection(str(path), flags=flags)
        conn.set_busy_timeout(busy_timeout_ms())  # the warm-up's open never waits (cancel.without_waiting)
        refused = not_qmds_error(conn, path)
        if refused is not None:  # before WAL mode or a migration writes into it: not damaged, never rebuilt, nothing changed
            conn.close()
            raise refused
        conn.execute("PRAGMA synchronous = NORMAL; PRAGMA temp_store = MEMORY; PRAGMA cache_size = -16000; PRAGMA journal_size_limit = 67108864")  # a WAL restarted after a big write shrinks to 64 MB
        if conn.execute("PRAGMA journal_mode").fetchall()[0][0] != "wal":
            conn.execute("PRAGMA journal_mode = WAL")
        access.writable_sidecars(unmade)
        migrate(conn)
        stranger = foreign_object(conn)
        if stranger:
            raise damaged(path, stranger)
    except apsw.Error as exc:
        if conn is not None:
            conn.close()
        if isinstance(exc, apsw.BusyError):  # another process holds it locked: nothing is wrong with the file
            raise locked(path, exc) from exc
        raise translate(path, exc) or QmdError(f"cannot open the index {path}: {exc}", "check the file; `qmd doctor` can rebuild a broken index") from exc
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)  # its queries wait as any other's
    return conn


def foreign_object(conn: apsw.Connection) -> str | None:
    """Why the schema holds something qmd's migrations never make (a trigger or a view: a
    shipped or edited file can carry one that rewrites or refuses qmd's writes), or None."""
    for kind, name in conn.execute("SELECT type, name FROM sqlite_master WHERE type IN ('trigger', 'view') LIMIT 1"):
        return f"it holds a {kind} qmd never makes ({str(name)[:80]!r})"
    return None


def not_qmds(conn: apsw.Connection) -> str | None:
    """What the file is when it is an SQLite database qmd never made (tables, and no record of
    qmd's migrations), or None. INDEX_PATH set to another program's database had qmd's tables
    written into it; the original qmd's index at the same default path (~/.cache/qmd) failed
    every command with "table content already exists", its hint offering a rebuild."""
    if conn.execute("SELECT 1 FROM sqlite_master WHERE type='table' AND name='schema_migrations'").fetchall():
        return None
    tables = [str(row[0]) for row in conn.execute("SELECT name FROM sqlite_master WHERE type='table' AND name NOT LIKE 'sqlite_%' ORDER BY name")]
    if not tables:
        return None  # an empty database: the index is made in it
    if {"content", "documents", "store_collections"} <= set(tables):
        return "the original qmd's index (npm @tobilu/qmd keeps its own schema there)"
    return f"an SQLite database of something else (its tables: {', '.join(tables[:4])}{', …' if len(tables) > 4 else ''})"


def not_qmds_error(conn: apsw.Connection, path: Path) -> IndexAccessError | None:
    """The error for a database qmd never made at the index path (`not_qmds`), or None. An
    IndexAccessError: doctor names the move as the fix and `--fix` never rebuilds over it."""
    what = not_qmds(conn)
    if what is None:
        return None
    return IndexAccessError(
        f"{path} is {what}, not this qmd's index; nothing in it was changed", f"mv {path} {path}.moved-aside", "", owner=False,
        hint=f"keep it and give this qmd its own file: mv {path} {path}.moved-aside (qmd builds a new index there), or set INDEX_PATH to another file",
    )


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
    """BEGIN IMMEDIATE ... COMMIT, rolled back on any exception. Inside another transaction
    (an import's, `IndexBackend.atomic`) a savepoint: the outer one commits or rolls back all."""
    if not conn.getautocommit():
        conn.execute("SAVEPOINT qmd_nested")
        try:
            yield
        except BaseException:
            if not conn.getautocommit():  # else SQLite already rolled the whole transaction back (a full disk)
                conn.execute("ROLLBACK TO qmd_nested")
                conn.execute("RELEASE qmd_nested")
            raise
        conn.execute("RELEASE qmd_nested")
        return
    conn.execute("BEGIN IMMEDIATE")
    try:
        yield
        conn.execute("COMMIT")
    except BaseException as exc:
        if not conn.getautocommit():  # SQLite rolls back by itself on a full disk: a second ROLLBACK fails and hides why
            conn.execute("ROLLBACK")
        if isinstance(exc, apsw.FullError):
            raise access.disk_full(Path(conn.db_filename("main")), exc) from exc
        raise


def values_in(values: Sequence[object]) -> tuple[str, list[object]]:
    """The inside of `x IN (…)` for `values`: one parameter each while few, else one JSON
    array (SQLite allows 32,766 parameters a statement: `vsearch --all` passes more)."""
    if len(values) <= 500:
        return ",".join("?" * len(values)), list(values)
    return "SELECT value FROM json_each(?)", [json.dumps(list(values))]


_SIDE_WRITES: dict[str, WeakKeyDictionary[apsw.Connection, int]] = {}  # "writes": made by the first side write (a search never imports weakref)


@contextmanager
def side_writes(conn: apsw.Connection) -> Iterator[None]:
    """Writes in the block change no document, chunk or vector (the LLM cache, a note in
    `meta`): `data_changes` leaves them out, so a reranked query's cache write does not throw
    away what was read for the next query (approx.py's kept scopes: seconds to cut again at 1M)."""
    before = conn.total_changes()
    try:
        yield
    finally:
        if not _SIDE_WRITES:
            from weakref import WeakKeyDictionary

            _SIDE_WRITES.setdefault("writes", WeakKeyDictionary())
        kept = _SIDE_WRITES["writes"]
        kept[conn] = kept.get(conn, 0) + conn.total_changes() - before


def data_changes(conn: apsw.Connection) -> int:
    """Rows this connection has changed, besides its `side_writes`."""
    kept = _SIDE_WRITES.get("writes")
    return conn.total_changes() - (kept.get(conn, 0) if kept is not None else 0)
