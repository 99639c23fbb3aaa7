"""Expansions and rerank scores cached in the index; writes are best-effort (never fail a query)."""

from __future__ import annotations

import json

import psycopg

from qmd.core.clock import now_iso


def get_many(conn: psycopg.Connection, keys: list[str]) -> dict[str, object]:
    if not keys:
        return {}
    return {str(k): json.loads(v) for k, v in conn.execute("SELECT key, value FROM llm_cache WHERE key = ANY(%s)", (keys,))}


def put_many(conn: psycopg.Connection, kind: str, items: dict[str, object]) -> bool:
    """Store values; False (nothing stored) when a row is locked for more than 50 ms or the write fails."""
    if not items:
        return True
    now = now_iso()
    try:
        with conn.transaction(), conn.cursor() as cur:
            cur.execute("SET LOCAL lock_timeout = '50ms'")
            cur.executemany(
                "INSERT INTO llm_cache (key, kind, value, created_at) VALUES (%s, %s, %s, %s)"
                " ON CONFLICT (key) DO UPDATE SET kind = excluded.kind, value = excluded.value, created_at = excluded.created_at",
                [(k, kind, json.dumps(v), now) for k, v in items.items()],
            )
        return True
    except psycopg.Error:
        return False
