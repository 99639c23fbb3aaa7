"""The knowledge-folder cache: every collection folder of every index, in one JSON file.

Lean tools that must not parse YAML on every call (the agent guard runs on every shell
command an agent issues) read `<state>/guard/folders.json`. It is rewritten whenever a
config in the config dir is saved, and can be rebuilt at any time with `refresh_folder_cache()`.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from qmd.core.clock import now_iso
from qmd.core.errors import ConfigError
from qmd.core.fileio import write_json
from qmd.core.paths import StateLayout, config_dir
from qmd.core.config import Config

CACHE_VERSION = 1


def cache_path() -> Path:
    """`<state>/guard/folders.json`."""
    return StateLayout.current().guard_folders


def collect() -> dict[str, Any]:
    """Folders and guard globs from every `*.yml` index config in the config dir."""
    folders: list[dict[str, str]] = []
    protect: list[str] = []
    allow: list[str] = []
    errors: list[str] = []
    directory = config_dir()
    for path in sorted(directory.glob("*.yml")) if directory.is_dir() else []:
        if path.name == "models.yml":
            continue
        try:
            config = Config.load(path)
            colls = config.collections()
        except ConfigError as exc:
            errors.append(exc.message)
            continue
        for coll in colls.values():
            folders.append({"path": os.path.realpath(coll.path), "index": path.stem, "collection": coll.name})
        guard = config.raw.get("guard") or {}
        if isinstance(guard, dict):
            protect += [str(g) for g in guard.get("protect") or [] if isinstance(g, str)]
            allow += [str(g) for g in guard.get("allow") or [] if isinstance(g, str)]
    return {
        "version": CACHE_VERSION,
        "generated_at": now_iso(),
        "config_dir": str(directory),
        "folders": folders,
        "protect": protect,
        "allow": allow,
        "errors": errors,
    }


def refresh_folder_cache() -> Path:
    """Rewrite `<state>/guard/folders.json` atomically from every index config; returns its path.

    Raises OSError if it cannot be written.
    """
    return write_json(cache_path(), collect(), indent=2)


def refresh_quietly(changed_config: Path) -> None:
    """Refresh after `changed_config` was saved, if it is one of the config dir's indexes.

    Best-effort: a config save never fails because the cache could not be written (the
    guard treats a missing or stale cache as "allow" and doctor reports it).
    """
    try:
        if changed_config.parent.resolve() != config_dir().resolve():
            return
        refresh_folder_cache()
    except OSError:
        pass
