"""`qmd.index.chunking`: break-point scores, cut choice, overlap, coverage and bounds (design §2).

Two toy tokenizers make the arithmetic exact: `words` (whitespace-separated words) and
`chars` (one token per character, so token offsets are character offsets). A third one,
`utf8`, counts UTF-8 bytes (denser than characters for CJK and emoji, like a byte-level BPE).
"""

from __future__ import annotations

import contextlib
import functools
import random
import signal
from collections.abc import Callable, Iterator

import pytest

from qmd.index.chunking import BreakPoint, Chunk, break_points, chunk_text

Tokenizer = Callable[[str], int]


def words(s: str) -> int:
    return len(s.split())


def chars(s: str) -> int:
    return len(s)


def utf8(s: str) -> int:
    return len(s.encode("utf-8"))


TOKENIZERS: dict[str, Tokenizer] = {"words": words, "chars": chars, "utf8": utf8}


@contextlib.contextmanager
def time_limit(seconds: float) -> Iterator[None]:
    """Fail (TimeoutError) instead of hanging when chunk_text does not terminate."""

    def expired(signum: int, frame: object) -> None:
        raise TimeoutError(f"chunk_text did not finish within {seconds} s")

    previous = signal.signal(signal.SIGALRM, expired)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)


def chunk(doc: str, tok: Tokenizer, max_tokens: int, overlap: int, window: int, seconds: float = 10.0) -> list[Chunk]:
    with time_limit(seconds):
        return chunk_text(doc, tok, max_tokens=max_tokens, overlap_tokens=overlap, window_tokens=window)


def fence_lines(text: str) -> int:
    return sum(1 for line in text.split("\n") if line.lstrip(" ").startswith(("```", "~~~")))


def check_invariants(doc: str, chunks: list[Chunk], tok: Tokenizer, max_tokens: int, *, whitespace_gaps: bool = False) -> None:
    """text is the slice, tokens ≤ max (re-counted), progress, overlap or adjacency, full coverage.

    `whitespace_gaps`: a run of pure whitespace longer than a chunk may be left out (its
    chunks would be empty); nothing else may ever be uncovered.
    """
    assert chunks, "a non-blank document must give at least one chunk"
    for i, c in enumerate(chunks):
        assert c.seq == i
        assert 0 <= c.start < c.end <= len(doc)
        assert c.text == doc[c.start : c.end]
        assert c.text.strip(), f"chunk {i} is blank"
        assert c.tokens == tok(c.text)
        assert c.tokens <= max_tokens, f"chunk {i} has {c.tokens} > {max_tokens} tokens"
    for a, b in zip(chunks, chunks[1:]):
        assert b.start > a.start and b.end > a.end, "no progress"
        if b.start > a.end:
            assert whitespace_gaps and not doc[a.end : b.start].strip(), f"gap {a.end}..{b.start}: {doc[a.end:b.start][:60]!r}"
    head, tail = doc[: chunks[0].start], doc[chunks[-1].end :]
    if whitespace_gaps:
        assert not head.strip() and not tail.strip()
    else:
        assert chunks[0].start == 0
        assert chunks[-1].end == len(doc)


# ---------------------------------------------------------------------------------------
# Documents for the table


def doc_sections(n: int = 40, seed: int = 1) -> str:
    rng = random.Random(seed)
    vocab = "search index chunk embed vector query rerank token window overlap fence heading".split()
    out = ["# Handbook\n\nIntro line one.\n"]
    for i in range(n):
        out.append(f"\n## Section {i}\n\n")
        for _ in range(rng.randint(2, 5)):
            out.append(" ".join(rng.choice(vocab) for _ in range(rng.randint(4, 9))) + "\n")
    return "".join(out)


def doc_fenced(seed: int = 2) -> str:
    rng = random.Random(seed)
    out = ["# Code notes\n"]
    for i in range(30):
        out.append(f"\nParagraph {i} explains the snippet below in a few words.\n\n```python\n")
        out.extend(f"value_{j} = compute({j}, {i})  # step\n" for j in range(rng.randint(2, 8)))
        out.append("```\n")
    return "".join(out)


def doc_lists() -> str:
    out = ["# Checklist\n\n"]
    for i in range(60):
        out.append(f"- item {i} check the thing twice\n")
        if i % 10 == 9:
            out.append("\n---\n\n1. numbered step\n2) another step\n* star item\n+ plus item\n\n")
    return "".join(out)


def doc_cjk() -> str:
    lines = ["# 東京の案内 🗼\n"]
    for i in range(80):
        lines.append(f"第{i}段落：東京は日本の首都です。人口は約千四百万人。🍣🍜 绿色的山和蓝色的海 😀👍🏽 👨‍👩‍👧 é café naïve\n")
        if i % 9 == 0:
            lines.append(f"\n## 第{i}章 🚀\n\n")
    return "".join(lines)


def doc_crlf() -> str:
    return "".join(f"## Part {i}\r\n\r\nSome text for part {i} with several words in it.\r\n" for i in range(60))


def doc_long_line() -> str:
    rng = random.Random(3)
    return " ".join(rng.choice(["alpha", "beta", "gamma", "delta", "epsilon", "zeta"]) for _ in range(3000))


def doc_long_token() -> str:
    return "x" * 6000


def doc_long_fence() -> str:
    body = "".join(f"    line_{i} = {i} * factor  # no break outside\n" for i in range(400))
    return "Intro words before the code.\n\n```python\n" + body + "```\n\nAfter the fence.\n"


DOCS: dict[str, Callable[[], str]] = {
    "sections": doc_sections,
    "fenced": doc_fenced,
    "lists": doc_lists,
    "cjk": doc_cjk,
    "crlf": doc_crlf,
    "long_line": doc_long_line,
    "long_token": doc_long_token,
    "long_fence": doc_long_fence,
}

# (tokenizer, max_tokens, overlap_tokens, window_tokens)
SETTINGS = [
    ("words", 64, 10, 16),
    ("words", 200, 30, 50),
    ("words", 900, 135, 200),
    ("chars", 300, 45, 80),
    ("chars", 1000, 150, 250),
    ("utf8", 400, 60, 100),
]


@pytest.mark.parametrize("setting", SETTINGS, ids=lambda s: "-".join(map(str, s)))
@pytest.mark.parametrize("name", list(DOCS))
def test_invariants_table(name: str, setting: tuple[str, int, int, int]) -> None:
    tok_name, max_tokens, overlap, window = setting
    tok = TOKENIZERS[tok_name]
    doc = DOCS[name]()
    chunks = chunk(doc, tok, max_tokens, overlap, window)
    check_invariants(doc, chunks, tok, max_tokens)
    if tok(doc) <= max_tokens:
        assert [(c.start, c.end) for c in chunks] == [(0, len(doc))]
    else:
        assert len(chunks) >= 2


# ---------------------------------------------------------------------------------------
# Small, empty and blank documents


@pytest.mark.parametrize(
    ("doc", "tok"),
    [
        ("# Title\n\nOne short paragraph.\n", words),
        ("one line no newline", words),
        ("  leading and trailing blanks  \n\n", words),
        ("x" * 50_000, words),  # one (huge) word is one token: it fits
        ("東京 😀", chars),
    ],
)
def test_short_document_is_one_chunk(doc: str, tok: Tokenizer) -> None:
    chunks = chunk(doc, tok, 64, 10, 16)
    assert len(chunks) == 1
    c = chunks[0]
    assert (c.seq, c.start, c.end, c.text, c.tokens) == (0, 0, len(doc), doc, tok(doc))


def test_document_exactly_max_tokens_is_one_chunk() -> None:
    doc = " ".join(f"w{i}" for i in range(64))
    assert len(chunk(doc, words, 64, 10, 16)) == 1
    assert len(chunk(doc + " w64", words, 64, 10, 16)) == 2


@pytest.mark.parametrize("doc", ["", " ", "\n", "\n\n\n", " \t \n \r\n  ", "\n" * 5000, " " * 5000, "\t\n " * 3000])
@pytest.mark.parametrize("tok", [words, chars])
def test_empty_and_blank_documents_have_no_chunks(doc: str, tok: Tokenizer) -> None:
    assert chunk(doc, tok, 64, 10, 16) == []


def test_whitespace_run_longer_than_a_chunk_loses_nothing_but_whitespace() -> None:
    doc = "alpha beta gamma\n" * 30 + "\n" * 3000 + " " * 500 + "delta epsilon\n" * 30 + "\n" * 2000
    chunks = chunk(doc, chars, 200, 30, 50)
    check_invariants(doc, chunks, chars, 200, whitespace_gaps=True)
    covered = "".join(doc[c.start : c.end] for c in chunks)
    assert covered.count("alpha") >= 30 and covered.count("delta") >= 30


def test_max_tokens_below_eight_is_rejected() -> None:
    with pytest.raises(ValueError):
        chunk_text("a b c", words, max_tokens=7)


def test_default_settings_are_900_tokens_with_135_overlap() -> None:
    doc = doc_sections(400)
    chunks = chunk_text(doc, words)
    check_invariants(doc, chunks, words, 900)
    assert max(c.tokens for c in chunks) > 700  # chunks are filled towards 900, not tiny


# ---------------------------------------------------------------------------------------
# Break points: scores as documented


@pytest.mark.parametrize(
    ("line", "score"),
    [
        ("# H1", 100),
        ("## H2", 90),
        ("### H3", 80),
        ("#### H4", 70),
        ("##### H5", 60),
        ("###### H6", 50),
        ("####### seven hashes is text", 1),
        ("#hashtag is text", 1),
        ("```", 80),
        ("```python", 80),
        ("~~~", 80),
        ("---", 60),
        ("***", 60),
        ("___", 60),
        ("- - -", 60),
        ("* * *", 60),
        ("  ----------  ", 60),
        ("", 20),
        ("   ", 20),
        ("\t", 20),
        ("- item", 5),
        ("* item", 5),
        ("+ item", 5),
        ("1. item", 5),
        ("12) item", 5),
        ("   - nested item", 5),
        ("plain text", 1),
        ("    indented text", 1),
        ("-not a list", 1),
    ],
)
def test_break_point_score_of_a_line(line: str, score: float) -> None:
    doc = f"first line\n{line}\nlast line"
    points = break_points(doc)
    assert points[0] == BreakPoint(len("first line\n"), float(score), False)
    assert len(points) == 2 and points[1].pos == len(f"first line\n{line}\n")


def test_break_points_positions_are_line_starts_after_the_first() -> None:
    doc = "a\nbb\n\nccc\n"
    assert [p.pos for p in break_points(doc)] == [2, 5, 6, 10]
    assert all(doc[p.pos - 1] == "\n" for p in break_points(doc))
    assert break_points("") == [] and break_points("single line") == []


def test_break_points_inside_a_fence() -> None:
    doc = "text\n```bash\n# a comment, not a heading\n\n- not a list\n```\nafter\n## Real heading\n"
    points = {doc[p.pos : doc.index("\n", p.pos)]: p for p in break_points(doc) if p.pos < len(doc)}
    assert points["```bash"] == BreakPoint(doc.index("```bash"), 80.0, False)  # before the opening fence
    assert points["# a comment, not a heading"].in_fence and points["# a comment, not a heading"].score == 1.0
    assert points[""].in_fence
    assert points["- not a list"].in_fence
    assert points["```"].in_fence  # the closing fence line is still inside
    assert points["after"] == BreakPoint(doc.index("after"), 80.0, False)  # right after the closing fence
    assert points["## Real heading"].score == 90.0 and not points["## Real heading"].in_fence


# ---------------------------------------------------------------------------------------
# Where the cut goes (chars tokenizer: one token per character, so positions are exact)

MAX, WINDOW, OVERLAP = 100, 40, 15


def filler(n: int) -> str:
    """n characters of non-breaking text lines (score 1), ending with a newline."""
    assert n == 0 or n >= 2, n
    out, left = [], n
    while left:
        size = min(left, 12) if left - min(left, 12) != 1 else 11
        out.append("x" * (size - 1) + "\n")
        left -= size
    return "".join(out)


def doc_with_lines_at(marks: dict[int, str], length: int = 400) -> str:
    """A document whose line `marks[pos]` starts exactly at character pos (ascending)."""
    doc = ""
    for pos in sorted(marks):
        doc += filler(pos - len(doc))
        doc += marks[pos] + "\n"
    doc += filler(length - len(doc))
    assert all(doc[pos:].startswith(line + "\n") for pos, line in marks.items())
    return doc


def first_cut(doc: str) -> int:
    chunks = chunk(doc, chars, MAX, OVERLAP, WINDOW)
    assert len(chunks) >= 2
    check_invariants(doc, chunks, chars, MAX)
    return chunks[0].end


@pytest.mark.parametrize(
    ("marks", "cut"),
    [
        # h1 beats h3 whichever is nearer to the target (100): both within the window
        ({80: "# One", 90: "### Three"}, 80),
        ({80: "### Three", 90: "# One"}, 90),
        # same level: the nearer one wins
        ({70: "## A", 90: "## B"}, 90),
        # a heading at the edge of the window (score 90 × 0.3345 ≈ 30) still beats a blank line at the target (20)…
        ({61: "## Far", 99: ""}, 61),
        # …but not an h6 at the target (50)
        ({61: "## Far", 99: "###### Near"}, 99),
        # outside the window a heading is not considered: the best in-window line wins
        ({50: "# Too far", 95: "- item"}, 95),
        # a horizontal rule (60) beats a blank line (20) and list items (5)
        ({75: "---", 95: ""}, 75),
        ({70: "***", 85: "- item", 98: "1. item"}, 70),
        # a blank line (20) beats list items (5) and plain lines (1)
        ({70: "", 86: "- item", 95: "* item"}, 70),
        # an opening code fence (80) ties an h3 in score: the nearer one wins
        ({75: "### Three", 85: "```"}, 85),
    ],
)
def test_cut_goes_to_the_best_scored_line_in_the_window(marks: dict[int, str], cut: int) -> None:
    if marks.get(85) == "```":
        marks = {**marks, 150: "```"}  # close it again, well after the first chunk
    assert first_cut(doc_with_lines_at(marks)) == cut


def test_document_of_sections_cuts_right_before_h2_headings() -> None:
    doc = doc_sections(80)  # sections of ≤ 50 words, so a window of 60 words always holds one
    chunks = chunk(doc, words, 200, 30, 60)
    check_invariants(doc, chunks, words, 200)
    assert len(chunks) > 5
    for c in chunks[:-1]:
        assert doc[c.end :].startswith("## Section "), doc[c.end : c.end + 30]


def test_heading_preferred_over_nearer_blank_lines_and_lists() -> None:
    body = []
    for i in range(30):
        body.append(f"### Topic {i}\n\n" + "".join(f"- point {i}.{j} with a few words\n" for j in range(4)) + "\n")
    doc = "".join(body)
    chunks = chunk(doc, words, 120, 15, 40)
    check_invariants(doc, chunks, words, 120)
    for c in chunks[:-1]:
        assert doc[c.end :].startswith("### Topic ")


def test_overlap_starts_on_a_line_and_is_about_overlap_tokens() -> None:
    doc = "".join(f"line {i} has exactly six words\n" for i in range(400))  # 6 words/line
    max_tokens, overlap = 120, 30
    chunks = chunk(doc, words, max_tokens, overlap, 30)
    check_invariants(doc, chunks, words, max_tokens)
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end, "consecutive chunks must overlap"
        assert doc[b.start - 1] == "\n", "the overlap starts on a line"
        shared = words(doc[b.start : a.end])
        assert overlap - 6 <= shared <= overlap, shared


def test_overlap_is_about_overlap_tokens_with_characters() -> None:
    doc = "".join(f"{i:04d} abcdefghi\n" for i in range(300))  # 15-char lines
    chunks = chunk(doc, chars, 300, 45, 60)
    check_invariants(doc, chunks, chars, 300)
    for a, b in zip(chunks, chunks[1:]):
        assert 45 - 15 <= a.end - b.start <= 45


def test_overlap_is_capped_at_half_a_chunk() -> None:
    doc = "".join(f"row {i} a b\n" for i in range(300))
    chunks = chunk(doc, words, 40, 500, 500)  # overlap clamped to 20, window to 20
    check_invariants(doc, chunks, words, 40)
    for a, b in zip(chunks, chunks[1:]):
        assert 0 < words(doc[b.start : a.end]) <= 20


# ---------------------------------------------------------------------------------------
# Code fences


def test_short_fence_inside_the_window_cuts_before_it_and_keeps_it_whole() -> None:
    # ~70 words of prose, then a 60-word fence: the window (words 60..100) holds the fence's
    # opening line, so the cut goes right before ``` and the next chunk has the whole fence.
    prose = "".join(f"prose line {i} is here\n" for i in range(14))  # 5 words/line
    fence = "```python\n" + "".join(f"a{i} = b + c  # d\n" for i in range(10)) + "```\n"
    tail = "".join(f"tail line {i} is here\n" for i in range(60))
    doc = prose + fence + tail
    chunks = chunk(doc, words, 100, 15, 40)
    check_invariants(doc, chunks, words, 100)
    assert chunks[0].end == len(prose)
    holder = [c for c in chunks if c.start <= len(prose) and c.end >= len(prose + fence)]
    assert holder, "no chunk holds the whole fence"
    assert fence_lines(holder[0].text) == 2
    assert not [c.end for c in chunks if len(prose) < c.end < len(prose + fence)], "a cut inside the fence"
    assert not [c.start for c in chunks if len(prose) < c.start < len(prose + fence)], "a start inside the fence"
    assert all(fence_lines(c.text) % 2 == 0 for c in chunks)


def test_window_ending_inside_a_fence_prefers_the_line_after_it() -> None:
    prose = "".join(f"prose line {i} is here\n" for i in range(10))  # 50 words
    fence = "```\n" + "".join(f"x{i} y z\n" for i in range(15)) + "```\n"  # ends at ~97 words
    doc = prose + fence + "".join(f"tail line {i} is here\n" for i in range(40))
    chunks = chunk(doc, words, 100, 15, 20)
    check_invariants(doc, chunks, words, 100)
    assert chunks[0].end == len(prose + fence)
    assert fence_lines(chunks[0].text) == 2


def test_fence_longer_than_a_chunk_is_still_cut() -> None:
    doc = doc_long_fence()
    for max_tokens in (50, 120):
        chunks = chunk(doc, words, max_tokens, max_tokens // 7, max_tokens // 4)
        check_invariants(doc, chunks, words, max_tokens)
        assert len(chunks) > words(doc) // max_tokens
        assert any(fence_lines(c.text) % 2 for c in chunks)  # it had to be cut inside


def test_fence_of_only_one_huge_line_is_hard_cut() -> None:
    doc = "```\n" + "y" * 5000 + "\n```\n"
    chunks = chunk(doc, chars, 300, 45, 80)
    check_invariants(doc, chunks, chars, 300)
    assert len(chunks) >= 5000 // 300


def test_short_fence_spanning_the_whole_window_is_not_split() -> None:
    # Regression (fixed in 98c3bb2): with every break point of the window inside a fence
    # shorter than a chunk, chunk_text used to fall back to a cut inside the fence.
    # 202 words of prose, a 162-word fence (words 202..364), max 300, window 60 (240..300):
    # every break point in the window is inside the fence. The fence fits in a chunk, so the
    # cut goes right before its opening ``` (word 202), outside the window.
    doc = (
        "# Title\n\n"
        + "\n".join(f"para {i} aa bb" for i in range(50))
        + "\n```\n"
        + "\n".join(f"code {i} x y" for i in range(40))
        + "\n```\n"
        + "\n".join(f"tail {i} q r" for i in range(100))
        + "\n"
    )
    chunks = chunk(doc, words, 300, 45, 60)
    check_invariants(doc, chunks, words, 300)
    assert chunks[0].end == doc.index("```")
    assert [fence_lines(c.text) % 2 for c in chunks] == [0] * len(chunks)


def test_overlap_never_starts_inside_a_fence() -> None:
    # Regression (fixed in 98c3bb2): a chunk ending right after a fence longer than the
    # overlap used to make the next chunk start mid-fence, with an unmatched closing ```.
    doc = (
        "# Title\n\n"
        + "\n".join(f"para {i} aa bb" for i in range(25))
        + "\n```\n"
        + "\n".join(f"code {i} x y" for i in range(45))
        + "\n```\n"
        + "\n".join(f"tail {i} q r" for i in range(100))
        + "\n"
    )
    chunks = chunk(doc, words, 300, 45, 60)
    check_invariants(doc, chunks, words, 300)
    assert fence_lines(chunks[0].text) == 2  # the first cut is right after the fence: fine
    assert [fence_lines(c.text) % 2 for c in chunks] == [0] * len(chunks)


def test_short_fences_are_never_split_sweep() -> None:
    """Both fence rules above, swept over fence positions and sizes."""
    failures = []
    for lead in range(0, 60, 3):
        for size in (10, 25, 40):
            prose = "".join(f"p{i} a b c d\n" for i in range(lead))  # 5 words/line
            fence = "```\n" + "".join(f"c{i} x y z\n" for i in range(size)) + "```\n"  # ≤ 162 words
            doc = prose + fence + "".join(f"t{i} a b c d\n" for i in range(120)) + prose + fence
            chunks = chunk(doc, words, 300, 45, 60)
            check_invariants(doc, chunks, words, 300)
            if any(fence_lines(c.text) % 2 for c in chunks):
                failures.append((lead, size))
    assert not failures, failures


# ---------------------------------------------------------------------------------------
# Long lines, long tokens, unicode


def test_very_long_line_is_cut_at_spaces() -> None:
    doc = doc_long_line()
    chunks = chunk(doc, words, 100, 15, 30)
    check_invariants(doc, chunks, words, 100)
    for c in chunks[:-1]:
        assert doc[c.end - 1] == " " and doc[c.end] != " ", "soft cut: right after a space"
        assert c.tokens >= 50
    for a, b in zip(chunks, chunks[1:]):
        assert b.start < a.end


def test_very_long_line_with_characters() -> None:
    doc = doc_long_line()
    chunks = chunk(doc, chars, 500, 75, 100)
    check_invariants(doc, chunks, chars, 500)
    for c in chunks[:-1]:
        assert doc[c.end - 1] == " "
        assert c.tokens > 400  # the last space before the target, not far back


@pytest.mark.parametrize(("tok", "max_tokens"), [(chars, 300), (chars, 64), (utf8, 100)])
def test_very_long_token_is_hard_cut(tok: Tokenizer, max_tokens: int) -> None:
    doc = doc_long_token()
    chunks = chunk(doc, tok, max_tokens, max_tokens // 7, max_tokens // 4)
    check_invariants(doc, chunks, tok, max_tokens)
    assert all(c.tokens == max_tokens for c in chunks[:-1]), "hard cuts fill the chunk exactly"


def test_very_long_emoji_token_is_cut_between_code_points() -> None:
    doc = "😀" * 3000  # 4 UTF-8 bytes each
    chunks = chunk(doc, utf8, 101, 14, 25)
    check_invariants(doc, chunks, utf8, 101)
    assert all(c.text == "😀" * len(c.text) for c in chunks)
    assert all(c.tokens in (96, 100) for c in chunks[:-1])


@pytest.mark.parametrize("tok", [words, chars, utf8])
def test_cjk_and_emoji_text(tok: Tokenizer) -> None:
    doc = doc_cjk()
    chunks = chunk(doc, tok, 120 if tok is words else 600, 18 if tok is words else 90, 40 if tok is words else 150)
    check_invariants(doc, chunks, tok, 120 if tok is words else 600)
    for c in chunks:
        c.text.encode("utf-8")  # no lone surrogates
    assert "".join(doc[c.start : c.end] for c in chunks).count("🗼") >= 1


def test_cjk_without_any_spaces_or_newlines() -> None:
    doc = "東京は日本の首都です。" * 500
    chunks = chunk(doc, chars, 200, 30, 50)
    check_invariants(doc, chunks, chars, 200)
    assert all(c.tokens == 200 for c in chunks[:-1])


def test_dense_text_after_a_long_token_terminates() -> None:
    # Regression (fixed in 98c3bb2): the shrink loop re-targeted by `budget * ratio` chars
    # with budget floored at 1 and ratio the document average, so it looped forever here.
    # 10 000 chars of one word, then 100 one-letter words: ratio ≈ 101 chars/word, so in
    # the dense tail even a 1-token budget (101 chars ≈ 50 words) exceeds max_tokens=8.
    doc = "x" * 10_000 + " a" * 100
    chunks = chunk(doc, words, 8, 2, 3, seconds=1.0)
    check_invariants(doc, chunks, words, 8)


# ---------------------------------------------------------------------------------------
# Size and speed


def big_doc(size: int, seed: int = 5) -> str:
    rng = random.Random(seed)
    vocab = "alpha beta gamma delta epsilon zeta eta theta iota kappa lambda mu 東京 😀".split()
    parts, n, i = [], 0, 0
    while n < size:
        i += 1
        s = f"## Section {i}\n\n" + "\n".join(" ".join(rng.choice(vocab) for _ in range(12)) for _ in range(8)) + "\n\n"
        if i % 7 == 0:
            s += "```python\n" + "".join(f"x{j} = {j}\n" for j in range(10)) + "```\n\n"
        if i % 11 == 0:
            s += "- a\n- b\n\n---\n\n"
        parts.append(s)
        n += len(s)
    return "".join(parts)


@functools.lru_cache(maxsize=1)
def two_megabytes() -> str:
    return big_doc(2_000_000)


@pytest.mark.parametrize(
    ("tok", "max_tokens", "overlap", "window"),
    [(words, 900, 135, 200), (words, 256, 38, 57), (chars, 900, 135, 200)],
    ids=["words-900", "words-256", "chars-900"],
)
def test_two_megabyte_document_is_linear_and_covered(tok: Tokenizer, max_tokens: int, overlap: int, window: int, monkeypatch: pytest.MonkeyPatch) -> None:
    doc = two_megabytes()
    assert len(doc.encode("utf-8")) >= 2_000_000
    counter = _count_break_point_reads(monkeypatch)
    chunks = chunk(doc, tok, max_tokens, overlap, window, seconds=60.0)  # a hang guard, not a speed test
    check_invariants(doc, chunks, tok, max_tokens)
    # Work, not wall time (timings vary 3-6x here): each chunk reads only the break points
    # near its cut and overlap, never the whole document's (it did while it was quadratic).
    assert counter.reads <= 12 * counter.points + 50 * len(chunks), (counter.reads, counter.points, len(chunks))


class _BreakPointCounter:
    """Counts the break points chunk_text reads through slices of its sorted list."""

    def __init__(self) -> None:
        self.reads = 0
        self.points = 0


def _count_break_point_reads(monkeypatch: pytest.MonkeyPatch) -> _BreakPointCounter:
    import qmd.index.chunking

    counter = _BreakPointCounter()
    real = qmd.index.chunking.break_points

    class Counted(list):  # type: ignore[type-arg]
        def __getitem__(self, item):  # type: ignore[no-untyped-def]
            out = super().__getitem__(item)
            if isinstance(item, slice):
                counter.reads += len(out)
            return out

    def counted(text: str, code: object = None) -> Counted:
        points = Counted(real(text, code))  # type: ignore[arg-type]
        counter.points += len(points)
        return points

    monkeypatch.setattr(qmd.index.chunking, "break_points", counted)
    return counter


def test_chunking_work_grows_linearly(monkeypatch: pytest.MonkeyPatch) -> None:
    # Regression (fixed in 98c3bb2): every chunk scanned every break point of the document
    # (O(chunks × lines)); 8× the text took 40-60× the time. Counted, not timed.
    reads = []
    for size in (60_000, 480_000):
        counter = _count_break_point_reads(monkeypatch)
        chunk(big_doc(size), words, 256, 38, 64, seconds=60.0)
        reads.append(counter.reads)
    assert reads[1] / reads[0] < 12.0, f"8x the text read {reads[1] / reads[0]:.1f}x the break points"
