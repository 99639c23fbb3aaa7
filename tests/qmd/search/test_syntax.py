"""Keyword query syntax → FTS5 MATCH (pure, table-driven)."""

from __future__ import annotations

import pytest

from qmd.search.syntax import ParsedQuery, parse_query, text_query
from qmd.backends.sqlite.fulltext import build_match as _match


def build_match(parsed: ParsedQuery, mode: str) -> str | None:
    """The FTS5 MATCH text the SQLite backend runs for `parsed` in `mode`."""
    query = text_query(parsed, mode)
    return None if query is None else _match(query)


@pytest.mark.parametrize(
    ("query", "all_expr", "any_expr"),
    [
        ("kubectl", '"kubectl"*', '"kubectl"*'),
        ("load balancer", '("load"* AND "balancer"*)', '("load"* OR "balancer"*)'),
        ('"load balancer"', '"load balancer"', '"load balancer"'),
        ("blue -green", '"blue"* NOT "green"*', '"blue"* NOT "green"*'),
        ('rollback -"blue green"', '"rollback"* NOT "blue green"', '"rollback"* NOT "blue green"'),
        ("blue-green", '"blue-green"*', '"blue-green"*'),
        ("what is the rollback plan", '("what"* AND "is"* AND "the"* AND "rollback"* AND "plan"*)', '("rollback"* OR "plan"*)'),
        ("the and of", '("the"* AND "and"* AND "of"*)', '("the"* OR "and"* OR "of"*)'),  # only stop-words: keep them
        ('say "hi"', '("say"* AND "hi")', '("say"* OR "hi")'),
        ('quote"inside', '"quote""inside"*', '"quote""inside"*'),
        ("東京", '"東 京"', '"東 京"'),
        ("aircraft .", '"aircraft"*', '"aircraft"*'),
        ("NEAR(a b)", '"NEAR(a"* AND "b)"*'.join(["(", ")"]), '"NEAR(a"* OR "b)"*'.join(["(", ")"])),
    ],
)
def test_build_match(query: str, all_expr: str, any_expr: str) -> None:
    parsed = parse_query(query)
    assert build_match(parsed, "all") == all_expr
    assert build_match(parsed, "any") == any_expr


@pytest.mark.parametrize("query", ["", "   ", "-green", '-"a b"', "...", "- - -", '""', "*", "^"])
def test_nothing_positive_means_no_match(query: str) -> None:
    assert build_match(parse_query(query), "all") is None


def test_unclosed_quote_is_a_phrase_to_the_end() -> None:
    parsed = parse_query('"load balancer')
    assert [t.text for t in parsed.positive] == ["load balancer"]
    assert parsed.positive[0].phrase


def test_words_for_snippets() -> None:
    assert parse_query('Flip "load balancer" -green').words == ["flip", "load", "balancer"]


def test_unknown_mode() -> None:
    with pytest.raises(ValueError):
        build_match(parse_query("x"), "some")
