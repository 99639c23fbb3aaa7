"""The YAML config of one index: collections, contexts, global context, models.

The file is the source of truth for collections and contexts (users may edit it);
keys qmd does not know (`guard`, `updater`, `doctor`, ...) are kept as they are.
"""

from __future__ import annotations

import os
from qmd.core.records import field, record
from pathlib import Path

from qmd.core.errors import ConfigError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

DEFAULT_PATTERN = "**/*.md"
CONFIG_BYTES = 16 * 1024 * 1024  # a config's size on disk; 2,000 collections with contexts take under 1 MB
CONFIG_NODES = 200_000  # values a config may hold once its YAML aliases are expanded (an alias bomb: billions)


def _yaml() -> tuple[Any, Any, Any]:
    """(yaml module, loader, dumper): imported only when a config is parsed or written."""
    import yaml

    from qmd.core.yamlcore import dumper, loader

    # YAML 1.2 scalars as the original reads them; strings written so both YAML versions read them back.
    return yaml, loader(), dumper()


@record
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
    chunk_strategy: str = "regex"  # regex (markdown break points) or auto (source files by their syntax tree)


# Keys qmd reads; anything else is kept as it is and named in a did-you-mean warning.
TOP_LEVEL_KEYS = ("global_context", "models", "collections", "guard", "updater", "doctor", "database", "search")
SEARCH_KEYS = ("min_confidence",)
COLLECTION_KEYS = ("path", "pattern", "ignore", "update", "includeByDefault", "embed", "context", "chunk_strategy")
CHUNK_STRATEGIES = ("regex", "auto")
MODEL_ROLES = ("embed", "rerank", "generate")


def _type_name(value: object) -> str:
    return {list: "a list", dict: "a mapping", bool: "true/false", int: "a number", float: "a number", str: "text"}.get(type(value), type(value).__name__)


def _bad(where: str, key: str, wanted: str, value: object, path: Path) -> ConfigError:
    return ConfigError(f"{where}: '{key}' must be {wanted}, not {_type_name(value)} ({value!r:.60})", f"fix '{key}' in {path}")


def _as_str_list(value: Any, where: str, key: str, path: Path) -> list[str]:
    if value is None:
        return []
    if isinstance(value, str):
        return [value]
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return list(value)
    raise _bad(where, key, "a glob or a list of globs", value, path)


def _text(body: dict[str, Any], key: str, where: str, path: Path) -> str | None:
    value = body.get(key)
    if value is None:
        return None
    if not isinstance(value, str):
        raise _bad(where, key, "text", value, path)
    if "\x00" in value:  # no path, glob or command can hold one (the OS refuses it: a crash later)
        raise _bad(where, key, "text without NUL bytes", value, path)
    return value


_WORDS = {"yes": True, "on": True, "true": True, "no": False, "off": False, "false": False}


def _flag(body: dict[str, Any], key: str, where: str, path: Path) -> bool:
    """A true/false setting; `yes`/`no`/`on`/`off`, booleans to YAML 1.1 (and so in configs
    written before qmd read YAML 1.2), still count as the booleans they meant."""
    value = body.get(key, True)
    if isinstance(value, str) and value.lower() in _WORDS:
        return _WORDS[value.lower()]
    if not isinstance(value, bool):
        raise _bad(where, key, "true or false", value, path)
    return value


def _did_you_mean(key: str, known: tuple[str, ...]) -> str:
    import difflib

    close = difflib.get_close_matches(key, known, n=1, cutoff=0.6)
    return f"; did you mean '{close[0]}'?" if close else f" (known keys: {', '.join(known)})"


# --- the parsed-config cache ------------------------------------------------------
# Parsing YAML (import included) costs more than a whole `qmd search`, so the parsed form
# of each config (an index's, and `models.yml`: qmd.llm.models) is kept as JSON under the
# cache dir with the exact text it was parsed from.
# A copy is used only when the file's text is that text, so it cannot be stale whatever
# happened to the file's times (no "racily clean" window: a same-size edit within the file
# system's timestamp granularity is seen as well). So it can be written the moment qmd saves
# a config: the first `qmd mcp` after `qmd collection add` reads no YAML (issue 31).

CACHE_VERSION = 3  # 2: parsed with YAML 1.2 scalars (qmd.core.yamlcore); 3: keyed by the text, not the file's stamp (files named by FNV-1a since 2026-12: an older crc32-named copy is left unread)


def config_cache_path(path: Path) -> Path:
    """Where the parsed copy of the config at `path` is kept (one file per config path, named
    by a 32-bit FNV-1a of the absolute path: zlib's crc32 cost its import, 0.2 ms of the
    first MCP call)."""
    from qmd.core.paths import cache_dir

    absolute = os.path.abspath(path)
    key = 0x811C9DC5
    for byte in os.fsencode(absolute):
        key = ((key ^ byte) * 0x01000193) & 0xFFFFFFFF
    return cache_dir() / "config" / f"{os.path.basename(absolute)}-{key:08x}.json"


def read_parsed_copy(path: Path, text: str) -> dict[str, Any] | None:
    """The kept parse of the YAML file `path` when it was made from exactly `text`, else None (parse the YAML)."""
    import json

    try:
        with open(config_cache_path(path), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != CACHE_VERSION or data.get("text") != text:
        return None
    raw = data.get("raw")
    return raw if isinstance(raw, dict) else None


def keep_parsed_copy(path: Path, text: str, raw: dict[str, Any]) -> None:
    """Keep `raw`, the parse of `text` (the YAML file at `path`), for `read_parsed_copy`. Best
    effort: what JSON cannot hold exactly (dates, number keys), or an unwritable cache dir,
    gets no copy; the next load parses the YAML again. `raw` must be bounded (yamlcore.bounded):
    an alias bomb's shared nodes would be written out in full."""
    import json

    from qmd.core.fileio import write_text

    try:
        data = json.dumps({"version": CACHE_VERSION, "text": text, "raw": raw}, ensure_ascii=False)
        if json.loads(data)["raw"] != raw:
            return
        write_text(config_cache_path(path), data + "\n", fsync=False)
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

        A parsed copy in the cache dir (see `config_cache_path`) spares every search the
        import and run of the YAML parser; it is used only when it cannot be stale.
        """
        from qmd.core.fileio import TooLarge, read_regular

        try:  # a FIFO here blocked every command (and the updater) in open(); a cloned repository's sparse 4 GB one filled the memory
            text = read_regular(path, CONFIG_BYTES).decode("utf-8")
        except FileNotFoundError:
            return cls(path, {})
        except TooLarge as exc:
            raise ConfigError(f"cannot read config {path}: {exc.strerror}", f"a config holds collections and contexts (kilobytes): fix or remove {path}") from exc
        except (OSError, UnicodeDecodeError) as exc:
            raise ConfigError(f"cannot read config {path}: {getattr(exc, 'strerror', None) or exc}", "check the path, the file's permissions and its encoding") from exc
        cached = read_parsed_copy(path, text)
        if cached is not None:
            config = cls(path, cached)
            config.validate()  # a copy written by an older qmd may hold what this one refuses
            return config
        yaml, loader, _ = _yaml()
        try:
            raw = yaml.load(text, Loader=loader) or {}
        except yaml.YAMLError as exc:
            raise ConfigError(f"config {path} is not valid YAML: {exc}".replace("\n", " "), f"fix or remove {path}") from exc
        if not isinstance(raw, dict):
            raise ConfigError(f"config {path} must be a mapping at the top level", f"fix or remove {path}")
        from qmd.core.yamlcore import bounded

        if not bounded(raw, CONFIG_NODES):  # checked before anything walks, prints or caches it
            raise ConfigError(f"config {path} expands to more than {CONFIG_NODES} values through its YAML aliases (&name/*name used inside each other)", f"write the values out instead of nesting aliases in {path}")
        config = cls(path, raw)
        config.validate()  # eagerly, so errors surface at load time (and a cached copy is valid)
        keep_parsed_copy(path, text, raw)
        return config

    def save(self) -> None:
        """Write the config atomically (temp file, fsync, rename): never half-written.

        The caller refreshes caches derived from the config dir (`Store` does: the guard's
        knowledge-folder cache).
        """
        from qmd.core.fileio import write_text

        yaml, _, dumper = _yaml()
        text = yaml.dump(self.raw, Dumper=dumper, sort_keys=False, allow_unicode=True, default_flow_style=False)
        # A new config is private (0600); an existing one keeps its mode.
        try:
            write_text(self.written_path(), text, mode=None if self.path.exists() else 0o600, keep_read_only=True)
        except OSError as exc:
            raise self._unwritable(exc) from exc
        # Keep the parse of what was written: the next process (a server's first start) reads no YAML.
        _, loader, _ = _yaml()
        try:
            keep_parsed_copy(self.path, text, yaml.load(text, Loader=loader) or {})
        except yaml.YAMLError:
            pass
        self.path.with_name(f".{self.path.name}.json").unlink(missing_ok=True)  # the copy older qmds kept beside it

    def written_path(self) -> Path:
        """The file `save()` replaces: in qmd's own config folder, a link to an existing file (a
        dotfiles manager's: stow, chezmoi, yadm) is written through, so the copy it keeps stays
        the one in use (replacing the link left it silently behind); anywhere else (a project's
        `.qmd/`, which a cloned repository controls) a link is replaced, never written through."""
        from qmd.core.paths import config_dir

        if self.path.is_symlink() and self.path.is_file() and os.path.abspath(self.path.parent) == os.path.abspath(config_dir()):
            return Path(os.path.realpath(self.path))
        return self.path

    def check_writable(self) -> None:
        """A ConfigError naming the fix when `save()` could not write the file (its folder
        read-only, not creatable); changes nothing. Called before a change that must not
        reach the index unless the config can follow it (rename, remove)."""
        from qmd.core.fileio import check_writable

        try:
            check_writable(self.written_path(), keep_read_only=True)
        except OSError as exc:
            raise self._unwritable(exc) from exc

    def _unwritable(self, exc: OSError) -> ConfigError:
        from qmd.core.fileio import denial

        doing = f"cannot save the config {self.path}"
        refused = denial(exc, doing)
        if refused is not None:
            return ConfigError(*refused)
        return ConfigError(f"{doing}: {exc.strerror or exc}", f"check that {self.path.parent} is a folder you can write in (or set QMD_CONFIG_DIR to one)")

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

    @property
    def database(self) -> str | None:
        """`database: postgresql://…`: the index lives in that PostgreSQL database (None: a SQLite file)."""
        value = self.raw.get("database")
        if value is None or value == "":
            return None
        if not isinstance(value, str) or not value.startswith(("postgresql://", "postgres://")):
            raise _bad(str(self.path), "database", "a PostgreSQL URL (postgresql://user@host/db[?schema=NAME])", value, self.path)
        return value

    @property
    def min_confidence(self) -> float | None:
        """`search: {min_confidence: 0.4}`: below this confidence a hit is a best guess, not an
        answer (None: qmd's measured default, qmd/search/confidence.py THRESHOLD)."""
        section = self.raw.get("search")
        if section is None:
            return None
        if not isinstance(section, dict):
            raise _bad(str(self.path), "search", "a mapping such as {min_confidence: 0.4}", section, self.path)
        value = section.get("min_confidence")
        if value is None:
            return None
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
            raise _bad(f"{self.path} search", "min_confidence", "a number from 0 to 1", value, self.path)
        return float(value)

    def _collections_raw(self) -> dict[str, Any]:
        section = self.raw.get("collections")
        if section is None:
            return {}
        if not isinstance(section, dict):
            raise ConfigError(f"'collections' in {self.path} must be a mapping", "fix the config file")
        return section

    def collections(self) -> dict[str, CollectionConfig]:
        """All collections, by name, in file order; a value of the wrong type is a ConfigError
        naming the key and the file (never a silently empty collection)."""
        result: dict[str, CollectionConfig] = {}
        for name, body in self._collections_raw().items():
            where = f"collection {name!r} in {self.path}"
            if not isinstance(name, (str, int)) or isinstance(name, bool):
                raise ConfigError(f"{where}: a collection's name must be text, YAML read this one as a {type(name).__name__}", f"write the collection's name as plain or quoted text in {self.path}")
            if not isinstance(body, dict):
                raise ConfigError(f"{where} must be a mapping with at least a 'path'", f"fix {self.path}")
            folder = _text(body, "path", where, self.path)
            if not folder:
                raise ConfigError(f"{where} needs a 'path'", f"fix {self.path}")
            context = body.get("context") or {}
            if not isinstance(context, dict) or not all(isinstance(v, str) for v in context.values()):
                raise _bad(where, "context", "a mapping of folder to text", context, self.path)
            pattern = body.get("pattern")
            if pattern is not None and (not isinstance(pattern, str) or not pattern.strip()):
                raise _bad(where, "pattern", "a glob such as '**/*.md' (several: comma-separated)", pattern, self.path)
            strategy = body.get("chunk_strategy")
            if strategy is not None and strategy not in CHUNK_STRATEGIES:
                raise _bad(where, "chunk_strategy", "regex or auto", strategy, self.path)
            result[str(name)] = CollectionConfig(
                name=str(name),
                path=Path(folder).expanduser(),
                pattern=pattern or DEFAULT_PATTERN,
                ignore=_as_str_list(body.get("ignore"), where, "ignore", self.path),
                update=_text(body, "update", where, self.path) or None,
                include_by_default=_flag(body, "includeByDefault", where, self.path),
                embed=_flag(body, "embed", where, self.path),
                context={str(k): v for k, v in context.items()},
                chunk_strategy=strategy or "regex",
            )
        return result

    def validate(self) -> None:
        """Check the types of every key qmd reads (collections, global_context, models), and
        that no collection's name holds a character that rewrites a terminal's line (a cloned
        config's `"ok\\r\\e[2K"` changed what a terminal showed of every listing and message
        naming it). A newline or a tab shows as what it is, and stays allowed."""
        section = self.raw.get("collections")
        for name in section if isinstance(section, dict) else ():
            if isinstance(name, str) and any((ord(c) < 32 and c not in "\n\t") or 127 <= ord(c) < 160 or c in "\u2028\u2029" for c in name):
                from qmd.core.text import line_safe

                raise ConfigError(f"config {self.path}: the collection name '{line_safe(name)}' holds a control character", f"rename the collection in {self.path} (letters, digits, - _ .)")
        self.collections()
        text = self.raw.get("global_context")
        if text is not None and not isinstance(text, str):
            raise _bad(str(self.path), "global_context", "text", text, self.path)
        self.database  # a `database:` that is not a PostgreSQL URL is refused here
        self.min_confidence
        models = self.raw.get("models")
        if models is not None:
            if not isinstance(models, dict):
                raise _bad(str(self.path), "models", "a mapping of role (embed, rerank, generate) to a model", models, self.path)
            for role, spec in models.items():
                if isinstance(spec, dict) and isinstance(spec.get("uri"), str):
                    continue  # {uri: openai:…, options}: the options are checked where the role is resolved
                if spec is not None and not isinstance(spec, str):
                    raise _bad(f"{self.path} models", str(role), "a model path, hf: or openai: URI (or {uri: …, options})", spec, self.path)

    def warnings(self) -> list[str]:
        """Keys qmd does not know (a typo such as `patern` or `modles`), each with a did-you-mean."""
        out = [
            f"{self.path}: unknown key '{key}'{_did_you_mean(str(key), TOP_LEVEL_KEYS)}"
            for key in self.raw
            if key not in TOP_LEVEL_KEYS
        ]
        section = self.raw.get("collections")
        for name, body in section.items() if isinstance(section, dict) else ():
            for key in body if isinstance(body, dict) else ():
                if key not in COLLECTION_KEYS:
                    out.append(f"{self.path}: collection '{name}': unknown key '{key}'{_did_you_mean(str(key), COLLECTION_KEYS)}")
        search = self.raw.get("search")
        for key in search if isinstance(search, dict) else ():
            if key not in SEARCH_KEYS:
                out.append(f"{self.path}: search: unknown key '{key}'{_did_you_mean(str(key), SEARCH_KEYS)}")
        models = self.raw.get("models")
        for role in models if isinstance(models, dict) else ():
            if role not in MODEL_ROLES:
                out.append(f"{self.path}: models: unknown role '{role}'{_did_you_mean(str(role), MODEL_ROLES)}")
        return out

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
            ("chunk_strategy", coll.chunk_strategy, "regex"),
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
