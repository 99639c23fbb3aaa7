"""Snippets: the best line of a document for a query, with a diff-style header."""

from __future__ import annotations

import re
from bisect import bisect_right
from functools import lru_cache
from itertools import accumulate

from ..text import has_cjk

JSON_SNIPPET_CHARS = 300  # JSON and MCP: agents pay for every character
CLI_SNIPPET_CHARS = 500


@lru_cache(maxsize=64)
def _words_regex(words: tuple[str, ...]) -> re.Pattern[str] | None:
    parts = []
    for word in words:
        # A short stem catches inflections the porter-stemmed index matched (balancer ~ balance).
        stem = word if len(word) <= 4 or has_cjk(word) else word[: max(4, len(word) - 2)]
        parts.append(re.escape(stem) if has_cjk(word) else r"\b" + re.escape(stem))
    return re.compile("|".join(parts), re.IGNORECASE) if parts else None


def best_line(text: str, lines: list[str], words: tuple[str, ...], start: int, stop: int | None = None) -> int:
    """0-based index of the line in [start, stop) matching the most distinct words.

    One regex pass over the text (not one per line); ties go to the earliest line. With
    no match at all (a vector hit shares no word with the query), the first heading in the
    range, where a section starts, else the first non-blank line.
    """
    stop = len(lines) if stop is None else min(stop, len(lines))
    regex = _words_regex(words)
    if regex is not None:
        offsets = list(accumulate((len(line) + 1 for line in lines), initial=0))
        found: dict[int, set[str]] = {}
        for match in regex.finditer(text, offsets[start], offsets[stop]):
            found.setdefault(bisect_right(offsets, match.start()) - 1, set()).add(match.group(0).lower())
        if found:
            return min(found, key=lambda i: (-len(found[i]), i))
    for i in range(start, stop):
        if lines[i].startswith("#"):
            return i
    for i in range(start, stop):
        if lines[i].strip():
            return i
    return min(start, max(len(lines) - 1, 0))


def make_snippet(
    text: str,
    words: list[str],
    body_line: int,
    max_chars: int,
    line_numbers: bool = False,
    region: tuple[int, int] | None = None,
) -> tuple[int, str]:
    """(1-based best line, snippet) where the snippet is lines best-1 .. best+2.

    The header says where the lines sit: `@@ -start,count @@ (N before, M after)`.
    Front matter (lines before `body_line`) is never shown. `region` (0-based lines,
    end exclusive) limits where the best line is looked for, e.g. one chunk.
    """
    lines = text.split("\n")
    start = max(body_line - 1, 0)
    stop = None
    if region is not None:
        start, stop = max(start, region[0]), max(region[1], region[0] + 1)
    best = best_line(text, lines, tuple(words), start, stop)
    first = max(start, best - 1)
    last = min(len(lines), best + 3)
    shown = lines[first:last]
    if line_numbers:
        shown = [f"{first + 1 + i}: {line}" for i, line in enumerate(shown)]
    body = "\n".join(shown)
    if len(body) > max_chars:
        body = body[: max(max_chars - 3, 0)].rstrip() + "..."
    header = f"@@ -{first + 1},{last - first} @@ ({first} before, {len(lines) - last} after)"
    return best + 1, f"{header}\n{body}"
