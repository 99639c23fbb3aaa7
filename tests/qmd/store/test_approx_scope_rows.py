"""A narrow scope read by chunk id (`_probe_scope`, 017a338) answers as the pass over
every code does, for scope/filter combinations beyond the commit's own tests."""

from __future__ import annotations

import numpy as np
import pytest

from qmd.backends.base import ChunkVector
from qmd.backends.sqlite import approx, vectors
from qmd.core.filters import parse_filter
from tests.qmd.store.test_approx_vectors import DIMS, N, _unit, index  # noqa: F401  (the fixture)


def _answers(backend, model, queries, scope, filt, by_rows: float, monkeypatch, many: bool):  # type: ignore[no-untyped-def]
    monkeypatch.setattr(approx, "SCOPE_BY_ROWS", by_rows)
    approx.forget_codes()
    if many:
        return backend.nearest_many(model, [q.tolist() for q in queries], 10, scope, filt)
    return [backend.nearest_documents(model, q.tolist(), 10, scope, filt) for q in queries]


@pytest.fixture
def world(index, monkeypatch):  # type: ignore[no-untyped-def]  # noqa: F811
    monkeypatch.setattr(approx, "IVF_MIN_CHUNKS", 0)
    monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", 1)
    _, backend, model, vecs = index
    conn = backend.connection()
    with conn:
        # collection d: 10 documents of their own; collection c: one document sharing a's chunk h00000;
        # e: empty (no documents); some of a deactivated; a metadata key on every third document
        for j in range(10):
            conn.execute(
                "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
                " VALUES (?, 'd', ?, ?, ?, 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)", (N + 1 + j, f"x{j}.md", f"x{j}", f"z{j:05d}"))
        conn.execute(
            "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
            " VALUES (?, 'c', 'shared.md', 'shared', 'h00000', 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)", (N + 100,))
        conn.execute("UPDATE documents SET active = 0 WHERE collection = 'a' AND id % 3 = 1")
        for i in range(0, N, 3):
            conn.execute("INSERT INTO document_meta (doc_id, key, type, value) VALUES (?, 'bucket', 'number', 1)", (i + 1,))
    rng = np.random.default_rng(11)
    extra = _unit(rng.standard_normal((10, DIMS))).astype(np.float32)
    backend.write_vectors(model, [(f"z{j:05d}", [ChunkVector(f"z{j:05d}", 0, 0, 5, 3, extra[j].tolist())]) for j in range(10)])
    backend.build_vector_index(model)
    queries = _unit(np.vstack([vecs[:8], extra[:3]]) + 0.3 * rng.standard_normal((11, DIMS)) / np.sqrt(DIMS))
    return backend, model, queries


SCOPES = [
    (["a"], None), (["c"], None), (["d"], None), (["e"], None), (["a", "d"], None), (["c", "a"], None), (["a", "e"], None),
    (["a"], "bucket"), (["d"], "bucket"), (None, "bucket"), (["b"], None),
]


@pytest.mark.parametrize("many", [False, True], ids=["one", "many"])
@pytest.mark.parametrize("scope,filt", SCOPES, ids=[f"{s}-{f}" for s, f in SCOPES])
def test_by_rows_answers_as_the_full_pass(world, monkeypatch, scope, filt, many) -> None:  # type: ignore[no-untyped-def]
    backend, model, queries = world
    where = parse_filter({"key": "bucket", "operator": "eq", "value": 1}) if filt else None
    full = _answers(backend, model, queries, scope, where, 0.0, monkeypatch, many)
    rows = _answers(backend, model, queries, scope, where, 1.0, monkeypatch, many)
    assert rows == full


def _both_paths(monkeypatch):  # type: ignore[no-untyped-def]
    """0.0 (the pass over every code), then 1.0 (every scope read by rows), each on a connection that has read no codes."""
    for by_rows in (0.0, 1.0):
        monkeypatch.setattr(approx, "SCOPE_BY_ROWS", by_rows)
        approx.forget_codes()
        yield by_rows


def test_inside_an_open_transaction(world, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    backend, model, queries = world
    conn = backend.connection()
    out = {}
    for by_rows in _both_paths(monkeypatch):
        conn.execute("BEGIN")
        try:
            conn.execute("UPDATE documents SET collection = 'a' WHERE id IN (2, 3, 4)")
            out[by_rows] = [backend.nearest_documents(model, q.tolist(), 10, ["a"]) for q in queries]
        finally:
            conn.execute("ROLLBACK")
        out[(by_rows, "after")] = [backend.nearest_documents(model, q.tolist(), 10, ["a"]) for q in queries]
    assert out[1.0] == out[0.0]
    assert out[(1.0, "after")] == out[(0.0, "after")]


def test_a_connection_kept_across_a_change(world, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The same connection searches, another document joins `d` (a write on this connection), it searches again."""
    backend, model, queries = world
    conn = backend.connection()
    out = {}
    for by_rows in _both_paths(monkeypatch):
        first = [backend.nearest_documents(model, q.tolist(), 10, ["d"]) for q in queries]
        with conn:
            conn.execute("UPDATE documents SET collection = 'd' WHERE id IN (2, 3)")
        second = [backend.nearest_documents(model, q.tolist(), 10, ["d"]) for q in queries]
        with conn:
            conn.execute("UPDATE documents SET collection = 'b' WHERE id IN (2, 3)")
        out[by_rows] = (first, second)
    assert out[1.0] == out[0.0]
