"""The updater's global lock (design §7): one updater at a time across all repos and indexes.

`filelock.FileLock(<state>/updater.lock, timeout=0)` is flock on Unix, released by the
kernel when the holder dies (kill -9 included). The holder writes its PID, start time and
command line to `updater.lock.json`, so a second updater can name it when it gives up.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

from qmd import QmdError

from .layout import Layout, now_iso, read_json, write_json


class UpdaterBusy(QmdError):
    """Another updater holds the lock."""

    def __init__(self, holder: dict[str, Any] | None, lock_path: str) -> None:
        if holder and holder.get("pid"):
            who = f"pid {holder['pid']} ({holder.get('mode', 'updater')}, started {holder.get('started_at', '?')})"
        else:
            who = "another process"
        super().__init__(f"another qmd updater is running: {who}; it drains the queue for every repo and index", f"let it work (qmd updater status shows what it does), or stop it: kill {holder.get('pid') if holder else '<pid>'}")
        self.holder = holder
        self.lock_path = lock_path


def holder(layout: Layout) -> dict[str, Any] | None:
    """Who holds (or last held) the lock, if its process is still alive."""
    data = read_json(layout.holder)
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int):
        return None
    try:
        os.kill(data["pid"], 0)
    except ProcessLookupError:
        return None
    except PermissionError:
        pass  # alive, someone else's
    return data


class UpdaterLock:
    """`with UpdaterLock(layout, mode):` — hold the global lock or raise UpdaterBusy at once."""

    def __init__(self, layout: Layout, mode: str) -> None:
        self.layout = layout
        self.mode = mode
        self.info: dict[str, Any] = {}

    def __enter__(self) -> UpdaterLock:
        from filelock import FileLock, Timeout  # lazy: `qmd health` and `--help` never need it

        self.layout.root.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.layout.lock), timeout=0)
        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise UpdaterBusy(holder(self.layout), str(self.layout.lock)) from None
        self.info = {"pid": os.getpid(), "started_at": now_iso(), "started": time.time(), "host": socket.gethostname(), "mode": self.mode, "argv": sys.argv}
        write_json(self.layout.holder, self.info)
        return self

    def __exit__(self, *exc: object) -> None:
        try:
            data = read_json(self.layout.holder)
            if isinstance(data, dict) and data.get("pid") == os.getpid():
                self.layout.holder.unlink()
        except OSError:
            pass
        self._lock.release()
