"""A full disk under the index (design §7: one clear line naming the fix, exit 1; nothing lost):
an update, a cleanup and a read on a real small tmpfs say the disk is full and leave the index
sound, and an index whose last checkpoint the full disk stopped part way (its file shorter than
its header says, the rest in its -wal) is sound, not "damaged" (doctor --fix moved it aside)."""

from __future__ import annotations

import json
import shutil
import struct
from pathlib import Path

import apsw
import pytest

from tests.support.diskfull import fill, small_disk
from tests.support.modes import one_clear_error
from tests.support.run import run_qmd


def qmd(*args: str) -> tuple[int, str, str]:
    done = run_qmd(*args, timeout=180)
    return done.returncode, done.stdout, done.stderr


def said_full(code: int, out: str, err: str) -> None:
    line = one_clear_error(code, out, err, "free space on")
    assert "is full" in line and "not damaged" in line, err
    assert "rebuild" not in err and "damaged:" not in err and "doctor --fix" not in err, err


def many_notes(folder: Path, n: int = 400) -> Path:
    folder.mkdir(parents=True)
    for i in range(n):
        words = " ".join(f"w{(i * 7 + k) % 997}" for k in range(300))
        (folder / f"n{i:04}.md").write_text(f"# note {i}\n\n{words}\n")
    return folder


@pytest.fixture
def cache_on_small_disk(isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    with small_disk(tmp_path / "disk", 12) as disk:
        monkeypatch.setenv("XDG_CACHE_HOME", str(disk / "cache"))
        monkeypatch.setenv("QMD_SERVER", "off")
        yield disk


def test_an_update_a_cleanup_and_a_read_on_a_full_disk_say_so_and_leave_the_index_sound(cache_on_small_disk: Path, tmp_path: Path) -> None:
    """update crashed with exit 3 (SQLite had rolled back; qmd's own ROLLBACK then failed and hid
    why), cleanup's VACUUM with exit 3, and a read said "disk I/O error … rebuild"."""
    disk = cache_on_small_disk
    notes = many_notes(tmp_path / "notes")
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes")
    assert code == 0, err
    for path in sorted(notes.iterdir())[:300]:
        path.write_text(path.read_text() + " ".join(f"extra{k}" for k in range(400)) + "\n")
    filler = fill(disk, leave=64 * 1024)
    code, out, err = qmd("update")
    said_full(code, out, err)
    code, out, err = qmd("cleanup")
    said_full(code, out, err)
    fill(disk)  # nothing left: not even room for the -shm of a read
    code, out, err = qmd("search", "w5", "--json")
    if code != 0:  # a read needs its -shm: on some kernels tmpfs still has a page for it
        said_full(code, out, err)
    filler.unlink()
    code, out, err = qmd("doctor", "--json", "--quick")
    index_check = [c for c in json.loads(out)["checks"] if c["name"] == "index [index]"]
    assert index_check and index_check[0]["status"] == "ok", index_check
    code, out, err = qmd("update")
    assert code == 0 and "300 updated" in err, (code, out, err)
    code, out, err = qmd("search", "extra7", "--json", "-n", "400")
    assert code == 0 and len(json.loads(out)) == 300, (code, err)


def test_an_index_whose_checkpoint_the_full_disk_stopped_is_sound_not_damaged(isolated_home: Path, notes: Path, tmp_path: Path) -> None:
    """The state a checkpoint leaves when the disk fills part way: page 1 (its page count) written
    into the file, the pages past its end only in the -wal. SQLite reads them from there; qmd
    called the file "cut short … damaged" and doctor --fix moved it aside and rebuilt it."""
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes")
    assert code == 0, err
    index = isolated_home / ".cache" / "qmd" / "index.sqlite"
    crashed = tmp_path / "crashed"
    crashed.mkdir()
    conn = apsw.Connection(str(index))
    try:
        conn.execute("PRAGMA wal_autocheckpoint = 0")
        with conn:  # committed to the -wal only: the file does not grow
            for i in range(400):
                conn.execute("INSERT INTO llm_cache (key, kind, value, created_at) VALUES (?, 'test', ?, '2026-12-04T00:00:00Z')", (f"k{i}", "x" * 4000))
        page_size = int(conn.execute("PRAGMA page_size").fetchall()[0][0])
        shutil.copyfile(index, crashed / "index.sqlite")  # what a power cut or a full disk leaves, before the checkpoint's end
        shutil.copyfile(f"{index}-wal", crashed / "index.sqlite-wal")
    finally:
        conn.close()
    wal = (crashed / "index.sqlite-wal").read_bytes()
    page1 = None
    for at in range(32, len(wal) - 24 - page_size + 1, 24 + page_size):
        number, after = struct.unpack(">II", wal[at:at + 8])
        if number == 1:
            page1 = wal[at + 24:at + 24 + page_size]  # its last committed version (a commit frame follows)
    assert page1 is not None
    with open(crashed / "index.sqlite", "r+b") as f:  # the checkpoint wrote page 1, then the disk filled
        f.write(page1)
    pages = int.from_bytes(page1[28:32], "big")
    assert (crashed / "index.sqlite").stat().st_size < pages * page_size  # cut short, by the header
    shutil.copyfile(crashed / "index.sqlite", index)
    shutil.copyfile(crashed / "index.sqlite-wal", f"{index}-wal")
    Path(f"{index}-shm").unlink(missing_ok=True)
    code, out, err = qmd("search", "rollback", "--json")
    assert code == 0 and "deploy.md" in out, (code, out, err)
    code, out, err = qmd("doctor", "--json", "--quick", "--fix")
    index_check = [c for c in json.loads(out)["checks"] if c["name"] == "index [index]"]
    assert index_check and index_check[0]["status"] == "ok", index_check
    assert not list(index.parent.glob("index.sqlite.broken-*")), list(index.parent.iterdir())
    check = apsw.Connection(str(index))
    try:
        assert check.execute("PRAGMA quick_check").fetchall() == [("ok",)]
        assert check.execute("SELECT count(*) FROM llm_cache WHERE kind = 'test'").fetchall() == [(400,)]
    finally:
        check.close()


def test_an_index_on_a_read_only_mount_names_the_remount_for_reads_too(cache_on_small_disk: Path, notes: Path) -> None:
    """A read makes the -shm beside the index: on a read-only mount search and status said
    "the index folder is not writable by this user" with a chmod, which no chmod can fix."""
    import subprocess

    code, out, err = qmd("collection", "add", str(notes), "--name", "notes")
    assert code == 0, err
    subprocess.run(["mount", "-o", "remount,ro", str(cache_on_small_disk)], check=True)
    try:
        for args in (("search", "rollback"), ("status",), ("update",)):
            code, out, err = qmd(*args)
            line = one_clear_error(code, out, err, f"mount -o remount,rw {cache_on_small_disk}")
            assert "read-only file system" in line and "chmod" not in err, (args, err)
    finally:
        subprocess.run(["mount", "-o", "remount,rw", str(cache_on_small_disk)], check=True)
    code, out, err = qmd("search", "rollback", "--json")
    assert code == 0 and "deploy.md" in out, (code, out, err)
