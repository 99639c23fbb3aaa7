"""RRF, the rerank blend and the typed-query parser: pure functions, table-driven."""

from __future__ import annotations

import pytest

from qmd.core.errors import QmdError
from qmd.search.fusion import RankedList, blend, blend_weight, rrf
from qmd.search.typed import SubQuery, parse_typed


def test_rrf_weights_ranks_and_bonuses() -> None:
    fused = rrf([RankedList("bm25:q", 2.0, ["a", "b", "c"]), RankedList("vec:q", 2.0, ["b", "d"]), RankedList("lex:1", 1.0, ["d", "a"])])
    scores = {f.key: f.score for f in fused}
    assert scores["a"] == pytest.approx(2 / 61 + 1 / 62 + 0.05)
    assert scores["b"] == pytest.approx(2 / 62 + 2 / 61 + 0.05)
    assert scores["c"] == pytest.approx(2 / 63 + 0.02)
    assert scores["d"] == pytest.approx(2 / 62 + 1 / 61 + 0.05)
    assert [f.key for f in fused] == ["b", "a", "d", "c"]
    b = fused[0]
    assert b.best_rank == 1 and [(name, rank) for name, rank, _ in b.contributions] == [("bm25:q", 2), ("vec:q", 1)]


def test_rrf_second_and_third_get_the_small_bonus_only() -> None:
    fused = {f.key: f for f in rrf([RankedList("x", 1.0, ["a", "b", "c", "d"])])}
    assert fused["b"].score == pytest.approx(1 / 62 + 0.02)
    assert fused["c"].score == pytest.approx(1 / 63 + 0.02)
    assert fused["d"].score == pytest.approx(1 / 64)


def test_rrf_ties_keep_best_rank_then_first_seen() -> None:
    fused = rrf([RankedList("x", 1.0, ["a", "b"]), RankedList("y", 1.0, ["b", "a"])])
    assert fused[0].score == pytest.approx(fused[1].score)
    assert [f.key for f in fused] == ["a", "b"]


@pytest.mark.parametrize("lists", [[], [RankedList("x", 1.0, [])], [RankedList("x", 1.0, []), RankedList("y", 2.0, [])]])
def test_rrf_empty_lists(lists: list[RankedList]) -> None:
    assert rrf(lists) == []


def test_rrf_counts_a_repeated_key_once_per_list() -> None:
    (only,) = rrf([RankedList("x", 1.0, ["a", "a", "a"])])
    assert only.score == pytest.approx(1 / 61 + 0.05) and len(only.contributions) == 1


@pytest.mark.parametrize(("rank", "weight"), [(1, 0.75), (3, 0.75), (4, 0.60), (10, 0.60), (11, 0.40), (40, 0.40)])
def test_blend_weights(rank: int, weight: float) -> None:
    assert blend_weight(rank) == weight
    assert blend(rank, 0.5) == pytest.approx(weight / rank + (1 - weight) * 0.5)


def test_blend_lets_the_reranker_reorder_the_tail_more_than_the_head() -> None:
    assert blend(1, 0.0) > blend(2, 1.0)  # the head is sticky
    assert blend(12, 1.0) > blend(11, 0.0)  # the tail follows the reranker


@pytest.mark.parametrize(
    ("text", "searches", "intent", "expand", "plain"),
    [
        ("how do we undo a release", [], None, None, "how do we undo a release"),
        ("error: connection refused", [], None, None, "error: connection refused"),
        ("lex: rollback\nvec: undo a release", [SubQuery("lex", "rollback"), SubQuery("vec", "undo a release")], None, None, None),
        ("LEX:  load balancer \n\nhyde: Flip the load balancer back.", [SubQuery("lex", "load balancer"), SubQuery("hyde", "Flip the load balancer back.")], None, None, None),
        ("intent: deployments\nlex: rollback", [SubQuery("lex", "rollback")], "deployments", None, None),
        ("expand: undo a release\nintent: deploys", [], "deploys", "undo a release", None),
    ],
)
def test_parse_typed(text: str, searches: list[SubQuery], intent: str | None, expand: str | None, plain: str | None) -> None:
    q = parse_typed(text)
    assert (q.searches, q.intent, q.expand, q.plain) == (searches, intent, expand, plain)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("", "empty"),
        ("   \n  ", "empty"),
        ("lex: rollback\nfoo: bar", "line 2: expected lex:"),
        ("lex: rollback\njust words", "line 2: expected lex:"),
        ("plain question\nlex: rollback", "line 1: a typed query needs"),
        ("lex:", "line 1: 'lex:' has no text"),
        ("expand: x\nlex: y", "cannot be mixed"),
        ("intent: a\nintent: b\nlex: c", "line 2: only one intent"),
        ("expand: a\nexpand: b", "line 2: only one expand"),
        ("intent: only", "intent: alone"),
        ("\n".join(f"lex: w{i}" for i in range(11)), "at most 10"),
        ("vec: " + "x" * 2001, "longer than 2000"),
    ],
)
def test_parse_typed_errors(text: str, message: str) -> None:
    with pytest.raises(QmdError, match=message):
        parse_typed(text)
