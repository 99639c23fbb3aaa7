"""Progress for long commands: a live bar on a terminal, a plain line every ~10 s elsewhere.

A log file, `nohup` or CI gets `Embedding: 120/1485 documents (8%), 5.2 chunks/s, ETA 4m 20s`
lines instead of nothing, so silence never stands for progress.
"""

from __future__ import annotations

import os
import sys
import time
from typing import TextIO

LOG_EVERY_S = 10.0


def log_interval() -> float:
    """Seconds between progress lines off a terminal: `QMD_PROGRESS_S`, else 10 (0: every update)."""
    try:
        value = float(os.environ.get("QMD_PROGRESS_S", LOG_EVERY_S))
    except ValueError:
        return LOG_EVERY_S
    return value if value >= 0 and value == value else LOG_EVERY_S


def eta(seconds: float) -> str:
    """`4m 20s`, `1h 05m`, `12s`."""
    s = max(0, int(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"


class Bar:
    """Progress of one long operation on stderr (a bar on a TTY, periodic lines otherwise)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, every_s: float | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = log_interval() if every_s is None else every_s
        self.started = time.perf_counter()
        self._last_line = self.started
        self.done = 0
        self.total: int | None = None

    def update(self, done: int, total: int | None, extra: str = "", unit: str = "") -> None:
        self.done, self.total = done, total
        now = time.perf_counter()
        elapsed = now - self.started
        remaining = (elapsed / done * (total - done)) if total and done else None
        if self.tty:
            if total:
                width = 24
                filled = int(width * done / total)
                line = f"\r{self.label} [{'#' * filled}{'.' * (width - filled)}] {done}/{total} {extra}" + (f" ETA {eta(remaining)}" if remaining is not None else "")
            else:
                line = f"\r{self.label} {done} {extra}"
            self.stream.write(line[:160] + "\033[K")
            self.stream.flush()
            return
        if now - self._last_line < self.every_s:
            return
        self._last_line = now
        share = f" ({100 * done // total}%)" if total else ""
        counts = f"{done}/{total}" if total else f"{done}"
        tail = f", ETA {eta(remaining)}" if remaining is not None else ""
        self.stream.write(f"{self.label}: {counts}{(' ' + unit) if unit else ''}{share}{', ' + extra if extra else ''}{tail}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()
