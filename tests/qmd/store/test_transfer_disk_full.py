"""`qmd export` / `qmd import` on a full disk (design §7: one clear line naming the fix, exit 1,
nothing lost or half-written), on a real small file system (tests/support/diskfull.py).

Export: closing the temporary file after the disk filled flushed it again and raised a second
ENOSPC that hid the first (exit 3). Import: the config was saved just before the index's COMMIT;
when the COMMIT found the disk full, putting the config back needed room the disk no longer
had, and `imp.yml` named a collection the index did not hold."""

from __future__ import annotations

import subprocess
from collections.abc import Mapping
from pathlib import Path

import pytest

from tests.support.diskfull import fill, small_disk
from tests.support.modes import everything, one_clear_error
from tests.support.run import command, qmd_env


def qmd(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> tuple[int, str, str]:
    proc = subprocess.run(command(*args), env=qmd_env({"QMD_SERVER": "off", **(env or {})}), cwd=cwd, capture_output=True, text=True, timeout=300)
    return proc.returncode, proc.stdout, proc.stderr


def ok(*args: str, cwd: Path, env: Mapping[str, str] | None = None) -> str:
    code, out, err = qmd(*args, cwd=cwd, env=env)
    assert code == 0, (args, out, err)
    return out


def test_an_export_onto_a_full_disk_is_one_line_and_leaves_the_earlier_export(isolated_home: Path, notes: Path, tmp_path: Path) -> None:
    ok("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    out = tmp_path / "out"
    with small_disk(out, 1):
        target = out / "notes.qmd.gz"
        target.write_bytes(b"")  # an empty file may be replaced: it must stay as it is
        fill(out)
        before = everything(out)
        code, stdout, err = qmd("export", str(target), cwd=isolated_home)
        line = one_clear_error(code, stdout, err, f"df -h {out}")
        assert line == f"Error: cannot export to {target}: No space left on device (the file system at {out} is full); nothing was written", err
        assert f"free space on {out}" in err
        assert everything(out) == before  # no temporary file, the old one untouched
    assert not sorted(isolated_home.rglob("crash-*.log"))


def _bundles(tmp_path: Path, home: Path) -> tuple[Path, Path, Path]:
    """(a small export of collection `a`, a larger one of `notes` (300 notes), the notes' folder)."""
    notes, small = tmp_path / "many", tmp_path / "a"
    notes.mkdir()
    small.mkdir()
    for i in range(300):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\n" + f"rollback words and more words {i} " * 60 + "\n")
    (small / "a.md").write_text("# A\n\nalpha\n")
    ok("--index", "src", "collection", "add", str(notes), "--name", "notes", cwd=home)
    ok("--index", "src", "collection", "add", str(small), "--name", "a", cwd=home)
    ok("--index", "src", "export", str(tmp_path / "notes.qmdx"), "-c", "notes", cwd=home)
    ok("--index", "src", "export", str(tmp_path / "a.qmdx"), "-c", "a", cwd=home)
    return tmp_path / "a.qmdx", tmp_path / "notes.qmdx", notes


@pytest.mark.parametrize("leave", [64 * 1024, 200 * 1024])
def test_an_import_whose_commit_fills_the_disk_changes_neither_config_nor_index(isolated_home: Path, tmp_path: Path, leave: int) -> None:
    """The config and the index on one disk with room for the config's save but not for the
    index's COMMIT: the import rolls back and the config is as it was (it said `notes` too)."""
    small, large, folder = _bundles(tmp_path, isolated_home)
    disk = tmp_path / "disk"
    with small_disk(disk, 4):
        env = {"XDG_CONFIG_HOME": str(disk / "config"), "XDG_CACHE_HOME": str(disk / "cache")}
        ok("--index", "imp", "import", str(small), cwd=isolated_home, env=env)
        listed = ok("--index", "imp", "ls", cwd=isolated_home, env=env)
        assert "qmd://a/" in listed
        fill(disk, leave)
        config = everything(disk / "config")
        code, out, err = qmd("--index", "imp", "import", str(large), "-c", f"notes={folder}", cwd=isolated_home, env=env)
        one_clear_error(code, out, err, f"free space on {disk}")
        assert "full" in err.splitlines()[0] and str(disk) in err.splitlines()[0], err
        assert everything(disk / "config") == config  # imp.yml as it was (no `notes`), no stray kept copy or temp file
        (disk / ".filler").unlink()
        assert ok("--index", "imp", "ls", cwd=isolated_home, env=env) == listed  # the index as it was
        code, out, err = qmd("--index", "imp", "search", "rollback", "--json", cwd=isolated_home, env=env)
        assert code in (0, 1) and "qmd://notes/" not in out, (out, err)
        ok("--index", "imp", "import", str(large), "-c", f"notes={folder}", cwd=isolated_home, env=env)  # with room again it goes in
        assert "qmd://notes/" in ok("--index", "imp", "ls", cwd=isolated_home, env=env)
