"""Locks on files (flock via `filelock`: released by the kernel when the holder dies).

One helper for every lock qmd and its harness take: the index's writer lock, the
updater's global lock, an MCP server's single-instance lock, the hook registry's edit lock.
`filelock` is imported only when a lock is taken, so readers and `--help` never load it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

from qmd.core.errors import IndexBusyError, QmdError

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


def is_locked(path: Path) -> bool:
    """Whether another process holds the lock on `path` (a missing file is not locked)."""
    if not path.exists():
        return False
    handle = try_lock(path)
    if handle is None:
        return True
    handle.release()
    return False


def lock_path(index_path: Path) -> Path:
    """The writer lock's file, next to the index: `{index}.sqlite.lock`."""
    return index_path.with_name(index_path.name + ".lock")


@contextmanager
def writer_lock(index_path: Path, *, wait: bool = True, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of `index_path`: one writer at a time; readers never wait.

    With `wait=False` a held lock raises IndexBusyError at once; otherwise `on_wait` is
    called once and the call blocks until the holder finishes.
    """
    path = lock_path(index_path)
    try:
        handle = try_lock(path)
    except OSError as exc:
        raise QmdError(f"cannot create the index folder {path.parent}: {exc.strerror or exc}", "set XDG_CACHE_HOME or INDEX_PATH to a writable folder") from exc
    if handle is None:
        if not wait:
            raise IndexBusyError(f"the index {index_path} is being written by another process", "wait for it to finish, then retry") from None
        if on_wait is not None:
            on_wait()
        handle = lock_file(path)
    with handle:
        yield
