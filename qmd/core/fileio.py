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
    from collections.abc import Callable
    from typing import Any, BinaryIO


DENIED = (errno.EACCES, errno.EPERM, errno.EROFS)  # the environment refuses: modes, ownership, a read-only mount
FULL = (errno.ENOSPC, errno.EDQUOT)  # the file system has no room: no space left on it, or this user's quota spent


class ReadOnlyFile(PermissionError):
    """A file of the user's that qmd was to replace or remove and a plain write may not change
    (its mode, its owner, an immutable flag, an ACL, a read-only or bind mount of its own): an
    atomic replace needs only its folder's write bit and would override that. `fix` is the
    hint naming what would let qmd change it."""

    def __init__(self, path: str | os.PathLike[str], why: str, fix: str) -> None:
        super().__init__(errno.EACCES, why, os.fspath(path))
        self.fix = fix


_IMMUTABLE, _APPEND_ONLY = 0x10, 0x20  # FS_IMMUTABLE_FL, FS_APPEND_FL (linux/fs.h)


def _inode_flags(path: str | os.PathLike[str]) -> int:
    """The file's inode flags (lsattr's), 0 where they cannot be read (not Linux, no such ioctl)."""
    try:
        import fcntl
        import struct

        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_NOFOLLOW", 0))
        try:
            return int(struct.unpack_from("i", fcntl.ioctl(fd, 0x80086601, b"\0" * 8))[0])  # FS_IOC_GETFLAGS
        finally:
            os.close(fd)
    except (OSError, ImportError):  # not Linux, or a file system without the flags
        return 0


def read_only(path: str | os.PathLike[str]) -> ReadOnlyFile | None:
    """Why a plain write (`>`, `cp`, an editor) of the existing regular file `path` would be
    refused, as the error to raise, else None: the protection an atomic rename, which needs
    only the folder's write bit, would override; or a file mounted on its own (a container's
    `-v FILE:FILE`), which a rename cannot replace. The hint names what fixes the cause."""
    try:
        st = os.stat(path)
        if not stat.S_ISREG(st.st_mode):
            return None
        folder = os.stat(os.path.dirname(os.path.abspath(path)))
        mounted_ro = bool(os.statvfs(path).f_flag & os.ST_RDONLY)
    except OSError:
        return None
    name = os.path.abspath(path)
    if st.st_dev != folder.st_dev or _mount_point_file(name):
        return ReadOnlyFile(
            path, "a file mounted on its own (a bind mount" + (", read-only" if mounted_ro else "") + "), which qmd cannot replace: it writes a new file and renames it over the old one",
            "mount the folder that holds it instead, or change the file where it is mounted from",
        )
    if mounted_ro:
        return None  # the write itself fails there, naming the mount and the remount
    search = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    if os.access(path, os.W_OK, **search):
        return None
    mode = stat.S_IMODE(st.st_mode)
    flags = _inode_flags(path)
    if flags & (_IMMUTABLE | _APPEND_ONLY):
        kind, flag = ("immutable", "i") if flags & _IMMUTABLE else ("append-only", "a")
        return ReadOnlyFile(path, f"{kind} (chattr +{flag})", f"clear the flag to let qmd change it (sudo chattr -{flag} {name}), or leave it as it is")
    euid = os.geteuid()
    if euid != 0 and st.st_uid != euid:
        owner = _user_name(st.st_uid)
        return ReadOnlyFile(path, f"read-only to you (mode {mode:04o}, owned by {owner})", f"run qmd as {owner}, or make the file yours (sudo chown {_user_name(euid)} {name})")
    if mode & stat.S_IWUSR:  # its mode lets its owner write: an ACL or a security module refuses
        return ReadOnlyFile(path, f"not writable to you although its mode is {mode:04o} (an ACL?)", f"see what refuses it (getfacl {name}; lsattr {name})")
    return ReadOnlyFile(path, f"read-only (mode {mode:04o})", f"make it writable (chmod u+w {name}) to let qmd change it, or keep it read-only and leave it be")


def _mount_point_file(name: str) -> bool:
    """Whether the file `name` is itself a mount point (a bind mount of one file, as a
    container's `-v FILE:FILE` makes: on the same file system, so its device tells nothing)."""
    try:
        with open("/proc/self/mountinfo", "rb") as fh:
            points = {line.split(b" ")[4] for line in fh if line.count(b" ") >= 4}
    except OSError:
        return False
    real = os.path.realpath(name).encode()
    return real.replace(b" ", b"\\040") in points


def _user_name(uid: int) -> str:
    try:
        import pwd

        return pwd.getpwuid(uid).pw_name
    except (ImportError, KeyError):
        return f"uid {uid}"


def refuse_read_only(path: str | os.PathLike[str]) -> None:
    """Raise ReadOnlyFile when `path` is a file a plain write may not change (see `read_only`)."""
    refused = read_only(path)
    if refused is not None:
        raise refused


def denial(exc: BaseException, doing: str | None = None) -> tuple[str, str] | None:
    """(message, hint) for an OSError that the environment is to blame for, else None: a
    refusal (permission denied, operation not permitted, read-only file system) or a full
    file system (no space left on the device, a disk quota exceeded).

    For a refusal the message names what is in the way, not the file qmd was touching: a
    folder above it that this user cannot look into, else the file or folder itself when it
    exists, else the folder it was to be created in (a temp file's, a new folder's); the hint
    names the chmod that fixes it. For a full file system it names the file being written and
    the file system's mount point, and the hint says to free space there (`df -h FOLDER`).
    `doing` ("cannot save the config X") goes first when given.
    """
    if not isinstance(exc, OSError) or exc.errno not in DENIED + FULL:
        return None
    why = exc.strerror or os.strerror(exc.errno)
    if isinstance(exc, ReadOnlyFile):
        name = os.path.abspath(os.fsdecode(exc.filename))
        said = f"it is {why}" if doing and name in doing else f"{name} is {why}, so qmd leaves it as it is"
        return (f"{doing}: {said}" if doing else said), exc.fix
    if exc.errno in FULL:
        return _no_room(exc, why, doing)
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


def _no_room(exc: OSError, why: str, doing: str | None) -> tuple[str, str]:
    """`denial`'s (message, hint) for a write that found its file system full (ENOSPC) or the
    user's quota on it spent (EDQUOT): the file, the mount point, and where to free space."""
    quota = exc.errno == errno.EDQUOT
    if not exc.filename:
        said = f"{why} (the disk is full)" if not quota else why
        where = "the file system qmd was writing to (its config, cache and state folders; see: df -h)"
        return (f"{doing}: {said}" if doing else said), f"free space on {where}, then run the command again"
    name = os.path.abspath(os.fsdecode(exc.filename))
    folder = _existing_folder(name)
    mount = mount_point(folder)
    full = f"your disk quota on {mount} is used up" if quota else f"the file system at {mount} is full"
    said = f"{why} ({full})" if doing and name in doing else f"cannot write {name}: {why} ({full})"  # the file named once
    message = f"{doing}: {said}" if doing else said
    if quota:
        return message, f"free space within your quota on {mount} (see: quota -s; df -h {folder}), or ask for a larger quota, then run the command again"
    return message, f"free space on {mount} (see: df -h {folder}), then run the command again"


def _existing_folder(name: str) -> str:
    """The nearest folder at or above `name` that exists."""
    folder = name if os.path.isdir(name) else os.path.dirname(name)
    while not os.path.isdir(folder) and os.path.dirname(folder) != folder:
        folder = os.path.dirname(folder)
    return folder


def mount_point(path: str | os.PathLike[str]) -> str:
    """The mount point of the file system holding `path` (or its nearest existing folder)."""
    current = os.path.realpath(_existing_folder(os.path.abspath(path)))
    while not os.path.ismount(current) and os.path.dirname(current) != current:
        current = os.path.dirname(current)
    return current


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


def stamped(path: Path, label: str, make: Callable[[Path], None]) -> Path:
    """`<name>.<label>-<time>` beside `path`, made by `make(name)`, which must raise
    FileExistsError when the name is taken (`os.link`, `open(name, "xb")`): two runs in the
    same second each get their own name (`-2`, `-3`, ...) and no earlier file is written over
    (a second rebuild's copy once overwrote the first's hard link to the original index)."""
    import time

    stamp = time.strftime("%Y%m%d-%H%M%S")
    n = 1
    while True:
        target = path.with_name(f"{path.name}.{label}-{stamp}" + (f"-{n}" if n > 1 else ""))
        n += 1
        try:
            make(target)
            return target
        except FileExistsError:
            continue


def kept_copy(path: Path, label: str, *, link: bool = False) -> Path:
    """A copy of `path` kept beside it under a new `stamped` name (`link`: a hard link where the
    file system allows one, else a copy of its bytes, mode and times)."""

    def make(target: Path) -> None:
        import shutil

        if link:
            try:
                os.link(path, target)
                return
            except FileExistsError:
                raise
            except OSError:
                pass  # no hard links on this file system: a copy
        with open(path, "rb") as src, open(target, "xb") as dst:
            shutil.copyfileobj(src, dst)
        shutil.copystat(path, target)

    return stamped(path, label, make)


def replace_file(src: str | os.PathLike[str], dst: str | os.PathLike[str]) -> None:
    """Rename `src` to `dst` atomically, replacing `dst` (same file system)."""
    os.replace(src, dst)


def _tmp_for(path: Path) -> Path:
    return path.with_name(f".{path.name}.{os.getpid()}.tmp")


def write_bytes(
    path: str | os.PathLike[str], data: bytes, *, mode: int | None = None, keep_mode: bool = True, fsync: bool = True, keep_read_only: bool = False,
) -> Path:
    """Atomically replace `path` with `data`; returns the path.

    The new file gets `mode` when given, else the existing file's mode (`keep_mode`; plus
    owner-read: what qmd writes it must be able to read back), else the umask default. The
    parent folder is created when missing. A symlink at `path` is replaced by a regular file,
    never written through. `keep_read_only` (the user's own files: the config, agents'
    settings, the tokens, an export's target) refuses a file a plain write may not change
    (ReadOnlyFile: see `read_only`) instead of replacing it, unless it already holds `data`;
    qmd's own caches and state heal such a mode.
    """
    target = Path(path)
    if keep_read_only and (refused := read_only(target)) is not None:
        if _holds(target, data):
            return target  # nothing to change: a command run again over a protected file is no error
        raise refused
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
    except BaseException as exc:
        tmp.unlink(missing_ok=True)
        _name_the_target(exc, tmp, target)
        raise
    return target


def _holds(path: Path, data: bytes) -> bool:
    """Whether the file at `path` holds exactly `data`."""
    try:
        return path.stat().st_size == len(data) and path.read_bytes() == data
    except OSError:
        return False


def _name_the_target(exc: BaseException, tmp: Path, target: Path) -> None:
    """Give a full disk's OSError the file being written: write() and close() raise it
    without a name, and the temp file's name is not the one the user knows."""
    if isinstance(exc, OSError) and exc.errno in FULL and (not exc.filename or os.fsdecode(exc.filename) == str(tmp)):
        exc.filename = str(target)


def check_writable(path: str | os.PathLike[str], *, keep_read_only: bool = False, make_folders: bool = True) -> None:
    """Raise the OSError that `write_bytes(path, …)` would meet creating its temp file (its
    folder missing and not creatable, not writable, on a read-only mount; with
    `keep_read_only`, a file a plain write may not change: `read_only`). For a step that must not start unless
    the file can be written after it. Missing folders are made, unless `make_folders` is
    false: then the probe is made in the nearest folder that exists, where the first would
    be, and nothing is changed at all."""
    target = Path(path)
    if keep_read_only:
        refuse_read_only(target)
    if make_folders:
        target.parent.mkdir(parents=True, exist_ok=True)
    else:
        target = Path(_existing_folder(str(target.parent))) / target.name
    tmp = _tmp_for(target)
    try:
        fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o600)  # as write_bytes opens it
    except OSError as exc:
        _name_the_target(exc, tmp, target)
        raise
    os.close(fd)
    tmp.unlink()


class KeptFile:
    """A file as it is before a change that may have to be undone, put back by `restore`
    without needing any room on its file system (the change may have failed for a full disk):
    the old file is kept under a hard link (`.<name>.<pid>.kept.tmp`) and renamed back over
    the new one, or, when it did not exist, the new one is removed. Where a link cannot be
    made (a file system without them) its bytes are kept and written back. `drop` (always
    call it, e.g. in a `finally`) removes the link once the change stands or was undone."""

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.path = Path(path)
        self._link: Path | None = None
        self._data: bytes | None = None
        try:
            self.absent = not os.path.lexists(self.path)
            if not self.absent:
                link = self.path.with_name(f".{self.path.name}.{os.getpid()}.kept.tmp")
                link.unlink(missing_ok=True)
                try:
                    os.link(self.path, link, follow_symlinks=False)
                    self._link = link
                except OSError:
                    self._data = self.path.read_bytes()
        except OSError:
            self.absent = False  # unreadable: `restore` leaves the file alone (its write was refused too)

    def restore(self) -> None:
        """Put the file back as it was when kept (raises the OSError of a failed restore)."""
        if self.absent:
            self.path.unlink(missing_ok=True)
        elif self._link is not None:
            replace_file(self._link, self.path)
            self._link = None
        elif self._data is not None:
            write_bytes(self.path, self._data)

    def drop(self) -> None:
        """Forget the kept copy (removes the link; the file stays as it now is). Never raises:
        it runs in a `finally`, where an error would hide the one being reported."""
        link, self._link, self._data = self._link, None, None
        if link is not None:
            try:
                link.unlink(missing_ok=True)
            except OSError:
                pass


def write_text(
    path: str | os.PathLike[str], text: str, *, mode: int | None = None, keep_mode: bool = True, fsync: bool = True, keep_read_only: bool = False,
) -> Path:
    """Atomically replace `path` with `text` (UTF-8); see `write_bytes`."""
    return write_bytes(path, text.encode("utf-8"), mode=mode, keep_mode=keep_mode, fsync=fsync, keep_read_only=keep_read_only)


def write_json(
    path: str | os.PathLike[str], data: Any, *, indent: int | None = 2, sort_keys: bool = False, mode: int | None = None, fsync: bool = True, keep_read_only: bool = False,
) -> Path:
    """Atomically write `data` as JSON (with a final newline); see `write_bytes`."""
    text = json.dumps(data, indent=indent, sort_keys=sort_keys)
    return write_text(path, text + "\n", mode=mode, fsync=fsync, keep_read_only=keep_read_only)


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
    except BaseException:
        os.close(fd)
        raise
    # Outside the try: once fdopen's file object holds the descriptor, closing it here again
    # failed with EBADF, and that OSError replaced a Ctrl-C arriving inside fdopen (the
    # indexer then listed the file as unreadable and the interrupted command exited 0).
    return os.fdopen(fd, "rb")


class TooLarge(OSError):
    """`read_regular` found more bytes than its limit."""


def read_regular(path: str | os.PathLike[str], limit: int) -> bytes:
    """The bytes of `path` when it is a regular file of at most `limit` bytes. NotRegularFile
    for a pipe, device, socket or folder, TooLarge past `limit` (a cloned repository's file
    linked to /dev/zero, or a sparse file of gigabytes, was read until the memory ran out);
    other OSErrors pass through."""
    with open_regular(path) as fh:
        data = fh.read(limit + 1)
    if len(data) > limit:
        raise TooLarge(errno.EFBIG, f"it is larger than {limit:,} bytes")
    return data


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
