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


# --- evidence-weighted fusion (fuse_lists, what `query` uses) ---------------------------

from qmd.search.fusion import NO_VECTORS, coverage, evidence, fuse_lists, legacy_rrf, list_evidence, vector_winner  # noqa: E402


def bm25(keys: list[str], exact: int, cover: list[float], weight: float = 2.0) -> RankedList:
    return RankedList("bm25:query", weight, keys, [0.9] * len(keys), "bm25", exact, cover)


def vec(keys: list[str], scores: list[float], weight: float = 2.0) -> RankedList:
    return RankedList("vec:query", weight, keys, scores, "vector")


@pytest.mark.parametrize(
    ("text", "want"),
    [("Rollback: the load balancer", 1.0), ("rollbacks of the balancing act", 2 / 3), ("roll back, unload", 0.0), ("", 0.0)],
)
def test_coverage_counts_five_letter_word_prefixes(text: str, want: float) -> None:
    assert coverage(["rollback", "balancer", "load"], text) == pytest.approx(want)
    assert coverage([], "anything") == 0.0


def test_evidence_of_entries_and_lists() -> None:
    fill = bm25(["a", "b", "c"], 1, [1.0, 0.5, 0.2])
    assert [evidence(fill, i) for i in range(3)] == pytest.approx([1.0, 0.25, 0.04])  # exact hit, then coverage ** 2
    assert list_evidence(fill) == 1.0  # an all-terms hit: the list knows
    assert list_evidence(bm25(["a"], 0, [0.4])) == 0.0  # best fill covers < 0.5: noise
    assert list_evidence(bm25(["a", "b"], 0, [0.3, 0.6])) == pytest.approx(0.5)  # halfway from 0.5 to 0.7
    assert list_evidence(bm25(["a"], 0, [0.9])) == 1.0
    assert list_evidence(vec(["a"], [0.1])) == pytest.approx(0.5)  # cosine 0.1 of the 0.2 that counts fully
    assert list_evidence(vec(["a"], [0.6])) == 1.0 and list_evidence(vec([], [])) == 1.0
    assert evidence(vec(["a"], [0.6]), 0) == 1.0


def test_fill_noise_does_not_beat_the_vector_answer() -> None:
    """A paraphrase: BM25 has only distractors sharing one word; vectors have the answer second."""
    lists = [bm25(["distractor", "other"], 0, [0.25, 0.2]), vec(["near", "answer", "distractor"], [0.40, 0.38, 0.30])]
    assert [f.key for f in legacy_rrf(lists)][0] == "distractor"  # the rule before: the fill's first place wins
    fused = fuse_lists(lists)
    assert [f.key for f in fused][:2] == ["near", "answer"]
    assert fused[0].bonus == pytest.approx(0.05) and fused[0].score == pytest.approx(2 / 61 + 0.05)


def test_informative_fill_still_fuses_with_vectors() -> None:
    """Cranfield-like: fill documents covering most of a long question, and weak vectors."""
    lists = [bm25(["b", "a"], 0, [0.8, 0.7]), vec(["c", "a", "b"], [0.35, 0.34, 0.33])]
    fused = {f.key: f for f in fuse_lists(lists)}
    assert fused["a"].score == pytest.approx(2 * 0.49 / 62 + 2 / 62 + 0.02)
    assert fused["b"].score == pytest.approx(2 * 0.64 / 61 + 2 / 63 + 0.05 * 0.64)
    assert [f.key for f in fuse_lists(lists)][0] == "b"


def test_exact_keyword_hit_outweighs_vectors() -> None:
    lists = [bm25(["runbook", "x"], 1, [1.0, 0.3]), vec(["x", "runbook"], [0.5, 0.49])]
    assert [f.key for f in fuse_lists(lists)][0] == "runbook"


def test_clear_vector_winner_goes_first() -> None:
    lists = [bm25(["a", "b"], 0, [0.9, 0.9]), vec(["w", "a"], [0.6, 0.4])]
    assert vector_winner(lists) == "w"
    assert [f.key for f in rrf(lists)][0] == "a"  # by ranks alone, the document in both lists
    fused = fuse_lists(lists)
    assert fused[0].key == "w" and fused[0].contributions[-1][:2] == ("vector-winner", 1)
    assert fused[0].score == pytest.approx(fused[1].score + 0.05)
    assert vector_winner([bm25(["a"], 1, [1.0]), vec(["w", "a"], [0.6, 0.4])]) is None  # an all-terms hit knows better
    assert vector_winner([vec(["w", "a"], [0.6, 0.55])]) is None  # not 15% ahead
    assert vector_winner([vec(["w", "a"], [0.15, 0.01])]) is None  # below the cosine that counts
    assert vector_winner([vec(["w"], [0.5])]) == "w"


def test_fuse_lists_without_evidence_fields_is_weighted_rrf_with_scaled_bonus() -> None:
    lists = [RankedList("x", 2.0, ["a", "b"]), RankedList("y", 1.0, ["b"])]
    fused = {f.key: f for f in fuse_lists(lists)}
    assert fused["a"].score == pytest.approx(2 / 61 + 0.05)
    assert fused["b"].score == pytest.approx(2 / 62 + 1 / 61 + 0.025)  # max(0.02 × 2/2, 0.05 × 1/2)
    assert fuse_lists([]) == [] and fuse_lists([RankedList("x", 1.0, [])]) == []


def test_feedback_seeds_are_the_documents_both_lists_agree_on() -> None:
    from qmd.search.fusion import feedback_list, feedback_seeds, fuse_lists

    bm25 = RankedList("bm25:query", 2.0, ["a", "b", "c"], [0.9, 0.8, 0.7], "bm25", 3, [1.0, 1.0, 1.0])
    vec = RankedList("vec:query", 2.0, ["c", "d", "b"], [0.5, 0.4, 0.3], "vector")
    lists = [bm25, vec]
    assert feedback_seeds(lists, fuse_lists(lists)) == ["c", "b"]  # fused order, only the shared ones
    assert feedback_seeds([bm25, RankedList("vec:query", 2.0, ["d"], [0.5], "vector")], fuse_lists(lists)) == []
    fill = RankedList("bm25:query", 2.0, ["c", "b"], [0.2, 0.1], "bm25", 0, [0.3, 0.3])  # fill below FILL_TRUST: no evidence
    assert feedback_seeds([fill, vec], fuse_lists([fill, vec])) == []
    assert feedback_seeds([vec], fuse_lists([vec])) == []  # no keyword list
    half = RankedList("bm25:query", 2.0, ["c"], [0.2], "bm25", 0, [0.6])  # half-way through FILL_TRUST
    assert feedback_list([half, vec], ["x"]).weight == pytest.approx(0.5)


def test_the_feedback_lists_first_place_earns_no_rank_bonus() -> None:
    """Issue 29, "how do we undo a bad release?" with sections (MiniLM): the feedback list's
    first place is a seed (its words were drawn from it), an echo of the question's own lists,
    so it counts by rank alone; with the first-place bonus a seed the vector list ranks 8th
    passed the answer the vector list ranks 3rd."""
    from qmd.search.fusion import FEEDBACK_LIST, feedback_list, fuse_lists

    bm25 = RankedList("bm25:query", 2.0, ["notes", "weekly", "adr"], [0.9, 0.8, 0.7], "bm25", 0, [1.0, 0.67, 0.33])
    vec = RankedList("vec:query", 2.0, ["notes", "weekly", "answer", "d4", "d5", "d6", "d7", "adr"], [0.51, 0.37, 0.32, 0.31, 0.29, 0.28, 0.27, 0.25], "vector")
    feedback = feedback_list([bm25, vec], ["adr", "weekly", "notes"])
    fused = fuse_lists([bm25, vec, feedback])
    assert [f.key for f in fused][:4] == ["notes", "weekly", "answer", "adr"]
    adr = next(f for f in fused if f.key == "adr")
    assert adr.bonus == pytest.approx(0.02 * 2.0 * 0.33**2 / 2)  # its BM25 third place, not the feedback list's first
    assert any(name == FEEDBACK_LIST for name, _, _ in adr.contributions)


def test_feedback_terms_are_shared_by_two_seeds_and_new_to_the_question() -> None:
    from qmd.search.fusion import feedback_terms

    texts = ["Wing flutter at supersonic speed; flutter of the panel.", "Panel flutter and wing boundary layers.", "The wing of a bird."]
    # "flutter" is in the question (prefix "flutt"), stop-words and words of one seed are out
    assert feedback_terms(["flutter"], texts) == ["wing", "panel"]
    assert feedback_terms(["flutter"], texts, limit=1) == ["wing"]
    assert feedback_terms(["flutter"], texts[:1]) == []  # one seed: nothing is shared


def test_a_document_without_vectors_stands_in_the_vector_lists_at_its_keyword_rank() -> None:
    """Edited since the last embed: first by keywords, absent from the vector list for lack of
    vectors. It is not outranked by a document second in both lists."""
    lists = [bm25(["fresh", "old"], 2, [1.0, 1.0]), vec(["unrelated", "old"], [0.30, 0.29])]
    before = fuse_lists(lists)
    assert before[0].key == "old"  # counted as a vector miss, the fresh note lost
    fused = fuse_lists(lists, without_vectors={"fresh"})
    assert fused[0].key == "fresh"
    entry = fused[0]
    assert [(n, r) for n, r, _ in entry.contributions] == [("bm25:query", 1), ("vec:query" + NO_VECTORS, 1)]
    assert entry.score == pytest.approx(2 / 61 + 2 / 61 + 0.05)  # as a note first in both lists
    assert {f.key: f.score for f in fused}["old"] == pytest.approx({f.key: f.score for f in before}["old"])  # the others as before


def test_a_stand_in_carries_its_keyword_lists_evidence_and_the_vector_lists_weight() -> None:
    weak = vec(["a"], [0.1])  # a vector list of half evidence
    fill = bm25(["noise", "half"], 0, [0.3, 0.65])  # fill only: list evidence 0.75, entries coverage ** 2
    fused = {f.key: f for f in fuse_lists([fill, weak], without_vectors={"noise", "half"})}
    half = dict((n, v) for n, _, v in fused["half"].contributions)
    assert half["vec:query" + NO_VECTORS] == pytest.approx(2 * 0.5 * 0.75 / 62)  # rank 2, as a vector entry of the list's evidence
    assert half["bm25:query"] == pytest.approx(2 * 0.75 * 0.65**2 / 62)
    noise = bm25(["junk"], 0, [0.4])  # a fill-only list of noise (best coverage < 0.5) lends nothing
    assert [n for n, _, _ in fuse_lists([noise, weak], without_vectors={"junk"})[-1].contributions] == ["bm25:query"]
    assert fuse_lists([weak], without_vectors={"x"})[0].key == "a"  # no keyword list: nothing stands in


def test_a_clear_vector_winner_passes_only_documents_the_vector_lists_know() -> None:
    lists = [bm25(["fresh", "a", "b"], 0, [0.9, 0.9, 0.9]), vec(["w", "a", "b"], [0.6, 0.4, 0.3])]
    assert fuse_lists(lists)[0].key == "w"
    fused = fuse_lists(lists, without_vectors={"fresh"})
    assert [f.key for f in fused][:2] == ["fresh", "w"]  # first among the documents the vector lists can rank
    assert fused[0].score > fused[1].score > fused[2].score
