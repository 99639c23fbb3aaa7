"""How fast a long job goes and when it will be done: `Eta`, and how often progress is said off a terminal."""

from __future__ import annotations

import os
from collections import deque

LINES_EVERY_S = 10.0


def progress_interval() -> float:
    """Seconds between progress lines off a terminal: `QMD_PROGRESS_S`, else 10 (0: every update)."""
    try:
        value = float(os.environ.get("QMD_PROGRESS_S", LINES_EVERY_S))
    except ValueError:
        return LINES_EVERY_S
    return value if value >= 0 and value == value else LINES_EVERY_S


class Eta:
    """Seconds left of a job measured in units of work (an embed's tokens), from the work done so far.

    1. No estimate until one can mean something: at least MIN_SHARE of the work done and
       MIN_SECONDS since the work began (`started`).
    2. The pace is the work done over a trailing window, the later half of the run so far
       (at least WINDOW_S): a slow start (a model warming up, a first large file) is
       forgotten as the run goes on, and as the window grows with the run the noise of
       single batches averages out, so the estimate settles instead of jumping.
    3. Seconds left = work left / pace.
    """

    MIN_SHARE = 0.02
    MIN_SECONDS = 5.0
    WINDOW_S = 30.0

    def __init__(self, total: float, started: float) -> None:
        self.total = total
        self.started = started
        self._samples: deque[tuple[float, float]] = deque([(started, 0.0)])  # (time, work done), oldest first

    def update(self, done: float, now: float) -> float | None:
        """Record `done` units at time `now`; the seconds left, or None while too little is done to say."""
        self._samples.append((now, done))
        elapsed = now - self.started
        window_start = now - max(self.WINDOW_S, elapsed / 2)
        while len(self._samples) > 2 and self._samples[1][0] <= window_start:
            self._samples.popleft()  # keep one sample at or before the window's start
        if self.total <= 0 or done < self.MIN_SHARE * self.total or elapsed < self.MIN_SECONDS:
            return None
        then, done_then = self._samples[0]
        pace = (done - done_then) / (now - then) if now > then and done > done_then else done / elapsed
        return max(0.0, self.total - done) / pace if pace > 0 else None
