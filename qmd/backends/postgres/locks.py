"""The writer lock of a PostgreSQL index: a session advisory lock, held on its own connection.

The server releases it when the holder's connection ends (a crash, a kill -9 or a lost
network), as the kernel releases a file lock. Readers take no lock (MVCC: they never wait).
The holder is named by its connection's application_name (`qmd:<pid>:<command>`) and
pg_stat_activity, so any machine can say who writes.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager

import psycopg

from qmd.core.errors import IndexBusyError
from qmd.backends.postgres.connection import connect

LOCK_CLASS = 0x716D64  # "qmd": the first key of every qmd advisory lock
POLL_S = 0.1

_HOLDER_SQL = (
    "SELECT a.application_name, a.backend_start, a.client_addr FROM pg_locks l JOIN pg_stat_activity a ON a.pid = l.pid"
    " WHERE l.locktype = 'advisory' AND l.granted AND l.classid = %s::oid AND l.objid = hashtext(%s)::oid AND l.objsubid = 2"
)


def _key(schema: str) -> str:
    return f"qmd-writer:{schema}"


@contextmanager
def writer_lock(url: str, schema: str, location: str, *, timeout: float | None = None, on_wait: Callable[[], None] | None = None) -> Iterator[None]:
    """Hold the index's writer lock; wait up to `timeout` (None: forever, 0: not at all)."""
    from qmd.core.process import own_command

    conn = connect(url, schema, application=f"qmd:{os.getpid()}:{own_command()}")
    try:
        started = time.monotonic()
        waited = False
        while not conn.execute("SELECT pg_try_advisory_lock(%s, hashtext(%s))", (LOCK_CLASS, _key(schema))).fetchone()[0]:  # type: ignore[index]
            if timeout is not None and time.monotonic() - started >= timeout:
                raise busy(url, schema, location, None if not waited else timeout)
            if not waited and on_wait is not None:
                on_wait()
            waited = True
            time.sleep(POLL_S)
        yield
    finally:
        conn.close()  # ends the session: the lock goes with it


def describe_holder(url: str, schema: str) -> str | None:
    """`pid 4242 (qmd embed) on 10.0.0.5, since …`, or None when nobody writes."""
    from qmd.core.clock import ago

    try:
        conn = connect(url, schema)
    except Exception:  # noqa: BLE001 - a status line must not fail on an unreachable server
        return None
    try:
        row = conn.execute(_HOLDER_SQL, (LOCK_CLASS, _key(schema))).fetchone()
    except psycopg.Error:
        return None
    finally:
        conn.close()
    if row is None:
        return None
    name, since, addr = row
    parts = str(name or "").split(":", 2)
    stamp = since.strftime("%Y-%m-%dT%H:%M:%SZ") if since is not None else ""
    where = f" on {addr}" if addr else ""
    if len(parts) == 3 and parts[0] == "qmd":
        return f"pid {parts[1]} ({parts[2]}){where}, since {stamp} ({ago(stamp)})"
    return f"a connection ({name or 'unnamed'}){where}, since {stamp}"


def busy(url: str, schema: str, location: str, waited: float | None = None) -> IndexBusyError:
    who = describe_holder(url, schema) or "another process"
    after = f" (waited {waited:g}s)" if waited else ""
    return IndexBusyError(f"the index {location} is being written by {who}{after}", "wait for it to finish (or use --wait SECONDS), then retry")
