"""PostgreSQL's HNSW build on a real server: maintenance_work_mem sized from the graph (rows x
(dims x 4 + m x 2 x 8 + overhead)), capped by the machine's share and the server's maximum,
never below the server's own setting; an index an earlier qmd built at ef_construction 64 is
reported (with a fix that rebuilds it in place) and the fix works."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest

import qmd
import qmd.backends.postgres.vectors as pgvectors
from qmd.backends.base import IndexBackend, VectorModel

DIMS = 8
GB = 1 << 30


@pytest.fixture
def space(tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[IndexBackend, VectorModel, str]]:
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    monkeypatch.setenv("QMD_DATABASE_URL", url)
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        (tmp_path / "notes").mkdir()
        s.add_collection(tmp_path / "notes", name="notes")
        backend = s.backend
        model = backend.ensure_vector_model("test-fp", "test", DIMS)
        conn: Any = backend.connection()
        conn.execute(f"INSERT INTO {pgvectors.table(model.id)} SELECT i, ('[' || array_to_string(array_fill(i::real, ARRAY[{DIMS}]), ',') || ']')::vector FROM generate_series(1, 300) i")
        conn.commit()
        yield backend, model, schema
    finally:
        s.close()
        postgres.drop_schema(postgres_url, schema)


def _server_setting(conn: Any) -> int:
    return int(conn.execute("SELECT setting::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()[0])


def test_build_memory_is_sized_from_the_graph(space: tuple[IndexBackend, VectorModel, str], monkeypatch: pytest.MonkeyPatch) -> None:
    backend, model, _ = space
    conn: Any = backend.connection()
    assert pgvectors.graph_bytes(1_000_000, 384) // (1 << 20) in range(1800, 2100)  # the 1M x 384 graph: about 2 GB
    server = _server_setting(conn)
    monkeypatch.setattr(pgvectors, "machine_memory", lambda: 64 * GB)
    small = pgvectors.build_memory_kb(conn, model.id, DIMS)  # 300 rows: the floor (or the server's larger setting)
    assert small == max(server, pgvectors.BUILD_MEMORY_MIN_KB)
    monkeypatch.setattr(pgvectors, "graph_bytes", lambda rows, dims: 2 * GB if rows == 300 and dims == DIMS else 0)
    assert pgvectors.build_memory_kb(conn, model.id, DIMS) == max(server, 2 * GB * 11 // 10 // 1024)  # the graph, 10% slack
    monkeypatch.setattr(pgvectors, "machine_memory", lambda: 4 * GB)  # capped at a quarter of the machine
    assert pgvectors.build_memory_kb(conn, model.id, DIMS) == max(server, GB // 1024)
    monkeypatch.setattr(pgvectors, "machine_memory", lambda: None)
    monkeypatch.setattr(pgvectors, "graph_bytes", lambda rows, dims: 1 << 50)  # never above the server's maximum
    ceiling = int(conn.execute("SELECT max_val::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()[0])
    assert pgvectors.build_memory_kb(conn, model.id, DIMS) == ceiling
    # a build under the sized setting succeeds (the server accepts it)
    monkeypatch.setattr(pgvectors, "machine_memory", lambda: 64 * GB)
    monkeypatch.setattr(pgvectors, "graph_bytes", lambda rows, dims: 2 * GB)
    conn.execute(f"DROP INDEX {pgvectors.table(model.id)}_hnsw")
    conn.commit()
    assert pgvectors.build_hnsw(conn, model) and pgvectors.hnsw_ready(conn, model.id)
    assert pgvectors.hnsw_ef_construction(conn, model.id) == pgvectors.HNSW_EF_CONSTRUCTION
    assert _server_setting(conn) == server  # SET LOCAL: the session's setting is back after the build


def test_doctor_reports_an_index_built_at_the_old_ef_construction(space: tuple[IndexBackend, VectorModel, str]) -> None:
    from doctor.index import _vector_index

    backend, model, schema = space
    conn: Any = backend.connection()
    assert backend.vector_index_status() == []  # built at today's setting: nothing to say
    t = pgvectors.table(model.id)
    conn.execute(f"DROP INDEX {t}_hnsw")
    conn.execute(f"CREATE INDEX {t}_hnsw ON {t} USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
    conn.commit()
    [found] = backend.vector_index_status()
    assert found["model"] == "test" and found["current"] is False and "ef_construction 64" in str(found["structure"])

    class Store:
        def vector_index_status(self) -> list[dict[str, object]]:
            return backend.vector_index_status()

    [check] = _vector_index(Store(), "index")  # type: ignore[arg-type]
    assert check.status == "warn" and "ef_construction 64" in check.detail and "REINDEX INDEX CONCURRENTLY" in (check.fix or ""), check
    # the fix, as doctor words it, rebuilds the index in place
    statements = [part.split("'")[0] for part in (check.fix or "").split(" -c '")[1:]]
    assert len(statements) == 2
    with psycopg.connect(conn.info.dsn, autocommit=True) as other:
        for statement in statements:
            other.execute(statement)
    assert pgvectors.hnsw_ef_construction(conn, model.id) == pgvectors.HNSW_EF_CONSTRUCTION and pgvectors.hnsw_ready(conn, model.id)
    assert backend.vector_index_status() == []
