"""embed / vsearch with real llama.cpp on tiny models (and MiniLM for the semantic case)."""

from __future__ import annotations

import os
import shutil
import signal
import struct
import subprocess
import time
from pathlib import Path

import apsw
import numpy as np
import pytest

import qmd
from qmd.backends.sqlite.vectors import ensure_vec
from tests.support.paths import REPO
from tests.support.run import command, qmd_env, run_qmd

pytestmark = pytest.mark.usefixtures("index_backend")  # each test on SQLite and on PostgreSQL


def _notes(root: Path, n: int, seed: int = 0) -> Path:
    rng = np.random.default_rng(seed)
    words = "deploy rollback blue green load balancer database backup restore cache redis kafka lag tls cert dns page".split()
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        body = "\n\n".join(" ".join(rng.choice(words, 40)) for _ in range(int(rng.integers(1, 4))))
        (root / f"n{i:04d}.md").write_text(f"# Note {i}\n\n{body}\n")
    return root


def _store(tmp_path: Path, model: Path, monkeypatch: pytest.MonkeyPatch) -> qmd.Store:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(model))
    return qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")


def _vectors(index: Path) -> dict[tuple[str, int], tuple[int, int, np.ndarray]]:
    """(content hash, chunk seq) → (start, end, vector) for every stored chunk."""
    conn = apsw.Connection(str(index))
    ensure_vec(conn)
    out = {}
    for model_id in [r[0] for r in conn.execute("SELECT id FROM embed_models")]:
        sql = f"SELECT c.hash, c.seq, c.start, c.end, v.embedding FROM chunks c JOIN vec_{model_id} v ON v.chunk_id = c.id"
        for h, seq, start, end, blob in conn.execute(sql):
            assert (h, seq) not in out, "duplicate chunk"
            out[(h, seq)] = (start, end, np.array(struct.unpack(f"<{len(blob) // 4}f", blob)))
    conn.close()
    return out


@pytest.mark.sqlite_only("reads the vectors out of the SQLite file")
def test_embed_is_incremental_and_vsearch_finds_documents(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    root = _notes(tmp_path / "notes", 30)
    (root / "long.md").write_text("# Long\n\n" + "\n\n".join(f"## Part {i}\n\n" + "restore the database backup " * 12 for i in range(8)))
    store.add_collection(root, name="notes")
    with pytest.raises(qmd.QmdError, match="qmd embed"):
        store.vsearch("rollback")
    assert store.vector_status().pending_documents == 31
    first = store.embed()
    assert first.documents == 31 and first.chunks > 31  # long.md has several chunks
    vectors = _vectors(store.index_path)
    assert all(end - start > 0 for start, end, _ in vectors.values())
    assert all(abs(np.linalg.norm(v) - 1) < 1e-4 for _, _, v in vectors.values())
    again = store.embed()
    assert (again.documents, again.chunks, again.already) == (0, 0, 31)
    (root / "n0001.md").write_text("# Changed\n\nkafka lag kafka lag\n")
    store.update()
    third = store.embed()
    assert (third.documents, third.chunks) == (1, 1)
    result = store.vsearch("restore the database backup", limit=5)
    assert len(result.hits) == 5 and result.pending == 0
    assert len({h.path for h in result.hits}) == 5  # one hit per document
    assert all(h.match == "vector" and 0 <= h.score <= 1 for h in result.hits)
    assert result.hits == sorted(result.hits, key=lambda h: -h.score)
    status = store.vector_status()
    assert (status.embedded_documents, status.pending_documents, status.model) == (31, 0, "tiny-embed")


@pytest.mark.sqlite_only("reads the vectors out of the SQLite file")
def test_collection_filter_equals_a_brute_force_scan(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    a = _notes(tmp_path / "a", 40, seed=1)
    b = _notes(tmp_path / "b", 40, seed=2)
    for i in range(5):  # identical content in both collections: vectors are shared by hash
        shutil.copy(a / f"n{i:04d}.md", b / f"shared{i}.md")
    store.add_collection(a, name="a")
    store.add_collection(b, name="b")
    store.embed()
    query = "rollback blue green load balancer"
    qvec = np.array(store.embedder().embed_query(query))
    vectors = _vectors(store.index_path)
    conn = store.backend.connection()
    for coll in ("a", "b"):
        expected: dict[str, float] = {}
        for doc_id, path, h in conn.execute("SELECT id, path, hash FROM documents WHERE active = 1 AND collection = ?", (coll,)):
            best = max(float(qvec @ v) for (hh, _), (_, _, v) in vectors.items() if hh == h)
            expected[path] = best
        got = store.vsearch(query, limit=None, collections=[coll]).hits
        assert [h.collection for h in got] == [coll] * len(expected)
        assert {h.path for h in got} == set(expected)
        for hit in got:
            assert hit.score == pytest.approx(max(0.0, expected[hit.path]), abs=1e-4)
        order = sorted(expected, key=lambda p: -expected[p])
        assert [h.path for h in got][:10] == order[:10]
        assert [h.path for h in store.vsearch(query, limit=7, collections=[coll]).hits] == [h.path for h in got[:7]]
    everything = store.vsearch(query, limit=None).hits
    assert len(everything) == 85


def test_model_switch_never_mixes_vectors(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    store.add_collection(_notes(tmp_path / "a", 10, seed=1), name="a")
    store.add_collection(_notes(tmp_path / "b", 10, seed=2), name="b")
    store.embed()
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed_b"]))
    switched = qmd.Store(store.index_path, store.config_path)
    with pytest.raises(qmd.QmdError, match="no vectors yet for the embed model tiny-embed_b"):
        switched.vsearch("rollback")
    assert switched.vector_status().pending_documents == 20
    switched.embed(collections=["a"])
    result = switched.vsearch("rollback", limit=None)
    assert {h.collection for h in result.hits} == {"a"}  # only what the new model embedded
    assert result.pending == 10 and result.model == "tiny-embed_b"
    # The old model's vectors are still there, untouched, for switching back.
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    back = qmd.Store(store.index_path, store.config_path)
    assert len(back.vsearch("rollback", limit=None).hits) == 20


def test_embed_false_collection_is_skipped(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    store.add_collection(_notes(tmp_path / "a", 5, seed=1), name="a")
    store.add_collection(_notes(tmp_path / "logs", 5, seed=2), name="logs")
    coll = store.config.collections()["logs"]
    coll.embed = False
    store.config.set_collection(coll)
    store.config.save()
    report = store.embed()
    assert report.documents == 5 and report.skipped_collections == ["logs"]
    assert {h.collection for h in store.vsearch("rollback", limit=None).hits} == {"a"}


@pytest.mark.sqlite_only("reads the vectors out of the SQLite file")
def test_cleanup_drops_orphaned_vectors(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    root = _notes(tmp_path / "a", 6)
    store.add_collection(root, name="a")
    store.embed()
    before = len(_vectors(store.index_path))
    (root / "n0000.md").unlink()
    store.update()
    store.cleanup()
    after = _vectors(store.index_path)
    assert len(after) < before
    conn = store.backend.connection()
    live = {r[0] for r in conn.execute("SELECT hash FROM documents")}
    assert {h for h, _ in after} == live


@pytest.mark.slow
@pytest.mark.sqlite_only("reads the vectors out of the SQLite file")
def test_kill_during_embed_then_rerun_equals_a_clean_run(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    root = _notes(tmp_path / "notes", 500, seed=3)  # about 30 batches of 32 chunks: killed after the 7th
    env = qmd_env({"QMD_EMBED_MODEL": str(tiny_models["embed"]), "QMD_THREADS": "1"})
    crash_index = tmp_path / "crash.sqlite"
    clean_index = tmp_path / "clean.sqlite"

    def qmd_cmd(index: Path, *args: str) -> subprocess.CompletedProcess[str]:
        return run_qmd(*args, env={**env, "INDEX_PATH": str(index)})

    assert qmd_cmd(crash_index, "collection", "add", str(root), "--name", "notes").returncode == 0
    proc = subprocess.Popen(command("embed"), env={**env, "INDEX_PATH": str(crash_index)}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, cwd=REPO)
    deadline = time.monotonic() + 120
    done = 0
    while time.monotonic() < deadline and proc.poll() is None:
        try:
            conn = apsw.Connection(str(crash_index), flags=apsw.SQLITE_OPEN_READONLY)
            done = conn.execute("SELECT count(*) FROM embedded").fetchall()[0][0]
            conn.close()
        except apsw.Error:
            done = 0
        if done >= 100:
            os.kill(proc.pid, signal.SIGKILL)
            break
        time.sleep(0.02)
    proc.wait()
    assert proc.returncode == -signal.SIGKILL, "embed finished before it could be killed; make the corpus bigger"
    assert 100 <= done < 500
    rerun = qmd_cmd(crash_index, "embed")
    assert rerun.returncode == 0, rerun.stderr
    assert "were already embedded" in rerun.stderr
    # A clean run: the same config (collection), another index file.
    assert qmd_cmd(clean_index, "update").returncode == 0
    assert qmd_cmd(clean_index, "embed").returncode == 0
    crashed, clean = _vectors(crash_index), _vectors(clean_index)
    assert set(crashed) == set(clean) and len(clean) >= 500
    for key, (start, end, vector) in clean.items():
        assert crashed[key][:2] == (start, end)
        assert np.allclose(crashed[key][2], vector, atol=1e-5)
    conn = apsw.Connection(str(crash_index))
    ensure_vec(conn)
    model_id = conn.execute("SELECT id FROM embed_models").fetchall()[0][0]
    n_chunks = conn.execute("SELECT count(*) FROM chunks").fetchall()[0][0]
    n_vectors = conn.execute(f"SELECT count(*) FROM vec_{model_id}").fetchall()[0][0]
    assert n_chunks == n_vectors == len(clean)  # no orphans, no duplicates


@pytest.mark.slow
def test_semantic_search_finds_the_rollback_runbook(tmp_path: Path, minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The seed's demo: no shared words between the question and the runbook's answer."""
    notes = REPO / "examples" / "notes"
    runbook = (notes / "runbooks" / "blue-green-deploy.md").read_text()
    assert "flip the load balancer back to blue" in runbook
    import re

    assert not re.search(r"\b(how|do|we|undo|a|bad|release)\b", runbook, re.I)
    store = _store(tmp_path, minilm_gguf, monkeypatch)
    store.add_collection(notes, name="notes")
    store.embed()
    hits = store.vsearch("how do we undo a bad release?", limit=3).hits
    assert hits[0].path == "runbooks/blue-green-deploy.md", [(h.path, round(h.score, 3)) for h in hits]
    assert store.search("how do we undo a bad release?", limit=3)[0].path != "runbooks/blue-green-deploy.md"  # BM25 cannot


def test_pending_count_follows_other_writers(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store = _store(tmp_path, tiny_models["embed"], monkeypatch)
    root = _notes(tmp_path / "a", 4)
    store.add_collection(root, name="a")
    store.embed()
    assert store.vsearch("rollback").pending == 0
    (root / "new.md").write_text("# New\n\nkafka lag\n")
    other = qmd.Store(store.index_path, store.config_path)  # another connection writes
    other.update()
    assert store.vsearch("rollback").pending == 1  # the cached count saw the other commit
    store.embed()
    assert store.vsearch("rollback").pending == 0  # and this Store's own write
