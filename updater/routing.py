"""One harness for all indexes: route a repository to the collections, in every index, it touches.

Indexes are the `*.yml` configs in `qmd.harness.config_dir()` (except `models.yml`) and the
project-local `.qmd/index.yml` configs qmd has used (so a commit of a repository with its
own index goes to that index; an untrusted one's outside collections are not). A collection
is routed to a repository when its folder lies inside the repository's work tree, or
contains it (a collection over ~/work sees the files of every repo below it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

from qmd import harness
from qmd import QmdError


@dataclass
class Coll:
    index: str
    name: str
    path: str  # realpath of the folder
    embed: bool


@dataclass
class Indexes:
    """What every index config says, read once per run (no index is opened)."""

    keys: list[str] = field(default_factory=list)  # every index served (see `index_names`)
    configured: dict[str, harness.ConfiguredIndex] = field(default_factory=dict)  # index → its config as read
    collections: list[Coll] = field(default_factory=list)
    errors: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # index → (message, hint)

    def route(self, repo: str) -> dict[str, list[str]]:
        """{index: [collection names]} for the work tree (or folder) `repo`."""
        out: dict[str, list[str]] = {}
        for coll in self.collections:
            if inside(coll.path, repo) or inside(repo, coll.path):
                out.setdefault(coll.index, []).append(coll.name)
        return out


inside = harness.within  # `path` is `folder` or below it (both real paths)


def index_names() -> list[str]:
    """Every index the harness serves: the config dir's (by name), then the project-local
    ones qmd has used (by the path of their `.qmd/index.yml`, which `qmd.open_index` takes)."""
    return harness.index_keys()


def load() -> Indexes:
    """Every index's collections, from its config and trust decision; an index whose config
    cannot be read, or whose index file the trust gate refuses, is listed in `errors`."""
    result = Indexes(index_names())
    for index in result.keys:
        try:
            configured = harness.read_index(index)
            refused = configured.refused()
            if refused is not None:
                raise refused
            for name, coll in configured.collections().items():
                result.collections.append(Coll(index, name, os.path.realpath(coll.path), coll.embed))
        except QmdError as exc:
            result.errors[index] = (exc.message, exc.cli_hint)
            continue
        result.configured[index] = configured
    return result


def covered_by(repos: list[str], path: str) -> bool:
    """True when `path` is inside one of the (enrolled) work trees."""
    return any(inside(path, repo) for repo in repos)
