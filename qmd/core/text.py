"""Pure text helpers shared by indexing and search: front matter, titles, CJK, hashes."""

from __future__ import annotations

import re
from functools import lru_cache
from qmd.core.records import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


# Han, kana, hangul (syllables and jamo), CJK compatibility ideographs, extension B+.
_CJK_CLASS = (
    "\u1100-\u11ff\u2e80-\u2fdf\u3040-\u30ff\u3130-\u318f\u31f0-\u31ff\u3400-\u4dbf"
    "\u4e00-\u9fff\uac00-\ud7af\uf900-\ufaff\U00020000-\U0002ebef"
)

@lru_cache(maxsize=1)
def _cjk_char() -> re.Pattern[str]:
    # Compiled on first non-ASCII text: the class is large (10 ms to compile).
    return re.compile(f"[{_CJK_CLASS}]")


def _spaced(match: re.Match[str]) -> str:
    # A callable, not the template r" \1 ": 3x faster on CJK-heavy text (no template expansion).
    return " " + match.group() + " "

# Patterns of the indexer's reading, compiled where used (re caches them): a search that imports
# this module for `has_cjk` compiles nothing.
_HEADING = r"^ {0,3}(#{1,2})[ \t]+(.+?)[ \t#]*$"
_FM_CLOSE = r"^(?:---|\.\.\.)[ \t]*\r?$"


def content_hash(text: str) -> str:
    """sha256 hex of the UTF-8 text; its first 6 hex digits are the docid."""
    import hashlib  # loads OpenSSL: 2 ms that a search does not need

    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


def segment_cjk(text: str) -> str:
    """Put spaces around every CJK character so FTS5 indexes each one as a token.

    unicode61 keeps a run of CJK characters as one token, so a word inside the run
    could never match; as single-character tokens, a word becomes a phrase query.
    """
    if text.isascii():
        return text
    return _cjk_char().sub(_spaced, text)


def has_cjk(text: str) -> bool:
    return not text.isascii() and _cjk_char().search(text) is not None


@record
class FrontMatter:
    """Metadata from a leading `---` YAML block and where the body starts."""

    meta: dict[str, Any] = field(default_factory=dict)
    body_offset: int = 0  # characters of front matter before the body
    body_line: int = 1  # 1-based line number of the first body line

    @property
    def title(self) -> str | None:
        value = self.meta.get("title")
        return str(value).strip() or None if value is not None else None

    @property
    def tags(self) -> list[str]:
        value = self.meta.get("tags")
        if isinstance(value, str):
            return [t for t in re.split(r"[,\s]+", value) if t]
        if isinstance(value, list):
            return [str(t) for t in value if t is not None]
        return []


FRONT_MATTER_NODES = 20_000  # values a front matter may hold once its aliases are expanded


def parse_front_matter(text: str) -> FrontMatter:
    """Find a YAML front matter block at the very start of `text`.

    A block that does not close, or whose YAML does not parse into a mapping (or into more
    than FRONT_MATTER_NODES values), is not front matter: the text is then indexed as it is.
    """
    if not (text.startswith("---\n") or text.startswith("---\r\n")):
        return FrontMatter()
    first_nl = text.index("\n") + 1
    close = re.compile(_FM_CLOSE, re.MULTILINE).search(text, first_nl)
    if close is None:
        return FrontMatter()
    import yaml  # only files that start with front matter pay for the parser

    from qmd.core.yamlcore import bounded, loader

    try:
        meta = yaml.load(text[first_nl : close.start()], Loader=loader())  # YAML 1.2: `yes` is a string
    except (yaml.YAMLError, ValueError, TypeError, AttributeError, OverflowError, RecursionError):
        return FrontMatter()  # PyYAML's constructors raise more than YAMLError (`date: 2024-02-30`)
    if meta is not None and (not isinstance(meta, dict) or not bounded(meta, FRONT_MATTER_NODES)):
        return FrontMatter()
    end = text.find("\n", close.end())
    offset = len(text) if end == -1 else end + 1
    return FrontMatter(meta or {}, offset, text.count("\n", 0, offset) + 1)


def extract_title(body: str, fallback: str) -> str:
    """First `#` or `##` heading (outside code fences), else `fallback`."""
    for match in re.finditer(_HEADING, body, re.MULTILINE):
        before = body[: match.start()]
        if before.count("```") % 2 == 0 and before.count("~~~") % 2 == 0:
            return match.group(2).strip()
    return fallback


def numbered(text: str, first: int) -> str:
    """`text` with each line prefixed by its number (`12: …`), counting from `first`."""
    return "\n".join(f"{first + i}: {line}" for i, line in enumerate(text.split("\n")))


@lru_cache(maxsize=2)
def _unprintable(newlines: bool) -> re.Pattern[str]:
    # Compiled on first use: each class takes about 1 ms (its characters past U+00FF), which
    # every importer of this module (the SQLite backend, on a search's path) paid for nothing.
    return re.compile(r"[\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029]" if newlines else r"[\x00-\x1f\x7f-\x9f\u2028\u2029]")


def line_safe(text: str, *, newlines: bool = False) -> str:
    """`text` on one line, inert on a terminal: newlines, escapes and other control characters
    as `\\n`, `\\x1b`… (a file name may hold them; line-based output must not split or color).
    `newlines=True` keeps line breaks (a multi-line context) and escapes the rest."""
    return _unprintable(newlines).sub(lambda m: repr(m.group())[1:-1], text)
