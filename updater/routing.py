"""One harness for all indexes: route a repository to the collections, in every index, it touches.

Indexes are the `*.yml` configs in `qmd.config_dir()` (except `models.yml`) and the
project-local `.qmd/index.yml` configs qmd has used (so a commit of a repository with its
own index goes to that index; an untrusted one's outside collections are not). A collection
is routed to a repository when its folder lies inside the repository's work tree, or
contains it (a collection over ~/work sees the files of every repo below it).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field

import qmd
from qmd import QmdError


@dataclass
class Coll:
    index: str
    name: str
    path: str  # realpath of the folder
    embed: bool


@dataclass
class Indexes:
    """What every index config says, read once per run."""

    collections: list[Coll] = field(default_factory=list)
    errors: dict[str, tuple[str, str | None]] = field(default_factory=dict)  # index → (message, hint)

    def route(self, repo: str) -> dict[str, list[str]]:
        """{index: [collection names]} for the work tree (or folder) `repo`."""
        out: dict[str, list[str]] = {}
        for coll in self.collections:
            if inside(coll.path, repo) or inside(repo, coll.path):
                out.setdefault(coll.index, []).append(coll.name)
        return out


def inside(path: str, folder: str) -> bool:
    """`path` is `folder` or below it (both real paths)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def index_names() -> list[str]:
    """Every index the harness serves: the config dir's (by name), then the project-local
    ones qmd has used (by the path of their `.qmd/index.yml`, which `qmd.open_index` takes)."""
    from qmd import local_configs

    folder = qmd.config_dir()
    try:
        named = sorted(p.stem for p in folder.glob("*.yml") if p.name != "models.yml" and p.is_file())
    except OSError:
        named = []
    return named + [str(p) for p in local_configs()]


def load() -> Indexes:
    """Every index's collections; an index whose config cannot be read is listed in `errors`."""
    result = Indexes()
    for index in index_names():
        try:
            store = qmd.open_index(index)
            try:
                embed, _ = store.embed_collections()
                for name, folder in store.collection_folders().items():  # the config's word: no index is opened
                    result.collections.append(Coll(index, name, os.path.realpath(folder), name in embed))
            finally:
                store.close()
        except QmdError as exc:
            result.errors[index] = (exc.message, exc.cli_hint)
    return result


def covered_by(repos: list[str], path: str) -> bool:
    """True when `path` is inside one of the (enrolled) work trees."""
    return any(inside(path, repo) for repo in repos)

