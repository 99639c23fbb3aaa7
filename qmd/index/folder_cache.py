"""The knowledge-folder cache: every collection folder of every index, in one JSON file.

Lean tools that must not parse YAML on every call (the agent guard runs on every shell
command an agent issues) read `<state>/guard/folders.json`. It is rewritten whenever a
config in the config dir is saved, and can be rebuilt at any time with `refresh_folder_cache()`.

`patterns` maps each folder to its collections' patterns (`{"/x/manual": ["**/*.rst"]}`,
split at the commas; a folder in two collections gets both), so the guard tests an agent's
file filters against the notes that are really there. The `guard.allow` globs of the
config dir's indexes apply everywhere (`allow`); those of a project-local config only
inside that project, and only once it is trusted (`project_allow`: `{"root": <project>,
"glob": <glob>}`), so that a cloned repository cannot exempt the user's own notes; its
`guard.protect` globs are confined to the project too (`_within`). Readers
ignore keys they do not know and treat a folder missing from `patterns` as the sample
notes the guard used before (.md, .markdown, .mdx, .txt).
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
from qmd.core.indexes import local_configs, read_index, sources

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.trust import Decision

CACHE_VERSION = 1


def cache_path() -> Path:
    """`<state>/guard/folders.json`."""
    return StateLayout.current().guard_folders


def local_trust(config_path: str | os.PathLike[str]) -> Decision:
    """The trust gate of a config as an unattended run (agents, MCP, the updater) applies it:
    for a project-local `.qmd/index.yml`, which of its gated fields (update commands,
    collections outside the project, custom models) are used, and why (`why`: not-local,
    nothing-gated, opted-in, approved, untrusted). Raises ConfigError for an unreadable config."""
    from qmd.core.trust import decide

    return decide(config_path, Config.load(Path(config_path)).raw)


def register_local(config_path: Path) -> bool:
    """Remember a project-local config (`qmd init`, `update`, a config change); True when it
    was new (the folder cache is then rewritten). Best-effort, like the cache."""
    absolute = Path(os.path.abspath(config_path))
    known = local_configs()
    if absolute in known:
        return False
    try:
        write_json(StateLayout.current().local_indexes, {"configs": [str(p) for p in [*known, absolute]]}, indent=2)
        refresh_folder_cache()
    except OSError:
        return False
    return True


def _within(root: str, globs: list[str]) -> list[str]:
    """A project's `guard.protect` globs, confined to the project (a cloned repository's
    `protect: ['*']` must not block the user's searches everywhere): an absolute glob only
    when it lies inside `root`, a relative one (any depth) made absolute below `root`."""
    out: list[str] = []
    for glob in globs:
        glob = glob.strip()
        if not glob or glob.startswith("~"):
            continue
        if glob.startswith("/"):
            if glob == root or glob.startswith(root.rstrip("/") + "/"):
                out.append(glob)
            continue
        out += [f"{root}/{glob}", f"{root}/**/{glob}"]
    return out


def collect() -> dict[str, Any]:
    """Folders and guard globs from every index config: the config dir's `*.yml` and the
    project-local ones (only the collections an untrusted one may index: inside the project)."""
    from qmd.core.trust import project_root
    from qmd.index.scan import split_patterns

    folders: list[dict[str, str]] = []
    patterns: dict[str, list[str]] = {}
    protect: list[str] = []
    allow: list[str] = []
    project_allow: list[dict[str, str]] = []
    errors: list[str] = []
    directory = config_dir()
    for path, key in sources():
        try:
            index = read_index(key, path)
            colls = index.collections()
        except ConfigError as exc:
            errors.append(exc.message)
            continue
        config, decision = index.config, index.decision
        for coll in colls.values():
            real = os.path.realpath(coll.path)
            folders.append({"path": real, "index": key, "collection": coll.name})
            known = patterns.setdefault(real, [])
            known += [p for p in split_patterns(coll.pattern) if p not in known]
        guard = config.raw.get("guard") or {}
        if isinstance(guard, dict):
            extra = [str(g) for g in guard.get("protect") or [] if isinstance(g, str)]
            protect += extra if not decision.local else _within(os.path.realpath(project_root(path)), extra)
            globs = [str(g) for g in guard.get("allow") or [] if isinstance(g, str)]
            if not decision.local:
                allow += globs
            elif decision.allowed:  # a project's exemptions: its own paths only, once trusted
                root = os.path.realpath(project_root(path))
                project_allow += [{"root": root, "glob": g} for g in globs]
    return {
        "version": CACHE_VERSION,
        "generated_at": now_iso(),
        "config_dir": str(directory),
        "folders": folders,
        "patterns": patterns,
        "protect": protect,
        "allow": allow,
        "project_allow": project_allow,
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
    from qmd.core.paths import is_local_config

    try:
        if is_local_config(changed_config):
            if register_local(changed_config):
                return  # registering rewrote the cache
        elif changed_config.parent.resolve() != config_dir().resolve():
            return
        refresh_folder_cache()
    except OSError:
        pass
