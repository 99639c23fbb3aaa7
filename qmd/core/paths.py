"""Where qmd keeps things: config, index, models and harness state (env + XDG)."""

from __future__ import annotations

import os
import re
from dataclasses import dataclass
from pathlib import Path

from qmd.core.errors import QmdError

DEFAULT_INDEX = "index"
_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    if value:
        return Path(value)
    return Path.home() / fallback


def config_dir() -> Path:
    """`$QMD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/qmd`, else `~/.config/qmd`."""
    explicit = os.environ.get("QMD_CONFIG_DIR")
    return Path(explicit) if explicit else _xdg("XDG_CONFIG_HOME", ".config") / "qmd"


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/qmd`, else `~/.cache/qmd`: indexes live here."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "qmd"


def models_dir() -> Path:
    """`$QMD_MODELS_DIR`, else `<cache>/models`."""
    explicit = os.environ.get("QMD_MODELS_DIR")
    return Path(explicit) if explicit else cache_dir() / "models"


def state_dir() -> Path:
    """`$QMD_STATE_DIR`, else `$XDG_STATE_HOME/qmd`, else `~/.local/state/qmd`."""
    explicit = os.environ.get("QMD_STATE_DIR")
    return Path(explicit) if explicit else _xdg("XDG_STATE_HOME", ".local/state") / "qmd"


def check_index_name(name: str) -> str:
    """Return `name` if it is a valid index name, else raise a QmdError naming the rule."""
    if not _INDEX_NAME.match(name):
        raise QmdError(
            f"invalid index name {name!r}",
            "use letters, digits, '.', '_' or '-' (at most 64 characters)",
        )
    return name


@dataclass(frozen=True)
class IndexPaths:
    """The files that make up one named index."""

    name: str
    index_path: Path
    config_path: Path


def resolve_index(name: str | None = None) -> IndexPaths:
    """Paths of index `name` (default `index`); `INDEX_PATH` overrides the database file."""
    name = check_index_name(name or DEFAULT_INDEX)
    explicit = os.environ.get("INDEX_PATH")
    index_path = Path(explicit) if explicit else cache_dir() / f"{name}.sqlite"
    return IndexPaths(name, index_path.expanduser(), config_dir() / f"{name}.yml")
