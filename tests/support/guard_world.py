"""The trees the guard tests decide over (real folders under a tmp root)."""

from __future__ import annotations

import os
from pathlib import Path


def build_tree(root: Path) -> dict[str, object]:
    """The decision tree of test_guard_decisions (see its docstring) under `root`; returns the
    folders.json content for it."""
    files = {
        "repo/.git/HEAD": "ref: refs/heads/main\n",
        "repo/notes/a.md": "# A\nretry policy\n",
        "repo/notes/b.md": "# B\n",
        "repo/notes/sub/c.md": "# C\n",
        "repo/docs/adr/0001.md": "# ADR\n",
        "repo/docs/guide.md": "# Guide\n",
        "repo/vendor/wiki/page.md": "# Wiki\n",
        "repo/vendor/lib/x.py": "x = 1\n",
        "repo/src/app.py": "print('retry')\n",
        "repo/src/util.py": "",
        "repo/tests/test_app.py": "",
        "repo/README.md": "# Repo\n",
        "kb/x.md": "# X\n",
        "kb/y.md": "# Y\n",
        "kb/public/p.md": "# P\n",
        "other/code.py": "",
        "home/notes/h.md": "# H\n",
    }
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    if not (root / "link").exists():
        (root / "link").symlink_to(root / "repo" / "notes")
    real = os.path.realpath(root)
    return {
        "version": 1,
        "folders": [
            {"path": f"{real}/repo/notes", "index": "index", "collection": "notes"},
            {"path": f"{real}/kb", "index": "work", "collection": "kb"},
            {"path": f"{real}/home/notes", "index": "index", "collection": "home"},
        ],
        "protect": [f"{real}/repo/docs/adr", "wiki/"],
        "allow": [f"{real}/kb/public/**"],
        "errors": [],
    }


SWEEP_FILES = {  # test_guard_sweeps' tree: see its docstring
    "work/repo/.git/HEAD": "ref: refs/heads/main\n",
    "work/repo/notes/a.md": "# A\nretry policy\n",
    "work/repo/notes/b.md": "# B\nretry\n",
    "work/repo/notes/sub/c.md": "# C\n",
    "work/repo/src/app.py": "print('retry')\n",
    "work/repo/src/util.py": "",
    "work/repo/tests/test_app.py": "",
    "work/repo/README.md": "# Repo\n",
    "work/code/.git/HEAD": "ref: refs/heads/main\n",
    "work/code/main.py": "retry = 1\n",
    "work/code/lib/x.py": "",
    "work/code/README.md": "# Code\n",
    "manual/intro.rst": "Intro\n=====\n",
    "manual/guide.rst": "Guide\n=====\n",
    "manual/api/ref.rst": "Ref\n===\n",
}


def write_tree(root: Path, files: dict[str, str]) -> None:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
