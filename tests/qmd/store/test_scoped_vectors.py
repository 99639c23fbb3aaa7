"""Collection-scoped vector search on a real SQLite index: one collection, several, a collection
plus a metadata filter, a collection smaller than k, content shared between collections; each
equal to a brute-force ranking over the scope, and a narrow scope found by one KNN (issue 31).
The same on a real PostgreSQL (pgvector), through its exact scan and through its HNSW index:
the scope inside the index-ordered query, one pass, never short."""

from __future__ import annotations


import math
from collections.abc import Iterator, Sequence
from pathlib import Path

import numpy as np
import pytest

import qmd
import qmd.backends.sqlite.vectors as vectors
from qmd.core.filters import parse_filter
from qmd.backends.base import ChunkVector, DocRow, IndexBackend, VectorModel
from qmd.backends.sqlite.backend import SqliteBackend

DIMS = 8
QUERY = [1.0] + [0.0] * (DIMS - 1)
QUERIES = [QUERY, [0.0, 1.0] + [0.0] * (DIMS - 2), [0.3, -0.2, 0.9, 0.1, 0.0, 0.5, -0.4, 0.2], [-1.0] + [0.1] * (DIMS - 1)]
SIZES = {"big": 120, "rest": 170, "tiny": 2}
PAYMENTS = {"key": "team", "operator": "eq", "value": "payments"}


Indexed = tuple[SqliteBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]]


@pytest.fixture
def index(tmp_path: Path) -> Iterator[Indexed]:
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    backend, model, rows, vecs = fill(s, tmp_path)
    assert isinstance(backend, SqliteBackend)
    yield backend, model, rows, vecs
    s.close()


def fill(s: qmd.Store, tmp_path: Path) -> tuple[IndexBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]]:
    """Three collections (+ `twin`, one note whose content `rest` also holds), two chunks a
    document; `tiny`'s chunks point away from QUERY, so an unscoped KNN's first pages hold none."""
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
    return backend, model, rows, {r.id: by_hash[r.hash] for r in rows}


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
def test_scoped_vector_search_is_exact(index: Indexed, floor: int, monkeypatch: pytest.MonkeyPatch) -> None:
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


def test_shared_content_is_found_under_each_collection(index: Indexed) -> None:
    backend, model, rows, vecs = index
    twin = next(r for r in rows if r.collection == "twin")
    original = next(r for r in rows if r.collection == "rest" and r.path == twin.path)
    assert twin.hash == original.hash
    assert ids(backend.nearest_documents(model, QUERY, 10, ["twin"], None)) == [twin.id]
    assert original.id in ids(backend.nearest_documents(model, QUERY, None, ["rest"], None))


@pytest.mark.parametrize("floor", [vectors.BROAD_FILTER_MIN, 1])
def test_a_narrow_scope_takes_one_knn(index: Indexed, floor: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tiny` is nearest to nothing: searching everything and keeping its documents needs
    k ≥ all chunks; restricting the pass to its chunks finds both in one pass."""
    backend, model, rows, vecs = index
    monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", floor)
    calls: list[int] = []
    real = vectors.float_pass

    def counting(*args: object, **kwargs: object) -> list[list[tuple[int, float]]] | None:
        calls.append(1)
        return real(*args, **kwargs)  # type: ignore[arg-type]

    monkeypatch.setattr(vectors, "float_pass", counting)
    for scope, where in ((["tiny"], None), (["big", "tiny"], parse_filter(PAYMENTS)), (["tiny"], parse_filter(PAYMENTS))):
        calls.clear()
        team = "payments" if where is not None else None
        assert ids(backend.nearest_documents(model, QUERY, 10, scope, where)) == brute(rows, vecs, QUERY, scope, team)[:10]
        assert len(calls) == 1, scope


SCOPES: list[tuple[list[str] | None, dict[str, object] | None]] = [
    (None, None), (["big"], None), (["tiny"], None), (["rest", "twin"], None), (["big", "rest", "tiny", "twin"], None), (["big", "tiny"], PAYMENTS), (None, PAYMENTS),
]


def _counting(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[int]:
    """Calls of `module.name` (each call's queries), the real function still answering."""
    calls: list[int] = []
    real = getattr(module, name)

    def spy(*args: object, **kwargs: object) -> object:
        calls.append(len(args[2]) if name == "float_pass" else 1)  # float_pass(conn, model, queries, …)
        return real(*args, **kwargs)

    monkeypatch.setattr(module, name, spy)
    return calls


@pytest.mark.parametrize("floor", [vectors.BROAD_FILTER_MIN, 1])
def test_batched_nearest_equals_each_query_alone_in_one_pass(index: Indexed, floor: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hybrid query's sub-queries (issue 31): `nearest_many` answers each query as
    `nearest_documents` does (the brute-force ranking, ties by id, scopes and filters, never
    short), from one read of the vectors for all of them, not one a query."""
    backend, model, rows, vecs = index
    monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", floor)
    twin = QUERIES + [QUERIES[0], [2 * x for x in QUERIES[1]]]  # a repeated query and a tie (the same direction)
    for scope, spec in SCOPES:
        where = parse_filter(spec) if spec is not None else None
        team = "payments" if spec is not None else None
        for k in (1, 10, None):
            alone = [backend.nearest_documents(model, q, k, scope, where) for q in twin]
            passes = _counting(monkeypatch, vectors, "float_pass")
            together = backend.nearest_many(model, twin, k, scope, where)
            monkeypatch.undo()
            monkeypatch.setattr(vectors, "BROAD_FILTER_MIN", floor)
            assert together == alone, (scope, spec, k)
            assert passes == [len(twin)], (scope, spec, k)  # one pass, every query in it
            for q, found in zip(twin, together):
                assert ids(found) == brute(rows, vecs, q, scope or sorted(SIZES) + ["twin"], team)[:k], (scope, spec, k)
    assert backend.nearest_many(model, [], 10, None) == []


def test_the_float_pass_ranks_by_sqlite_vec_distances(index: Indexed) -> None:
    """Its numpy cosines only choose candidates: every distance is sqlite-vec's own, and equal
    distances come in chunk id order."""
    backend, model, rows, vecs = index
    conn = backend.connection()
    q = np.asarray([QUERY, QUERIES[2]], np.float32)
    found = vectors.float_pass(conn, model, q, [v.tobytes() for v in q], [7, 600])
    assert found is not None and [len(f) for f in found] == [7, 584]  # 292 contents × 2 chunks: all of them
    for v, pairs in zip(q, found):
        table = vectors.table(model.id)
        own = sorted((float(d), int(c)) for c, d in conn.execute(f"SELECT chunk_id, vec_distance_cosine(embedding, ?) FROM {table}", (v.tobytes(),)))
        assert [(d, c) for c, d in pairs] == own[: len(pairs)]



def _float_space(tmp_path: Path, vecs: np.ndarray, dropped: range | None = None) -> tuple[qmd.Store, VectorModel]:
    """A SQLite index with one chunk per row of `vecs` (hashes h00000, h00001, …), those of
    `dropped` deleted since: vec0 blocks with holes, for float_pass."""
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    s.backend.open(create=True)
    model = s.backend.ensure_vector_model("test-fp", "test", vecs.shape[1])
    s.backend.write_vectors(model, [(f"h{i:05d}", [ChunkVector(f"h{i:05d}", 0, 0, 5, 3, v.tolist())]) for i, v in enumerate(vecs)])
    if dropped is not None:
        s.backend.drop_vectors(model, [f"h{i:05d}" for i in dropped])
    return s, model


@pytest.mark.parametrize("group", [1024, vectors.GROUP_ROWS])
def test_the_float_pass_over_many_blocks_with_holes(tmp_path: Path, group: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """3,000 chunks (three vec0 blocks, some rows deleted, some vectors repeated: ties), read a
    block at a time or grouped: the k nearest by sqlite-vec's distance, ties by chunk id."""
    monkeypatch.setattr(vectors, "GROUP_ROWS", group)
    rng = np.random.default_rng(4)
    vecs = rng.standard_normal((3000, 16)).astype(np.float32)
    vecs[2000:2010] = vecs[5]
    s, model = _float_space(tmp_path, vecs, range(0, 3000, 7))
    conn = s.backend.connection()
    q = np.stack([vecs[5], rng.standard_normal(16).astype(np.float32), -vecs[9]])
    found = vectors.float_pass(conn, model, q, [v.tobytes() for v in q], [12, 40, 3000])
    assert found is not None
    table = vectors.table(model.id)
    for v, k, pairs in zip(q, [12, 40, 3000], found):
        own = sorted((float(d), int(c)) for c, d in conn.execute(f"SELECT chunk_id, vec_distance_cosine(embedding, ?) FROM {table}", (v.tobytes(),)))
        assert [(d, c) for c, d in pairs] == own[:k]
    s.close()


PgIndexed = tuple[IndexBackend, VectorModel, list[DocRow], dict[int, list[np.ndarray]]]


@pytest.fixture
def pg_index(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[PgIndexed]:
    """The same index in a fresh schema of a real PostgreSQL."""
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    monkeypatch.setenv("QMD_DATABASE_URL", url)
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        yield fill(s, tmp_path)
    finally:
        s.close()
        postgres.drop_schema(postgres_url, schema)


@pytest.mark.parametrize("exact_chunks", [20_000, 1])  # 20,000: pgvector's exact scan; 1: the HNSW index answers
def test_postgres_scoped_vector_search_is_exact(pg_index: PgIndexed, exact_chunks: int, monkeypatch: pytest.MonkeyPatch) -> None:
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, rows, vecs = pg_index
    monkeypatch.setattr(pgvectors, "EXACT_CHUNKS", exact_chunks)
    monkeypatch.setattr(pgvectors, "SCOPED_EXACT_CHUNKS", exact_chunks)
    monkeypatch.setenv("QMD_VECTOR_INDEX", "approx")  # HNSW past EXACT_CHUNKS, its recall unmeasured (test_postgres_vectors measures it)
    if exact_chunks == 1:  # every page from the index (600 vectors of 8 dims: HNSW finds the true nearest)
        monkeypatch.setattr(pgvectors, "_exact", _fails)
    where = parse_filter(PAYMENTS)
    assert where is not None
    for q in QUERIES:
        for scope in (["big"], ["rest"], ["big", "tiny"], ["rest", "twin"], ["big", "rest", "tiny", "twin"]):
            exact = brute(rows, vecs, q, scope)
            for k in (1, 5, 10, 25):
                assert ids(backend.nearest_documents(model, q, k, scope, None)) == exact[:k], (scope, k)
            got = ids(backend.nearest_documents(model, q, 10, scope, where))
            assert got == brute(rows, vecs, q, scope, "payments")[:10], scope
        assert ids(backend.nearest_documents(model, q, 10, None, None)) == brute(rows, vecs, q, sorted(SIZES) + ["twin"])[:10]
    monkeypatch.setattr(pgvectors, "_exact", _EXACT)
    for q in QUERIES:  # fewer documents than k: all of them (the index scan runs dry, the exact scan confirms)
        assert ids(backend.nearest_documents(model, q, 10, ["tiny"], None)) == brute(rows, vecs, q, ["tiny"])
        assert ids(backend.nearest_documents(model, q, 10, ["twin"], None)) == brute(rows, vecs, q, ["twin"])
        assert backend.nearest_documents(model, q, 10, ["nope"], None) == []
        assert backend.nearest_documents(model, q, 10, [], None) == []


def test_postgres_batched_nearest_equals_each_query_alone(pg_index: PgIndexed) -> None:
    """PostgreSQL answers `nearest_many` one query at a time (an HNSW search is its query's
    own walk): the same answers, scoped and filtered."""
    backend, model, rows, vecs = pg_index
    for scope, spec in SCOPES:
        where = parse_filter(spec) if spec is not None else None
        assert backend.nearest_many(model, QUERIES, 10, scope, where) == [backend.nearest_documents(model, q, 10, scope, where) for q in QUERIES]


def _fails(*args: object, cap: int | None = None) -> list[tuple[int, float, tuple[int, int]]] | None:
    if cap is not None:  # the capped scan of a scope: every scope here has more than 1 chunk
        return None
    raise AssertionError("the exact scan ran: the index-ordered pass came back short")


import qmd.backends.postgres.vectors as _pgvectors  # noqa: E402 - the real function, restored by the tests that patch it

_EXACT = _pgvectors._exact


def test_postgres_tiny_scope_is_never_short(pg_index: PgIndexed, monkeypatch: pytest.MonkeyPatch) -> None:
    """`tiny` (2 of 292 documents) points away from QUERY: with a scan budget too small to reach
    it (a planner estimate that took it for a broad scope), the pass comes back short and the
    exact scan over the scope answers: the page holds every matching document."""
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, rows, vecs = pg_index
    monkeypatch.setattr(pgvectors, "EXACT_CHUNKS", 1)
    monkeypatch.setattr(pgvectors, "SCOPED_EXACT_CHUNKS", 1)
    monkeypatch.setenv("QMD_VECTOR_INDEX", "approx")  # HNSW whatever its recall
    monkeypatch.setattr(pgvectors, "SCAN_TUPLES_MIN", 50)
    monkeypatch.setattr(pgvectors, "EF_SEARCH_MIN", 40)  # the first graph search stops short of the whole table
    monkeypatch.setattr(pgvectors, "_share", lambda *a: 1.0)
    scans: list[int] = []
    real = pgvectors._hnsw

    def counting(*args: object) -> list[tuple[int, float, tuple[int, int]]]:
        found = real(*args)  # type: ignore[arg-type]
        scans.append(len(found))
        return found

    monkeypatch.setattr(pgvectors, "_hnsw", counting)
    for k in (1, 2, 10):
        scans.clear()
        assert ids(backend.nearest_documents(model, QUERY, k, ["tiny"], None)) == brute(rows, vecs, QUERY, ["tiny"])[:k]
        assert scans == [0], k  # one index pass (short: the budget), then the exact scan
    assert ids(backend.nearest_documents(model, QUERY, 10, ["big"], None)) == brute(rows, vecs, QUERY, ["big"])[:10]


def test_postgres_scope_is_inside_the_index_scan(pg_index: PgIndexed) -> None:
    """The plan of the scoped query: pgvector's HNSW scan feeding nested loops that test each
    chunk's documents against the scope and filter, with no sort of the table (the index
    order, continued by the iterative scan as rows are fetched)."""
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, _, _ = pg_index
    conn = backend.connection()  # type: ignore[attr-defined]
    allowed, params = pgvectors._allowed_docs(["big"], parse_filter(PAYMENTS))
    q = pgvectors.literal(QUERY)
    with conn.transaction():
        for setting in pgvectors.scan_settings(40, 600, 0.1):
            conn.execute(setting)
        assert conn.execute("SHOW hnsw.iterative_scan").fetchone()[0] == "relaxed_order"
        plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + pgvectors.scan_sql(model, allowed), (q, *params, q)))
    assert f"Index Scan using {pgvectors.table(model.id)}_hnsw" in plan, plan
    assert "Nested Loop" in plan and "collection" in plan, plan
    assert "Sort" not in plan and "Seq Scan on vec" not in plan, plan


def test_postgres_exact_scan_of_a_scope_stops_past_its_cap(pg_index: PgIndexed) -> None:
    """The exact scan of a scope lists its (document, chunk) pairs once, up to cap + 1: within the cap it is the
    exact top-k (collection + filter included), past it None (no distance computed: the caller
    takes the index), an empty scope an empty page, not None."""
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, rows, vecs = pg_index
    conn = backend.connection()  # type: ignore[attr-defined]
    for q in QUERIES:
        for scope, team in ((["big"], "payments"), (["big", "tiny"], "payments"), (["tiny"], None), (["rest", "twin"], None)):
            allowed, params = pgvectors._allowed_docs(scope, parse_filter(PAYMENTS) if team else None)
            exact = brute(rows, vecs, q, scope, team)
            chunks = 2 * len(exact)  # (document, chunk) pairs: two chunks a document (twin's content counts under each)
            for cap in (chunks, chunks + 50):
                got = pgvectors._exact(conn, model, pgvectors.literal(q), 10, allowed, params, cap=cap)
                assert got is not None and ids(got) == exact[:10], (scope, cap)
            assert pgvectors._exact(conn, model, pgvectors.literal(q), 10, allowed, params, cap=chunks - 1) is None, scope
        allowed, params = pgvectors._allowed_docs(["nope"], None)
        assert pgvectors._exact(conn, model, pgvectors.literal(q), 10, allowed, params, cap=5) == []


def test_postgres_capped_exact_scan_reads_the_vectors_in_one_scan(pg_index: PgIndexed) -> None:
    """The exact scan of a narrow scope reads its chunks' vectors in one scan over the array of
    their ids, not a key lookup per chunk (a subplan run once per chunk: 1.7x the time at 8k of
    100k), and joins only (id, distance) pairs back (whole vectors in the hash spilled to disk)."""
    import json

    import qmd.backends.postgres.vectors as pgvectors

    backend, model, _, _ = pg_index
    conn = backend.connection()  # type: ignore[attr-defined]
    allowed, params = pgvectors._allowed_docs(["big"], parse_filter(PAYMENTS))
    sql = pgvectors.exact_sql(model, 10, allowed, cap=1000)
    plan = conn.execute("EXPLAIN (ANALYZE, FORMAT JSON) " + sql, (*params, model.id, pgvectors.literal(QUERY)), prepare=False).fetchone()[0][0]["Plan"]

    def nodes(node: dict[str, object]) -> list[dict[str, object]]:
        return [node] + [n for child in node.get("Plans", []) for n in nodes(child)]  # type: ignore[attr-defined]

    reads = [n for n in nodes(plan) if n.get("Relation Name") == pgvectors.table(model.id)]
    assert len(reads) == 1 and reads[0]["Actual Loops"] == 1, json.dumps(plan)[:3000]
    assert any("ANY" in str(reads[0].get(key)) for key in ("Index Cond", "Recheck Cond", "Filter")), reads[0]
    assert not any(n.get("Hash Cond") and n.get("Plan Width", 0) > 100 for n in nodes(plan) if n.get("Node Type") == "Hash Join"), json.dumps(plan)[:3000]


def test_postgres_hnsw_graph_is_built_wide_enough_for_broad_scopes(pg_index: PgIndexed) -> None:
    """The HNSW graph is built at ef_construction 128: at 64 a 19% scope found 0.940 of its true
    top 10 on scope_bench's hard 100k set (ef_search is at pgvector's widest already), at 128 0.967."""
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, _, _ = pg_index
    conn = backend.connection()  # type: ignore[attr-defined]
    assert pgvectors.build_hnsw(conn, model) and pgvectors.hnsw_ready(conn, model.id)
    row = conn.execute("SELECT reloptions FROM pg_class WHERE oid = to_regclass(%s)", (f"{pgvectors.table(model.id)}_hnsw",)).fetchone()
    assert row is not None and "ef_construction=128" in row[0] and "m=16" in row[0], row


def test_postgres_scoped_search_is_never_a_prepared_statement(pg_index: PgIndexed, monkeypatch: pytest.MonkeyPatch) -> None:
    """psycopg prepares a statement run five times, and PostgreSQL then plans it once for any
    scope and filter (a generic plan: 3.7x slower at 100k on scope_bench's collection + filter).
    After many scoped searches, exact and through the index, no search statement is prepared."""
    import qmd.backends.postgres.vectors as pgvectors

    backend, model, rows, vecs = pg_index
    where = parse_filter(PAYMENTS)
    conn = backend.connection()  # type: ignore[attr-defined]
    for exact in (1, 10_000):
        monkeypatch.setattr(pgvectors, "EXACT_CHUNKS", 1)
        monkeypatch.setattr(pgvectors, "SCOPED_EXACT_CHUNKS", exact)
        for _ in range(8):
            for q in QUERIES:
                assert ids(backend.nearest_documents(model, q, 10, ["big"], where)) == brute(rows, vecs, q, ["big"], "payments")[:10]
    prepared = [str(s) for (s,) in conn.execute("SELECT statement FROM pg_prepared_statements").fetchall()]
    assert not [s for s in prepared if "documents d" in s], prepared


def test_a_broken_vector_never_breaks_a_long_search(index: Indexed, monkeypatch: pytest.MonkeyPatch) -> None:
    """A NaN vector (stored by an older qmd) reads as a NULL distance from sqlite-vec: past
    KNN_MAX (`vsearch --all`) or on the KNN fallback it is skipped, never a TypeError."""
    backend, model, rows, vecs = index
    broken = rows[0]
    backend.write_vectors(model, [(broken.hash, [ChunkVector(broken.hash, 0, 0, 5, 3, [float("nan")] * DIMS)])])
    vecs = {**vecs, **{r.id: [np.full(DIMS, -1e9)] for r in rows if r.hash == broken.hash}}  # never nearer than 0
    exact = [d for d in brute(rows, vecs, QUERY, list(SIZES) + ["twin"]) if rows_by_id(rows)[d].hash != broken.hash]
    monkeypatch.setattr(vectors, "KNN_MAX", 8)  # the scan that `--all` takes on a large index
    got = ids(backend.nearest_documents(model, QUERY, None, None, None))
    assert got == exact
    monkeypatch.setattr(vectors, "float_pass", lambda *args: None)  # vec0's blocks unreadable: sqlite-vec's KNN
    monkeypatch.setattr(vectors, "KNN_MAX", 4096)
    assert ids(backend.nearest_documents(model, QUERY, 10, None, None)) == exact[:10]
    monkeypatch.setenv("QMD_VECTOR_INDEX", "approx")  # the codes' candidates, rescored (the NaN one's code, all
    backend.build_vector_index(model)  # zero bits, is one bit from QUERY's: among them)
    got = ids(backend.nearest_documents(model, QUERY, 10, None, None))
    assert len(got) == 10 and set(got) <= set(exact)


def rows_by_id(rows: list[DocRow]) -> dict[int, DocRow]:
    return {r.id: r for r in rows}


@pytest.mark.parametrize("damage", ["rowids = substr(rowids, 1, 80)", "validity = x'00'"])
def test_a_damaged_block_is_never_read_as_fewer_vectors(tmp_path: Path, damage: str) -> None:
    """A vec0 block whose rowids or validity are cut short: float_pass leaves it to sqlite-vec
    (whose error names the damage), never an IndexError nor an answer missing its vectors."""
    vecs = np.random.default_rng(2).standard_normal((2500, 16)).astype(np.float32)
    s, model = _float_space(tmp_path, vecs)
    conn = s.backend.connection()
    conn.execute(f"UPDATE {vectors.table(model.id)}_chunks SET {damage} WHERE chunk_id = 2")
    q = vecs[1500:1501]
    assert vectors.float_pass(conn, model, q, [q[0].tobytes()], [5]) is None
    s.close()


def test_a_zero_query_keeps_k_chunks_not_every_vector(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A zero (or NaN) query has no finite distance: the pass keeps the k first chunks by id,
    as sqlite-vec ranks them, instead of every vector (memory and one SQL call each)."""
    vecs = np.random.default_rng(5).standard_normal((3000, 16)).astype(np.float32)
    s, model = _float_space(tmp_path, vecs, range(0, 3000, 7))
    conn = s.backend.connection()
    calls = _counting(monkeypatch, vectors, "_distance")
    for q in (np.zeros((1, 16), np.float32), np.full((1, 16), np.nan, np.float32)):
        found = vectors.float_pass(conn, model, q, [q[0].tobytes()], [5])
        assert found is not None
        first = [int(c) for c, in conn.execute(f"SELECT chunk_id FROM {vectors.table(model.id)} ORDER BY chunk_id LIMIT 5")]
        assert [c for c, _ in found[0]] == first and all(math.isnan(d) for _, d in found[0])
    assert len(calls) == 10
    s.close()
