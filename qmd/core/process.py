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


def process_start(pid: int) -> str | None:
    """When process `pid` started, as a token that differs for a later process given the same
    pid (the boot and the start time in clock ticks, Linux's /proc); None where it is not known."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        boot = Path("/proc/sys/kernel/random/boot_id").read_text().strip()
        return f"{boot}:{stat[stat.rindex(')') + 2 :].split()[19]}"
    except (OSError, ValueError, IndexError):
        return None


def same_process(pid: int, started: object) -> bool:
    """Whether `pid` is alive and still the process a record saw start at `started`
    (process_start's token): a pid reused after a crash (a container restarted, a long
    uptime) is another process. A record without the token trusts the pid alone."""
    if not process_alive(pid):
        return False
    return not isinstance(started, str) or process_start(pid) in (started, None)


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
