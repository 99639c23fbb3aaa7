"""Fusion of the hybrid query's lists (evidence-weighted RRF) and the rerank blend (pure functions).

The hybrid pipeline (qmd/search/hybrid.py):
1. Each sub-query yields a ranked list: lex → BM25, vec/hyde → vectors, the original
   question → both. Lists from the original question (or the first typed sub-query)
   weigh 2, the others 1. BM25 lists carry, for each hit, whether it has every term and
   otherwise its coverage: the share of the question's content terms it contains.
2. `fuse_lists` (what `query` uses) sums, over the lists a document is in,
   weight × list evidence × entry evidence / (60 + rank), plus a rank bonus (+0.05 for a
   first place, +0.02 for second/third) scaled by the same evidence / 2:
   - entry evidence: 1, except an any-term fill hit of BM25: coverage² (FILL_POWER);
   - list evidence: 1 for a vector list whose best cosine reaches 0.2 (less in proportion
     below), 1 for a BM25 list with an all-terms hit; a BM25 list of fill only counts by its
     best coverage: 0 up to 0.5, rising to 1 at 0.7 (FILL_TRUST);
   - a document without vectors for its current content (changed or added since the last
     embed) is absent from the vector lists for lack of vectors, not for being far from the
     question: it stands in each vector list at its best keyword rank, weighed by that
     keyword list's evidence (`stand_ins`), so a note edited since the last embed and first
     by keywords is not pushed down by notes the vector lists know;
   - a clear vector winner (no all-terms BM25 hit, its cosine ≥ 0.2 and 15% ahead of
     the second) is put first among the documents the vector lists know.
   `rrf` is plain weighted RRF (every entry evidence 1, a flat bonus); `legacy_rrf` is
   the rule before: RRF with a fill-only BM25 list at weight 1.
   Feedback (pseudo-relevance, RM3-style, plain questions only): before fusing, the
   documents in the top 10 of both the question's BM25 and vector lists (`feedback_seeds`,
   best fused first, at most 5; none when the BM25 list has no evidence) lend the 10 words
   they most share (`feedback_terms`) to one more BM25 search, question terms plus those
   words; its hits join as the list FEEDBACK_LIST, weight 1 × the BM25 list's evidence,
   counted by rank alone: no rank bonus, since its first place is one of its own seeds (the
   words were drawn from them; 28 of 28 first places on the paraphrase, deep-research and
   example sets, 187 of 194 on Cranfield), an echo of the question's lists rather than new evidence. One FTS5 query
   and the seeds' texts: about 5 ms (p90 7-8 ms) a question on Cranfield's 1,400 documents,
   no second KNN.
3. The reranker scores the top candidates in [0, 1]; `blend` mixes that score with the
   fused rank: w / rrf_rank + (1 − w) × rerank, w = 0.75 for ranks 1–3, 0.60 for 4–10 and
   0.40 below, so the reranker can reorder the tail more freely than the head.

Why (bench/fusion_bench.py, rerank and expansion off, same captured lists per rule):
before, a BM25 list of any-term fill still weighed 1 and its first place earned the full
+0.05, so a distractor sharing one word of a paraphrased question beat the vector list's
answer: on the paraphrase set (43 questions sharing no keyword with their answer) RRF
answered 13/43 first with MiniLM against 25/43 for vectors alone. Per-document coverage
alone does not separate noise from evidence (relevant and other Cranfield documents
cover 0.50 and 0.45 of a question); the best coverage in the list does (median 0.73 on
Cranfield, 0.67 on deep-research, 0.29 on the paraphrase set). A convex combination of
normalized scores (Bruch, Gai, Ingber, TOIS 2023; α 0.3–0.8, theoretical-min, max and
min-max normalization, with and without coverage) never beat this rule on all sets at
once, and no rule tried reached Cranfield nDCG@10 0.43 with MiniLM (best 0.416).
Measured with MiniLM (hit@1 / MRR@10; before → now): paraphrase 13/43 0.508 → 25/43
0.701 (vectors 25/43 0.697), keyword 10/10 → 10/10, deep-research 24/25 → 23/25
(vectors 22/25), example 10/10 → 10/10, Cranfield nDCG@10 0.413 → 0.402 (BM25 0.378,
vectors 0.379), Cranfield hit@1 88 → 79 of 225 (vectors 80). With EmbeddingGemma-300M:
paraphrase 16/43 0.585 → 29/43 0.798 (vectors the same), deep-research 24/25 → 23/25
(vectors 23/25), keyword and example all first. The seed question "how do we undo a bad
release?" over examples/notes: the rollback runbook 2nd → 1st with either model.

Feedback, measured the same way (no feedback → feedback, same run): Cranfield (MiniLM)
nDCG@10 0.402 → 0.409, hit@1 79 → 82 of 225 (vectors 80, BM25 77), MRR@10 0.552 → 0.565;
every other set and model unchanged (paraphrase, keyword, deep-research, example, both
models: same hit@1 and MRR). It fires on 195 of 225 Cranfield questions, 8-9 of 53
paraphrase ones. Tried and not kept: vector Rocchio (the question's vector plus 0.5-1 ×
the mean best-chunk vector of the top 3-5 fused or vector documents, a second KNN): at
most 0.405 and it cost paraphrase and deep-research MRR; feedback seeded by the top
BM25 or top fused documents, or weighing 1.5-3: up to 0.426 on Cranfield, but drift
through a shared-word distractor moved the seed question (EmbeddingGemma) from 2nd to
3rd-5th and cost deep-research questions; a bonus for a document in both top-10s: at most
0.404. The chosen point sits inside a plateau (offline grid): at weight 1, 4-8 seeds with
10-15 words all lose nothing (Cranfield 0.410-0.415, hit@1 80-83); 5-8 words or weight
1.5 mostly cost the seed question with EmbeddingGemma. Also measured and not kept (the
numbers are in docs/ranking.md): query likelihood from Gemma-3-270M over the top 8 (paraphrase +2
with EmbeddingGemma, a deep-research question lost with MiniLM, seconds a question), and
heavier feedback for questions of 8+ content words (Cranfield 0.422, but +0.005 / +0.013
when chosen on one half of Cranfield and measured on the other). `blend` keeps the fused
first place whatever the reranker says (rank 1 scores at least 0.75, rank 2 at most 0.625),
as the original's does.

The feedback list without a rank bonus (issue 29, same captured lists, MiniLM): with
heading-bounded sections embedded, "how do we undo a bad release?" went from `vsearch`'s 3rd
to 4th, behind a seed the vector list ranks 8th that the feedback list ranked 1st (+0.025 of
bonus, more than the whole 0.0002 margin), and `query`'s paraphrase MRR fell 0.002 below
`vsearch`'s. Without the bonus: paraphrase 28/43 0.735 (vsearch 28/43 0.735), keyword,
deep-research and example the same with either model and chunk setting, Cranfield hit@1
82 → 82, MRR 0.5647 → 0.5649, nDCG@10 0.4100 → 0.4086 (docs/ranking.md). Not counting the
seeds' feedback entries at all cost Cranfield (nDCG@10 0.396).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Hashable, Iterable, Sequence, Set as AbstractSet

from qmd.core.records import field, record

RRF_K = 60
TOP1_BONUS = 0.05
TOP3_BONUS = 0.02


@record(frozen=True)
class RankedList:
    """One retrieval result: a name for --explain, a weight, and keys best first."""

    name: str
    weight: float
    keys: Sequence[Hashable]
    scores: Sequence[float] = ()  # one per key, higher is better: BM25 in [0, 1), cosine for vectors
    kind: str = ""  # "bm25" or "vector" ("" when unknown: such a list counts by rank alone)
    exact: int = 0  # BM25: how many leading keys matched every term (the rest is any-term fill)
    coverage: Sequence[float] = ()  # BM25: share of the query's content terms each key contains (1 for all-terms hits)


@record
class Fused:
    key: Hashable
    score: float
    best_rank: int
    contributions: list[tuple[str, int, float]] = field(default_factory=list)  # (list, rank, w/(k+rank))
    bonus: float = 0.0  # the rank bonus inside `score`


Entry = tuple[str, Hashable, int, float, float]  # (list name, key, rank, weight, bonus scale)


def _accumulate(
    lists: Sequence[RankedList], k: int, weigh: Callable[[RankedList, int], tuple[float, float]], extra: Iterable[Entry] = (),
) -> list[Fused]:
    """Reciprocal rank fusion with per-entry weights: `weigh(list, index)` gives the entry's
    weight w (it adds w / (k + rank)) and the scale of its rank bonus; a document keeps its
    largest scaled bonus. A list that repeats a key counts it once, at its best rank; ties
    go to the better best rank, then to first appearance. `extra`: entries standing in for
    ones no list holds (`stand_ins`), counted the same way after the lists."""
    fused: dict[Hashable, Fused] = {}
    order: dict[Hashable, int] = {}
    bonus: dict[Hashable, float] = {}

    def add(name: str, key: Hashable, rank: int, w: float, scale: float) -> None:
        contribution = w / (k + rank)
        entry = fused.get(key)
        if entry is None:
            entry = fused[key] = Fused(key, 0.0, rank)
            order[key] = len(order)
        entry.score += contribution
        entry.best_rank = min(entry.best_rank, rank)
        entry.contributions.append((name, rank, contribution))
        b = (TOP1_BONUS if rank == 1 else TOP3_BONUS if rank <= 3 else 0.0) * scale
        bonus[key] = max(bonus.get(key, 0.0), b)

    for ranked in lists:
        seen: set[Hashable] = set()
        for index, key in enumerate(ranked.keys):
            if key in seen:
                continue
            seen.add(key)
            add(ranked.name, key, index + 1, *weigh(ranked, index))
    for name, key, rank, w, scale in extra:
        add(name, key, rank, w, scale)
    for key, entry in fused.items():
        entry.bonus = bonus[key]
        entry.score += entry.bonus
    return sorted(fused.values(), key=lambda e: (-e.score, e.best_rank, order[e.key]))


def rrf(lists: Sequence[RankedList], k: int = RRF_K) -> list[Fused]:
    """Plain weighted RRF: each list's weight over k + rank, the flat bonus of the best rank."""
    return _accumulate(lists, k, lambda ranked, _: (ranked.weight, 1.0))


def blend_weight(rrf_rank: int) -> float:
    """How much the fused rank counts against the reranker at this position (1-based)."""
    if rrf_rank <= 3:
        return 0.75
    if rrf_rank <= 10:
        return 0.60
    return 0.40


def blend(rrf_rank: int, rerank_score: float) -> float:
    """Final score of the document at fused rank `rrf_rank` with reranker score in [0, 1]."""
    w = blend_weight(rrf_rank)
    return w * (1.0 / rrf_rank) + (1.0 - w) * rerank_score


ANY_ONLY_WEIGHT = 1.0


def legacy_rrf(lists: Sequence[RankedList]) -> list[Fused]:
    """The rule before issue 15: RRF, a BM25 list holding only any-term fill at weight <= 1."""
    return rrf([RankedList(x.name, min(x.weight, ANY_ONLY_WEIGHT), x.keys, x.scores, x.kind, x.exact) if x.kind == "bm25" and not x.exact else x for x in lists])


FILL_POWER = 2.0  # an any-term fill hit counts coverage ** FILL_POWER of an all-terms hit
FILL_TRUST = (0.5, 0.7)  # a fill-only BM25 list counts 0 below this best coverage, fully above
VECTOR_CONFIDENT = 0.2  # a vector list whose best cosine is below this knows little: it weighs less
VECTOR_GAP = 0.15  # a vector top-1 this far (share of its cosine) ahead of the second is a clear winner


def list_evidence(ranked: RankedList) -> float:
    """How much a whole list knows, in [0, 1].

    - A BM25 list with an all-terms hit: 1. One holding only any-term fill: by the best
      coverage in it (the share of the question's content terms its best document has),
      0 up to 0.5, rising linearly to 1 at 0.7 (FILL_TRUST). Measured: the best fill
      document covers a median 0.73 of a Cranfield question and 0.67 of a deep-research
      one, where BM25 helps, and 0.29 of a paraphrase question, where it is noise.
    - A vector list: its best cosine over VECTOR_CONFIDENT, at most 1 (an all-MiniLM
      cosine of 0.07 is no evidence; EmbeddingGemma's cosines stay above 0.2).
    """
    if ranked.kind == "vector":
        return min(1.0, max(0.0, ranked.scores[0]) / VECTOR_CONFIDENT) if ranked.scores else 1.0
    if ranked.kind != "bm25" or ranked.exact or not ranked.coverage:
        return 1.0
    low, high = FILL_TRUST
    return min(1.0, max(0.0, (max(ranked.coverage) - low) / (high - low)))


def evidence(ranked: RankedList, index: int) -> float:
    """How much the entry at `index` is worth within its list, in [0, 1]: 1, except an
    any-term fill hit of a BM25 list: its coverage ** FILL_POWER (a note with half the
    question's terms counts a quarter of an all-terms hit)."""
    if ranked.kind != "bm25" or index < ranked.exact or index >= len(ranked.coverage):
        return 1.0
    return float(min(1.0, max(0.0, ranked.coverage[index])) ** FILL_POWER)


def vector_winner(lists: Sequence[RankedList]) -> Hashable | None:
    """The first vector list's top key when it leads the next by >= VECTOR_GAP of its cosine
    and no keyword list has an all-terms hit (which would be the stronger evidence)."""
    if any(x.kind == "bm25" and x.exact for x in lists):
        return None
    vec = next((x for x in lists if x.kind == "vector" and x.keys), None)
    if vec is None or len(vec.scores) < 1:
        return None
    top = vec.scores[0]
    second = vec.scores[1] if len(vec.scores) > 1 else 0.0
    return vec.keys[0] if top >= VECTOR_CONFIDENT and top - second >= VECTOR_GAP * top else None


NO_VECTORS = " (no vectors yet)"  # a vector list's name + this: the stand-in entry of a document without vectors


def stand_ins(lists: Sequence[RankedList], without_vectors: AbstractSet[Hashable], list_weights: dict[int, float], k: int = RRF_K) -> list[Entry]:
    """Entries for the documents of `without_vectors` (no vectors for their current content:
    changed or added since the last embed, or in an `embed: false` collection) in each
    vector list: such a document is absent from a vector list for lack of vectors, not for
    being far from the question, so it stands in every vector list at its best keyword rank,
    weighed by the vector list's weight and evidence times that keyword list's evidence (a
    fill-only list of noise lends nothing). A fresh note first by keywords then counts as a
    note first in both lists would.

    Why the list's evidence and not the entry's (coverage², what the keyword entry itself
    earns): a vector list ranks a document its keyword list ranks r at about the worth of an
    entry at r (measured on the captured lists of bench/fusion_bench.py, MiniLM: 0.86 of it
    at rank 1 on Cranfield, 0.99 on deep-research), and with the entry's coverage² a fresh
    note kept too little (the relevant notes made stale: deep-research hit@1 6/25 against
    10/25, Cranfield 16/225 against 51/225; docs/ranking.md)."""
    if not without_vectors:
        return []
    best: dict[Hashable, tuple[int, float]] = {}  # key -> (rank, worth) of its best keyword entry
    for ranked in lists:
        worth = list_weights[id(ranked)]
        if ranked.kind != "bm25" or worth <= 0.0:
            continue
        for index, key in enumerate(ranked.keys):
            rank, prior = best.get(key, (0, 0.0))
            if key in without_vectors and (not rank or worth / (k + index + 1) > prior / (k + rank)):
                best[key] = (index + 1, worth)
    out: list[Entry] = []
    for ranked in lists:
        if ranked.kind == "vector":
            w = ranked.weight * list_weights[id(ranked)]
            out += [(ranked.name + NO_VECTORS, key, rank, w * worth, w * worth / 2.0) for key, (rank, worth) in best.items()]
    return out


def fuse_lists(lists: Sequence[RankedList], k: int = RRF_K, without_vectors: AbstractSet[Hashable] = frozenset()) -> list[Fused]:
    """Evidence-weighted RRF (see the module docstring): each list's weight times the
    evidence of the document's entry, over k + rank; the rank bonus scaled the same way;
    the documents of `without_vectors` stand in the vector lists at their keyword rank
    (`stand_ins`); a clear vector winner first among the documents the vector lists know."""
    list_weights = {id(ranked): list_evidence(ranked) for ranked in lists}

    def weigh(ranked: RankedList, index: int) -> tuple[float, float]:
        w = ranked.weight * list_weights[id(ranked)] * evidence(ranked, index)
        return w, (0.0 if ranked.name == FEEDBACK_LIST else w / 2.0)

    out = _accumulate(lists, k, weigh, stand_ins(lists, without_vectors, list_weights, k))
    winner = vector_winner(lists)
    if winner is not None and out and out[0].key != winner:
        out = _lift(out, winner, without_vectors)
    return out


def _lift(out: list[Fused], winner: Hashable, without_vectors: AbstractSet[Hashable]) -> list[Fused]:
    """`out` with the clear vector winner moved before every document the vector lists know
    (those of `without_vectors` ahead of it keep their place: the vector lists cannot rank
    the winner against them), scored TOP1_BONUS above the one it passes (less when a
    document without vectors stands just ahead)."""
    at = next(i for i, e in enumerate(out) if e.key == winner or e.key not in without_vectors)
    entry = out[at] if out[at].key == winner else next(e for e in out if e.key == winner)
    if entry is out[at]:
        return out
    lift = out[at].score - entry.score + TOP1_BONUS
    if at:
        lift = min(lift, (out[at - 1].score + out[at].score) / 2.0 - entry.score)
    entry.score += lift
    entry.contributions.append((WINNER_LIST, 1, lift))
    return out[:at] + [entry] + [e for e in out[at:] if e.key != winner]


FEEDBACK_DEPTH = 10  # seeds come from the documents in the top 10 of both the question's BM25 and vector lists
FEEDBACK_SEEDS = 5  # at most this many seeds, in fused order
FEEDBACK_TERMS = 10  # expansion words drawn from the seeds
FEEDBACK_WEIGHT = 1.0  # the feedback list's weight (the question's lists weigh 2), times the BM25 list's evidence
FEEDBACK_LIST = "feedback:bm25"
WINNER_LIST = "vector-winner"  # the lift a clear vector winner gets, shown as a list by --explain
_WORD = re.compile(r"[a-z]+")


def feedback_seeds(lists: Sequence[RankedList], fused: Sequence[Fused]) -> list[Hashable]:
    """Pseudo-relevant documents: those in the top FEEDBACK_DEPTH of both the first BM25
    list and the first vector list (the question's), best fused first, at most
    FEEDBACK_SEEDS; none when the lists share no document or the BM25 list has no evidence."""
    bm25 = next((x for x in lists if x.kind == "bm25"), None)
    vec = next((x for x in lists if x.kind == "vector"), None)
    if bm25 is None or vec is None or list_evidence(bm25) <= 0.0:
        return []
    both = set(bm25.keys[:FEEDBACK_DEPTH]) & set(vec.keys[:FEEDBACK_DEPTH])
    return [f.key for f in fused if f.key in both][:FEEDBACK_SEEDS]


def feedback_terms(question: Iterable[str], texts: Iterable[str], limit: int = FEEDBACK_TERMS) -> list[str]:
    """RM3-style expansion words from the seed documents' texts: words of three letters or
    more, not stop-words, in at least two seeds, sharing no five-letter prefix with a term
    of `question`; ranked by (sum over seeds of the word's share of the seed's words) ×
    (seeds holding it), ties alphabetically."""
    from qmd.search.syntax import STOPWORDS

    asked = {t[:5] for t in question}
    share: dict[str, float] = {}
    seeds: dict[str, int] = {}
    for text in texts:
        words = [w for w in _WORD.findall(text.lower()) if len(w) > 2 and w not in STOPWORDS]
        counts: dict[str, int] = {}
        for w in words:
            counts[w] = counts.get(w, 0) + 1
        for w, n in counts.items():
            share[w] = share.get(w, 0.0) + n / len(words)
            seeds[w] = seeds.get(w, 0) + 1
    ranked = sorted((w for w in share if seeds[w] >= 2 and w[:5] not in asked), key=lambda w: (-share[w] * seeds[w], w))
    return ranked[:limit]


def feedback_list(lists: Sequence[RankedList], keys: Sequence[Hashable]) -> RankedList:
    """The feedback search's hits as a fusion list: weight FEEDBACK_WEIGHT × the question's
    BM25 list evidence, counted by rank alone (no kind; `fuse_lists` gives it no rank bonus)."""
    bm25 = next(x for x in lists if x.kind == "bm25")
    return RankedList(FEEDBACK_LIST, FEEDBACK_WEIGHT * list_evidence(bm25), list(keys))


def coverage(terms: Iterable[str], text: str) -> float:
    """Share of `terms` (lower-case content words) that `text` contains as a word prefix.

    A term matches a word starting with its first five letters (all of a shorter term),
    the rule `lex:` expansions are kept by: close to FTS5's stemmed prefix match, and
    cheap enough for the twenty documents of a BM25 list.
    """
    terms = list(dict.fromkeys(terms))
    if not terms:
        return 0.0
    low = text.lower()
    found = sum(1 for t in terms if re.search(r"(?<!\w)" + re.escape(t[:5]), low))
    return found / len(terms)


_KINDS = {"bm25": "keywords", "lex": "keywords", "vec": "vectors", "hyde": "vectors of a hypothetical answer"}


def list_label(name: str, typed: bool = False) -> str:
    """A fusion list's name for people: `bm25:query` → "keywords (original query)", `vec#2`
    → "vectors (expansion 2)", or "(your line 2)" when the query was typed lines."""
    if name == FEEDBACK_LIST:
        return "keywords (feedback words from the top hits)"
    if name == WINNER_LIST:
        return "clear vector winner (moved first)"
    if name.endswith(NO_VECTORS):  # a stand-in (`stand_ins`)
        return f"{list_label(name[: -len(NO_VECTORS)], typed)} — no vectors yet, at its keyword rank"
    kind, sep, which = name.partition(":") if ":" in name else name.partition("#")
    what = _KINDS.get(kind, kind)
    if sep == ":":
        return f"{what} (original query)"
    return f"{what} ({'your line' if typed else 'expansion'} {which})"
