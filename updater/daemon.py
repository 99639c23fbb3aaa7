"""`qmd updater daemon`: hold the global lock, wake on new requests (watchdog), drain in batches.

Requests arriving within `window` seconds of each other are drained together (at most
`max_batch` seconds after the first). A drain also runs every RESCAN_S seconds, which
catches a missed event and retries whose backoff has elapsed. With `watch`, every
collection folder that no enrolled repository covers is watched too: a change there
queues a request for the folder (event `watch`), which routes like a repository.
"""

from __future__ import annotations

import logging
import os
import signal
import threading
import time
from typing import Any

from qmd import QmdError, harness

from . import registry, routing
from .run import drain
from .spool import enqueue

RESCAN_S = 60.0


class _Wake:
    """A watchdog handler that sets an event; for folders, remembers which one changed."""

    def __init__(self, wake: threading.Event, folder: str | None = None, dirty: dict[str, float] | None = None) -> None:
        self.wake, self.folder, self.dirty = wake, folder, dirty

    def dispatch(self, event: Any) -> None:
        if event.event_type not in ("created", "modified", "deleted", "moved"):
            return  # opened/closed: the updater reading a file must not wake it again
        if self.folder is not None:
            if event.is_directory and event.event_type == "modified":
                return
            paths = [str(event.src_path), str(getattr(event, "dest_path", "") or "")]
            rel = [os.path.relpath(p, self.folder) for p in paths if p]
            if all(any(part.startswith(".") for part in r.split(os.sep)) for r in rel):
                return  # .git, editor swap files, our own dot-files
            assert self.dirty is not None
            self.dirty.setdefault(self.folder, time.time())
        self.wake.set()


def _observer() -> Any:
    from watchdog.observers import Observer

    return Observer()


def _schedule(observer: Any, handler: Any, path: str, recursive: bool, log: logging.Logger) -> Any:
    try:
        return observer.schedule(handler, path, recursive=recursive)
    except OSError as exc:
        log.warning("cannot watch %s (%s); it is still drained every %.0fs", path, exc, RESCAN_S)
        return None


def watched_folders(enrolled: list[str]) -> list[str]:
    """Collection folders (every index) that no enrolled repository covers and that exist."""
    indexes = routing.load()
    folders = sorted({c.path for c in indexes.collections if not routing.covered_by(enrolled, c.path) and os.path.isdir(c.path)})
    # a folder inside another watched folder adds nothing
    return [f for f in folders if not any(f != g and routing.inside(f, g) for g in folders)]


class Daemon:
    def __init__(self, layout: harness.StateLayout, log: logging.Logger, *, window: float = 0.5, max_batch: float = 5.0, watch: bool = False) -> None:
        self.layout, self.log = layout, log
        self.window, self.max_batch, self.watch = window, max_batch, watch
        self.wake = threading.Event()
        self.stop = False
        self.draining = False
        self.dirty: dict[str, float] = {}
        self.watches: dict[str, Any] = {}

    def _signal(self, signum: int, frame: object) -> None:
        self.log.info("signal %d: stopping", signum)
        self.stop = True
        self.wake.set()
        if self.draining:
            raise SystemExit(0)  # every step is crash-safe: the next start finishes the work

    def _refresh_watches(self, observer: Any) -> None:
        enrolled = [k for k in registry.load(self.layout) if os.path.isdir(k)]
        wanted = set(watched_folders(enrolled))
        for folder in set(self.watches) - wanted:
            if self.watches[folder] is not None:
                observer.unschedule(self.watches[folder])
            del self.watches[folder]
        for folder in sorted(wanted - set(self.watches)):
            self.watches[folder] = _schedule(observer, _Wake(self.wake, folder, self.dirty), folder, True, self.log)
            self.log.info("watching %s", folder)

    def _drain(self) -> None:
        for folder in list(self.dirty):
            self.dirty.pop(folder, None)
            enqueue(self.layout, folder, "watch")
        self.draining = True
        try:
            result = drain(self.layout, self.log, respect_backoff=True)
        except QmdError as exc:  # recorded (the flag is raised) and logged: the daemon waits for the next request, no restart loop
            self.log.error("%s", exc.message)
            return
        finally:
            self.draining = False
        if result.requests:
            self.log.info(
                "run: %d request(s), %d repo(s) updated, %d failure(s), %d documents, %d chunks in %.2fs",
                result.requests, len(result.succeeded_repos), len(result.failures), result.documents_updated, result.chunks_embedded, result.seconds,
            )

    def serve(self) -> None:
        """Run until SIGTERM/SIGINT (the caller holds the global lock)."""
        self.layout.ensure_queue()
        for sig in (signal.SIGTERM, signal.SIGINT, signal.SIGHUP):
            signal.signal(sig, self._signal)
        observer = _observer()
        _schedule(observer, _Wake(self.wake), str(self.layout.q("new")), False, self.log)
        last_refresh = 0.0
        if self.watch:
            self._refresh_watches(observer)
            last_refresh = time.time()
        observer.start()
        self.log.info("daemon started (pid %d): waiting for requests in %s", os.getpid(), self.layout.q("new"))
        try:
            self._drain()
            last_drain = time.time()
            while not self.stop:
                woke = self.wake.wait(max(0.05, RESCAN_S - (time.time() - last_drain)))
                if self.stop:
                    break
                if woke:
                    first = time.time()
                    self.wake.clear()
                    while self.wake.wait(self.window) and time.time() - first < self.max_batch and not self.stop:
                        self.wake.clear()
                    self.wake.clear()
                if self.watch and time.time() - last_refresh >= RESCAN_S:
                    self._refresh_watches(observer)
                    last_refresh = time.time()
                self._drain()
                last_drain = time.time()
        finally:
            observer.stop()
            observer.join(timeout=5)
            self.log.info("daemon stopped")

