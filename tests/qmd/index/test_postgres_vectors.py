"""pgvector on a real PostgreSQL: a bulk embed builds HNSW once at its end (searches exact
meanwhile), an interrupted or killed one leaves an index behind or gets it rebuilt, and
HNSW searches under a collection scope are never short and agree with exact search."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import qmd
from qmd.backends.base import ChunkVector, IndexBackend, VectorModel

DIMS = 16


@pytest.fixture
def pg(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    from qmd.backends.postgres import vectors
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    monkeypatch.setenv("QMD_DATABASE_URL", url)
    monkeypatch.setattr(vectors, "EXACT_CHUNKS", 20)  # so that HNSW answers on a small set
    monkeypatch.setattr(vectors, "SCOPED_EXACT_CHUNKS", 20)
    monkeypatch.setattr(vectors, "BULK_DOCUMENTS", 50)
    for name, n in (("big", 270), ("small", 30)):
        root = tmp_path / name
        root.mkdir()
        for i in range(n):
            (root / f"{name}-{i}.md").write_text(f"# {name} {i}\n\nnote number {i} of {name}\n")
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(tmp_path / "big", name="big")
    store.add_collection(tmp_path / "small", name="small")
    yield store
    store.close()
    postgres.drop_schema(postgres_url, schema)


def _vectors(backend: IndexBackend) -> tuple[VectorModel, list[str], np.ndarray]:
    hashes = sorted({row.hash for row in backend.find()})
    rng = np.random.default_rng(5)
    vecs = rng.standard_normal((len(hashes), DIMS)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    return backend.ensure_vector_model("test-synthetic", "synthetic", DIMS), hashes, vecs


def _write(backend: IndexBackend, model: VectorModel, hashes: list[str], vecs: np.ndarray) -> None:
    for i in range(0, len(hashes), 40):
        backend.write_vectors(model, [(h, [ChunkVector(h, 0, 0, 5, 3, vecs[j].tolist())]) for j, h in enumerate(hashes[i:i + 40], start=i)])
    backend.build_vector_index(model)  # what `qmd embed` runs after its writes: HNSW's recall measured, so auto searches take it


def _exact(backend: IndexBackend, hashes: list[str], vecs: np.ndarray, q: np.ndarray, k: int, scope: str | None = None) -> list[str]:
    keep = {r.hash for r in backend.find(collection=scope)} if scope else set(hashes)
    order = np.argsort(-(vecs @ q))
    return [hashes[i] for i in order if hashes[i] in keep][:k]


def _hashes(backend: IndexBackend, found: list[tuple[int, float, tuple[int, int]]]) -> list[str]:
    rows = backend.documents([i for i, _, _ in found])
    return [rows[i][0].hash for i, _, _ in found]


def test_bulk_embed_builds_hnsw_once_after_and_searches_stay_exact(pg: qmd.Store) -> None:
    from qmd.backends.postgres import vectors

    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    conn = backend.connection()  # type: ignore[attr-defined]
    assert vectors.hnsw_ready(conn, model.id)
    q = vecs[3] + 0.1
    with backend.bulk_vectors(model, len(hashes)):
        assert not vectors.hnsw_ready(conn, model.id)  # dropped: the batches write plain rows
        _write(backend, model, hashes, vecs)
        during = _hashes(backend, backend.nearest_documents(model, q.tolist(), 10, None))
        assert during == _exact(backend, hashes, vecs, q, 10)  # no index: every distance computed
    assert vectors.hnsw_ready(conn, model.id)
    after = _hashes(backend, backend.nearest_documents(model, q.tolist(), 10, None))
    assert len(set(after) & set(_exact(backend, hashes, vecs, q, 10))) >= 9


def test_a_small_embed_writes_through_the_index(pg: qmd.Store) -> None:
    from qmd.backends.postgres import vectors

    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    _write(backend, model, hashes, vecs)
    conn = backend.connection()  # type: ignore[attr-defined]
    with backend.bulk_vectors(model, 60):  # 60 new against 300 embedded: not a bulk
        assert vectors.hnsw_ready(conn, model.id)


def test_an_interrupted_bulk_still_ends_with_an_index(pg: qmd.Store) -> None:
    from qmd.backends.postgres import vectors

    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    conn = backend.connection()  # type: ignore[attr-defined]
    with pytest.raises(KeyboardInterrupt):
        with backend.bulk_vectors(model, len(hashes)):
            _write(backend, model, hashes[:100], vecs[:100])
            raise KeyboardInterrupt
    assert vectors.hnsw_ready(conn, model.id)
    # A process killed mid-bulk leaves no index: the next embed's ensure_vector_model builds it.
    conn.execute(f"DROP INDEX {vectors.table(model.id)}_hnsw")
    assert not vectors.hnsw_ready(conn, model.id)
    backend.ensure_vector_model("test-synthetic", "synthetic", DIMS)
    assert vectors.hnsw_ready(conn, model.id)


@pytest.mark.parametrize("limit", [1, 10, 30])
def test_scoped_hnsw_search_is_never_short(pg: qmd.Store, limit: int) -> None:
    from qmd.backends.postgres import vectors

    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    _write(backend, model, hashes, vecs)
    conn = backend.connection()  # type: ignore[attr-defined]
    assert vectors.hnsw_ready(conn, model.id)
    rng = np.random.default_rng(limit)
    for q in rng.standard_normal((5, DIMS)).astype(np.float32):
        got = _hashes(backend, backend.nearest_documents(model, q.tolist(), limit, ["small"]))
        want = _exact(backend, hashes, vecs, q, limit, "small")
        assert len(got) == len(want) == limit  # 30 small documents among 300: 10% of the space
        assert len(set(got) & set(want)) >= int(0.9 * limit)
        assert all(backend.find(collection="small", hash_prefix=h) for h in got)



def test_ef_search_is_pgvectors_widest() -> None:
    """recall@10 on postgres_bench's hard 100k set is 0.86 at ef_search 200 and 0.975 at 1000
    (pgvector's limit), so every table gets the widest search; a page is never cut below k."""
    from qmd.backends.postgres.vectors import EF_SEARCH_MAX, ef_search

    assert ef_search(40, 30_000) == ef_search(40, 100_000) == ef_search(40, 5_000_000) == EF_SEARCH_MAX == 1000
    assert ef_search(5000, 10) == 1000


def test_qmd_vector_index_exact_is_exact_on_postgresql(pg: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """QMD_VECTOR_INDEX=exact computes every distance on PostgreSQL as on SQLite (it was
    read by SQLite only: PostgreSQL answered through HNSW whatever it said), scoped or not,
    and a bad value is refused before an embed starts."""
    from qmd.backends.postgres import vectors
    from qmd.core.errors import QmdError

    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    _write(backend, model, hashes, vecs)
    assert vectors.hnsw_ready(backend.connection(), model.id)  # type: ignore[attr-defined]
    passes: list[int] = []
    real = vectors._hnsw

    def counted(*args, **kwargs):  # type: ignore[no-untyped-def]
        passes.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(vectors, "_hnsw", counted)
    q = np.random.default_rng(9).standard_normal(DIMS).astype(np.float32)
    backend.nearest_documents(model, q.tolist(), 10, None)
    assert passes, "auto: HNSW answers past EXACT_CHUNKS"
    monkeypatch.setenv("QMD_VECTOR_INDEX", "exact")
    passes.clear()
    for scope in (None, ["small"], ["big", "small"]):
        got = _hashes(backend, backend.nearest_documents(model, q.tolist(), 10, scope))
        assert got == _exact(backend, hashes, vecs, q, 10, scope[0] if scope and len(scope) == 1 else None)
    assert not passes
    monkeypatch.setenv("QMD_VECTOR_INDEX", "fastest")
    with pytest.raises(QmdError, match="QMD_VECTOR_INDEX"):
        backend.check_vector_settings()


def test_unscoped_exact_search_grows_past_one_long_documents_chunks(pg: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """The unscoped exact search ranks the table's nearest chunks first and looks up only their
    documents: when those are all one long document's (or inactive ones), it reads further
    until it holds the page, and the page is the exact one (numpy over every chunk)."""
    from qmd.backends.postgres import vectors

    monkeypatch.setattr(vectors, "EXACT_CHUNKS", 10_000)  # exact: the path under test
    monkeypatch.setattr(vectors, "NEAREST_FIRST", 1)  # the first read: `limit` chunks only
    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    q = np.random.default_rng(3).standard_normal(DIMS).astype(np.float32)
    q /= np.linalg.norm(q)
    long_doc = hashes[0]
    near = [q + 0.01 * (i + 1) * np.eye(DIMS, dtype=np.float32)[i % DIMS] for i in range(60)]  # 60 chunks nearer than any other
    rows = [(long_doc, [ChunkVector(long_doc, i, i, i + 1, 1, (v / np.linalg.norm(v)).tolist()) for i, v in enumerate(near)])]
    rows += [(h, [ChunkVector(h, 0, 0, 5, 3, vecs[j].tolist())]) for j, h in enumerate(hashes) if j > 0]
    backend.write_vectors(model, rows)
    inactive = hashes[1]
    backend.connection().execute("UPDATE documents SET active = false WHERE hash = %s", (inactive,))  # type: ignore[attr-defined]
    got = _hashes(backend, backend.nearest_documents(model, q.tolist(), 10, None))
    others = [h for h in _exact(backend, hashes, vecs, q, 12) if h not in (long_doc, inactive)]
    assert got == [long_doc] + others[:9]


def test_a_broad_scope_ranks_the_nearest_chunks_first_then_keeps_its_own(pg: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under exact, a scope or filter passing NEAREST_FIRST_SHARE of the chunks or more is ranked
    as the unscoped search is (one parallel scan keeping the nearest chunks, then their allowed
    documents looked up): its own join read every vector in one process (1M x 384: a 19%
    collection 715 ms, 80% 2.3 s, against 495 ms unscoped). The page equals numpy's; when the
    scope's documents lie beyond the chunks NEAREST_FIRST_ROUNDS scans keep, its own join
    answers, exactly too."""
    from qmd.backends.postgres import vectors

    monkeypatch.setenv("QMD_VECTOR_INDEX", "exact")
    backend = pg.backend
    model, hashes, vecs = _vectors(backend)
    _write(backend, model, hashes, vecs)
    scans: list[str] = []
    joins: list[str] = []
    first, join = vectors._exact_nearest_first, vectors.exact_sql
    monkeypatch.setattr(vectors, "_exact_nearest_first", lambda conn, m, q, limit, allowed="d.active", *a, **k: scans.append(allowed) or first(conn, m, q, limit, allowed, *a, **k))
    monkeypatch.setattr(vectors, "exact_sql", lambda m, limit, allowed, *a: joins.append(allowed) or join(m, limit, allowed, *a))
    rng = np.random.default_rng(14)
    for scope in (["big"], ["small"], ["big", "small"]):
        for _ in range(3):
            q = rng.standard_normal(DIMS).astype(np.float32)
            q /= np.linalg.norm(q)
            got = _hashes(backend, backend.nearest_documents(model, q.tolist(), 10, scope))
            assert got == _exact(backend, hashes, vecs, q, 10, scope[0] if len(scope) == 1 else None), scope
    assert len(scans) == 9 and all("collection = ANY" in a for a in scans) and not joins  # small: 10% of the chunks

    monkeypatch.setattr(vectors, "NEAREST_FIRST", 1)  # 40 chunks, then 160: fewer than 13 of `small`'s documents
    scans.clear()
    small = [i for i, h in enumerate(hashes) if h in {r.hash for r in backend.find(collection="small")}]
    big = [i for i in range(len(hashes)) if i not in small]
    q = vecs[big[:40]].sum(axis=0)
    q /= np.linalg.norm(q)
    top = np.argsort(-(vecs @ q))
    assert sum(1 for i in top[:160] if i in small) == 12  # of `small`'s documents, 13 nearer than orthogonal (scores clamp at 0)
    got = _hashes(backend, backend.nearest_documents(model, q.tolist(), 13, ["small"]))
    assert got == _exact(backend, hashes, vecs, q, 13, "small")
    assert len(scans) == 1 and len(joins) == 1  # two scans short of the page, then the scope's own join


def test_hnsw_is_searched_under_auto_only_once_its_recall_measures_up(pg: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """Under QMD_VECTOR_INDEX=auto the HNSW index answers only once `qmd embed` has measured its
    recall@10 against exact search at RECALL_TARGET (a near-uniform 1M set measured 0.575):
    unmeasured, or measured under it, every distance is computed, and doctor gives the number.
    A poor graph (m 2, ef_construction 4, a 20-wide search, no iterative scan) is the one that misses."""
    from doctor.index import _vector_index
    from doctor.results import Status
    from qmd.backends import recall
    from qmd.backends.postgres import vectors

    backend = pg.backend
    for name, value in (("HNSW_M", 2), ("HNSW_EF_CONSTRUCTION", 4)):
        monkeypatch.setattr(vectors, name, value)
    monkeypatch.setattr(vectors, "scan_settings", lambda k, size, share: ["SET LOCAL hnsw.ef_search = 20", "SET LOCAL enable_sort = off"])
    hashes = sorted({row.hash for row in backend.find()})
    vecs = np.random.default_rng(21).standard_normal((len(hashes), 64)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    model = backend.ensure_vector_model("test-uniform", "uniform", 64)
    for i in range(0, len(hashes), 100):
        backend.write_vectors(model, [(h, [ChunkVector(h, 0, 0, 5, 3, vecs[j].tolist())]) for j, h in enumerate(hashes[i:i + 100], start=i)])
    passes: list[int] = []
    real = vectors._hnsw
    monkeypatch.setattr(vectors, "_hnsw", lambda *a: passes.append(1) or real(*a))
    queries = np.random.default_rng(22).standard_normal((12, 64)).astype(np.float32)

    def answers() -> list[list[str]]:
        return [_hashes(backend, backend.nearest_documents(model, q.tolist(), 10, None)) for q in queries]

    exact = [_exact(backend, hashes, vecs, q, 10) for q in queries]
    assert backend.vector_recall_due(model) and answers() == exact and not passes  # unmeasured: exact
    [check] = [c for c in _vector_index(pg, "index") if "uniform" in c.name]
    assert check.status == Status.WARN and "not measured" in check.detail, check
    backend.build_vector_index(model)
    assert passes  # the measurement searched the index
    passes.clear()
    measured = backend.vector_recall(model)
    assert measured is not None and measured.low < recall.RECALL_TARGET and not backend.vector_recall_due(model)
    assert answers() == exact and not passes  # measured under the target: exact
    [check] = [c for c in _vector_index(pg, "index") if "uniform" in c.name]
    assert check.status == Status.OK and f"recall@10 {measured.recall:.3f}" in check.detail and "not shown to reach 0.95" in check.detail, check
    monkeypatch.setenv("QMD_VECTOR_INDEX", "approx")  # the index whatever it measured: it misses
    assert answers() != exact and passes
    monkeypatch.setenv("QMD_VECTOR_INDEX", "auto")
    conn = backend.connection()  # type: ignore[attr-defined]
    conn.execute("UPDATE meta SET value = replace(value, %s, %s) WHERE key = %s", (f'"low": {measured.low}', '"low": 0.99', recall.key(model.id)))
    passes.clear()
    answers()
    assert passes  # a measurement at the target: HNSW answers
