"""A damaged index file is never read as an empty or healthy one, and never crashes.

Each damage is made for real on a built, embedded index (bytes overwritten, the file cut
short or replaced), then every command that reads or writes the index runs as a real `qmd`
subprocess: exit 1, one `Error:` line naming the file as damaged, one `hint:` line naming
`qmd doctor --fix`. Fault injection only writes bytes, so it works as root too.
"""

from __future__ import annotations

import os
import random
import subprocess
import tempfile
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import qmd
from tests.support.run import run_qmd

PAGE = 4096


def _root_page(data: bytes, table: str) -> int:
    """The root page number of `table` in a sound index file's bytes."""
    with tempfile.TemporaryDirectory() as folder:
        copy = Path(folder) / "copy.sqlite"
        copy.write_bytes(data)
        conn = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
        rows = conn.execute("SELECT rootpage FROM sqlite_master WHERE name = ?", (table,)).fetchall()
        conn.close()
    return int(rows[0][0])


def _zero(data: bytes) -> bytes:
    return b""


def _truncated(data: bytes) -> bytes:
    return data[: len(data) - 3 * PAGE]  # the tail pages are gone; the header still counts them


def _btree_page(data: bytes) -> bytes:
    """Random bytes over the documents table's b-tree page (every command reads it)."""
    page = _root_page(data, "documents")
    noise = random.Random(13).randbytes(PAGE)
    start = (page - 1) * PAGE
    return data[:start] + noise + data[start + PAGE :]


def _header(data: bytes) -> bytes:
    stamp = b"not a database at all, sorry" * 4
    return stamp + data[len(stamp) :]


def _text(data: bytes) -> bytes:
    return b"# my shopping list\n\n- milk\n- bread\n"


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "0-byte file": _zero,
    "truncated file": _truncated,
    "random bytes in a b-tree page": _btree_page,
    "overwritten header": _header,
    "a text file in its place": _text,
}

COMMANDS: list[tuple[str, ...]] = [
    ("search", "rollback"),
    ("get", "notes/note1.md"),
    ("multi-get", "notes/*.md"),
    ("status",),
    ("vsearch", "rollback"),
    ("query", "rollback"),
    ("update",),
    ("embed",),
]


@pytest.fixture
def built(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> tuple[Path, bytes]:
    """A built and embedded default index, checkpointed into its one file: (path, its sound bytes)."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(6):
        (notes / f"note{i}.md").write_text(f"# Note {i}\n\nThe load balancer rollback step {i}.\n")
    for args in (("collection", "add", str(notes), "--name", "notes"), ("embed",), ("cleanup",)):
        proc = run_qmd(*args)
        assert proc.returncode == 0, proc.stderr
    path = qmd.resolve_index(None).index_path
    for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        side.unlink(missing_ok=True)
    return path, path.read_bytes()


def _damage(path: Path, data: bytes, kind: str) -> bytes:
    damaged = DAMAGE[kind](data)
    for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        side.unlink(missing_ok=True)
    path.write_bytes(damaged)
    return damaged


@pytest.mark.slow
@pytest.mark.parametrize("kind", list(DAMAGE))
def test_every_command_says_the_index_is_damaged_and_names_doctor_fix(built: tuple[Path, bytes], kind: str) -> None:
    path, data = built
    for command in COMMANDS:
        damaged = _damage(path, data, kind)
        proc = run_qmd(*command)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if line.startswith("Error:")]
        hints = [line for line in lines if line.startswith("hint:")]
        where = f"{kind} / qmd {' '.join(command)}: exit {proc.returncode}\n{proc.stdout}{proc.stderr}"
        assert proc.returncode == 1, where
        assert len(errors) == 1 and len(hints) == 1, where
        assert "damaged" in errors[0] and str(path) in errors[0], where
        assert "qmd doctor --fix" in hints[0], where
        assert "No results found" not in proc.stdout, where
        assert path.read_bytes() == damaged, f"{where}\nthe damaged file was written to"


@pytest.mark.parametrize("kind", ["0-byte file", "truncated file", "overwritten header", "a text file in its place"])
def test_the_backend_raises_index_damaged_not_an_apsw_error(built: tuple[Path, bytes], kind: str) -> None:
    path, data = built
    _damage(path, data, kind)
    with qmd.open_index() as store:
        with pytest.raises(qmd.IndexDamagedError) as caught:
            store.search("rollback")
    assert str(path) in caught.value.message and caught.value.hint and "qmd doctor --fix" in caught.value.hint
    if kind == "0-byte file":
        assert path.stat().st_size == 0  # no tables were created in it


def test_a_corrupt_page_read_mid_query_is_index_damaged(built: tuple[Path, bytes]) -> None:
    """The open succeeds (header and schema are sound); the error comes from a later read."""
    path, data = built
    _damage(path, data, "random bytes in a b-tree page")
    with qmd.open_index() as store:
        with pytest.raises(qmd.IndexDamagedError) as caught:
            store.get("notes/note1.md")
    assert "damaged" in caught.value.message and not isinstance(caught.value.__cause__, qmd.QmdError)


@pytest.mark.parametrize("kind", list(DAMAGE))
def test_inspect_quick_sees_the_damage(built: tuple[Path, bytes], kind: str) -> None:
    path, data = built
    _damage(path, data, kind)
    with qmd.open_index() as store:
        found = store.check(quick=True)
    assert found.corrupted, found


def test_a_sound_index_is_not_flagged(built: tuple[Path, bytes]) -> None:
    path, data = built
    with qmd.open_index() as store:
        assert not store.check(quick=True).corrupted
        assert not store.check().corrupted
        assert store.search("rollback")
    assert run_qmd("search", "rollback").returncode == 0


def test_a_folder_in_place_of_the_index_names_the_folder_not_a_rebuild(built: tuple[Path, bytes]) -> None:
    path, _ = built
    path.unlink()
    path.mkdir()
    proc = run_qmd("search", "rollback")
    assert proc.returncode == 1 and f"Error: the index path {path} is a folder" in proc.stderr and "move the folder aside" in proc.stderr, proc.stderr


def test_a_fifo_in_place_of_the_index_is_one_line_not_a_hang(built: tuple[Path, bytes]) -> None:
    """A FIFO at the index path (red team): SQLite's open and the header's read both waited
    forever for a writer, so `qmd search` and `qmd doctor` hung. Now: one line, exit 1."""
    path, _ = built
    path.unlink()
    os.mkfifo(path)
    proc = run_qmd("search", "rollback", timeout=60)
    assert proc.returncode == 1 and f"Error: the index path {path} is a pipe, a device or a socket" in proc.stderr and "move it aside" in proc.stderr, proc.stderr
    doctor = run_qmd("doctor", "--quick", timeout=60)
    assert doctor.returncode != 0 and "pipe" in doctor.stdout + doctor.stderr, doctor.stdout + doctor.stderr


TAMPERED = {
    "a view in place of a table": "DROP TABLE file_issues; CREATE VIEW file_issues AS SELECT 1 AS x",
    "a table dropped": "DROP TABLE documents",
    "a table of other columns": "DROP TABLE collection_state; CREATE TABLE collection_state (x)",
    "a trigger refusing writes": "CREATE TRIGGER t BEFORE INSERT ON documents BEGIN SELECT RAISE(ABORT, 'x'); END",
    "a view of its own": "CREATE VIEW peek AS SELECT path FROM documents",
}


@pytest.mark.parametrize("kind", list(TAMPERED))
@pytest.mark.slow
def test_tables_that_are_not_qmd_s_are_a_damaged_index_not_a_bug(tmp_path: Path, kind: str) -> None:
    """A shipped or edited file whose tables qmd's migrations did not make (a cloned
    repository's `.qmd/index.sqlite`): one line naming it damaged (exit 1), and doctor fails
    that index alone, every other check still reported."""
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "note1.md").write_text("# Note\n\nrollback words\n")
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    path = qmd.resolve_index(None).index_path
    conn = apsw.Connection(str(path))
    conn.execute(TAMPERED[kind])
    conn.close()
    for command in (("status",), ("update",), ("search", "rollback") if "documents" in TAMPERED[kind] else ("status", "--json")):
        proc = run_qmd(*command)
        assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and "damaged" in proc.stderr and "Traceback" not in proc.stderr, (command, proc.stderr)
    import json

    proc = run_qmd("doctor", "--json", "--quick")
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    assert checks["index [index]"]["status"] == "fail" and ("damaged" in checks["index [index]"]["detail"] or "corrupted" in checks["index [index]"]["detail"]), checks["index [index]"]
    assert "check itself failed" not in proc.stdout and len(checks) > 5
