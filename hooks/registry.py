"""The enrolled repositories (`<state>/hooks/repos.json`), for `qmd hooks status`, the updater and doctor.

    {"version": 1, "repos": {"<work tree, real path>": {
        "hooks_dir": "<where git runs hooks from>", "husky_dir": "<.husky>" | null,
        "state_dir": "<the state dir baked into the hooks>", "installed_at": "<UTC ISO>",
        "hooks": {"post-commit": {"how": "created" | "chained" | "pre-commit" | "husky", ...}, ...},
        "created_dirs": ["<folders install created, deepest first>"]}}}
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from updater.layout import Layout, read_json, write_json


def load(layout: Layout | None = None) -> dict[str, dict[str, Any]]:
    """{work tree: what install did there}; {} when nothing is enrolled."""
    data = read_json((layout or Layout.current()).repos)
    repos = data.get("repos") if isinstance(data, dict) else None
    return {str(k): v for k, v in repos.items() if isinstance(v, dict)} if isinstance(repos, dict) else {}


@contextmanager
def editing(layout: Layout | None = None) -> Iterator[dict[str, dict[str, Any]]]:
    """Read, let the caller change, write back atomically; one editor at a time."""
    from filelock import FileLock

    layout = layout or Layout.current()
    layout.repos.parent.mkdir(parents=True, exist_ok=True)
    with FileLock(str(layout.repos) + ".lock", timeout=30):
        repos = load(layout)
        yield repos
        write_json(layout.repos, {"version": 1, "repos": repos})
