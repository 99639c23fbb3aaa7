"""The YAML config of one index: collections, contexts, global context, models.

The file is the source of truth for collections and contexts (users may edit it);
keys qmd does not know (`guard`, `updater`, `doctor`, ...) are kept as they are.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from .errors import ConfigError

DEFAULT_PATTERN = "**/*.md"

try:  # the C loader is ~10x faster; fall back where libyaml is absent
    _Loader: Any = yaml.CSafeLoader
    _Dumper: Any = yaml.CSafeDumper
except AttributeError:  # pragma: no cover - depends on the platform's wheel
    _Loader = yaml.SafeLoader
    _Dumper = yaml.SafeDumper


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


class Config:
    """An index's config file, loaded into memory; `save()` writes it atomically."""

    def __init__(self, path: Path, raw: dict[str, Any]) -> None:
        self.path = path
        self.raw = raw
        self.version = 0  # bumped by every change made through this object (for caches)

    @classmethod
    def load(cls, path: Path) -> Config:
        """Read `path`; a missing file is an empty config."""
        try:
            text = path.read_text(encoding="utf-8")
        except FileNotFoundError:
            return cls(path, {})
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {exc}", "check the file's permissions and encoding") from exc
        try:
            raw = yaml.load(text, Loader=_Loader) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}".replace("\n", " "), f"fix or remove {path}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path} must be a mapping at the top level", f"fix or remove {path}")
        config = cls(path, raw)
        config.collections()  # validate eagerly so errors surface at load time
        return config

    def save(self) -> None:
        """Write the config atomically (temp file, fsync, rename): never half-written."""
        import tempfile

        self.path.parent.mkdir(parents=True, exist_ok=True)
        text = yaml.dump(self.raw, Dumper=_Dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
        fd, tmp = tempfile.mkstemp(prefix=".tmp-", suffix=".yml", dir=self.path.parent)
        try:
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                fh.write(text)
                fh.flush()
                os.fsync(fh.fileno())
            os.replace(tmp, self.path)
        except BaseException:
            Path(tmp).unlink(missing_ok=True)
            raise
        from .folders import refresh_quietly  # late import: folders imports this module

        refresh_quietly(self.path)

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
