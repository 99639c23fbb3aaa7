"""The YAML config of one index: collections, contexts, global context, models.

The file is the source of truth for collections and contexts (users may edit it);
keys qmd does not know (`guard`, `updater`, `doctor`, ...) are kept as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmd.core.errors import ConfigError
from qmd.core.fileio import write_json, write_text

DEFAULT_PATTERN = "**/*.md"


def _yaml() -> tuple[Any, Any, Any]:
    """(yaml module, loader, dumper): imported only when a config is parsed or written."""
    import yaml

    # The C loader is ~10x faster; fall back where libyaml is absent.
    return yaml, getattr(yaml, "CSafeLoader", yaml.SafeLoader), getattr(yaml, "CSafeDumper", yaml.SafeDumper)


@dataclass
class CollectionConfig:
    """One collection: a folder, which files in it to index, and what they are about."""

    name: str
    path: Path
    pattern: str = DEFAULT_PATTERN
    ignore: list[str] = field(default_factory=list)
    update: str | None = None
    include_by_default: bool = True
    embed: bool = True
    context: dict[str, str] = field(default_factory=dict)


def _as_str_list(value: Any, where: str) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise ConfigError(f"{where} must be a list of glob strings", "fix the config file")


def _cache_path(path: Path) -> Path:
    return path.with_name(f".{path.name}.json")


def _read_cache(path: Path, stat: os.stat_result) -> dict[str, Any] | None:
    import json

    try:
        data = json.loads(_cache_path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("stat") != [stat.st_mtime_ns, stat.st_size, stat.st_ino]:
        return None
    raw = data.get("raw")
    return raw if isinstance(raw, dict) else None


def _write_cache(path: Path, stat: os.stat_result, raw: dict[str, Any]) -> None:
    """Best effort: a config with values JSON cannot hold, or a read-only folder, has no cache."""
    try:
        write_json(_cache_path(path), {"stat": [stat.st_mtime_ns, stat.st_size, stat.st_ino], "raw": raw}, indent=None, fsync=False)
    except (OSError, TypeError, ValueError):
        pass


class Config:
    """An index's config file, loaded into memory; `save()` writes it atomically."""

    def __init__(self, path: Path, raw: dict[str, Any]) -> None:
        self.path = path
        self.raw = raw
        self.version = 0  # bumped by every change made through this object (for caches)

    @classmethod
    def load(cls, path: Path) -> Config:
        """Read `path`; a missing file is an empty config.

        A JSON copy beside it (`.NAME.yml.json`, keyed by the file's mtime and size) spares
        every search the 25 ms it takes to import and run the YAML parser.
        """
        try:
            stat = path.stat()
        except FileNotFoundError:
            return cls(path, {})
        except OSError as exc:
            raise ConfigError(f"cannot read config {path}: {exc}", "check the path and its permissions") from exc
        cached = _read_cache(path, stat)
        if cached is not None:
            return cls(path, cached)
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path, {})
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}", "check the file's permissions and encoding") from exc
        yaml, loader, _ = _yaml()
        try:
            raw = yaml.load(text, Loader=loader) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}".replace("\n", " "), f"fix or remove {path}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path} must be a mapping at the top level", f"fix or remove {path}")
        config = cls(path, raw)
        config.collections()  # validate eagerly so errors surface at load time
        _write_cache(path, stat, raw)
        return config

    def save(self) -> None:
        """Write the config atomically (temp file, fsync, rename): never half-written.

        The caller refreshes caches derived from the config dir (`Store` does: the guard's
        knowledge-folder cache).
        """
        yaml, _, dumper = _yaml()
        text = yaml.dump(self.raw, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
        # A new config is private (0600); an existing one keeps its mode.
        write_text(self.path, text, mode=None if self.path.exists() else 0o600)
        _write_cache(self.path, self.path.stat(), self.raw)

    # --- reading -------------------------------------------------------------------

    @property
    def global_context(self) -> str | None:
        value = self.raw.get("global_context")
        return str(value) if value else None

    @global_context.setter
    def global_context(self, text: str | None) -> None:
        self.version += 1
        if text:
            self.raw["global_context"] = text
        else:
            self.raw.pop("global_context", None)

    def _collections_raw(self) -> dict[str, Any]:
        section = self.raw.get("collections")
        if section is None:
            return {}
        if not isinstance(section, dict):
            raise ConfigError(f"'collections' in {self.path} must be a mapping", "fix the config file")
        return section

    def collections(self) -> dict[str, CollectionConfig]:
        """All collections, by name, in file order."""
        result: dict[str, CollectionConfig] = {}
        for name, body in self._collections_raw().items():
            where = f"collection {name!r} in {self.path}"
            if not isinstance(body, dict) or not body.get("path"):
                raise ConfigError(f"{where} needs a 'path'", "fix the config file")
            context = body.get("context") or {}
            if not isinstance(context, dict):
                raise ConfigError(f"'context' of {where} must be a mapping of path to text", "fix the config file")
            result[str(name)] = CollectionConfig(
                name=str(name),
                path=Path(str(body["path"])).expanduser(),
                pattern=str(body.get("pattern") or DEFAULT_PATTERN),
                ignore=_as_str_list(body.get("ignore"), f"'ignore' of {where}"),
                update=str(body["update"]) if body.get("update") else None,
                include_by_default=bool(body.get("includeByDefault", True)),
                embed=bool(body.get("embed", True)),
                context={str(k): str(v) for k, v in context.items()},
            )
        return result

    # --- writing -------------------------------------------------------------------

    def set_collection(self, coll: CollectionConfig) -> None:
        """Insert or replace a collection, keeping keys qmd does not know."""
        self.version += 1
        section = self.raw.setdefault("collections", {})
        body: dict[str, Any] = dict(section.get(coll.name) or {})
        body["path"] = str(coll.path)
        body["pattern"] = coll.pattern
        for key, value, default in (
            ("ignore", coll.ignore, []),
            ("update", coll.update, None),
            ("includeByDefault", coll.include_by_default, True),
            ("embed", coll.embed, True),
            ("context", coll.context, {}),
        ):
            if value == default:
                body.pop(key, None)
            else:
                body[key] = value
        section[coll.name] = body

    def remove_collection(self, name: str) -> None:
        self.version += 1
        self._collections_raw().pop(name, None)

    def rename_collection(self, old: str, new: str) -> None:
        self.version += 1
        section = self._collections_raw()
        self.raw["collections"] = {(new if k == old else k): v for k, v in section.items()}
