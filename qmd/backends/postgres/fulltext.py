"""Keyword search in PostgreSQL: FTS5's BM25, computed in SQL over a term-statistics table.

Tokens are made exactly as the SQLite backend's FTS5 table makes them (`porter unicode61`,
through SQLite's own tokenizer, which apsw exposes), so both backends see the same terms,
stems and prefixes. Each document is stored three ways: per (term, document) its weighted
frequency over the columns and the row's length (`fts_terms`, everything in the primary
key's leaves, so a term or a prefix's terms is one index-only range scan), per (term,
document, column) the token positions (`fts_postings`, read only for phrases), and each
row's token count in `fts_docs` with the totals in `fts_stats`. A query is one SQL
statement that reads each phrase's rows once (its document frequency is their count), sums
them per document (all-terms: only documents every phrase found) and computes, as FTS5 does:

    score(d) = Σ_phrase idf(p) · f(p,d)·(k1+1) / (f(p,d) + k1·(1 − b + b·|d| / avgdl))

with f(p,d) = Σ_column weight(column) · occurrences of p in that column (weights filepath
1.5, title 4, body 1), |d| the row's tokens over all columns, k1 = 1.2, b = 0.75, and
idf(p) = ln((N − n(p) + 0.5) / (n(p) + 0.5)), at least 1e-6, n(p) the rows containing p
over the whole index (a collection or metadata filter narrows the results, not the
statistics, as in FTS5). Returned negated, like FTS5's bm25(): lower is better.
"""

from __future__ import annotations

from collections.abc import Sequence

import psycopg

from qmd.core.text import has_cjk, segment_cjk
from qmd.backends.base import Term, TextQuery
from qmd.backends.sql import fts5_tokens

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

K1 = 1.2
B = 0.75
WEIGHTS = (1.5, 4.0, 1.0)  # filepath, title, body
OPTIMIZE_AFTER = 1000  # documents written by one update: vacuum and analyze the full text after it
TOP = chr(0x10FFFF)  # above every character: the end of a prefix's range in byte ("C") order


def prefix_end(token: str) -> str:
    """The first string after every string that starts with `token`, in byte ("C") order (UTF-8
    byte order is code-point order): the last character's successor, so the planner's
    statistics estimate the range well (a range ending in U+10FFFF looks like one row to it)."""
    last = ord(token[-1])
    if last >= 0x10FFFF:
        return token + TOP
    nxt = last + 1 if not 0xD7FF <= last < 0xE000 else 0xE000  # surrogates are no characters
    return token[:-1] + chr(nxt)


def tokens(text: str, *, query: bool = False, prefix: bool = False) -> list[str]:
    """The FTS5 tokens of `text` (stemmed, folded, diacritics removed), as the SQLite backend's table makes them."""
    return fts5_tokens(text, query=query, prefix=prefix)


def postings(filepath: str, title: str, body: str) -> tuple[list[tuple[str, int, int, list[int]]], int]:
    """((term, column, tf, positions) rows, the row's token count) of one document."""
    rows: list[tuple[str, int, int, list[int]]] = []
    total = 0
    for col, text in enumerate((filepath, title, body)):
        where: dict[str, list[int]] = {}
        toks = tokens(text)
        for i, t in enumerate(toks):
            where.setdefault(t, []).append(i)
        total += len(toks)
        rows += [(t, col, len(p), p) for t, p in where.items()]
    return rows, total


def _phrase(term: Term) -> tuple[list[str], bool]:
    """(tokens, last token is a prefix) of a query term, as FTS5 reads `"text"` or `"text"*`."""
    text = " ".join(segment_cjk(term.text).split())
    prefix = not (term.phrase or has_cjk(term.text))
    return tokens(text, query=True, prefix=prefix), prefix


def _match(alias: str, token: str, prefix: bool, params: list[object]) -> str:
    if prefix:
        params += [token, prefix_end(token)]
        return f"{alias}.term >= %s AND {alias}.term < %s"
    params.append(token)
    return f"{alias}.term = %s"


def _weight_sql(alias: str) -> str:
    return f"(CASE {alias}.col WHEN 0 THEN %s WHEN 1 THEN %s ELSE %s END)" % WEIGHTS


def _hits_sql(toks: list[str], prefix: bool, params: list[object]) -> str:
    """SELECT (doc_id, f, len) of one phrase: f its weighted frequency in the row, len the row's tokens.

    A single token reads only `fts_terms` (a range of its covering primary key: the exact
    term, or the terms a prefix expands to, summed per row); only a phrase of several tokens
    reads positions (`fts_postings`)."""
    if len(toks) == 1:
        if prefix:
            params += [toks[0], prefix_end(toks[0])]
            return "SELECT doc_id, sum(f) AS f, min(len) AS len FROM fts_terms WHERE term >= %s AND term < %s GROUP BY doc_id"
        params.append(toks[0])
        return "SELECT doc_id, f, len FROM fts_terms WHERE term = %s"
    # A phrase: occurrences where token k sits at the first token's position + k, same column.
    first = _match("p0", toks[0], False, params)
    follows = []
    for k, tok in enumerate(toks[1:], start=1):
        last = k == len(toks) - 1
        cond = _match(f"p{k}", tok, prefix and last, params)
        follows.append(f"EXISTS (SELECT 1 FROM fts_postings p{k} WHERE {cond} AND p{k}.doc_id = p0.doc_id AND p{k}.col = p0.col AND x + {k} = ANY (p{k}.pos))")
    return (
        f"SELECT ph.doc_id, ph.f, fd.len FROM (SELECT p0.doc_id, sum({_weight_sql('p0')}) AS f FROM fts_postings p0, unnest(p0.pos) AS x"
        f" WHERE {first} AND {' AND '.join(follows)} GROUP BY p0.doc_id) ph JOIN fts_docs fd ON fd.doc_id = ph.doc_id"
    )


def build_sql(
    query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
) -> tuple[str, list[object]] | None:
    """The one statement of a keyword search (pure): (sql, params), or None when nothing can match.

    Each phrase's rows are read once into a CTE (h0, h1, …); its document frequency is that
    CTE's row count (over the whole index, as FTS5's idf). A document's score sums its
    phrases' terms; all-terms keeps the documents found by every phrase."""
    phrases = [_phrase(t) for t in query.terms]
    if not phrases or any(not toks for toks, _ in phrases):
        if not phrases or query.require_all:
            return None  # a term with no token (punctuation only) matches nothing, as in FTS5
        phrases = [p for p in phrases if p[0]]
        if not phrases:
            return None
    negs = [p for p in (_phrase(t) for t in query.negated) if p[0]]
    params: list[object] = []  # in the order of their marks in the text
    n = len(phrases)
    ctes = [f"h{i} AS MATERIALIZED ({_hits_sql(toks, prefix, params)})" for i, (toks, prefix) in enumerate(phrases)]
    idf = ", ".join(f"CASE WHEN ln((st.n - c{i}.c + 0.5) / (c{i}.c + 0.5)) > 0 THEN ln((st.n - c{i}.c + 0.5) / (c{i}.c + 0.5)) ELSE 1e-6 END AS w{i}" for i in range(n))
    counts = ", ".join(f"(SELECT count(*)::float8 AS c FROM h{i}) c{i}" for i in range(n))
    sql = (
        "WITH " + ", ".join(ctes) + ","
        " st AS MATERIALIZED (SELECT docs::float8 AS n, CASE WHEN docs > 0 THEN tokens::float8 / docs ELSE 1 END AS avgdl FROM fts_stats WHERE id = 1),"
        f" w AS MATERIALIZED (SELECT {idf} FROM st, {counts}),"
    )
    # One row per (phrase, document) in `u`; a document's score sums its rows. All-terms keeps
    # the documents with a row for every phrase: an aggregate, never a join of the phrases'
    # rows (whose sizes the planner cannot know in advance, and a nested loop over two
    # prefixes' thousands of rows costs seconds).
    union = " UNION ALL ".join(f"SELECT {i} AS i, doc_id, f, len FROM h{i}" for i in range(n))
    pick = "w.w0" if n == 1 else "CASE u.i " + " ".join(f"WHEN {i} THEN w.w{i}" for i in range(n)) + " END"
    sql += (
        f" u AS ({union}), scored AS (SELECT u.doc_id, sum({pick} * (u.f * %s) / (u.f + %s * (1 - %s + %s * u.len / st.avgdl))) AS score"
        " FROM u, w, st GROUP BY u.doc_id"
    )
    params += [K1 + 1, K1, B, B]
    if query.require_all and n > 1:
        sql += f" HAVING count(*) = {n}"
    sql += ")"
    sql += " SELECT s.doc_id, -s.score FROM scored s"
    filters: list[str] = []
    if collections is not None:
        sql += " JOIN documents d ON d.id = s.doc_id"
        filters.append("d.collection = ANY(%s)")
        params.append(list(collections))
    if negs:
        neg_parts = [_hits_sql(toks, prefix, params) for toks, prefix in negs]
        filters.append(f"s.doc_id NOT IN (SELECT doc_id FROM ({' UNION ALL '.join(neg_parts)}) neg)")
    if exclude:
        filters.append("s.doc_id <> ALL(%s)")
        params.append(sorted(exclude))
    if where is not None:
        from qmd.backends.postgres.filters import id_set

        ids, more = id_set(where)
        filters.append(f"s.doc_id IN ({ids})")
        params += more
    if filters:
        sql += " WHERE " + " AND ".join(filters)
    sql += " ORDER BY s.score DESC, s.doc_id"
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    return sql, params


def bm25(
    conn: psycopg.Connection, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None,
) -> list[tuple[int, float]]:
    """(document id, bm25, negative: lower is better) best first, without `exclude`."""
    if collections is not None and not collections:
        return []
    built = build_sql(query, limit, collections, exclude, where)
    if built is None:
        return []
    sql, params = built
    return [(int(r[0]), float(r[1])) for r in conn.execute(sql, params)]


_COPY_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


def write_rows(conn: psycopg.Connection, docs: Sequence[tuple[int, str, str, str]]) -> None:
    """Store the full-text rows of (doc id, filepath, title, body); their old rows must be gone.

    The COPY text is built here, a batch at a time (psycopg's per-row adaptation of the
    position arrays cost more than the rest of an update together)."""
    if not docs:
        return
    added = 0
    lengths: list[tuple[int, int]] = []
    posting_lines: list[str] = []
    term_lines: list[str] = []
    for doc_id, filepath, title, body in docs:
        rows, total = postings(filepath, title, body)
        weighted: dict[str, float] = {}
        for term, col, tf, pos in rows:
            t = term.translate(_COPY_ESCAPES)
            posting_lines.append(f"{t}\t{doc_id}\t{col}\t{tf}\t{{{','.join(map(str, pos))}}}\n")
            weighted[t] = weighted.get(t, 0.0) + WEIGHTS[col] * tf
        term_lines += [f"{t}\t{doc_id}\t{f!r}\t{total}\n" for t, f in weighted.items()]
        lengths.append((doc_id, total))
        added += total
    with conn.cursor() as cur:
        with cur.copy("COPY fts_postings (term, doc_id, col, tf, pos) FROM STDIN") as copy:
            copy.write("".join(posting_lines))
        with cur.copy("COPY fts_terms (term, doc_id, f, len) FROM STDIN") as copy:
            copy.write("".join(term_lines))
        with cur.copy("COPY fts_docs (doc_id, len) FROM STDIN") as copy:
            copy.write("".join(f"{d}\t{n}\n" for d, n in lengths))
        cur.execute("UPDATE fts_stats SET docs = docs + %s, tokens = tokens + %s WHERE id = 1", (len(lengths), added))


def delete_rows(conn: psycopg.Connection, ids: Sequence[int]) -> None:
    """Remove the full-text rows of documents (those without one are ignored)."""
    if not ids:
        return
    ids = list(ids)
    row = conn.execute("SELECT count(*), coalesce(sum(len), 0) FROM fts_docs WHERE doc_id = ANY(%s)", (ids,)).fetchone()
    n, total = (int(row[0]), int(row[1])) if row else (0, 0)
    if not n:
        return
    conn.execute("DELETE FROM fts_postings WHERE doc_id = ANY(%s)", (ids,))
    conn.execute("DELETE FROM fts_terms WHERE doc_id = ANY(%s)", (ids,))
    conn.execute("DELETE FROM fts_docs WHERE doc_id = ANY(%s)", (ids,))
    conn.execute("UPDATE fts_stats SET docs = docs - %s, tokens = tokens - %s WHERE id = 1", (n, total))


def delete_all(conn: psycopg.Connection) -> None:
    conn.execute("TRUNCATE fts_postings, fts_terms, fts_docs")
    conn.execute("UPDATE fts_stats SET docs = 0, tokens = 0 WHERE id = 1")


def optimize(conn: psycopg.Connection) -> None:
    """After a large write (an update, an import; autocommit, outside any transaction): mark the
    new rows all-visible, so keyword searches read `fts_terms` by index-only scans, and refresh
    the planner's statistics of every table a write of documents fills."""
    conn.execute("VACUUM (ANALYZE) fts_terms")
    conn.execute("ANALYZE fts_docs, fts_postings, documents, content, document_meta")
