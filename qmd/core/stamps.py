"""File stamps: when a copy derived from files may stand in for reading them again.

A stamp is a file's path, size, times, inode and device (or the path and None when there
is no file). A copy made from files is current while their stamps are unchanged, with
git's "racily clean" rule: a copy is kept only when every file had been left alone for
`RACY_SECONDS`, since an edit within the file system's timestamp granularity of the copy
could leave size and times as they were. Used for the MCP server's instructions
(qmd/serve/instructions.py); the parsed config (qmd/core/config.py) is keyed by its text.
"""

from __future__ import annotations

import os

RACY_SECONDS = 2.0

Stamp = list[object]


def stamp(path: str | os.PathLike[str], stat: os.stat_result | None = None) -> Stamp:
    """`[path, size, mtime_ns, ctime_ns, inode, device]`, or `[path, None]` without a file."""
    absolute = os.path.abspath(path)
    if stat is None:
        try:
            stat = os.stat(absolute)
        except OSError:
            return [absolute, None]
    return [absolute, stat.st_size, stat.st_mtime_ns, stat.st_ctime_ns, stat.st_ino, stat.st_dev]


def settled(stamps: list[Stamp], now_ns: int) -> bool:
    """Has every stamped file gone unchanged long enough that a same-size edit would change its times?"""
    for s in stamps:
        if len(s) == 6:
            mtime, ctime = s[2], s[3]
            assert isinstance(mtime, int) and isinstance(ctime, int)
            if now_ns - max(mtime, ctime) < RACY_SECONDS * 1e9:
                return False
    return True
