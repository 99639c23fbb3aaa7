"""Keyword search in FTS5: a `TextQuery` as a MATCH expression, ranked by the table's bm25.

Every term reaches FTS5 quoted, so no user input can be an FTS5 syntax error. Plain words
match as prefixes (`"roll"*`), phrases and CJK runs as phrases. The table's rank is
`bm25(1.5, 4.0, 1.0)` (filepath, title, body), set when the table was created.
"""

from __future__ import annotations

import apsw

from qmd.core.text import has_cjk, segment_cjk
from qmd.backends.base import Term, TextQuery

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter


# The table's rank (set when it was created: 0001_core) as a function call, for filtered searches.
RANK_FUNCTION = "bm25(documents_fts, 1.5, 4.0, 1.0)"
SMALL_SET = 4096  # one condition matching fewer documents is applied as a set; more, or a group, as a probe per match


def _fts_string(term: Term) -> str:
    text = " ".join(segment_cjk(term.text).split())
    quoted = '"' + text.replace('"', '""') + '"'
    # Prefix matching for plain words; CJK text is matched as a phrase of characters.
    return quoted if term.phrase or has_cjk(term.text) else quoted + "*"


def _join(terms: tuple[Term, ...], op: str) -> str:
    parts = [_fts_string(t) for t in terms]
    return parts[0] if len(parts) == 1 else "(" + f" {op} ".join(parts) + ")"


def build_match(query: TextQuery) -> str | None:
    """The FTS5 MATCH text for `query` (pure); None when it has no positive term."""
    if not query.terms:
        return None
    expr = _join(query.terms, "AND" if query.require_all else "OR")
    if query.negated:
        expr = f"{expr} NOT {_join(query.negated, 'OR')}"
    return expr


def bm25(
    conn: apsw.Connection, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
) -> list[tuple[int, float]]:
    """(document id, bm25) best first, skipping `exclude`; `collections` and `where` filter inside the query."""
    expr = build_match(query)
    if expr is None or (collections is not None and not collections):
        return []
    # Ask for extra rows when some will be dropped as already found.
    lim = -1 if limit is None else limit + len(exclude)
    params: list[object] = [expr]
    # Filtered, the score is computed by the bm25() function for the rows that pass the
    # filter only (SQLite evaluates WHERE first); `rank` would score every match before the
    # filter sees one: a 1% filter on a common word is then 8x faster. Same values.
    score = "f.rank" if where is None else RANK_FUNCTION
    if collections is None:
        sql = f"SELECT f.rowid, {score} AS score FROM documents_fts f WHERE documents_fts MATCH ?"
    else:
        marks = ",".join("?" * len(collections))
        sql = f"SELECT f.rowid, {score} AS score FROM documents_fts f JOIN documents d ON d.id = f.rowid WHERE documents_fts MATCH ? AND d.collection IN ({marks})"
        params += collections
    if where is not None:
        from qmd.core.filters import Condition
        from qmd.backends.sql import count
        from qmd.backends.sqlite.filters import id_set, predicate

        ids, more = id_set(where)
        # Only a single index range (one condition) is cheap enough to count and build per
        # query; a group's set costs more than probing the matches.
        simple = isinstance(where, Condition) and (where.operator in ("eq", "in", "gt", "gte", "lt", "lte") or (where.operator == "exists" and where.value is True))
        if simple and count(conn, f"SELECT count(*) FROM (SELECT 1 FROM ({ids}) LIMIT ?)", (*more, SMALL_SET)) < SMALL_SET:
            # A few thousand ids at most: SQLite builds the set once (with a Bloom filter) and
            # each match is a lookup. The `+` keeps the constraint from FTS5, which would run
            # the MATCH once per id (a minute on 23k ids).
            sql += f" AND +f.rowid IN ({ids})"
        else:  # a broad filter: a primary-key probe per match, no set of tens of thousands built
            ids, more = predicate(where, "f.rowid")
            sql += f" AND {ids}"
        params += more
    rows = [(int(r[0]), float(r[1])) for r in conn.execute(sql + f" ORDER BY {'f.rank' if where is None else 'score'} LIMIT ?", (*params, lim)) if r[0] not in exclude]
    return rows if limit is None else rows[:limit]


def write_row(conn: apsw.Connection, doc_id: int, filepath: str, title: str, body: str) -> None:
    conn.execute("INSERT INTO documents_fts (rowid, filepath, title, body) VALUES (?, ?, ?, ?)", (doc_id, filepath, title, body))


def delete_row(conn: apsw.Connection, doc_id: int) -> None:
    conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
