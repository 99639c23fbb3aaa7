"""What one doctor run looks at: which indexes, the harness state, thresholds, options."""

from __future__ import annotations

import os
import shlex
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qmd
from qmd import harness
from updater.routing import index_names

QUEUE_WARN_MINUTES = 15.0
QUEUE_FAIL_HOURS = 24.0


@dataclass
class Context:
    """One doctor run: what it checks, with which options, and repairs already done."""

    indexes: list[str]  # the indexes to check (every configured one unless --index)
    primary: str  # the index the stdio handshake serves
    quick: bool = False
    fix: bool = False
    local: qmd.IndexPaths | None = None  # the project-local index in use (--index PATH, or found from the working directory)
    selected: str | None = None  # the --index given, if any
    layout: harness.StateLayout = field(default_factory=harness.StateLayout.current)
    queue_warn_s: float = QUEUE_WARN_MINUTES * 60
    queue_fail_s: float = QUEUE_FAIL_HOURS * 3600
    memo: dict[str, str] = field(default_factory=dict)  # repairs shared by several checks run once

    @classmethod
    def create(cls, index: str | None, *, quick: bool = False, fix: bool = False) -> Context:
        """The run for `index` (a name or the path of a `.qmd/index.yml`; None: every index the
        harness serves, plus the project-local one found from the working directory), with
        thresholds read from the configs."""
        paths = qmd.resolve_index(index)
        local = paths if paths.local else None
        if index:
            names = [paths.key]
        else:
            names = index_names()
            if local is not None and os.path.realpath(local.key) not in {os.path.realpath(n) for n in names if os.sep in n}:
                names.append(local.key)
        primary = paths.key if index or local else ("index" if "index" in names or not names else names[0])
        ctx = cls(names, primary, quick, fix, local=local, selected=index)
        ctx._thresholds()
        return ctx

    def _thresholds(self) -> None:
        """`doctor: {queue_warn_minutes, queue_fail_hours}` from any index config; the strictest wins."""
        for name in self.indexes:
            raw = self.config(name).get("doctor")
            if not isinstance(raw, dict):
                continue
            for key, attr, scale in (("queue_warn_minutes", "queue_warn_s", 60), ("queue_fail_hours", "queue_fail_s", 3600)):
                value = raw.get(key)
                if isinstance(value, (int, float)) and not isinstance(value, bool) and value >= 0:
                    setattr(self, attr, min(getattr(self, attr), float(value) * scale))

    def config(self, name: str) -> dict[str, Any]:
        """The raw YAML config of index `name` ({} when it cannot be read)."""
        try:
            return self.store(name).config.raw
        except qmd.QmdError:
            return {}

    def store(self, name: str) -> qmd.Store:
        """A new Store for index `name` (each check opens its own: checks run in threads)."""
        return qmd.open_index(name)


def qmd_command(*args: str, index: str | None = None) -> str:
    """A runnable `qmd …` line for a fix (with --index when it is not the default)."""
    words = ["qmd", *(["--index", index] if index and index != "index" else []), *args]
    return shlex.join(words)


def pip_command(*args: str) -> str:
    """`<this venv's python> -m pip …`: repairs go into the venv qmd runs from."""
    return shlex.join([sys.executable, "-m", "pip", *args])


def home_path(path: str | Path) -> str:
    """`path` with the home folder written as ~ (shorter details)."""
    text, home = str(path), str(Path.home())
    return "~" + text[len(home):] if home not in ("", "/") and (text == home or text.startswith(home + os.sep)) else text
