"""BM25 keyword search: all-terms hits first, then any-term fill.

1. The query is parsed (`syntax.parse_query`); the backend quotes every part, so no input
   is a syntax error.
2. The all-terms query runs first, as the original; its hits are marked `match="all"`.
3. When it returns fewer than `limit`, an any-term query (stop-words dropped) fills the
   rest, ranked by BM25, marked `match="any"`. A long question with one word absent
   from every document still finds the documents that share the other words.
4. bm25 (column weights filepath 1.5, title 4.0, body 1.0, computed by the backend) is
   normalised to |s| / (1 + |s|).
A collection filter and a metadata/date filter (`where`) are applied inside the query, so
the top-k is exact under them: a filter matching 1% of the documents still fills `limit`.
"""

from __future__ import annotations

from qmd.core.records import record

from qmd.search.syntax import ParsedQuery, text_query

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter
    from qmd.search.narrowed import Searchable


@record(frozen=True)
class FtsHit:
    doc_id: int
    score: float
    match: str  # "all" or "any"


def normalise(bm25: float) -> float:
    """Map an FTS5 bm25 value (negative, lower is better) into [0, 1)."""
    s = abs(bm25)
    return s / (1.0 + s)


def bm25_search(
    backend: Searchable,
    parsed: ParsedQuery,
    limit: int | None,
    collections: list[str] | None = None,
    min_score: float = 0.0,
    where: Filter | None = None,
) -> list[FtsHit]:
    """Ranked hits for `parsed`; `limit=None` returns every match; `collections=None` searches all;
    `where` keeps the documents matching a filter (qmd/core/filters.py)."""
    if collections is not None and not collections:
        return []
    hits: list[FtsHit] = []
    every = text_query(parsed, "all")
    if every is None:
        return []
    for doc_id, rank in backend.bm25(every, limit, collections, set(), where):
        hits.append(FtsHit(doc_id, normalise(rank), "all"))
    some = text_query(parsed, "any")
    # A single term (and no stop-word dropped) asks the same question twice: skip it.
    same = some is None or (len(some.terms) == 1 and some.terms == every.terms)
    if not same and some is not None and (limit is None or len(hits) < limit):
        found = {h.doc_id for h in hits}
        room = None if limit is None else limit - len(hits)
        for doc_id, rank in backend.bm25(some, room, collections, found, where):
            hits.append(FtsHit(doc_id, normalise(rank), "any"))
    return [h for h in hits if h.score >= min_score]
