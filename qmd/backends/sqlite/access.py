"""May this user use the index's files? The file, its -wal and -shm, the folder SQLite makes
them in, and the writer lock beside them.

A refusal (a mode, an owner, a read-only mount) is the environment's, never damage: it is
`IndexAccessError`, naming the file and its chmod, never "damaged" or a rebuild (a rebuild
would move an intact index aside). Asked with `os.access`, never by opening the file: closing
a second descriptor of the index would drop the POSIX locks SQLite holds on it in this process.
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from pathlib import Path

from qmd.core.errors import IndexAccessError


def sidecars(path: Path) -> list[Path]:
    """The index's WAL and shared-memory files (they belong to that one file)."""
    return [Path(f"{path}-wal"), Path(f"{path}-shm")]


def _refused(path: Path, mode: int) -> bool:
    """Whether `path` is there and this user may not `mode` it."""
    search = {"effective_ids": True} if os.access in os.supports_effective_ids else {}
    return os.path.lexists(path) and not os.access(path, mode, **search)


def _listed(paths: list[Path]) -> str:
    return " ".join(str(p) for p in paths)


def _names(paths: list[Path]) -> str:
    """`a`, `a and b`, `a, b and c` of the files' names."""
    return " and ".join(", ".join(p.name for p in paths).rsplit(", ", 1))


def _mode_repair(path: Path, refused: list[Path]) -> Callable[[], str] | None:
    """A chmod of the refused -wal/-shm to the index's own mode, when that is safe: the index
    is this user's and readable and writable to them, and each refused file is a regular file
    (not a link) of this user. A mode change never touches what an open descriptor may do."""
    me = os.geteuid()
    try:
        index = os.stat(path)
        files = [os.lstat(p) for p in refused]
    except OSError:
        return None
    if index.st_uid != me or _refused(path, os.R_OK | os.W_OK) or any(p not in sidecars(path) for p in refused):
        return None
    if any(not stat.S_ISREG(st.st_mode) or st.st_uid != me for st in files):
        return None
    mode = stat.S_IMODE(index.st_mode)

    def repair() -> str:
        for p in refused:
            if stat.S_ISREG(os.lstat(p).st_mode):  # still no link (Linux has no lchmod)
                os.chmod(p, mode)
        return f"chmod {mode:o} {_listed(refused)} (the mode of the index file)"

    return repair


def unmade_sidecars(path: Path) -> list[Path]:
    """The -wal/-shm a connection to the index at `path` would create with a mode this user
    cannot write: none unless the index itself is read-only to them (SQLite gives the files it
    creates the index file's mode). `writable_sidecars` fixes them once they are made."""
    if not _refused(path, os.W_OK):
        return []
    return [p for p in sidecars(path) if not os.path.lexists(p)]


def writable_sidecars(made: list[Path]) -> None:
    """Give the -wal/-shm that this process just made (`unmade_sidecars` before the connection
    opened) u+rw: a read of a 0444 index left them 0444, and after `chmod u+w` of the index
    every write still failed. Only regular files of this user; never the index's own mode."""
    me = os.geteuid()
    for p in made:
        try:
            st = os.lstat(p)
            if stat.S_ISREG(st.st_mode) and st.st_uid == me and st.st_mode & 0o600 != 0o600:
                os.chmod(p, stat.S_IMODE(st.st_mode) | 0o600)
        except OSError:
            pass  # gone again, or refused: the write that needs it says which file


def _read_only_mount(folder: Path) -> bool:
    return bool(os.statvfs(folder).f_flag & os.ST_RDONLY)


def _on_read_only_mount(path: Path) -> IndexAccessError:
    from qmd.core.fileio import mount_point

    mount = mount_point(path.parent)
    return IndexAccessError(f"the index {path} is on a read-only file system ({mount})", f"mount -o remount,rw {mount}", "that file system writable", owner=False)


def _linked_side_file(path: Path, write: bool) -> IndexAccessError | None:
    """A -wal, -shm or (`write`) writer lock beside the index that is a symbolic link (a cloned
    repository's `.qmd/index.sqlite-wal -> ~/notes.md`): SQLite would write its WAL into the
    link's target. It read as "permission denied" (chmod), or "unable to open" with a rebuild
    offered; qmd makes each again as a plain file."""
    real = Path(os.path.realpath(path))  # SQLite keeps its side files beside the file a link to the index leads to
    linked = next((side for side in dict.fromkeys([*sidecars(path), *sidecars(real)]) if os.path.islink(side)), None)
    lock = Path(f"{path}.lock")  # locks.lock_path's name (its module is not on a search's path)
    if linked is None and not (write and os.path.islink(lock)):
        return None
    from qmd.core.locks import linked_side_file, lock_path  # only for a link found

    return linked_side_file(linked, "side file") if linked is not None else linked_side_file(lock_path(path), "writer lock")


def problem(path: Path, *, write: bool) -> IndexAccessError | None:
    """Why this user cannot read (or, with `write`, write) the index at `path`, or None when
    nothing is refused; a missing file or folder is not this function's to say."""
    folder = path.parent
    if not folder.is_dir():
        return None
    if os.path.islink(path) and not os.path.exists(path):  # it read as "permission denied" (update) or "not built" (search)
        return IndexAccessError(
            f"the index {path} is a link that leads to no file (its target is missing, or the link loops back on itself)", f"rm {path}", "", owner=False,
            hint=f"point the link at the index file, or remove it (rm {path}) and run qmd update to build a new index there",
        )
    linked = _linked_side_file(path, write)
    if linked is not None:
        return linked
    if _refused(path, os.R_OK):
        return IndexAccessError(
            f"the index {path} cannot be read by this user (permission denied); the file is not damaged",
            f"chmod u+rw {path}", "it readable and writable",
        )
    if write and _read_only_mount(folder):
        return _on_read_only_mount(path)
    need = os.R_OK | (os.W_OK if write else 0)
    refused = [p for p in ([path] if write else []) + sidecars(path) if _refused(p, need)]
    if refused:
        one = len(refused) == 1
        said = "read-only" if write else "unreadable"
        if refused == [path]:
            why = f"the index {path} is {said} to this user"
        else:
            why = f"the index {path} cannot be {'written' if write else 'read'} by this user: {_names(refused)} {'is' if one else 'are'} {said} to you (SQLite reads and writes the index through its -wal and -shm files)"
        return IndexAccessError(
            f"{why}; the index is not damaged",
            f"chmod u+rw {_listed(refused)}", f"{'it' if one else 'them'} readable and writable", _mode_repair(path, refused) if write else None,
        )
    lock = None
    if write:
        from qmd.core.locks import lock_path  # not on a search's path (it loads dataclasses and typing)

        lock = lock_path(path)
    made_here = [p for p in [path, *sidecars(path)] if not os.path.lexists(p)] + ([lock] if lock is not None and not os.path.lexists(lock) else [])
    if made_here and _refused(folder, os.W_OK | os.X_OK):
        if _read_only_mount(folder):  # a read too makes its -shm there: no chmod helps
            return _on_read_only_mount(path)
        return IndexAccessError(
            f"the index folder {folder} is not writable by this user: qmd and SQLite (WAL mode) create "
            f"{_names(made_here)} there{'; the index is not damaged' if path.exists() else ''}",
            f"chmod u+rwx {folder}", "it writable",
        )
    if lock is not None and _refused(lock, os.R_OK | os.W_OK):
        return IndexAccessError(
            f"the index's writer lock {lock} cannot be opened by this user (permission denied)",
            f"chmod u+rw {lock}", "it readable and writable",
        )
    return None


SHORT_OF_SPACE = 1 << 20  # bytes free under which an I/O error opening or writing the index is put down to a full disk


def short_of_space(path: Path) -> bool:
    """Whether the file system holding the index at `path` has (almost) no room left for this user."""
    try:
        st = os.statvfs(path.parent)
    except OSError:
        return False
    return st.f_bavail * st.f_frsize < SHORT_OF_SPACE


def disk_full(path: Path, said: object) -> IndexAccessError:
    """The error a write of the index that found its disk full becomes (SQLite rolled it back:
    the index is as it was, not damaged): names the file system and the fix."""
    from qmd.core.fileio import mount_point

    folder = path.parent
    mount = mount_point(folder)
    return IndexAccessError(
        f"the disk holding the index {path} is full ({mount}; SQLite says: {said}); the index is not damaged and this change was not written",
        f"df -h {folder}", "", owner=False, hint=f"free space on {mount} (see: df -h {folder}), then run the command again",
    )
