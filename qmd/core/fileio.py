"""Files that are never seen half-written: atomic writes, moves and JSON I/O.

Every write goes to a temporary file in the target's folder, is flushed and fsynced, and
then renamed over the target, so a reader sees the old file or the new one, never a mix,
and a crash leaves at most a stray `.<name>.<pid>.tmp`. This module is the only place qmd
renames files (`os.replace`): everything else calls `replace_file` or one of the writers.
"""

from __future__ import annotations

import errno
import json
import os
import stat
from pathlib import Path

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (3 ms) on a first query's path
if TYPE_CHECKING:
    from typing import Any, BinaryIO


DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)  # the environment refuses: modes, ownership, a read-only mount


def denial(exc: BaseException, doing: str | None = None) -> tuple[str, str] | None:
    """(message, hint) for an OSError that is a refusal of the environment (permission
    denied, operation not permitted, read-only file system), else None.

    The message names what is in the way, not the file qmd was touching: a folder above it
    that this user cannot look into, else the file or folder itself when it exists, else the
    folder it was to be created in (a temp file's, a new folder's); the hint names the chmod
    that fixes it. `doing` ("cannot save the config X") goes first when given.
    """
    if not isinstance(exc, OSError) or exc.errno not in DENIED:
        return None
    why = exc.strerror or os.strerror(exc.errno)
    if not exc.filename:
        return (f"{doing}: {why}" if doing else f"{why} ({exc})"), "check the permissions of qmd's folders (the config, cache and state folders) and run qmd as the user who owns them"
    culprit, what = _in_the_way(os.fsdecode(exc.filename))
    said = f"cannot {what} {culprit}: {why}"
    message = f"{doing}: {said}" if doing else said
    if exc.errno == errno.EROFS:
        return message, f"{culprit} is on a read-only file system: remount it read-write, or point qmd at a writable folder (QMD_CONFIG_DIR, QMD_STATE_DIR, XDG_CACHE_HOME)"
    bits = "rw" if what == "read or write" and not os.path.isdir(culprit) else "rwx"
    able = {"look into": "accessible", "create files in": "writable"}.get(what, "readable and writable")
    return message, f"make it {able} to you (chmod u+{bits} {culprit}), or run qmd as the user who owns it"


def _in_the_way(name: str) -> tuple[str, str]:
    """(the path to fix, what could not be done to it) for a refused operation on `name`."""
    absolute = os.path.abspath(name)
    search = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    folders = []
    folder = os.path.dirname(absolute)
    while True:
        folders.append(folder)
        if os.path.dirname(folder) == folder:
            break
        folder = os.path.dirname(folder)
    for folder in reversed(folders):  # from the root down: the first one this user cannot look into
        if not os.access(folder, os.X_OK, **search):
            return folder, "look into"
    if os.path.lexists(absolute):
        return absolute, "read or write"
    return os.path.dirname(absolute), "create files in"


def replace_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename `src` to `dst` atomically, replacing `dst` (same file system)."""
    os.replace(src, dst)


def _tmp_for(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_bytes(path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, keep_mode: bool = True, fsync: bool = True) -> Path:
    """Atomically replace `path` with `data`; returns the path.

    The new file gets `mode` when given, else the existing file's mode (`keep_mode`; plus
    owner-read: what qmd writes it must be able to read back), else the umask default. The
    parent folder is created when missing. A symlink at `path` is replaced by a regular file,
    never written through.
    """
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    if mode is None and keep_mode:
        try:
            if not target.is_symlink():
                mode = target.stat().st_mode & 0o7777 | stat.S_IRUSR  # a file qmd writes stays readable to its owner (a 000 one never healed)
        except OSError:
            mode = None
    tmp = _tmp_for(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o666 if mode is None else 0o600)
        with os.fdopen(fd, "wb") as fh:
            fh.write(data)
            fh.flush()
            if fsync:
                os.fsync(fh.fileno())
        if mode is not None:
            os.chmod(tmp, mode)
        replace_file(tmp, target)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return target


def check_writable(path: str | os.PathLike[str]) -> None:
    """Raise the OSError that `write_bytes(path, …)` would meet creating its temp file (its
    folder missing and not creatable, not writable, on a read-only mount); changes nothing.
    For a step that must not start unless the file can be written after it."""
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = _tmp_for(target)
    fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)  # as write_bytes opens it
    os.close(fd)
    tmp.unlink()


def write_text(path: str | os.PathLike[str], text: str, *, mode: int | None = None, keep_mode: bool = True, fsync: bool = True) -> Path:
    """Atomically replace `path` with `text` (UTF-8); see `write_bytes`."""
    return write_bytes(path, text.encode("utf-8"), mode=mode, keep_mode=keep_mode, fsync=fsync)


def write_json(path: str | os.PathLike[str], data: Any, *, indent: int | None = 2, sort_keys: bool = False, mode: int | None = None, fsync: bool = True) -> Path:
    """Atomically write `data` as JSON (with a final newline); see `write_bytes`."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys)
    return write_text(path, text + "\n", mode=mode, fsync=fsync)


class NotRegularFile(OSError):
    """`open_regular` was given a pipe, device, socket or folder."""


def open_regular(path: str | os.PathLike[str]) -> BinaryIO:
    """`path` opened for reading, only if it is a regular file: a FIFO is opened without
    waiting for a writer (O_NONBLOCK; a FIFO nobody writes blocked open() forever) and then
    refused, as is /dev/zero or a socket (NotRegularFile); other OSErrors pass through."""
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    try:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise NotRegularFile(0, "it is not a regular file (a pipe, device, socket or folder)")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def read_json(path: str | os.PathLike[str]) -> Any:
    """The JSON in `path`, or None when it is missing, unreadable, not a regular file (a FIFO
    in a state folder blocked the reader forever) or not JSON."""
    try:
        with open_regular(path) as fh:
            return json.loads(fh.read().decode("utf-8"))
    except (OSError, ValueError):
        return None


def file_digest(path: str | os.PathLike[str], cache: str | os.PathLike[str] | None = None) -> str:
    """The sha256 of a whole file (hex), computed once per (size, mtime, inode).

    With `cache`, digests are remembered in that JSON file (keyed by real path), so a
    large model file is read once per change, not once per process.
    """
    import hashlib

    real = os.path.realpath(path)
    st = os.stat(real)
    key = [st.st_size, st.st_mtime_ns, st.st_ino]
    known: dict[str, Any] = {}
    if cache is not None:
        loaded = read_json(cache)
        known = loaded if isinstance(loaded, dict) else {}
        entry = known.get(real)
        if isinstance(entry, dict) and entry.get("stat") == key and isinstance(entry.get("sha256"), str):
            return str(entry["sha256"])
    digest = hashlib.sha256()
    with open(real, "rb") as fh:
        for block in iter(lambda: fh.read(1 << 20), b""):
            digest.update(block)
    value = digest.hexdigest()
    if cache is not None:
        known[real] = {"stat": key, "sha256": value}
        try:
            write_json(cache, known, indent=None, fsync=False)
        except OSError:
            pass  # a read-only cache dir only costs the next process a re-read
    return value
