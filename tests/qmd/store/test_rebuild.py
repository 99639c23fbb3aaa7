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
