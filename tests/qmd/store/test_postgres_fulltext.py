"""The PostgreSQL backend's BM25 against the SQLite backend's FTS5, query by query.

One corpus indexed on both backends; every query of the table (exact terms, short prefixes
that expand to many terms, phrases, prefix phrases, negation, all-terms and any-term, a
collection scope, excluded ids, diacritics, CJK, punctuation only) must return the same
documents in the same order with the same bm25 values (to 1e-9 relative).
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import qmd
from qmd.search.syntax import parse_query, text_query
from qmd.backends.base import IndexBackend, Term, TextQuery

WORDS = (
    "file files filesystem filter find finder fine git github gitlab commit commits committed amend branch branches "
    "name names named compress compression archive extract tar zip docker container logs image build network port "
    "process kill list show memory usage disk mount user password key ssh remote copy move rename link symbolic "
    "café naïve résumé über"
).split()


def _corpus(root: Path) -> None:
    rng = random.Random(17)
    for sub in ("alpha", "beta"):
        (root / sub).mkdir(parents=True)
    for i in range(160):
        words = [rng.choice(WORDS) for _ in range(rng.randint(3, 120))]
        title = " ".join(rng.choice(WORDS) for _ in range(rng.randint(1, 4)))
        body = "\n".join(" ".join(words[j:j + 12]) for j in range(0, len(words), 12))
        name = f"{rng.choice(WORDS)}-{i}.md"
        (root / ("alpha" if i % 3 else "beta") / name).write_text(f"# {title}\n\n{body}\n", encoding="utf-8")
    (root / "alpha" / "cjk.md").write_text("# 検索\n\n全文検索のテスト file\n", encoding="utf-8")


QUERIES = [
    "file", "fil", "f", "git", "git commit", "git commit amend", "find files name", "compress files", "docker container logs",
    '"git commit"', '"commit amend"', '"files name"', "kill -process", "-git files", "cafe", "naive resume", "uber",
    "検索", "files, (name)", "zzyzx", "zzyzx file",
]


def _paths(backend: IndexBackend, hits: list[tuple[int, float]]) -> list[tuple[str, float]]:
    rows = backend.documents([i for i, _ in hits])
    return [(f"{rows[i][0].collection}/{rows[i][0].path}", score) for i, score in hits]


def _same(a: list[tuple[str, float]], b: list[tuple[str, float]]) -> None:
    assert [s for _, s in a] == pytest.approx([s for _, s in b], rel=1e-9)
    # Equal scores may come in another order (ties break on ids); the sets per score must match.
    assert sorted((round(s, 7), p) for p, s in a) == sorted((round(s, 7), p) for p, s in b)


@pytest.fixture(scope="module")
def both(tmp_path_factory: pytest.TempPathFactory, postgres_url: str):  # type: ignore[no-untyped-def]
    import os

    from tests.support import postgres

    tmp = tmp_path_factory.mktemp("ftparity")
    root = tmp / "notes"
    _corpus(root)
    os.environ.pop("QMD_DATABASE_URL", None)
    lite = qmd.Store(tmp / "lite" / "index.sqlite", tmp / "lite" / "index.yml")
    lite.add_collection(root / "alpha", name="alpha")
    lite.add_collection(root / "beta", name="beta")
    url, schema = postgres.fresh_schema_url(postgres_url)
    os.environ["QMD_DATABASE_URL"] = url
    try:
        pg = qmd.Store(tmp / "pg" / "index.sqlite", tmp / "pg" / "index.yml")
        pg.add_collection(root / "alpha", name="alpha")
        pg.add_collection(root / "beta", name="beta")
    finally:
        del os.environ["QMD_DATABASE_URL"]
    yield lite.backend, pg.backend
    lite.close()
    pg.close()
    postgres.drop_schema(postgres_url, schema)


@pytest.mark.parametrize("mode", ["all", "any"])
@pytest.mark.parametrize("q", QUERIES)
def test_bm25_equals_sqlite(both: tuple[IndexBackend, IndexBackend], q: str, mode: str) -> None:
    lite, pg = both
    tq = text_query(parse_query(q), mode)
    if tq is None:
        pytest.skip("no text query")
    _same(_paths(pg, pg.bm25(tq, None, None, set())), _paths(lite, lite.bm25(tq, None, None, set())))
    _same(_paths(pg, pg.bm25(tq, 10, ["beta"], set())), _paths(lite, lite.bm25(tq, 10, ["beta"], set())))


def test_any_term_fill_excludes_the_all_terms_hits(both: tuple[IndexBackend, IndexBackend]) -> None:
    lite, pg = both
    every, some = text_query(parse_query("git commit amend"), "all"), text_query(parse_query("git commit amend"), "any")
    assert every is not None and some is not None
    for backend in (lite, pg):
        first = backend.bm25(every, 5, None, set())
        rest = backend.bm25(some, 20, None, {i for i, _ in first})
        assert first and rest and not {i for i, _ in first} & {i for i, _ in rest}
    a = _paths(pg, pg.bm25(some, 20, None, {i for i, _ in pg.bm25(every, 5, None, set())}))
    b = _paths(lite, lite.bm25(some, 20, None, {i for i, _ in lite.bm25(every, 5, None, set())}))
    _same(a, b)


def test_prefix_phrase_and_empty_terms(both: tuple[IndexBackend, IndexBackend]) -> None:
    lite, pg = both
    for tq in (
        TextQuery((Term("git comm"),)),  # a prefix phrase: the last token is a prefix
        TextQuery((Term("git commit", phrase=True), Term("fi"))),
        TextQuery((Term("..."), Term("file")), require_all=False),  # a punctuation-only term drops out of any-term
        TextQuery((Term("..."), Term("file"))),  # and matches nothing in all-terms
    ):
        _same(_paths(pg, pg.bm25(tq, None, None, set())), _paths(lite, lite.bm25(tq, None, None, set())))


def test_keyword_search_reads_no_positions_without_a_phrase() -> None:
    from qmd.backends.postgres.fulltext import build_sql

    built = build_sql(TextQuery((Term("git"), Term("commit"))), 10, None, set())
    assert built is not None and "fts_postings" not in built[0] and "fts_terms" in built[0]
    phrase = build_sql(TextQuery((Term("git commit", phrase=True),)), 10, None, set())
    assert phrase is not None and "fts_postings" in phrase[0]


def test_the_table_finds_things(both: tuple[IndexBackend, IndexBackend]) -> None:
    # Guards the parametrisation above: most queries must match something on both backends.
    lite, pg = both
    found = [q for q in QUERIES if (tq := text_query(parse_query(q), "any")) and pg.bm25(tq, None, None, set())]
    assert len(found) >= len(QUERIES) - 3 and "検索" in found and "cafe" in found
