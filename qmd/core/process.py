"""This process and others: is a PID alive, and how was this process started."""

from __future__ import annotations

import os
import sys
from pathlib import Path


def process_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie.

    On Linux every thread counts: a killed multi-threaded process shows its main thread as
    a zombie while the others still exit, and until the last one has, its files (and the
    locks on them) are still open.
    """
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    stats: list[str] = []
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                stats.append((task / "stat").read_text())
            except OSError:
                continue  # that thread is gone already
    except OSError:
        pass
    if not stats:
        try:
            stats = [Path(f"/proc/{pid}/stat").read_text()]
        except OSError:
            return True
    try:
        return any(stat[stat.rindex(")") + 2] not in "ZX" for stat in stats)
    except (ValueError, IndexError):
        return True


def remove_own_record(path: str | os.PathLike[str]) -> bool:
    """Delete the JSON record at `path` if this process wrote it (its `pid` is ours), so a
    record another process has since written survives; True if removed. Never raises."""
    from qmd.core.fileio import read_json

    data = read_json(path)
    if not (isinstance(data, dict) and data.get("pid") == os.getpid()):
        return False
    try:
        Path(path).unlink(missing_ok=True)
    except OSError:
        return False
    return True


def own_command() -> str:
    """This process's command line as a person would type it: `qmd embed -c notes`."""
    program = os.path.basename(sys.argv[0]) if sys.argv and sys.argv[0] else "python"
    if program in ("qmd", "__main__.py"):  # the launcher, or `python -m qmd`
        program = "qmd"
    return " ".join([program, *sys.argv[1:]])
