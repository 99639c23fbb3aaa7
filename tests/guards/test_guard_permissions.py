"""`qmd guard refresh` and `qmd guard install` where file modes refuse them: one line naming the
chmod, exit 1, nothing half-written (both crashed with exit 3); a folders.json its owner could
not read is healed by a refresh. qmd runs with file modes binding (`bound_by_modes`)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

from qmd import harness

from tests.support.run import bound_by_modes, command, qmd_env


def qmd(*args: str, cwd: Path) -> tuple[int, str, str]:
    proc = subprocess.run(bound_by_modes(command(*args)), env=qmd_env(), cwd=cwd, capture_output=True, text=True, timeout=120)
    return proc.returncode, proc.stdout, proc.stderr


def refused(code: int, err: str, fix: str) -> None:
    assert code == 1, (code, err)
    assert "Traceback" not in err and "bug" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and fix in lines[1], err


def test_refresh_in_a_guard_folder_qmd_may_not_write_in_names_the_chmod(isolated_home: Path) -> None:
    code, out, err = qmd("guard", "refresh", cwd=isolated_home)
    assert code == 0, err
    guard = harness.StateLayout.current().guard
    before = sorted(p.name for p in guard.iterdir())
    guard.chmod(0o500)
    try:
        code, out, err = qmd("guard", "refresh", cwd=isolated_home)
    finally:
        guard.chmod(0o755)
    refused(code, err, f"chmod u+rwx {guard}")
    assert sorted(p.name for p in guard.iterdir()) == before  # no stray .folders.json.<pid>.tmp


def test_refresh_heals_a_folder_cache_its_owner_could_not_read(isolated_home: Path) -> None:
    """folders.json at mode 000: the rewrite kept that mode, so refresh could not read back what it
    wrote (exit 3), and the hook never could; a file qmd writes stays readable to its owner."""
    code, out, err = qmd("guard", "refresh", cwd=isolated_home)
    assert code == 0, err
    folders = harness.StateLayout.current().guard_folders
    folders.chmod(0o000)
    code, out, err = qmd("guard", "refresh", cwd=isolated_home)
    assert code == 0 and "knowledge folder" in out, (code, out, err)
    assert folders.stat().st_mode & 0o400
    assert "folders" in json.loads(folders.read_text())


def test_install_into_a_claude_folder_qmd_may_not_write_in_names_the_chmod(isolated_home: Path) -> None:
    claude = isolated_home / ".claude"
    claude.mkdir()
    claude.chmod(0o555)
    try:
        code, out, err = qmd("guard", "install", "--claude", cwd=isolated_home)
    finally:
        claude.chmod(0o755)
    refused(code, err, f"chmod u+rwx {claude}")
    assert list(claude.iterdir()) == []
