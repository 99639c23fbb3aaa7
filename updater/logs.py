"""Logs in `<state>/logs/`: updater.log rotates at 1 MB (3 kept); hooks.log, appended by the
sh hooks, is rotated by the updater (one old file kept), since a hook cannot afford to."""

from __future__ import annotations

import logging
import logging.handlers
import sys

from qmd import harness

MAX_BYTES = 1024 * 1024
LOGGER = "qmd.updater"


class _ForPeople(logging.Formatter):
    """`message` for information, `warning: message` / `error: message` above it."""

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        return text if record.levelno <= logging.INFO else f"{record.levelname.lower()}: {text}"


def setup(layout: harness.StateLayout, *, stderr: bool = False, verbose: bool = False, plain: bool = False) -> logging.Logger:
    """The updater's logger: the rotating file, plus stderr for the daemon (journald, launchd)
    or a run (`plain`: the lines without the log's level names, for a person or a timer's journal)."""
    log = logging.getLogger(LOGGER)
    log.setLevel(logging.DEBUG if verbose else logging.INFO)
    log.propagate = False
    for old in list(log.handlers):
        log.removeHandler(old)
        old.close()
    fmt = logging.Formatter("%(asctime)s %(levelname)s [%(process)d] %(message)s", "%Y-%m-%dT%H:%M:%S%z")
    try:
        layout.logs.mkdir(parents=True, exist_ok=True)
        handler: logging.Handler = logging.handlers.RotatingFileHandler(layout.updater_log, maxBytes=MAX_BYTES, backupCount=3, encoding="utf-8")
        handler.setFormatter(fmt)
        log.addHandler(handler)
    except OSError as exc:
        stderr = True
        sys.stderr.write(f"warning: cannot write {layout.updater_log}: {exc}; logging to stderr\n")
    if stderr:
        console = logging.StreamHandler(sys.stderr)
        console.setFormatter(_ForPeople("%(message)s") if plain else logging.Formatter("%(levelname)s %(message)s"))
        log.addHandler(console)
    return log


def rotate_hooks_log(layout: harness.StateLayout) -> None:
    """hooks.log → hooks.log.1 past MAX_BYTES (a hook appending meanwhile lands in either file)."""
    try:
        if layout.hooks_log.stat().st_size > MAX_BYTES:
            harness.replace_file(layout.hooks_log, layout.hooks_log.with_name("hooks.log.1"))
    except OSError:
        pass
