"""Fixtures of the guard tests: the trees of tests/support/guard_world.py, with the folder cache."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from qmd import harness

from tests.support.guard_world import SWEEP_FILES, build_tree, write_tree


@pytest.fixture
def world(tmp_path: Path) -> Path:
    """The decision-test tree, with its folders.json where qmd would write it."""
    data = build_tree(tmp_path)
    folders = harness.StateLayout.current().guard_folders
    folders.parent.mkdir(parents=True, exist_ok=True)
    folders.write_text(json.dumps(data))
    return Path(os.path.realpath(tmp_path))


@pytest.fixture
def notes_world(tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> Path:
    """test_guard_sweeps' tree, whose folders.json qmd itself wrote (`qmd collection add`)."""
    root = Path(os.path.realpath(tmp_path))
    write_tree(root, SWEEP_FILES)
    for folder, name, extra in (("work/repo/notes", "notes", ()), ("manual", "manual", ("--pattern", "**/*.rst"))):
        code, _out, err = cli("collection", "add", str(root / folder), "--name", name, "--no-index", *extra)
        assert code == 0, err
    return root
