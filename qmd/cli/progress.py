"""Progress for long commands: a live bar on a terminal, whole lines every ~10 s elsewhere.

A log file, `nohup` or CI gets lines (`Embedding: 480/1204 chunks, …, ETA 5m 40s`) instead
of nothing, so silence never stands for progress, and never a carriage return.
"""

from __future__ import annotations

import sys
import time
from typing import TextIO

from qmd.core.pace import progress_interval
from qmd.core.units import duration
from qmd.index.embed_progress import EmbedProgress, ProgressLines

WIDTH = 24  # the bar's cells
REDRAW_S = 0.1  # a terminal's bar is redrawn at most this often (a fast model reports hundreds of times a second)


class Bar:
    """Progress of one long operation on stderr (a bar on a TTY, periodic lines otherwise)."""

    def __init__(self, label: str, *, stream: TextIO | None = None, every_s: float | None = None) -> None:
        self.label = label
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.every_s = progress_interval() if every_s is None else every_s
        self.started = time.perf_counter()
        self._last_line = self.started
        self.done = 0
        self.total: int | None = None

    def draw(self, share: float | None, text: str) -> None:
        """On a terminal: the bar filled to `share` (0..1; None: no bar), then `text`, in place."""
        cells = "" if share is None else f" [{'#' * int(WIDTH * min(share, 1.0))}{'.' * (WIDTH - int(WIDTH * min(share, 1.0)))}]"
        self.stream.write(f"\r{self.label}{cells} {text}"[:160] + "\033[K")
        self.stream.flush()

    def update(self, done: int, total: int | None, extra: str = "", unit: str = "") -> None:
        self.done, self.total = done, total
        now = time.perf_counter()
        elapsed = now - self.started
        remaining = (elapsed / done * (total - done)) if total and done else None
        if self.tty:
            tail = f" ETA {duration(remaining)}" if remaining is not None else ""
            self.draw(done / total if total else None, (f"{done}/{total} {extra}" if total else f"{done} {extra}") + tail)
            return
        if now - self._last_line < self.every_s:
            return
        self._last_line = now
        share = f" ({100 * done // total}%)" if total else ""
        counts = f"{done}/{total}" if total else f"{done}"
        tail = f", ETA {duration(remaining)}" if remaining is not None else ""
        self.stream.write(f"{self.label}: {counts}{(' ' + unit) if unit else ''}{share}{', ' + extra if extra else ''}{tail}\n")
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write("\r\033[K")
            self.stream.flush()


class EmbedBar:
    """What `qmd embed` and `qmd update --embed` show of a running embed (an `EmbedProgress` callback).

    Off a terminal: the lines of `ProgressLines` (the plan, each phase's headline, counts every
    `QMD_PROGRESS_S` seconds). On one: the plan and the headlines as lines, each phase's counts
    as a bar drawn in place (its fill the share of the work: documents when chunking, tokens
    when embedding).
    """

    def __init__(self, stream: TextIO | None = None) -> None:
        self.stream = stream or sys.stderr
        self.tty = self.stream.isatty()
        self.lines = ProgressLines(self.say)
        self.bar: Bar | None = None
        self.last: EmbedProgress | None = None
        self._drawn = 0.0

    def say(self, text: str) -> None:
        self.stream.write(text[:1].upper() + text[1:] + "\n")
        self.stream.flush()

    @property
    def written(self) -> int:
        """Documents whose vectors were written so far."""
        return self.last.documents_done if self.last is not None and self.last.phase == "embedding" else 0

    def __call__(self, progress: EmbedProgress) -> None:
        previous, self.last = self.last, progress
        if not self.tty:
            self.lines(progress)
            return
        if previous is None or previous.phase != progress.phase:
            self.close()
            if previous is None:
                for collection in progress.plan:
                    self.say(collection.describe())
            self.say(progress.headline())
            if progress.phase == "loading":
                return
            self.bar = Bar(progress.phase.capitalize(), stream=self.stream)
            self._drawn = 0.0
        now = time.monotonic()
        if self.bar is not None and (progress.finished or now - self._drawn >= REDRAW_S):
            self._drawn = now
            self.bar.draw(progress.share, progress.counts())

    def close(self) -> None:
        if self.bar is not None:
            self.bar.close()
            self.bar = None
