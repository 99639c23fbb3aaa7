"""Late chunking (issue 29, QMD_LATE_CHUNKS=1; Günther et al., arXiv 2409.04669): each chunk's
vector is the mean of its tokens' outputs in one pass over the document, on real llama.cpp
with a tiny BERT; the fingerprint changes with the switch, so vectors are never mixed."""

from __future__ import annotations

import struct
from pathlib import Path

import apsw
import numpy as np
import pytest

import qmd
from qmd.backends.sqlite.vectors import ensure_vec
from qmd.index import embedding
from qmd.index.late_chunks import late_vectors, plan_windows
from qmd.llm.embedder import Embedder


@pytest.fixture()
def embedder(tiny_models: dict[str, Path]) -> Embedder:
    e = Embedder(tiny_models["embed"], n_threads=1)
    yield e  # type: ignore[misc]
    e.close()


def _unit(v: np.ndarray) -> np.ndarray:
    return v / np.linalg.norm(v)


def test_token_outputs_pool_to_the_models_own_vector(embedder: Embedder) -> None:
    text = "restore the database backup after a bad deploy"
    rows = np.array(embedder.token_vectors(embedder.tokenize(text, add_bos=True)))
    assert rows.shape[0] == len(embedder.tokenize(text, add_bos=True))
    assert float(_unit(rows.mean(axis=0)) @ np.array(embedder.embed([text])[0])) > 0.9999  # mean pooling, as embed() pools


def test_a_short_documents_chunks_are_the_whole_pass_pooled_over_their_spans(embedder: Embedder) -> None:
    text = "deploy the green stack first. then flip the load balancer. restore the backup if the cache is cold."
    cut = text.index(" then")
    head = "Runbook\n\n"
    got = late_vectors(embedder, head, text, [(0, cut), (cut, len(text)), (0, len(text))])
    lead, tail = embedder.special_tokens()
    first, second = embedder.tokens(text[:cut]), embedder.tokens(text[cut:])
    head_ids = embedder.tokens(head)
    rows = np.array(embedder.token_vectors(lead + head_ids + first + second + tail))
    at = len(lead) + len(head_ids)
    want = [rows[at : at + len(first)], rows[at + len(first) : at + len(first) + len(second)], rows[at : at + len(first) + len(second)]]
    for g, w in zip(got, want):
        assert np.allclose(np.array(g), _unit(w.mean(axis=0)), atol=1e-5)
    alone = np.array(embedder.embed([embedder.family.document("Runbook", text[cut:])])[0])
    assert float(np.array(got[1]) @ alone) < 0.9999  # the document around the chunk changed its vector


def test_windows_hold_every_span_whole_with_the_most_context() -> None:
    spans = [(0, 30), (25, 60), (55, 90), (85, 120), (118, 150)]
    windows, choice = plan_windows(150, 64, spans)
    assert all(e - s <= 64 for s, e in windows)
    for (s, e), w in zip(spans, choice):
        ws, we = windows[w]
        assert ws <= s and e <= we
    assert plan_windows(50, 64, spans[:2]) == ([(0, 50)], [0, 0])


def test_a_document_longer_than_the_context_is_read_in_windows(embedder: Embedder) -> None:
    words = "deploy rollback blue green load balancer database backup restore cache redis kafka".split()
    text = "\n\n".join(" ".join(words[(i + j) % len(words)] for j in range(30)) for i in range(12))
    doc = embedding.prepare(embedder, text, "Long", "h")
    spans = [(s, e) for _, s, e, _ in doc.starts]
    assert len(spans) > 2 and embedder.count_tokens(text) > embedder.n_ctx
    vectors = late_vectors(embedder, embedder.family.document("Long", ""), text, spans)
    assert len(vectors) == len(spans) and all(abs(np.linalg.norm(v) - 1) < 1e-6 for v in vectors)


def _stored(index: Path) -> dict[tuple[str, int], np.ndarray]:
    conn = apsw.Connection(str(index))
    ensure_vec(conn)
    out = {}
    for model_id in [r[0] for r in conn.execute("SELECT id FROM embed_models")]:
        sql = f"SELECT c.hash, c.seq, v.embedding FROM chunks c JOIN vec_{model_id} v ON v.chunk_id = c.id"
        for h, seq, blob in conn.execute(sql):
            out[(h, seq)] = np.array(struct.unpack(f"<{len(blob) // 4}f", blob))
    conn.close()
    return out


@pytest.mark.usefixtures("index_backend")
@pytest.mark.sqlite_only("reads the vectors out of the SQLite file")
def test_the_switch_embeds_late_chunks_under_its_own_fingerprint(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.delenv("QMD_LATE_CHUNKS", raising=False)
    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Deploy\n\n" + "\n\n".join("deploy the green stack then flip the load balancer " * 3 for _ in range(6)) + "\n")
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(notes, name="notes")
    emb = Embedder(tiny_models["embed"], n_threads=1)
    before = embedding.fingerprint(emb)
    assert store.embed().chunks > 1
    monkeypatch.setenv("QMD_LATE_CHUNKS", "1")
    assert embedding.fingerprint(emb) != before
    late_store = qmd.Store(store.index_path, store.config_path)
    report = late_store.embed()
    assert report.documents == 1  # a new vector space: embedded again, not mixed with the first
    stored = _stored(store.index_path)
    text = (notes / "a.md").read_text()
    doc = embedding.prepare(emb, text, "Deploy", "h")
    want = late_vectors(emb, emb.family.document(doc.title, ""), text, [(s, e) for _, s, e, _ in doc.starts])
    late = [v for v in stored.values() if any(np.allclose(v, np.array(w), atol=1e-5) for w in want)]
    assert len(late) == len(want)
    assert late_store.vsearch("flip the load balancer", limit=1).hits
    emb.close()
    late_store.close()
    store.close()


def test_the_embedding_module_loads_no_numpy() -> None:
    """qmd.index.embedding (every fingerprint: status, doctor, vsearch's check) imports late
    chunking's module; numpy loads only when a document is late-chunked."""
    import subprocess
    import sys

    code = "import sys, qmd.index.embedding, qmd.index.late_chunks; print('numpy' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False", out.stdout + out.stderr
