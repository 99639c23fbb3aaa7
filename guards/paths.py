"""Where the hook finds the guard's files, computed without importing qmd.

`qmd.harness.StateLayout` (`guard_folders`, `guard_blocks`, `guard_errors`) is the definition; this
is its mirror for the hook's allow path, which runs on every shell call an agent makes and
would pay about 15 ms for `qmd` (typing, dataclasses, pathlib). A test keeps the two equal.
"""

from __future__ import annotations

import os

BLOCKS = "blocks.jsonl"
ERRORS = "errors.log"
FOLDERS = "folders.json"


def state_dir() -> str:
    """The harness state dir, exactly as `qmd.harness.state_dir()` computes it."""
    explicit = os.environ.get("QMD_STATE_DIR")
    if explicit:
        return explicit
    xdg = os.environ.get("XDG_STATE_HOME")
    base = xdg if xdg else os.path.join(os.path.expanduser("~"), ".local", "state")
    return os.path.join(base, "qmd")


def guard_dir() -> str:
    """`<state>/guard`: folders.json (written by qmd), blocks.jsonl and errors.log."""
    return os.path.join(state_dir(), "guard")


def guard_file(name: str) -> str:
    """A file in the guard dir, e.g. `guard_file(BLOCKS)`."""
    return os.path.join(guard_dir(), name)
