"""The rerank/expansion cache in a SQLite index: many keys in one lookup, a busy index never fails."""

from __future__ import annotations

import apsw

from qmd.backends.sqlite import cache


def table() -> apsw.Connection:
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE TABLE llm_cache (key TEXT PRIMARY KEY, kind TEXT NOT NULL, value TEXT NOT NULL, created_at TEXT NOT NULL)")
    return conn


def test_many_keys_in_one_lookup_past_the_parameter_batch() -> None:
    conn = table()
    assert cache.put_many(conn, "rerank", {f"k{i}": [i, i / 2] for i in range(1200)})
    got = cache.get_many(conn, [f"k{i}" for i in range(0, 1500, 3)])  # 500 asked, past 1200 missing
    assert got == {f"k{i}": [i, i / 2] for i in range(0, 1200, 3)}
    assert cache.get_many(conn, []) == {} and cache.get_many(conn, ["k7"]) == {"k7": [7, 3.5]}
