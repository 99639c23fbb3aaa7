"""Collection-scoped vector search on a real SQLite index: one collection, several, a collection
plus a metadata filter, a collection smaller than k, content shared between collections; each
equal to a brute-force ranking over the scope, and a narrow scope found by one KNN (issue 31)."""

from __future__ import annotations


from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import qmd
import qmd.backends.sqlite.vectors as vectors
from qmd.core.filters import parse_filter
from qmd.backends.base import ChunkVector, DocRow, VectorModel
from qmd.backends.sqlite.backend import SqliteBackend

DIMS = 8
QUERY = [1.0] + [0.0] * (DIMS - 1)
QUERIES = [QUERY, [0.0, 1.0] + [0.0] * (DIMS - 2), [0.3, -0.2, 0.9, 0.1, 0.0, 0.5, -0.4, 0.2], [-1.0] + [0.1] * (DIMS - 1)]
SIZES = {"big": 120, "rest": 170, "tiny": 2}
PAYMENTS = {"key": "team", "operator": "eq", "value": "payments"}


@pytest.fixture
def index(tmp_path: Path) -> Iterator[tuple[SqliteBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]]]:
    """Three collections (+ `twin`, one note whose content `rest` also holds), two chunks a
    document; `tiny`'s chunks point away from QUERY, so an unscoped KNN's first pages hold none."""
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    for name, n in SIZES.items():
        root = tmp_path / name
        root.mkdir()
        for i in range(n):
            team = "payments" if i % 10 == 0 else "core"
            (root / f"{name}{i:03d}.md").write_text(f"---\nteam: {team}\n---\n# {name} {i}\ntext {i}\n")
        s.add_collection(root, name=name)
    (tmp_path / "twin").mkdir()
    (tmp_path / "twin" / "rest005.md").write_text((tmp_path / "rest" / "rest005.md").read_text())
    s.add_collection(tmp_path / "twin", name="twin")
    backend = s.backend
    assert isinstance(backend, SqliteBackend)
    model = backend.ensure_vector_model("test-fp", "test", DIMS)
    rows = backend.find()
    rng = np.random.default_rng(7)
    by_hash: dict[str, list[np.ndarray]] = {}
    for row in rows:
        if row.hash in by_hash:
            continue
        chunks = [rng.standard_normal(DIMS) for _ in range(2)]
        if row.collection == "tiny":
            for c in chunks:
                c[0] = -5.0
        by_hash[row.hash] = chunks
    backend.write_vectors(model, [(h, [ChunkVector(h, j, j * 5, j * 5 + 5, 3, v.tolist()) for j, v in enumerate(cs)]) for h, cs in by_hash.items()])
    yield backend, model, rows, {r.id: by_hash[r.hash] for r in rows}
    s.close()


def brute(rows: list[DocRow], vecs: dict[int, list[np.ndarray]], query: Sequence[float], scope: list[str], team: str | None = None) -> list[int]:
    """Active documents in scope (and of `team`), best chunk's cosine first: the exact answer."""
    q = np.asarray(query) / np.linalg.norm(query)
    scored = []
    for r in rows:
        if r.collection not in scope or (team is not None and (r.metadata or {}).get("team") != team):
            continue
        best = max(float(v @ q / np.linalg.norm(v)) for v in vecs[r.id])
        scored.append((-max(0.0, best), r.id))  # scores are clamped at 0 (ties by id), as qmd reports them
    return [d for _, d in sorted(scored)]


def ids(found: list[tuple[int, float, tuple[int, int]]]) -> list[int]:
    return [d for d, _, _ in found]


@pytest.mark.parametrize("floor", [vectors.BROAD_FILTER_MIN, 1])  # 1: the share decides the plan, as on a large index
def test_scoped_vector_search_is_exact(index: tuple[SqliteBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]], floor: int, monkeypatch: pytest.MonkeyPatch) -> None:
    backend, model, rows, vecs = index
    monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", floor)
    where = parse_filter(PAYMENTS)
    assert where is not None
    for q in QUERIES:
        for scope in (["big"], ["tiny"], ["rest"], ["twin"], ["big", "tiny"], ["rest", "twin"], ["big", "rest", "tiny", "twin"]):
            exact = brute(rows, vecs, q, scope)
            for k in (1, 5, 10, 25):
                assert ids(backend.nearest_documents(model, q, k, scope, None)) == exact[:k], (scope, k)
            got = ids(backend.nearest_documents(model, q, 10, scope, where))  # collection + metadata filter
            assert got == brute(rows, vecs, q, scope, "payments")[:10], scope
        # a collection smaller than k: all of it, never padded from elsewhere
        assert ids(backend.nearest_documents(model, q, 10, ["tiny"], None)) == brute(rows, vecs, q, ["tiny"])
        assert len(brute(rows, vecs, q, ["tiny"])) == 2
        assert backend.nearest_documents(model, q, 10, ["nope"], None) == []
        assert backend.nearest_documents(model, q, 10, [], None) == []


def test_shared_content_is_found_under_each_collection(index: tuple[SqliteBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]]) -> None:
    backend, model, rows, vecs = index
    twin = next(r for r in rows if r.collection == "twin")
    original = next(r for r in rows if r.collection == "rest" and r.path == twin.path)
    assert twin.hash == original.hash
    assert ids(backend.nearest_documents(model, QUERY, 10, ["twin"], None)) == [twin.id]
    assert original.id in ids(backend.nearest_documents(model, QUERY, None, ["rest"], None))


@pytest.mark.parametrize("floor", [vectors.BROAD_FILTER_MIN, 1])
def test_a_narrow_scope_takes_one_knn(index: tuple[SqliteBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]], floor: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tiny` is nearest to nothing: searching everything and keeping its documents needs
    k ≥ all chunks; restricting the KNN to its chunks finds both in one call."""
    backend, model, rows, vecs = index
    monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", floor)
    calls: list[int] = []
    real = vectors.knn

    def counting(*args: object, **kwargs: object) -> list[tuple[int, float]]:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(vectors, "knn", counting)
    for scope, where in ((["tiny"], None), (["big", "tiny"], parse_filter(PAYMENTS)), (["tiny"], parse_filter(PAYMENTS))):
        calls.clear()
        team = "payments" if where is not None else None
        assert ids(backend.nearest_documents(model, QUERY, 10, scope, where)) == brute(rows, vecs, QUERY, scope, team)[:10]
        assert len(calls) == 1, scope
