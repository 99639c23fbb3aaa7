"""Helpers for the freshness-harness tests (hooks, updater, health): real git, real processes."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

GIT_ENV = {
    "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t", "GIT_COMMITTER_EMAIL": "t@t",
    "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0",
}


@pytest.fixture
def state(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """QMD_STATE_DIR under tmp_path, and a git identity for commits (env, so subprocesses inherit it)."""
    root = tmp_path / "state"
    monkeypatch.setenv("QMD_STATE_DIR", str(root))
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    return root


def git(repo: Path, *args: str, input: str | None = None, check: bool = True) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, input=input, check=check, timeout=60)


def make_repo(path: Path, files: dict[str, str] | None = None) -> Path:
    """A git work tree with one commit holding `files` (default: one note)."""
    path.mkdir(parents=True, exist_ok=True)
    git(path, "init", "-q", "-b", "main")
    for name, text in (files or {"README.md": "# Readme\n\nA repository.\n"}).items():
        (path / name).parent.mkdir(parents=True, exist_ok=True)
        (path / name).write_text(text)
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path.resolve()


def commit(repo: Path, name: str, text: str, message: str | None = None) -> subprocess.CompletedProcess[str]:
    (repo / name).parent.mkdir(parents=True, exist_ok=True)
    (repo / name).write_text(text)
    git(repo, "add", name)
    return git(repo, "commit", "-q", "-m", message or f"add {name}")


def queue_files(state_dir: Path, sub: str) -> list[str]:
    folder = state_dir / "queue" / sub
    return sorted(os.listdir(folder)) if folder.is_dir() else []
