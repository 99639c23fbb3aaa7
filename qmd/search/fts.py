"""BM25 search over FTS5: all-terms hits first, then any-term fill.

1. The query is parsed (`syntax.parse_query`) and every part quoted, so no input is an
   FTS5 syntax error.
2. The all-terms MATCH runs first, as the original; its hits are marked `match="all"`.
3. When it returns fewer than `limit`, an any-term MATCH (stop-words dropped) fills the
   rest, ranked by BM25, marked `match="any"`. A long question with one word absent
   from every document still finds the documents that share the other words.
4. bm25 (column weights filepath 1.5, title 4.0, body 1.0, set as the table's rank) is
   normalised to |s| / (1 + |s|).
A collection filter is applied inside the query, so the top-k is exact per collection.
"""

from __future__ import annotations

from dataclasses import dataclass

import apsw

from qmd.search.syntax import ParsedQuery, build_match


@dataclass(frozen=True)
class FtsHit:
    doc_id: int
    score: float
    match: str  # "all" or "any"


def normalise(bm25: float) -> float:
    """Map an FTS5 bm25 value (negative, lower is better) into [0, 1)."""
    s = abs(bm25)
    return s / (1.0 + s)


def _run(conn: apsw.Connection, expr: str, limit: int | None, collections: list[str] | None, exclude: set[int]) -> list[tuple[int, float]]:
    # Ask for extra rows when some will be dropped as already found.
    lim = -1 if limit is None else limit + len(exclude)
    if collections is None:
        sql = "SELECT rowid, rank FROM documents_fts WHERE documents_fts MATCH ? ORDER BY rank LIMIT ?"
        params: tuple[object, ...] = (expr, lim)
    else:
        marks = ",".join("?" * len(collections))
        sql = (
            "SELECT f.rowid, f.rank FROM documents_fts f JOIN documents d ON d.id = f.rowid"
            f" WHERE documents_fts MATCH ? AND d.collection IN ({marks}) ORDER BY f.rank LIMIT ?"
        )
        params = (expr, *collections, lim)
    rows = [(r[0], r[1]) for r in conn.execute(sql, params) if r[0] not in exclude]
    return rows if limit is None else rows[:limit]


def bm25_search(
    conn: apsw.Connection,
    parsed: ParsedQuery,
    limit: int | None,
    collections: list[str] | None = None,
    min_score: float = 0.0,
) -> list[FtsHit]:
    """Ranked hits for `parsed`; `limit=None` returns every match; `collections=None` searches all."""
    if collections is not None and not collections:
        return []
    hits: list[FtsHit] = []
    all_expr = build_match(parsed, "all")
    if all_expr is None:
        return []
    for doc_id, rank in _run(conn, all_expr, limit, collections, set()):
        hits.append(FtsHit(doc_id, normalise(rank), "all"))
    any_expr = build_match(parsed, "any")
    if any_expr != all_expr and (limit is None or len(hits) < limit):
        found = {h.doc_id for h in hits}
        room = None if limit is None else limit - len(hits)
        for doc_id, rank in _run(conn, any_expr, room, collections, found):
            hits.append(FtsHit(doc_id, normalise(rank), "any"))
    return [h for h in hits if h.score >= min_score]
