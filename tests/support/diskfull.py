"""A real file system with little room: a tmpfs of a few MB mounted for one test (root only, as
CI runs; skipped where mounting is refused), with `fill` to leave a chosen number of bytes free.
What a full disk does to qmd (ENOSPC, SQLite's FullError) is measured on it, never faked."""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest


@contextmanager
def small_disk(folder: Path, megabytes: int, inodes: int | None = None) -> Iterator[Path]:
    """`folder` (created) as a tmpfs of `megabytes` MB (and at most `inodes` files and folders,
    when given) for the body; unmounted after it, whatever happens."""
    folder.mkdir(parents=True, exist_ok=True)
    mount = shutil.which("mount")
    if os.geteuid() != 0 or mount is None:
        pytest.skip("mounting a small tmpfs needs root")
    done = subprocess.run([mount, "-t", "tmpfs", "-o", f"size={megabytes}m" + (f",nr_inodes={inodes}" if inodes else ""), "tmpfs", str(folder)], capture_output=True, text=True)
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.strip()}")
    try:
        yield folder
    finally:
        subprocess.run(["umount", "-l", str(folder)], capture_output=True)


def use_every_inode(folder: Path) -> int:
    """Empty files in `folder/.inodes` until the file system can make no more (a tmpfs mounted
    with few inodes); returns how many were made."""
    holder = folder / ".inodes"
    made = 0
    try:
        holder.mkdir()
        while True:
            (holder / str(made)).touch()
            made += 1
    except OSError:
        return made


def free_bytes(folder: Path) -> int:
    st = os.statvfs(folder)
    return st.f_bavail * st.f_frsize


def fill(folder: Path, leave: int = 0) -> Path:
    """A filler file in `folder` taking all its free space but `leave` bytes (about: tmpfs counts pages)."""
    filler = folder / ".filler"
    size = max(0, free_bytes(folder) - leave)
    with open(filler, "ab") as fh:
        chunk = b"\0" * (1 << 20)
        while size > 0:
            n = min(size, len(chunk))
            try:
                fh.write(chunk[:n])
                fh.flush()
            except OSError:
                break
            size -= n
    return filler
