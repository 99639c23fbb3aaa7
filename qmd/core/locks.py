"""Locks on files (flock via `filelock`: released by the kernel when the holder dies).

One helper for every lock qmd and its harness take: the index's writer lock, the
updater's global lock, an MCP server's single-instance lock, the hook registry's edit lock,
the lock on a repository's hooks folder while qmd edits it.
`filelock` is imported only when a lock is taken, so readers and `--help` never load it.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from qmd.core.errors import IndexAccessError, IndexBusyError, QmdError

if TYPE_CHECKING:
    from filelock import BaseFileLock


class FileLockHandle:
    """A lock on one file, held by this process until `release()`."""

    def __init__(self, path: Path, lock: BaseFileLock) -> None:
        self.path = path
        self._lock = lock

    def release(self) -> None:
        self._lock.release(force=True)

    def __enter__(self) -> FileLockHandle:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _lock_for(path: Path) -> BaseFileLock:
    from filelock import FileLock

    path.parent.mkdir(parents=True, exist_ok=True)
    return FileLock(str(path))


def try_lock(path: Path) -> FileLockHandle | None:
    """Take the lock on `path` at once, or return None when another process holds it."""
    from filelock import Timeout

    lock = _lock_for(path)
    try:
        lock.acquire(timeout=0)
    except Timeout:
        return None
    return FileLockHandle(path, lock)


def lock_file(path: Path, timeout: float | None = None) -> FileLockHandle:
    """Take the lock on `path`, waiting up to `timeout` seconds (None: for as long as it takes).

    Raises `TimeoutError` when the wait runs out.
    """
    from filelock import Timeout

    lock_ = _lock_for(path)
    try:
        lock_.acquire(timeout=-1 if timeout is None else timeout)
    except Timeout:
        raise TimeoutError(f"{path} is still locked after {timeout}s") from None
    return FileLockHandle(path, lock_)


@contextmanager
def lock_folder(path: Path, timeout: float) -> Iterator[None]:
    """Hold flock on the folder `path` itself (no lock file left in it), waiting up to `timeout`
    seconds: for folders qmd edits but does not own, such as a repository's hooks. Where the
    file system refuses flock on a folder, nothing is held (the caller's own checks remain).

    Raises `TimeoutError` when the wait runs out.
    """
    import fcntl
    import time

    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        deadline = time.monotonic() + timeout
        while True:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                break
            except BlockingIOError:
                if time.monotonic() >= deadline:
                    raise TimeoutError(f"{path} is still locked after {timeout}s") from None
                time.sleep(0.05)
            except OSError:  # flock unsupported here (some network file systems)
                break
        yield
    finally:
        os.close(fd)  # closing the only descriptor releases the lock


def is_locked(path: Path) -> bool:
    """Whether another process holds the lock on `path` (a missing file is not locked)."""
    if not path.exists():
        return False
    handle = try_lock(path)
    if handle is None:
        return True
    handle.release()
    return False


def linked_side_file(side: Path, kind: str) -> IndexAccessError:
    """The error for a file kept beside the index (its writer lock, its -wal or -shm: `kind`)
    that is a symbolic link (a cloned repository's `.qmd/` can hold one): nothing is written
    through it, and `rm` is the fix; qmd makes the file again."""
    return IndexAccessError(
        f"the index's {kind} {side} is a symbolic link: qmd and SQLite never read or write it through a link (it would change the file it leads to); the index is not damaged",
        f"rm {side}", "", owner=False, hint=f"remove the link (rm {side}); qmd makes it again as a plain file",
    )


def lock_path(index_path: Path) -> Path:
    """The writer lock's file, next to the index: `{index}.sqlite.lock`."""
    return index_path.with_name(index_path.name + ".lock")


def holder_path(index_path: Path) -> Path:
    """Who holds the writer lock: `{index}.sqlite.lock.json`, written by the holder."""
    return index_path.with_name(index_path.name + ".lock.json")


@dataclass(frozen=True)
class LockHolder:
    """The process holding an index's writer lock, as it recorded itself."""

    pid: int
    command: str
    since: str  # ISO-8601 UTC

    def describe(self) -> str:
        """`pid 4242 (qmd embed), since 2026-12-01T10:21:03Z (2m ago)`."""
        from qmd.core.clock import ago

        return f"pid {self.pid} ({self.command}), since {self.since} ({ago(self.since)})"


def lock_holder(index_path: Path) -> LockHolder | None:
    """The recorded holder of the writer lock, if the lock is held and it left a record."""
    from qmd.core.fileio import read_json

    if not is_locked(lock_path(index_path)):
        return None
    data = read_json(holder_path(index_path))
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return None
    return LockHolder(int(data["pid"]), str(data.get("command") or "?"), str(data.get("since") or "?"))


def _record_holder(index_path: Path) -> None:
    import os

    from qmd.core.clock import now_iso
    from qmd.core.fileio import write_json
    from qmd.core.process import own_command

    try:
        write_json(holder_path(index_path), {"pid": os.getpid(), "command": own_command()[:200], "since": now_iso()}, fsync=False)
    except OSError:
        pass  # the record only serves messages; the lock itself is what counts


@contextmanager
def writer_lock(index_path: Path, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of `index_path`: one writer at a time; readers never wait.

    When another process holds it, `on_wait` is called once, then the call waits: for as long
    as it takes (`timeout=None`), not at all (`timeout=0`), or up to `timeout` seconds; a
    wait that runs out raises IndexBusyError naming the holder (pid, command, since when).
    """
    path = lock_path(index_path)
    try:
        handle = try_lock(path)
    except OSError as exc:
        if os.path.islink(path):  # opened without following links (ELOOP): the folder is not the problem
            raise linked_side_file(path, "writer lock") from exc
        raise QmdError(f"cannot create the index folder {path.parent}: {exc.strerror or exc}", "set XDG_CACHE_HOME or INDEX_PATH to a writable folder") from exc
    if handle is None:
        if timeout is not None and timeout <= 0:
            raise busy(index_path) from None
        if on_wait is not None:
            on_wait()
        try:
            handle = lock_file(path, timeout)
        except TimeoutError:
            raise busy(index_path, timeout) from None
    _record_holder(index_path)
    try:
        with handle:
            yield
    finally:
        from qmd.core.process import remove_own_record

        remove_own_record(holder_path(index_path))


def describe_holder(index_path: Path) -> str | None:
    """Who holds the writer lock, for messages (`another process` when it left no record);
    None when nobody does."""
    holder = lock_holder(index_path)
    if holder is not None:
        return holder.describe()
    return "another process" if is_locked(lock_path(index_path)) else None


def busy(index_path: Path, waited: float | None = None) -> IndexBusyError:
    """The error for a writer lock held by another process, naming it when it left a record."""
    who = describe_holder(index_path) or "another process"
    after = f" (waited {waited:g}s)" if waited else ""
    return IndexBusyError(f"the index {index_path} is being written by {who}{after}", "wait for it to finish (or use --wait SECONDS), then retry")
