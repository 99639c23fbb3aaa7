"""Is the index file sound? Read-only inspection, and the repairs doctor may run.

`inspect` opens the file read-only and never migrates, so it can say "schema behind"
or "corrupted" without changing anything. The repairs (`repair_fts`, `verified_backup`,
`rebuild`) run under the index's writer lock, like every other write.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from pathlib import Path

import apsw

from qmd.core.errors import QmdError
from qmd.core.fileio import kept_copy, replace_file, stamped
from qmd.backends.rows import FieldsFor, IndexCheck, RebuildReport
from qmd.backends.sql import active_texts, count, survey
from qmd.backends.sqlite import fulltext
from qmd.backends.sqlite.access import disk_full, short_of_space, sidecars
from qmd.backends.sqlite.connection import BUSY_TIMEOUT_MS, MIGRATIONS, applied_migrations, file_problem, foreign_object, locked, not_qmds_error


def _readonly(path: Path) -> apsw.Connection:
    conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.set_busy_timeout(BUSY_TIMEOUT_MS)
    return conn


def _touch_every_table(conn: apsw.Connection) -> None:
    """Read the schema and the first row of every table: cheap (a few pages per table), and
    it finds a damaged schema or root page before a command does. Raises apsw's error."""
    tables = [str(name) for name, in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND sql NOT LIKE 'CREATE VIRTUAL%'")]
    conn.execute("PRAGMA schema_version").fetchall()
    for name in tables:
        quoted = name.replace('"', '""')
        conn.execute(f'SELECT 1 FROM "{quoted}" LIMIT 1').fetchall()


def inspect(path: Path, *, quick: bool = False) -> IndexCheck:
    """Read-only health of the index at `path` (`quick` skips PRAGMA quick_check). A lock
    another process holds past the busy timeout raises IndexBusyError: a locked file is not
    a damaged one, and "corrupted" would have doctor move it aside and rebuild."""
    check = IndexCheck(str(path), path.exists())
    if not check.exists:
        return check
    problem = file_problem(path)
    if problem:
        check.error = problem
        return check
    try:
        conn = _readonly(path)
    except apsw.BusyError as exc:
        raise locked(path, exc) from exc
    except apsw.Error as exc:
        _refuse_if_full(path, exc)
        check.error = f"cannot open: {exc}"
        return check
    try:
        # one snapshot for every read below: a table dropped between the listing and its read (an
        # embed resetting a model's vectors) was "no such table", so "corrupted"; and counts read
        # apart (documents, then their full-text rows) disagreed across an update's commit
        conn.execute("BEGIN")
        refused = not_qmds_error(conn, path)
        if refused is not None:  # another program's database, the original qmd's index: never "corrupted", never rebuilt
            raise refused
        stranger = foreign_object(conn)
        if stranger:
            check.error = stranger
            return check
        _touch_every_table(conn)
        if not quick:
            check.quick_check = [str(r[0]) for r in conn.execute("PRAGMA quick_check(20)")]
        if not survey(conn, check, applied_migrations(conn), [name for name, _ in MIGRATIONS]):
            return check
        check.fts_rows = count(conn, "SELECT count(*) FROM documents_fts")
        check.fts_missing = count(
            conn, "SELECT count(*) FROM documents d WHERE d.active = 1 AND NOT EXISTS (SELECT 1 FROM documents_fts f WHERE f.rowid = d.id)"
        )
        check.fts_extra = count(conn, "SELECT count(*) FROM documents_fts WHERE rowid NOT IN (SELECT id FROM documents WHERE active = 1)")
    except apsw.BusyError as exc:  # another process's lock, past the busy timeout: no damage
        raise locked(path, exc) from exc
    except apsw.Error as exc:
        _refuse_if_full(path, exc)
        check.error = f"{type(exc).__name__}: {exc}"
    finally:
        conn.close()
    return check


def _refuse_if_full(path: Path, exc: apsw.Error) -> None:
    """Raise the full-disk error for an I/O error met on a disk with no room: a sound index
    SQLite could not even read (no room for its -shm) is not a corrupted one."""
    if isinstance(exc, (apsw.FullError, apsw.IOError, apsw.CantOpenError)) and short_of_space(path):
        raise disk_full(path, exc) from exc


def repair_fts(conn: apsw.Connection, fields: FieldsFor) -> int:
    """Rewrite every FTS row from the stored content; returns the rows written.

    The caller holds the writer lock and a transaction.
    """
    conn.execute("INSERT INTO documents_fts (documents_fts) VALUES ('delete-all')")
    rows = active_texts(conn)
    for doc_id, collection, rel, text in rows:
        f = fields(collection, rel, text)
        fulltext.write_row(conn, doc_id, f.filepath, f.title, f.body)
    return len(rows)


def verified_backup(conn: apsw.Connection, path: Path) -> Path:
    """Copy the open index to `<name>.backup-<time>` beside it (SQLite's online backup),
    then prove the copy sound with quick_check; QmdError when it is not."""
    dest = stamped(path, "backup", lambda name: open(name, "xb").close())  # SQLite takes an empty file as a new database
    target = apsw.Connection(str(dest))
    try:
        with target.backup("main", conn, "main") as job:
            job.step(-1)
        verdict = [str(r[0]) for r in target.execute("PRAGMA quick_check")]
    finally:
        target.close()
    if verdict != ["ok"]:
        dest.unlink(missing_ok=True)
        raise QmdError(f"the backup copy of {path} failed its integrity check: {verdict[0]}", "run: qmd rebuild")
    return dest


def swap_in(new: Path, path: Path, label: str = "broken") -> Path | None:
    """Put the freshly built `new` in place of `path`; the old file is kept beside it as
    `<name>.<label>-<time>` (with its WAL). Returns where the old file went, if it existed.

    The old file is hard-linked first, so the rename swaps the name atomically and a
    reader never finds no index; its WAL is moved away before, so it never meets the new file.
    """
    moved = kept_copy(path, label, link=True) if path.exists() else None
    kept = moved or path.with_name(f"{path.name}.{label}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}")  # a WAL left without its index
    for side in sidecars(path):
        if side.exists():
            replace_file(side, Path(str(kept) + side.name[len(path.name):]))
    replace_file(new, path)
    return moved


def rebuild(path: Path, build: Callable[[Path], tuple[int, int]], label: str = "broken") -> RebuildReport:
    """Build a new index with `build(tmp_path)` (returns its documents and the documents whose
    vectors it kept), then swap it in; the old file is kept as `<name>.<label>-<time>`."""
    started = time.perf_counter()
    tmp = path.with_name(f".{path.name}.rebuild-{os.getpid()}")
    for leftover in [tmp, *sidecars(tmp)]:
        leftover.unlink(missing_ok=True)
    try:
        documents, vectors_kept = build(tmp)
        left = [side for side in sidecars(tmp) if side.exists() and side.stat().st_size]
        if left:  # the builder must leave one self-contained file (journal_mode=DELETE, closed)
            raise QmdError(f"the rebuilt index left {left[0]} behind", "report this; the old index is untouched")
        for side in sidecars(tmp):
            side.unlink(missing_ok=True)
        kept = swap_in(tmp, path, label)
    except BaseException:
        for leftover in [tmp, *sidecars(tmp)]:
            leftover.unlink(missing_ok=True)
        raise
    return RebuildReport(str(path), str(kept) if kept else None, documents, time.perf_counter() - started, vectors_kept)
