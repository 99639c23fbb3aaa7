"""Split a document into overlapping chunks for embedding, cutting at the best break point.

Pure: token counting is a callable (the embedding model's own tokenizer in production, a
word counter in tests). The rules, as the original:

1. A document that fits in `max_tokens` is one chunk.
2. Otherwise each chunk aims at `max_tokens`; the cut goes to the best break point within
   the last `window_tokens` before that target. A break before a line scores by what the
   line is: heading h1..h6 100/90/80/70/60/50, code fence 80, horizontal rule 60, blank
   line 20, list item 5, any other line 1; the score decays with distance d from the
   target: score × (1 − (d / window)² × 0.7).
3. Never cut inside a code fence (only when a fence alone is longer than a chunk).
4. Consecutive chunks overlap by `overlap_tokens` (15% by default), starting on a line.
5. Every chunk is checked with the real token count and shortened until it fits.

With `code` (the break points of a source file's syntax tree, `code_chunks`), a line where a
definition starts scores the better of its regex and its definition score, and no cut (nor
an overlap start) goes inside a function's body while the window has a place outside one.
"""

from __future__ import annotations

import re
from bisect import bisect_left, bisect_right
from collections.abc import Callable
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from qmd.index.code_chunks import CodePoints

_HEADING = re.compile(r"^(#{1,6})\s")
_FENCE = re.compile(r"^\s{0,3}(```|~~~)")
_HR = re.compile(r"^\s{0,3}([-*_])(\s*\1){2,}\s*$")
_LIST = re.compile(r"^\s*([-*+]|\d+[.)])\s")
_HEADING_SCORES = {1: 100, 2: 90, 3: 80, 4: 70, 5: 60, 6: 50}


@dataclass(frozen=True)
class Chunk:
    seq: int
    start: int  # character offset in the document
    end: int
    text: str
    tokens: int


@dataclass(frozen=True)
class BreakPoint:
    pos: int  # character offset of the start of the line the cut goes before
    score: float
    in_fence: bool
    inside: bool = False  # inside a function's body (code files chunked by syntax)


def break_points(text: str, code: CodePoints | None = None) -> list[BreakPoint]:
    """Every line start after the first, scored as a place to cut before it."""
    if code is not None:
        # The regex scores stay (as the original merges them); a ``` in a string is no fence.
        return [
            BreakPoint(p.pos, max(p.score, code.scores.get(p.pos, 0.0)), False, p.pos in code.inside)
            for p in _regex_points(text)
        ]
    return _regex_points(text)


def _regex_points(text: str) -> list[BreakPoint]:
    points: list[BreakPoint] = []
    in_fence = False
    pos = 0
    previous_closed_fence = False
    for index, line in enumerate(text.split("\n")):
        is_fence = bool(_FENCE.match(line))
        if index > 0:
            if is_fence and not in_fence:
                score = 80.0
            elif previous_closed_fence:
                score = 80.0
            elif (m := _HEADING.match(line)) and not in_fence:
                score = float(_HEADING_SCORES[len(m.group(1))])
            elif _HR.match(line):
                score = 60.0
            elif not line.strip():
                score = 20.0
            elif _LIST.match(line):
                score = 5.0
            else:
                score = 1.0
            points.append(BreakPoint(pos, score, in_fence))
        previous_closed_fence = is_fence and in_fence
        if is_fence:
            in_fence = not in_fence
        pos += len(line) + 1
    return points


def _best_cut(
    points: list[BreakPoint], positions: list[int], lo: int, target: int, window_chars: float, allow_fence: bool, allow_inside: bool = True,
) -> int | None:
    best, best_score = None, -1.0
    first = bisect_right(positions, max(lo, target - window_chars if window_chars else lo))
    for p in points[first : bisect_right(positions, target)]:
        if p.pos <= lo or (p.in_fence and not allow_fence) or (p.inside and not allow_inside):
            continue
        distance = target - p.pos
        score = p.score * (1.0 - (distance / window_chars) ** 2 * 0.7) if window_chars else p.score
        if score > best_score:
            best, best_score = p.pos, score
    return best


def _cut(text: str, points: list[BreakPoint], positions: list[int], lo: int, target: int, window: float) -> int:
    """Where to end a chunk that starts at `lo` and aims at `target`.

    The best break in the window outside any fence; else the latest break outside a fence
    before the target (e.g. right before a fence that spans the whole window); only then a
    break inside a fence (a fence longer than a chunk), or a cut inside a long line. In code,
    a break outside every function's body in the window comes first.
    """
    best = _best_cut(points, positions, lo, target, window, allow_fence=False, allow_inside=False)
    if best is None:
        best = _best_cut(points, positions, lo, target, window, allow_fence=False)
    if best is not None:
        return best
    for p in reversed(points[bisect_right(positions, lo) : bisect_right(positions, target)]):
        if not p.in_fence:
            return p.pos
    return _best_cut(points, positions, lo, target, window, allow_fence=True) or _soft_cut(text, lo, target)


def _soft_cut(text: str, lo: int, target: int) -> int:
    """A cut in a long line: the last whitespace before `target`, else `target` itself."""
    space = text.rfind(" ", lo + 1, target)
    return space + 1 if space > lo else target


def _fit(
    text: str, points: list[BreakPoint], positions: list[int], start: int, window: float, ratio: float,
    count_tokens: Callable[[str], int], max_tokens: int,
) -> tuple[int, int, str, int]:
    """(start, end, text, tokens) of the longest well-cut chunk from `start` that fits."""
    length = max(int(max_tokens * ratio), 1)  # characters aimed at; shrinks until the chunk fits
    while True:
        target = min(len(text), start + length)
        end = len(text) if target >= len(text) else _cut(text, points, positions, start, target, window)
        piece = text[start:end]
        tokens = count_tokens(piece)
        if tokens <= max_tokens or end - start <= 1:
            return start, end, piece, tokens
        # Strictly shorter each round, so dense text after sparse text still terminates.
        length = max(1, min(int((end - start) * max_tokens / tokens * 0.95), end - start - 1))


def chunk_text(
    text: str,
    count_tokens: Callable[[str], int],
    max_tokens: int = 900,
    overlap_tokens: int = 135,
    window_tokens: int = 200,
    code: CodePoints | None = None,
) -> list[Chunk]:
    """Chunks of `text` of at most `max_tokens` tokens each; see the module docstring."""
    if max_tokens < 8:
        raise ValueError("max_tokens must be at least 8")
    overlap_tokens = min(overlap_tokens, max_tokens // 2)
    window_tokens = min(window_tokens, max_tokens // 2)
    total = count_tokens(text)
    if total <= max_tokens:
        return [Chunk(0, 0, len(text), text, total)] if text.strip() else []
    ratio = len(text) / max(total, 1)  # characters per token, for this document
    points = break_points(text, code)
    positions = [p.pos for p in points]
    chunks: list[Chunk] = []
    start = 0
    window = window_tokens * ratio
    previous_end = 0
    while start < len(text):
        start, end, piece, tokens = _fit(text, points, positions, start, window, ratio, count_tokens, max_tokens)
        if end <= previous_end and start < previous_end:
            # The overlap left no room to move forward (dense text): continue without overlap.
            start, end, piece, tokens = _fit(text, points, positions, previous_end, window, ratio, count_tokens, max_tokens)
        previous_end = end
        if piece.strip():
            chunks.append(Chunk(len(chunks), start, end, piece, tokens))
        if end >= len(text):
            break
        # Overlap: step back by overlap_tokens, then forward to the next line start outside a
        # code fence; with none there (the chunk ended just after a long fence), no overlap.
        # In code the overlap starts outside a function's body when it can.
        back = end - int(overlap_tokens * ratio)
        candidates = points[bisect_left(positions, back) : bisect_left(positions, end)]
        if candidates:
            nxt = next((p.pos for p in candidates if not p.in_fence and not p.inside), 0) or next((p.pos for p in candidates if not p.in_fence), end)
        else:
            nxt = back  # inside one long line: overlap from the exact offset
        start = nxt if start < nxt < end else end
    return chunks


@dataclass(frozen=True)
class HeadingTrail:
    """The Markdown headings of a text (outside code fences), each with the path of headings
    it sits under: what a chunk starting anywhere in the text is about."""

    positions: list[int]  # line start of each heading
    paths: list[tuple[tuple[int, int, str], ...]]  # (pos, level, text) from the top down to that heading

    def path_at(self, pos: int) -> tuple[tuple[int, int, str], ...]:
        """The headings above `pos`, top first (a heading at `pos` is the chunk's own text)."""
        i = bisect_left(self.positions, pos)
        if i < len(self.positions) and self.positions[i] == pos:
            return self.paths[i][:-1]
        return self.paths[i - 1] if i else ()


def heading_trail(text: str) -> HeadingTrail:
    """Every heading of `text` and its path (a heading closes those of its level and deeper)."""
    positions: list[int] = []
    paths: list[tuple[tuple[int, int, str], ...]] = []
    stack: list[tuple[int, int, str]] = []
    in_fence = False
    pos = 0
    for line in text.split("\n"):
        if _FENCE.match(line):
            in_fence = not in_fence
        elif not in_fence and (m := _HEADING.match(line)):
            level = len(m.group(1))
            words = line[m.end() :].strip().rstrip("#").strip()
            while stack and stack[-1][1] >= level:
                stack.pop()
            if words:
                stack.append((pos, level, words))
                positions.append(pos)
                paths.append(tuple(stack))
        pos += len(line) + 1
    return HeadingTrail(positions, paths)
