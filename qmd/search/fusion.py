"""Reciprocal rank fusion and the position-aware rerank blend (pure functions).

The hybrid pipeline (qmd/search/hybrid.py):
1. Each sub-query yields a ranked list: lex → BM25, vec/hyde → vectors, the original
   question → both. Lists from the original question (or the first typed sub-query)
   weigh 2, the others 1.
2. `rrf` sums w / (k + rank) over the lists a document appears in (k = 60, ranks from 1)
   and adds a bonus for documents ranked first (+0.05) or second/third (+0.02) in any
   list, so a strong single-list hit is not drowned by many weak ones.
3. The reranker scores the top candidates in [0, 1]; `blend` mixes that score with the
   fused rank: w / rrf_rank + (1 − w) × rerank, w = 0.75 for ranks 1–3, 0.60 for 4–10 and
   0.40 below, so the reranker can reorder the tail more freely than the head.
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence
from dataclasses import dataclass, field

RRF_K = 60
TOP1_BONUS = 0.05
TOP3_BONUS = 0.02


@dataclass(frozen=True)
class RankedList:
    """One retrieval result: a name for --explain, a weight, and keys best first."""

    name: str
    weight: float
    keys: Sequence[Hashable]


@dataclass
class Fused:
    key: Hashable
    score: float
    best_rank: int
    contributions: list[tuple[str, int, float]] = field(default_factory=list)  # (list, rank, w/(k+rank))


def rrf(lists: Sequence[RankedList], k: int = RRF_K) -> list[Fused]:
    """Fuse ranked lists; ties go to the better best rank, then to first appearance."""
    fused: dict[Hashable, Fused] = {}
    order: dict[Hashable, int] = {}
    for ranked in lists:
        seen: set[Hashable] = set()
        for rank, key in enumerate(ranked.keys, start=1):
            if key in seen:  # a list that repeats a key counts it once, at its best rank
                continue
            seen.add(key)
            contribution = ranked.weight / (k + rank)
            entry = fused.get(key)
            if entry is None:
                entry = fused[key] = Fused(key, 0.0, rank)
                order[key] = len(order)
            entry.score += contribution
            entry.best_rank = min(entry.best_rank, rank)
            entry.contributions.append((ranked.name, rank, contribution))
    for entry in fused.values():
        if entry.best_rank == 1:
            entry.score += TOP1_BONUS
        elif entry.best_rank <= 3:
            entry.score += TOP3_BONUS
    return sorted(fused.values(), key=lambda e: (-e.score, e.best_rank, order[e.key]))


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
