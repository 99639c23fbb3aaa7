"""The knowledge-folder cache: every collection folder of every index, in one JSON file.

Lean tools that must not parse YAML on every call (the agent guard runs on every shell
command an agent issues) read `<state>/guard/folders.json`. It is rewritten whenever a
config in the config dir is saved, and can be rebuilt at any time with `refresh()`.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Any

from qmd.store.config import Config
from qmd.core.errors import ConfigError
from qmd.core.paths import config_dir, state_dir

CACHE_VERSION = 1


def cache_path() -> Path:
    return state_dir() / "guard" / "folders.json"


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
        "generated_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "config_dir": str(directory),
        "folders": folders,
        "protect": protect,
        "allow": allow,
        "errors": errors,
    }


def refresh() -> Path:
    """Rewrite the cache atomically; returns its path. Raises OSError if it cannot be written."""
    target = cache_path()
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(collect(), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, target)
    return target


def refresh_quietly(changed_config: Path) -> None:
    """Refresh after `changed_config` was saved, if it is one of the config dir's indexes.

    Best-effort: a config save never fails because the cache could not be written (the
    guard treats a missing or stale cache as "allow" and doctor reports it).
    """
    try:
        if changed_config.parent.resolve() != config_dir().resolve():
            return
        refresh()
    except OSError:
        pass
