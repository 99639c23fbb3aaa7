"""The index's writer lock: one writer at a time (update, embed, cleanup); readers never wait."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from qmd.core.errors import IndexBusyError, QmdError


def lock_path(index_path: Path) -> Path:
    return index_path.with_name(index_path.name + ".lock")


@contextmanager
def writer_lock(index_path: Path, *, wait: bool = True, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the writer lock of `index_path` (flock: released by the kernel if we die).

    With `wait=False` a held lock raises IndexBusyError at once; otherwise `on_wait` is
    called once and the call blocks until the holder finishes.
    """
    from filelock import FileLock, Timeout  # lazy: readers never need it

    path = lock_path(index_path)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise QmdError(f"cannot create the index folder {path.parent}: {exc.strerror or exc}", "set XDG_CACHE_HOME or INDEX_PATH to a writable folder") from exc
    lock = FileLock(str(path))
    try:
        lock.acquire(timeout=0)
    except Timeout:
        if not wait:
            raise IndexBusyError(f"the index {index_path} is being written by another process", "wait for it to finish, then retry") from None
        if on_wait is not None:
            on_wait()
        lock.acquire()
    try:
        yield
    finally:
        lock.release()
