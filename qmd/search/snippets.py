"""Snippets: the best line of a document for a query, with a diff-style header."""

from __future__ import annotations

from functools import lru_cache

from qmd.core.text import has_cjk



@lru_cache(maxsize=64)
def _stems(words: tuple[str, ...]) -> tuple[tuple[str, bool], ...]:
    """(lower-case stem, needs a word boundary before it) for each query word.

    A short stem catches inflections the porter-stemmed index matched (balancer ~ balance).
    """
    out = []
    for word in words:
        cjk = has_cjk(word)
        stem = word if len(word) <= 4 or cjk else word[: max(4, len(word) - 2)]
        out.append((stem.lower(), not cjk))
    return tuple(out)


def _matches(low: str, stems: tuple[tuple[str, bool], ...], begin: int, end: int) -> list[tuple[int, str]]:
    """(offset, stem) of every stem occurrence at a word start in low[begin:end] (str.find, no regex)."""
    found = []
    for stem, boundary in stems:
        pos = low.find(stem, begin, end)
        while pos != -1:
            if not boundary or pos == 0 or not low[pos - 1].isalnum():
                found.append((pos, stem))
            pos = low.find(stem, pos + 1, end)
    found.sort()
    return found


def _line_offset(text: str, line: int, start_pos: int = 0, start_line: int = 0) -> int:
    """Character offset where 0-based `line` starts (len(text) past the end)."""
    pos = start_pos
    for _ in range(line - start_line):
        nl = text.find("\n", pos)
        if nl == -1:
            return len(text)
        pos = nl + 1
    return pos


def best_line(text: str, lines: list[str], words: tuple[str, ...], start: int, stop: int | None = None) -> int:
    """0-based index of the line in [start, stop) matching the most distinct words.

    Substring search on the lower-cased text (word starts only), counting newlines between
    matches (no per-line work); ties go to the earliest line. With no match at all (a vector hit
    shares no word with the query), the first heading in the range, where a section
    starts, else the first non-blank line.
    """
    stop = len(lines) if stop is None else min(stop, len(lines))
    if words:
        begin = _line_offset(text, start)
        end = len(text) if stop >= len(lines) else _line_offset(text, stop, begin, start)
        low = text.lower()
        if len(low) != len(text):  # lower() changed lengths (rare scripts): keep offsets aligned
            low = text
        found: dict[int, set[str]] = {}
        line, last = start, begin
        for pos, stem in _matches(low, _stems(words), begin, end):
            line += text.count("\n", last, pos)
            last = pos
            found.setdefault(line, set()).add(stem)
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
