"""What a long write is doing right now, for `qmd status`: `{index}.activity.json` beside it.

The process running `update` or `embed` records its pid, command, start and progress
from its first moment: at once when the phase changes (an embed's `loading`, `chunking`,
`embedding`), else at most once a second, with `detail`, what `qmd status` says of it
(`embedding 480/1204 chunks (48%), ETA 5m 40s`). It removes the record when done. A record
whose process is gone, or whose pid now names another process (pid_start), is a crash's
leftover and is ignored.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

from qmd.core.clock import now_iso
from qmd.core.fileio import read_json, write_json
from qmd.core.process import own_command, process_start, remove_own_record, same_process


class Activity:
    """One running operation's record (a no-op where the index has no file beside it)."""

    def __init__(self, path: Path | None, operation: str) -> None:
        self.path = path
        self.operation = operation
        self.started = now_iso()
        self._last = 0.0
        self._total: int | None = None
        self._phase: str | None = None
        self._pid_start = process_start(os.getpid())

    def progress(self, done: int, total: int | None = None, unit: str = "", *, phase: str | None = None, detail: str | None = None, extra: dict[str, object] | None = None) -> None:
        """Record `done` of `total` `unit`s (`phase`, `detail`, `extra` fields: an embed's own)."""
        now = time.monotonic()
        if self.path is None or (now - self._last < 1.0 and total == self._total and phase == self._phase):
            return
        self._last, self._total, self._phase = now, total, phase
        record = {
            "pid": os.getpid(), "pid_start": self._pid_start, "operation": self.operation, "command": own_command(),
            "started_at": self.started, "updated_at": now_iso(), "done": done, "total": total, "unit": unit,
            "phase": phase, "detail": detail, **(extra or {}),
        }
        try:
            write_json(self.path, record, fsync=False)
        except OSError:
            pass  # status just won't show it

    def __enter__(self) -> Activity:
        self.progress(0, phase="starting")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.path is not None:
            remove_own_record(self.path)


def activity_path(location: str) -> Path | None:
    """Where the record of the index at `location` lives (None for a non-file backend)."""
    path = Path(location)
    return path.with_name(path.name + ".activity.json") if path.parent.is_dir() else None


def running(location: str) -> dict[str, object] | None:
    """The live record of an update or embed writing the index now, or None."""
    path = activity_path(location)
    data = read_json(path) if path is not None else None
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not same_process(int(data["pid"]), data.get("pid_start")):
        return None  # a crash's leftover, its pid gone or since given to another process
    return data
