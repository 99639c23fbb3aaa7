"""`qmd rebuild`: a sound index keeps its vectors and is kept as a backup; a broken one is
kept aside as broken; no lock or temporary file is left behind. Real files, real llama.cpp."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmd
from tests.support.run import run_qmd

pytestmark = pytest.mark.usefixtures("index_backend")  # each test on SQLite and on PostgreSQL


def _kept(folder: Path, label: str) -> list[Path]:
    """The old index files kept beside the new one (their WAL and shm sidecars aside)."""
    return [p for p in folder.glob(f"index.sqlite.{label}-*") if not p.name.endswith(("-wal", "-shm"))]


def _leftovers(folder: Path) -> list[str]:
    return sorted(p.name for p in folder.iterdir() if ".rebuild-" in p.name or (p.name.endswith(".lock") and p.name != "index.sqlite.lock"))


@pytest.mark.sqlite_only("checks the .bak/.broken files beside the SQLite index")
def test_rebuilding_a_sound_index_keeps_its_vectors(tmp_path: Path, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    assert run_qmd("embed").returncode == 0
    index = qmd.resolve_index(None).index_path
    (notes / "runbooks" / "deploy.md").write_text("# Deploy Runbook\n\nChanged after embedding: ship with canaries.\n")
    proc = run_qmd("rebuild")
    assert proc.returncode == 0, proc.stderr
    assert "Kept the vectors of 3 unchanged documents" in proc.stderr, proc.stderr
    assert "Documents without vectors need: qmd embed" in proc.stderr
    assert len(_kept(index.parent, "bak")) == 1 and not _kept(index.parent, "broken")
    assert _leftovers(index.parent) == []
    with qmd.open_index() as store:
        status = store.vector_status()
        assert status.embedded_documents == 3 and status.pending_documents == 1  # only the changed file
        assert store.vsearch("pg_restore fresh database", limit=4).hits
        assert store.check().corrupted is False
    assert run_qmd("embed").returncode == 0
    with qmd.open_index() as store:
        assert store.vector_status().pending_documents == 0


@pytest.mark.sqlite_only("checks the .bak/.broken files beside the SQLite index")
def test_rebuilding_a_corrupted_index_keeps_it_aside_as_broken(tmp_path: Path, notes: Path) -> None:
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    index = qmd.resolve_index(None).index_path
    with qmd.open_index() as store:
        store.backend.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")  # type: ignore[attr-defined]
    data = bytearray(index.read_bytes())
    page = 4096
    for offset in range(2 * page, min(len(data), 5 * page)):  # overwrite b-tree pages past the schema
        data[offset] = 0x5A
    index.write_bytes(bytes(data))
    proc = run_qmd("rebuild")
    assert proc.returncode == 0, proc.stderr
    assert len(_kept(index.parent, "broken")) == 1 and not _kept(index.parent, "bak")
    assert _leftovers(index.parent) == []
    with qmd.open_index() as store:
        assert store.document_count() == 4 and store.search("rollback")


def test_two_rebuilds_in_the_same_second_each_keep_their_own_copy(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept name has only seconds in it: the second rebuild's copy (its hard link failed on
    the name) was written over the first's hard link to the original index, so the original was
    lost while both reports named the same file; on PostgreSQL the second rebuild failed on the
    schema name. Now each keeps its own (`-2`), and the first still holds the original."""
    import time

    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: "20261204-120000" if "-" in fmt else "20261204120000")
    (notes / "added.md").write_text("# Added\n\nA note the original index never saw.\n")
    with qmd.open_index() as store:
        first = store.rebuild().kept
        (notes / "added-later.md").write_text("# Later\n\nA note only the second rebuild sees.\n")
        second = store.rebuild().kept
        assert store.document_count() == 6
    assert first and second and first != second, (first, second)
    if first.startswith("schema "):
        return  # PostgreSQL: both schemas kept, under their own names
    import apsw

    def documents(path: str) -> int:
        conn = apsw.Connection(path, flags=apsw.SQLITE_OPEN_READONLY)
        try:
            return int(conn.execute("SELECT count(*) FROM documents WHERE active").fetchall()[0][0])
        finally:
            conn.close()

    assert (documents(first), documents(second)) == (4, 5)  # the original, then the first rebuild's


@pytest.mark.sqlite_only("checks the backup files beside the SQLite index")
def test_two_backups_in_the_same_second_never_write_over_each_other(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """doctor --fix's verified backup (before a cleanup) had the same one-second name."""
    import time

    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    monkeypatch.setattr(time, "strftime", lambda fmt, *args: "20261204-120000")
    with qmd.open_index() as store:
        first = store.backup()
        (notes / "added.md").write_text("# Added\n\nA note only the second backup holds.\n")
        store.update()
        second = store.backup()
    assert first != second and first.stat().st_size and second.stat().st_size
    assert sorted(p.name for p in first.parent.glob("index.sqlite.backup-*")) == [first.name, second.name]


@pytest.mark.sqlite_only("drops a table of the SQLite file from a second connection while it is inspected")
def test_a_table_dropped_while_the_index_is_inspected_is_no_damage(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The inspection listed the tables, then read each: one dropped in between by another
    process (an embed resetting a model's vectors) was "no such table", and doctor called the
    sound index corrupted and offered to rebuild it. Its reads now share one snapshot."""
    import apsw

    from qmd.backends.sqlite import integrity

    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    index = qmd.resolve_index(None).index_path
    other = apsw.Connection(str(index))
    other.execute("CREATE TABLE scratch_vectors (id INTEGER PRIMARY KEY)")  # a table another process will drop
    real = integrity._readonly
    dropped: list[str] = []

    def readonly(path: Path) -> apsw.Connection:
        conn = real(path)

        def trace(cursor: apsw.Cursor, sql: str, bindings: object) -> bool:
            if '"scratch_vectors"' in sql and not dropped:
                other.execute("DROP TABLE scratch_vectors")
                dropped.append(sql)
            return True

        conn.exec_trace = trace
        return conn

    monkeypatch.setattr(integrity, "_readonly", readonly)
    found = integrity.inspect(index, quick=True)
    other.close()
    assert dropped, "the table was never read: the test did not race"
    assert found.error is None and not found.corrupted, found.error
