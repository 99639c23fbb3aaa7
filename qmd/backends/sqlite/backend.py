"""The SQLite implementation of the storage seam: one file (apsw + FTS5 + sqlite-vec)."""

from __future__ import annotations

import os
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path

import apsw

from qmd.backends.base import FieldsFor, IndexBackend, IndexCheck, RebuildReport, VectorModel
from qmd.backends.owner import Owner
from qmd.backends.sql import count, drop_inactive, scalar
from qmd.backends.sqlite import cache, documents, fulltext
from qmd.backends.sqlite.connection import BUSY_TIMEOUT_MS, busy_timeout_ms, connect, locked, transaction, translate

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.errors import QmdError
    from qmd.backends.parts import VectorsSql


class SqliteBackend(IndexBackend):
    """An index in one SQLite file, WAL mode; the writer lock is `{file}.lock` beside it."""

    FOREIGN_HINT = "give each config its own index file: point INDEX_PATH elsewhere for this one (or unset it), remove the link that leads to this file, or delete a copy that came with a project (then: qmd update)"
    # Also unguarded: they raise no damage of this file (`rebuild` reads a fresh file, whose
    # errors are not this one's; the lock is a file beside it).
    UNGUARDED = IndexBackend.UNGUARDED | {"exists", "rebuild", "writer_lock", "lock_holder"}
    DOCUMENTS = documents
    FULLTEXT = fulltext
    CACHE = cache

    def __init__(self, path: str | Path, owner: Owner | None = None) -> None:
        self.path = Path(path)
        self.owner = owner
        self._conn: apsw.Connection | None = None
        self._file: tuple[int, int] | None = None  # (device, inode) of the file `_conn` has open
        self._busy_ms = BUSY_TIMEOUT_MS  # `_conn`'s busy timeout (connect leaves it so)

    def _failure(self, exc: Exception) -> QmdError | None:
        """apsw's "corrupt" and "not a database" errors: IndexDamagedError naming the file and
        `qmd doctor --fix`; "database is locked" (a statement that met another process's lock
        past its busy timeout): IndexBusyError, as when the index cannot be opened for it."""
        if isinstance(exc, apsw.BusyError):
            return locked(self.path, exc)
        return translate(self.path, exc) if isinstance(exc, apsw.Error) else None

    def _structure_due(self, model: VectorModel) -> bool:
        from qmd.backends.sqlite import approx

        conn = self.connection()
        if not approx.wanted(conn, model.id):
            return False
        return approx.due(conn, model.id, model.dims)  # status()'s verdict, its GROUP BY only after writes

    def vector_index_status(self) -> list[dict[str, object]]:
        from qmd.backends.sqlite import approx

        conn = self.connection()
        out: list[dict[str, object]] = []
        for model_id, name, fp, dims in list(conn.execute("SELECT id, model, fingerprint, dims FROM embed_models ORDER BY id")):
            found = approx.status(conn, int(model_id))
            if found["chunks"] or found["structure"]:
                space = VectorModel(int(model_id), str(fp), str(name), int(dims))
                out.append({
                    "model": str(name), **found, "due": approx.wanted(conn, int(model_id), int(str(found["chunks"]))),
                    **self.recall_status(space),
                })
        return out

    def _build_structure(self, model: VectorModel) -> int:
        from qmd.backends.sqlite import vectors

        return vectors.build_index(self.connection(), model)

    def _approx_identity(self, model: VectorModel) -> tuple[str, int] | None:
        from qmd.backends.sqlite import approx, vectors

        conn = self.connection()
        vectors.ensure_vec(conn)
        if not approx.searchable(conn, model.id, approx.chunks_of(conn, model.id), measured=False):
            return None
        return approx.identity(conn, model.id)

    def _vectors(self) -> VectorsSql:
        from qmd.backends.sqlite import vectors

        return vectors

    # --- lifecycle --------------------------------------------------------------------

    @property
    def location(self) -> str:
        return str(self.path)

    def exists(self) -> bool:
        return os.path.lexists(self.path)  # a link that leads nowhere is an index that cannot be opened (access.problem says why), not one never built

    def open(self, *, create: bool) -> None:
        if self._conn is None:
            self._connect(create=create)
        elif create and self._claim:
            self._write_owner()

    def connection(self) -> apsw.Connection:
        """The open connection (opened on first use; never creates the file). Inside
        `without_waiting()` its statements do not wait on another process's lock either (only
        its opening did: `initialize` on an index already open waited the 5 s busy timeout)."""
        conn = self._conn if self._conn is not None else self._connect(create=False)
        wait = busy_timeout_ms()
        if wait != self._busy_ms:
            conn.set_busy_timeout(wait)
            self._busy_ms = wait
        return conn

    def _connect(self, *, create: bool) -> apsw.Connection:
        conn = self._conn = connect(self.path, create=create)
        self._busy_ms = BUSY_TIMEOUT_MS
        self._file = self._identity()  # what `follow` compares the path with
        self._check_owner(create)
        return conn

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
        """Refuses first, before anything is written, an index, -wal, -shm, folder or lock file
        this user may not write (IndexAccessError naming it and its chmod)."""
        from qmd.backends.sqlite import access
        from qmd.core.locks import writer_lock

        denied = access.problem(self.path, write=True)
        if denied is not None:
            raise denied
        return writer_lock(self.path, timeout=timeout, on_wait=on_wait)

    def lock_holder(self) -> str | None:
        from qmd.core.locks import describe_holder

        return describe_holder(self.path)

    def atomic(self) -> AbstractContextManager[None]:
        self.open(create=True)
        return transaction(self.connection())

    def cleanup(self) -> tuple[int, int]:
        from qmd.backends.sqlite import vectors

        conn = self.connection()
        with transaction(conn):
            dropped = drop_inactive(conn)
            if count(conn, "SELECT count(*) FROM embed_models"):
                vectors.ensure_vec(conn)
                vectors.drop_orphans(conn)
        try:
            conn.execute("VACUUM")  # a copy of the whole file: the disk may not hold it
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        except apsw.FullError as exc:
            from qmd.backends.sqlite import access

            raise access.disk_full(self.path, exc) from exc
        return dropped

    def repair_fulltext(self, fields: FieldsFor) -> int:
        from qmd.backends.sqlite import integrity

        conn = self.connection()
        with transaction(conn):
            return integrity.repair_fts(conn, fields)

    # --- schema and integrity ---------------------------------------------------------

    def inspect(self, *, quick: bool = False) -> IndexCheck:
        """Also raises IndexAccessError for a file this user may not read or write: that is
        no damage (a rebuild would move a sound file aside), so it is not reported as one."""
        from qmd.backends.sqlite import access, integrity

        denied = access.problem(self.path, write=True)
        if denied is not None:
            raise denied
        return integrity.inspect(self.path, quick=quick)

    def backup(self) -> Path:
        from qmd.backends.sqlite import integrity

        return integrity.verified_backup(self.connection(), self.path)

    def rebuild(self, build: Callable[[IndexBackend], int]) -> RebuildReport:
        from qmd.backends.sqlite import integrity, vectors

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


