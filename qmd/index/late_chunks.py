"""Late chunking (issue 29): one pass of the model over a whole document, each chunk's vector
the mean of its tokens' output vectors, so a chunk is embedded with the document around it.

Günther et al., "Late Chunking: Contextual Chunk Embeddings Using Long-Context Embedding
Models" (arXiv 2409.04669). Faithful for mean-pooling models (MiniLM, nomic, EmbeddingGemma,
whose dense head is linear without bias: the mean of per-token outputs equals the pooled
vector, checked in tests/qmd/index/test_late_chunks.py). A document longer than the context
is read in overlapping windows; each chunk is pooled from the window holding it with the
most context on both sides. QMD_LATE_CHUNKS=1 switches it on (internal, for the bench; part
of the fingerprint). Measured in docs/ranking.md.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["TokenEmbedder", "late_chunking", "late_tokens", "late_vectors", "plan_windows"]


def late_chunking() -> bool:
    """QMD_LATE_CHUNKS=1: chunk vectors pooled from a whole-document pass (see module doc)."""
    return os.environ.get("QMD_LATE_CHUNKS", "") == "1"


@runtime_checkable
class TokenEmbedder(Protocol):
    """An embedding model that can return every token's output vector (a local GGUF)."""

    @property
    def n_ctx(self) -> int: ...

    def tokens(self, text: str) -> list[int]: ...

    def special_tokens(self) -> tuple[list[int], list[int]]: ...

    def token_vectors(self, tokens: list[int]) -> list[list[float]]: ...


def plan_windows(total: int, room: int, spans: Sequence[tuple[int, int]]) -> tuple[list[tuple[int, int]], list[int]]:
    """Windows (start, end) of at most `room` tokens over `total` tokens, and for each span the
    window it is pooled from: the one holding it with the most context on its shorter side
    (else the one overlapping it most). Windows step by `room` less the longest span, so every
    span fits whole in one; only windows some span uses are returned."""
    if total <= room:
        return [(0, total)], [0] * len(spans)
    longest = min(max((e - s for s, e in spans), default=0), room)
    step = max(room - longest, max(room // 4, 1))
    starts = list(range(0, total - room, step)) + [total - room]
    grid = [(s, s + room) for s in starts]
    choice: list[int] = []
    for s, e in spans:
        inside = [i for i, (ws, we) in enumerate(grid) if ws <= s and e <= we]
        if inside:
            choice.append(max(inside, key=lambda i: min(s - grid[i][0], grid[i][1] - e)))
        else:
            choice.append(max(range(len(grid)), key=lambda i: min(e, grid[i][1]) - max(s, grid[i][0])))
    used = sorted(set(choice))
    index = {w: n for n, w in enumerate(used)}
    return [grid[w] for w in used], [index[c] for c in choice]


def _inputs(embedder: TokenEmbedder, head: str, text: str, spans: Sequence[tuple[int, int]]) -> tuple[list[list[int]], list[tuple[int, int]], list[int]]:
    """The token inputs of the passes (one per window), each span's token span in the text's
    tokens, and the pass each span is pooled from. The text is tokenized piece by piece
    between span boundaries, so each span's tokens are known exactly (pieces start at chunk
    boundaries: line starts mostly)."""
    bounds = sorted({p for span in spans for p in span})
    at = {bounds[0]: 0}
    ids: list[int] = []
    for a, b in zip(bounds, bounds[1:]):
        ids += embedder.tokens(text[a:b])
        at[b] = len(ids)
    lead, tail = embedder.special_tokens()
    head_ids = embedder.tokens(head)
    room = max(embedder.n_ctx - len(lead) - len(head_ids) - len(tail), 1)
    token_spans = [(at[s], max(at[e], at[s] + 1)) for s, e in spans]
    windows, choice = plan_windows(len(ids), room, token_spans)
    offset = len(lead) + len(head_ids)
    local = [(max(s, windows[w][0]) - windows[w][0] + offset, max(min(e, windows[w][1]), max(s, windows[w][0]) + 1) - windows[w][0] + offset) for (s, e), w in zip(token_spans, choice)]
    return [lead + head_ids + ids[ws:we] + tail for ws, we in windows], local, choice


def late_tokens(embedder: TokenEmbedder, head: str, text: str, spans: Sequence[tuple[int, int]]) -> int:
    """Tokens the model reads to late-chunk one document (its cost, beside the chunks' own)."""
    return sum(len(tokens) for tokens in _inputs(embedder, head, text, spans)[0]) if spans else 0


def late_vectors(embedder: TokenEmbedder, head: str, text: str, spans: Sequence[tuple[int, int]]) -> list[list[float]]:
    """The L2-normalised vector of each (start, end) char span of `text`, pooled over its tokens
    in a pass over `head` (the input's title part, in every window, never pooled) and the text
    the spans cover (`_inputs`)."""
    if not spans:
        return []
    import numpy as np  # here, not at the top: qmd.index.embedding imports this module for every fingerprint

    inputs, local, choice = _inputs(embedder, head, text, spans)
    outputs = [np.asarray(embedder.token_vectors(tokens), dtype=np.float64) for tokens in inputs]
    vectors: list[list[float]] = []
    for (s, e), w in zip(local, choice):
        mean = outputs[w][s:e].mean(axis=0)
        vectors.append([float(x) for x in mean / (np.linalg.norm(mean) or 1.0)])
    return vectors
