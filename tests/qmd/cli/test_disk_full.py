"""A full disk (ENOSPC) at the command line (design §7: one clear line naming the fix, exit 1,
nothing lost or half-written; exit 3 "this is a bug" is for bugs only). Each folder qmd writes
is put on a real small file system (tests/support/diskfull.py: a tmpfs, filled) and the real
`qmd` runs against it: the Error line names the file being written and the file system's mount
point, the hint says to free space there (`df -h FOLDER`)."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.diskfull import fill, small_disk
from tests.support.modes import everything, one_clear_error
from tests.support.run import command, qmd_env


def qmd(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    """`qmd ARGS` (no warm server to hand it to): (exit code, stdout, stderr)."""
    proc = subprocess.run(command(*args), env=qmd_env({"QMD_SERVER": "off", **(env or {})}), cwd=cwd, capture_output=True, text=True, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


def names_the_full_disk(code: int, out: str, err: str, mount: Path, written: Path | None = None) -> None:
    """One clear error saying the disk at `mount` is full (and the file `written`), its fix `df -h`."""
    line = one_clear_error(code, out, err, "df -h ")
    assert "No space left on device" in line and f"the file system at {mount} is full" in line, err
    if written is not None:
        assert str(written) in line, err
    assert f"free space on {mount}" in err.splitlines()[1], err


def crash_logs(home: Path) -> list[Path]:
    return sorted(home.rglob("crash-*.log"))


def test_hooks_install_into_a_repository_on_a_full_disk_is_one_line(isolated_home: Path, tmp_path: Path) -> None:
    """`qmd hooks install REPO` with 0 bytes free crashed with exit 3 (OSError 28 from
    fileio.write_bytes, no file named): now the hook it was writing and the full disk."""
    repo = tmp_path / "repo"
    with small_disk(repo, 2):
        subprocess.run(["git", "init", "-q", str(repo)], check=True)
        fill(repo)
        before = everything(repo)
        code, out, err = qmd("hooks", "install", str(repo), cwd=isolated_home)
        names_the_full_disk(code, out, err, repo)
        assert f"cannot write {repo / '.git' / 'hooks'}" in err, err
        assert everything(repo) == before  # no hook half-written, no stray temp file
    assert not crash_logs(isolated_home)


@pytest.mark.parametrize(
    ("args", "written"),
    [(("guard", "refresh"), "guard/folders.json"), (("updater", "run"), "updater.lock.json")],
    ids=["guard-refresh", "updater-run"],
)
def test_a_state_folder_on_a_full_disk_is_one_line(isolated_home: Path, notes: Path, args: tuple[str, ...], written: str) -> None:
    """`qmd guard refresh` and `qmd updater run` with the state folder's disk full crashed with
    exit 3 (write_json/write_bytes), leaving empty crash logs on that disk."""
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    assert code == 0, err
    state = isolated_home / ".local" / "state" / "qmd"
    with small_disk(state, 1):
        fill(state)
        before = everything(state)
        code, out, err = qmd(*args, cwd=isolated_home)
        names_the_full_disk(code, out, err, state, state / written)
        after = everything(state)
        for empty in ("updater.lock", "logs/updater.log"):  # the updater's lock file (empty by design) and its log, opened before it could say anything
            assert after.pop(empty, b"") == b""
        assert after == before, sorted(set(after) ^ set(before))  # nothing half-written, no empty crash log
    assert not crash_logs(isolated_home)


def test_context_add_on_a_full_config_disk_names_the_disk_not_the_folder(isolated_home: Path, notes: Path) -> None:
    """Exit 1 with the config intact already, but the hint said "check that … is a folder you
    can write in (or set QMD_CONFIG_DIR)": the fix is room on the disk."""
    config = isolated_home / ".config"
    with small_disk(config, 1):
        code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
        assert code == 0, err
        fill(config)
        before = everything(config)
        code, out, err = qmd("context", "add", "qmd://notes/", "deploy runbooks", cwd=isolated_home)
        names_the_full_disk(code, out, err, config, config / "qmd" / "index.yml")
        assert err.startswith(f"Error: cannot save the config {config / 'qmd' / 'index.yml'}: No space left on device"), err
        assert everything(config) == before  # the config as it was, no stray temp file
    code, out, err = qmd("context", "list", cwd=isolated_home)
    assert "deploy runbooks" not in out


def test_a_crash_log_the_full_disk_cannot_hold_is_not_left_empty(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]) -> None:
    """A bug met on a full disk left a 0-byte `logs/crash-*.log` (created, never written):
    now no file, and the traceback goes to the terminal instead."""
    from qmd.cli.boundary import guarded

    state = tmp_path / "state"
    monkeypatch.setenv("QMD_STATE_DIR", str(state))
    with small_disk(state, 1):
        (state / "logs").mkdir()
        fill(state)

        def bug() -> int:
            raise RuntimeError("a bug")

        assert guarded(bug) == 3
        err = capsys.readouterr().err
        assert "Unexpected error: RuntimeError: a bug" in err and "could not write a crash log" in err and "Traceback" in err, err
        assert list((state / "logs").iterdir()) == []
