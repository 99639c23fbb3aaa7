"""Is a PID still the server its PID file describes? (PIDs are reused.)"""

from __future__ import annotations

import os
import subprocess
import time
from pathlib import Path

from qmd.core.process import process_alive
from qmd.serve.pidfile import PidInfo

__all__ = ["is_our_server", "looks_like_server", "process_alive", "process_argv", "wait_gone"]


def wait_gone(pid: int, timeout: float) -> bool:
    """Poll until `pid` has exited (or is a zombie), at most `timeout` seconds; True if it is gone."""
    deadline = time.monotonic() + timeout
    while process_alive(pid):
        if time.monotonic() >= deadline:
            return False
        time.sleep(0.02)
    return True


def process_argv(pid: int) -> list[str] | None:
    """The command line of `pid` (/proc, else `ps`), or None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        if raw:
            return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")]
    except OSError:
        pass
    try:
        out = subprocess.run(["ps", "-p", str(pid), "-o", "args="], capture_output=True, text=True, timeout=5, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text.split() if out.returncode == 0 and text else None


def looks_like_server(argv: list[str]) -> bool:
    """`… qmd … mcp … --http` (python -m qmd, the qmd launcher, or qmd/__main__.py)."""
    names = [os.path.basename(a) for a in argv]
    is_qmd = "qmd" in names or any(a.endswith(("qmd/__main__.py", "qmd\\__main__.py")) for a in argv)
    return is_qmd and "mcp" in argv and "--http" in argv


def is_our_server(info: PidInfo) -> tuple[bool, str]:
    """(verdict, why): is `info.pid` the server this PID file describes?"""
    if not process_alive(info.pid):
        return False, f"pid {info.pid} is not running"
    argv = process_argv(info.pid)
    if argv is None:
        return False, f"cannot read the command line of pid {info.pid}"
    same = argv == info.argv or " ".join(argv) == " ".join(info.argv)
    if not same or not looks_like_server(argv):
        return False, f"pid {info.pid} is now another program ({' '.join(argv)[:120]})"
    return True, "verified by its command line"
