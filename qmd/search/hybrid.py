"""`query`: expansion → BM25 and vector lists → RRF → rerank → position-aware blend.

1. Parse the query (plain, or typed lex/vec/hyde/intent/expand lines).
2. Plain questions: a BM25 probe; a strong all-terms hit (top ≥ 0.85, gap ≥ 0.15, no
   intent) skips expansion. Otherwise the generate model expands the question into typed
   lines (cached); `lex:` lines sharing no term with the question are dropped.
3. Routing: lex → BM25, vec/hyde → vectors, the original question → both; top 20 each.
   The original question's lists (or the first typed line's) weigh 2.
4. Reciprocal rank fusion (qmd/search/fusion.py).
5. The top `candidates` documents are reranked on their best chunk (cached per chunk).
6. Position-aware blend of fused rank and rerank score; without a reranker the score is
   1 / fused rank. Each missing model skips its stage, and the result says so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .fusion import RankedList, blend, rrf
from .syntax import STOPWORDS, parse_query
from .typed import SubQuery, TypedQuery, parse_typed

LIST_DEPTH = 20
STRONG_SCORE = 0.85
STRONG_GAP = 0.15

Progress = Callable[[str], None]


@dataclass
class QueryOptions:
    limit: int = 10
    candidates: int = 40
    min_score: float = 0.0
    collections: list[str] | None = None
    intent: str | None = None
    rerank: bool = True
    expand: bool = True


@dataclass
class Candidate:
    """A fused document before and after reranking (everything --explain shows)."""

    doc_id: int
    rrf_score: float
    rrf_rank: int
    contributions: list[tuple[str, int, float]]
    rerank: float | None = None
    score: float = 0.0
    chunk: tuple[int, int] | None = None  # the (start, end) the reranker read


@dataclass
class QueryPlan:
    """What ran: the sub-queries actually searched, the stages, notices and timings."""

    question: str
    intent: str | None
    searches: list[SubQuery] = field(default_factory=list)
    stages: dict[str, Any] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)


def question_terms(text: str) -> set[str]:
    return {w for w in parse_query(text).words if w not in STOPWORDS}


def shares_a_term(lex: str, question: str) -> bool:
    """A `lex:` expansion is kept only when it shares a (stemmed-prefix) term with the question."""
    q = question_terms(question)
    for word in question_terms(lex):
        if any(word[:5] == t[:5] for t in q):
            return True
    return False


def strong_signal(scores: list[float]) -> bool:
    if not scores or scores[0] < STRONG_SCORE:
        return False
    return len(scores) == 1 or scores[0] - scores[1] >= STRONG_GAP


class Timer:
    def __init__(self, plan: QueryPlan) -> None:
        self.plan = plan

    def __call__(self, stage: str) -> _Span:
        return _Span(self.plan, stage)


class _Span:
    def __init__(self, plan: QueryPlan, stage: str) -> None:
        self.plan, self.stage = plan, stage

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.plan.timings_ms[self.stage] = self.plan.timings_ms.get(self.stage, 0.0) + (time.perf_counter() - self.t0) * 1000


def plan_searches(typed: TypedQuery, expansions: list[SubQuery] | None) -> tuple[str, list[tuple[str, str, float, str]]]:
    """(question, [(list name, backend, weight, text)]) for a parsed query and its expansions.

    backend is "bm25" or "vector"; the first list(s) weigh 2.
    """
    lists: list[tuple[str, str, float, str]] = []
    if typed.searches:
        for i, sub in enumerate(typed.searches):
            backend = "bm25" if sub.type == "lex" else "vector"
            lists.append((f"{sub.type}#{i + 1}", backend, 2.0 if i == 0 else 1.0, sub.text))
        return typed.question, lists
    question = typed.question
    lists.append(("bm25:query", "bm25", 2.0, question))
    lists.append(("vec:query", "vector", 2.0, question))
    for i, sub in enumerate(expansions or []):
        backend = "bm25" if sub.type == "lex" else "vector"
        lists.append((f"{sub.type}#{i + 1}", backend, 1.0, sub.text))
    return question, lists


def fuse(named: list[tuple[str, float, list[int]]]) -> list[Candidate]:
    fused = rrf([RankedList(name, weight, keys) for name, weight, keys in named])
    return [Candidate(int(f.key), f.score, rank, f.contributions) for rank, f in enumerate(fused, start=1)]  # type: ignore[arg-type]


def finish(candidates: list[Candidate], reranked: bool) -> list[Candidate]:
    """Final scores: the blend with rerank scores, else 1 / fused rank; best first."""
    for c in candidates:
        c.score = blend(c.rrf_rank, c.rerank or 0.0) if reranked and c.rerank is not None else 1.0 / c.rrf_rank
    return sorted(candidates, key=lambda c: (-c.score, c.rrf_rank))


_SENTENCE = re.compile(r"(?<=[.!?])\s+")


def best_chunk(text: str, chunks: list[tuple[int, int]], words: set[str], intent_words: set[str], fallback_chars: int) -> tuple[int, int]:
    """The (start, end) with the most query-term overlap (intent terms count half)."""
    if not chunks:
        chunks = [(i, min(len(text), i + fallback_chars)) for i in range(0, max(len(text), 1), max(fallback_chars * 3 // 4, 1))]
    best, best_score = chunks[0], -1.0
    for start, end in chunks:
        low = text[start:end].lower()
        score = sum(1.0 for w in words if w in low) + sum(0.5 for w in intent_words if w in low)
        if score > best_score:
            best, best_score = (start, end), score
    return best
