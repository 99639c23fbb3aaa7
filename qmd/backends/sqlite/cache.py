"""Expansions and rerank scores cached in the index, keyed by model identity and input.

Writes are best-effort: a busy index (an update holding the write lock) never fails a
query; the value is simply not cached this time.
"""

from __future__ import annotations

import json

import apsw

from qmd.core.clock import now_iso
from qmd.backends.sqlite.connection import busy_timeout_ms, side_writes, values_in


def get_many(conn: apsw.Connection, keys: list[str]) -> dict[str, object]:
    """The cached values of `keys` that exist, in one statement."""
    if not keys:
        return {}
    marks, params = values_in(keys)
    return {key: json.loads(value) for key, value in conn.execute(f"SELECT key, value FROM llm_cache WHERE key IN ({marks})", params)}


def put_many(conn: apsw.Connection, kind: str, items: dict[str, object]) -> bool:
    """Store values; returns False (and stores nothing) when the index is busy."""
    if not items:
        return True
    conn.set_busy_timeout(50)
    try:
        with side_writes(conn), conn:
            now = now_iso()
            for key, value in items.items():
                conn.execute(
                    "INSERT OR REPLACE INTO llm_cache (key, kind, value, created_at) VALUES (?, ?, ?, ?)",
                    (key, kind, json.dumps(value), now),
                )
        return True
    except (apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError):
        return False
    finally:
        conn.set_busy_timeout(busy_timeout_ms())
