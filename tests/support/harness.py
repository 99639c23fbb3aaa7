"""Helpers for the freshness-harness tests (hooks, updater, health): real git, real processes."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
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


BUS_ERROR = "Failed to connect to bus: No such file or directory"


def fake_systemctl(tmp: Path, monkeypatch: pytest.MonkeyPatch, kind: str, tools: tuple[str, ...] = ()) -> Path:
    """PATH for a test of the updater's service where systemd is (or is not) there; returns the
    log the fake appends its arguments to, one call a line.

    kind "container": a `systemctl` that fails like one in a container or WSL without systemd
    (the bus error on stderr, exit 1); "absent": no systemctl on PATH at all; "running": one
    whose user manager answers (is-active says `active`).
    PATH keeps only the fake's folder, this interpreter's (where the `qmd` script is) and the
    folders of `tools` after them, so a real systemctl is never found first.
    """
    folder = tmp / "fakebin"
    folder.mkdir(exist_ok=True)
    log = tmp / "systemctl.log"
    if kind != "absent":
        if kind == "container":
            body = f'echo "{BUS_ERROR}" >&2\nexit 1\n'
        else:
            assert kind == "running", kind
            body = 'case "$*" in *is-active*) echo active ;; *show-environment*) echo "HOME=$HOME" ;; esac\nexit 0\n'
        script = folder / "systemctl"
        script.write_text(f'#!/bin/sh\necho "$*" >>{shlex.quote(str(log))}\n{body}')
        script.chmod(0o755)
    extra = [os.path.dirname(found) for found in map(shutil.which, tools) if found]
    assert kind != "absent" or not any(os.path.exists(os.path.join(d, "systemctl")) for d in extra), "a tool's folder holds a systemctl"
    monkeypatch.setenv("PATH", os.pathsep.join([str(folder), str(Path(sys.executable).parent), *extra]))
    return log
