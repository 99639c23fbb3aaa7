"""The updater's global lock (design §7): one updater at a time across all repos and indexes.

`qmd.harness.try_lock(<state>/updater.lock)` is flock on Unix, released by the kernel when the
holder dies (kill -9 included). The holder writes its PID, start time and
command line to `updater.lock.json`, so a second updater can name it when it gives up.
"""

from __future__ import annotations

import os
import socket
import sys
import time
from typing import Any

from qmd import harness
from qmd import QmdError


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


def holder(layout: harness.StateLayout) -> dict[str, Any] | None:
    """Who holds the lock, as it recorded itself; None while nobody holds it.

    The lock itself is asked too: a holder killed by SIGKILL leaves its record behind,
    and once its PID is reused by another process the record alone reads as a live updater
    (doctor then says one runs, and the agents' stale-queue line stays silent).
    """
    data = harness.read_json(layout.holder)
    if not isinstance(data, dict) or not isinstance(data.get("pid"), int) or not harness.process_alive(data["pid"]):
        return None
    try:
        held = harness.is_locked(layout.lock)  # probed last: only a live-looking record costs a probe
    except OSError:
        held = False  # a folder in its place: nobody can hold it
    return data if held else None


class UpdaterLock:
    """`with UpdaterLock(layout, mode):` — hold the global lock or raise UpdaterBusy at once."""

    def __init__(self, layout: harness.StateLayout, mode: str) -> None:
        self.layout = layout
        self.mode = mode
        self.info: dict[str, Any] = {}
        self._handle: harness.FileLockHandle | None = None

    def __enter__(self) -> UpdaterLock:
        try:
            handle = harness.try_lock(self.layout.lock)
        except OSError as exc:  # a folder in its place, a read-only state dir: not a bug of qmd's
            import shlex

            where = shlex.quote(str(self.layout.lock))
            folder = shlex.quote(str(self.layout.lock.parent))
            if os.path.isdir(self.layout.lock):  # a folder in its place
                fix = f"mv {where} {where}.moved-aside  # or set QMD_STATE_DIR to a writable folder"
            elif os.path.lexists(self.layout.lock):  # there, but not this user's to open
                fix = f"chmod u+rw {where}  # or run as the user who owns it, or set QMD_STATE_DIR to a writable folder"
            else:  # the state folder will not take it
                fix = f"chmod u+rwx {folder}  # or set QMD_STATE_DIR to a writable folder"
            raise QmdError(f"cannot take the updater lock {self.layout.lock}: {exc.strerror or exc}", fix) from exc
        if handle is None:
            raise UpdaterBusy(holder(self.layout), str(self.layout.lock))
        self._handle = handle
        self.info = {"pid": os.getpid(), "started_at": harness.now_iso(), "started": time.time(), "host": socket.gethostname(), "mode": self.mode, "argv": sys.argv}
        harness.write_json(self.layout.holder, self.info, sort_keys=True)
        return self

    def __exit__(self, *exc: object) -> None:
        harness.remove_own_record(self.layout.holder)
        if self._handle is not None:
            self._handle.release()
            self._handle = None
