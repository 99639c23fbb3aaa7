"""The enrolled repositories (`<state>/hooks/repos.json`): written by `qmd hooks install`, read by the updater, `qmd hooks status` and doctor.

    {"version": 1, "repos": {"<work tree, real path>": {
        "hooks_dir": "<where git runs hooks from>", "husky_dir": "<.husky>" | null,
        "state_dir": "<the state dir baked into the hooks>", "installed_at": "<UTC ISO>",
        "hooks": {"post-commit": {"how": "created" | "chained" | "pre-commit" | "husky", ...}, ...},
        "created_dirs": ["<folders install created, deepest first>"]}}}

It lives in the updater, which owns the queue these repositories feed; `hooks` imports it.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from qmd import harness

EDIT_TIMEOUT_S = 30.0

Repos = dict[str, dict[str, Any]]


def load(layout: harness.StateLayout | None = None) -> Repos:
    """{work tree: what install did there}; {} when nothing is enrolled."""
    data = harness.read_json((layout or harness.StateLayout.current()).repos)
    repos = data.get("repos") if isinstance(data, dict) else None
    return {str(k): v for k, v in repos.items() if isinstance(v, dict)} if isinstance(repos, dict) else {}


@contextmanager
def editing(layout: harness.StateLayout | None = None) -> Iterator[Repos]:
    """Read, let the caller change, write back atomically; one editor at a time."""
    layout = layout or harness.StateLayout.current()
    with harness.lock_file(Path(str(layout.repos) + ".lock"), timeout=EDIT_TIMEOUT_S):
        repos = load(layout)
        yield repos
        harness.write_json(layout.repos, {"version": 1, "repos": repos}, sort_keys=True)
