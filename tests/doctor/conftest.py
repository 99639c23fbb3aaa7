"""Fixtures of the doctor tests: a working directory like a subprocess's, and indexed notes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import make_repo


@pytest.fixture
def in_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """In-process runs see the cwd a subprocess gets (the isolated home), not the checkout."""
    monkeypatch.chdir(isolated_home)


@pytest.fixture
def indexed(state: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> Path:
    """Notes in a git repository, indexed into the default index (by the CLI, in this process)."""
    repo = make_repo(tmp_path / "notes", {f"note{i}.md": f"# Note {i}\n\nThe load balancer rollback step {i}.\n" for i in range(6)})
    assert cli("collection", "add", str(repo), "--name", "notes")[0] == 0
    assert cli("update")[0] == 0
    return repo
