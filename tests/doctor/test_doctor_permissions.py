"""`qmd doctor` on an index this user may not read or write: a failed check naming the file (or
folder) and its chmod, never "corrupted" and never a rebuild: `--fix` threw the intact file
aside as `.broken-<time>` and built a new one. qmd runs with file modes binding
(`bound_by_modes`: root without its DAC override)."""

from __future__ import annotations

import json
import stat
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.modes import everything
from tests.support.run import bound_by_modes, command, qmd_env

pytestmark = pytest.mark.usefixtures("in_home")


def doctor(*args: str) -> tuple[int, dict[str, Any]]:
    """The real `qmd doctor --json --quick ARGS`, with file modes binding: (exit code, its index check)."""
    proc = subprocess.run(bound_by_modes(command("doctor", "--json", "--quick", *args)), env=qmd_env({"QMD_SERVER": "off"}), capture_output=True, text=True, timeout=180)
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    checks = [c for c in report["checks"] if c["name"] == "index [index]"]
    assert len(checks) == 1, [c["name"] for c in report["checks"]]
    return proc.returncode, checks[0]


def index_file(home: Path) -> Path:
    return home / ".cache" / "qmd" / "index.sqlite"


def read_only_sidecars(index: Path) -> tuple[Path, Path]:
    """The index's -wal and -shm, made (empty) at mode 0444: what a read of a 0444 index left."""
    wal, shm = Path(f"{index}-wal"), Path(f"{index}-shm")
    for side in (wal, shm):
        side.touch()
        side.chmod(0o444)
    return wal, shm


@pytest.fixture
def index(indexed: Path, isolated_home: Path) -> Iterator[Path]:
    """The built index file; it, its folder and its sidecars get their usual modes back afterwards."""
    path = index_file(isolated_home)
    yield path
    path.parent.chmod(0o755)
    for p in path.parent.iterdir():
        if p.is_file():
            p.chmod(0o644)


def _refused_not_corrupted(check: dict[str, Any], fix: str) -> None:
    assert check["status"] == "fail", check
    assert "corrupted" not in check["detail"] and "not damaged" in check["detail"], check
    assert check["fix"].startswith(fix) and "rebuild" not in check["fix"], check


@pytest.mark.parametrize("mode", [0o000, 0o200])
def test_an_index_this_user_cannot_read_is_named_and_fix_never_moves_it_aside(index: Path, mode: int) -> None:
    before = everything(index.parent)
    index.chmod(mode)
    code, check = doctor()
    assert code == 2
    _refused_not_corrupted(check, f"chmod u+rw {index}")
    assert "cannot be read by this user" in check["detail"], check
    code, check = doctor("--fix")
    assert code == 2 and check["repaired"] is None, check
    _refused_not_corrupted(check, f"chmod u+rw {index}")
    assert not list(index.parent.glob("*.broken-*")) and not list(index.parent.glob("*.bak-*"))
    assert everything(index.parent) == before  # the same file, byte for byte, where it was
    index.chmod(0o644)
    code, check = doctor()
    assert check["status"] == "ok", check


def test_read_only_wal_and_shm_are_a_failure_and_fix_gives_them_the_index_mode(index: Path) -> None:
    """Doctor said all was well while every update failed on the 0444 -wal and -shm."""
    wal, shm = read_only_sidecars(index)
    index.chmod(0o640)
    code, check = doctor()
    assert code == 2
    _refused_not_corrupted(check, f"chmod u+rw {wal} {shm}")
    assert "qmd doctor --fix" in check["fix"], check
    code, check = doctor("--fix")
    assert check["repaired"] == f"chmod 640 {wal} {shm} (the mode of the index file)", check
    assert check["status"] == "ok", check
    for side in (wal, shm):
        assert not side.exists() or stat.S_IMODE(side.stat().st_mode) == 0o640
    proc = subprocess.run(bound_by_modes(command("update")), env=qmd_env({"QMD_SERVER": "off"}), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr


def test_a_read_only_index_is_a_failure_and_fix_leaves_its_mode_alone(index: Path) -> None:
    """A 0444 index (with 0444 -wal/-shm) is a choice doctor does not undo: the chmod is shown."""
    wal, shm = read_only_sidecars(index)
    index.chmod(0o444)
    code, check = doctor("--fix")
    assert code == 2 and check["repaired"] is None, check
    _refused_not_corrupted(check, f"chmod u+rw {index} {wal} {shm}")
    assert {stat.S_IMODE(p.stat().st_mode) for p in (index, wal, shm)} == {0o444}


def test_an_index_folder_this_user_cannot_write_in_is_named_not_corrupted(index: Path) -> None:
    """The folder at 0500: doctor said "corrupted: ReadOnlyError", fix: qmd rebuild."""
    before = everything(index.parent)
    index.parent.chmod(0o500)
    code, check = doctor("--fix")
    assert code == 2 and check["repaired"] is None, check
    _refused_not_corrupted(check, f"chmod u+rwx {index.parent}")
    assert "not writable by this user" in check["detail"], check
    index.parent.chmod(0o755)
    assert everything(index.parent) == before


def test_a_writer_lock_this_user_cannot_open_is_named(index: Path) -> None:
    lock = Path(f"{index}.lock")
    lock.chmod(0o000)
    code, check = doctor()
    assert code == 2 and check["status"] == "fail" and str(lock) in check["detail"], check
    assert check["fix"].startswith(f"chmod u+rw {lock}"), check


def test_a_project_local_index_this_user_cannot_read_names_the_chmod_not_a_rebuild(isolated_home: Path, tmp_path: Path) -> None:
    """The project-local index file's check said "fix its permissions …, or: qmd rebuild"; its
    index check said "corrupted" and --fix rebuilt it."""
    from tests.support.run import local_env, local_project

    root = local_project(tmp_path / "proj")
    index = root / ".qmd" / "index.sqlite"
    before = everything(index.parent)
    index.chmod(0o000)
    try:
        proc = subprocess.run(bound_by_modes(command("doctor", "--json", "--quick", "--fix")), env=local_env(), cwd=root / "docs", capture_output=True, text=True, timeout=180)
    finally:
        index.chmod(0o644)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    file_check = checks["project-local index file"]
    assert file_check["status"] == "fail" and file_check["fix"].startswith(f"chmod u+rw {index}") and "rebuild" not in file_check["fix"], file_check
    found = [c for c in checks.values() if c["name"].startswith("index [")]
    assert len(found) == 1, list(checks)
    index_check = found[0]
    _refused_not_corrupted(index_check, f"chmod u+rw {index}")
    assert everything(index.parent) == before and not list(index.parent.glob("*.broken-*"))
