"""Typed query documents: `lex:`, `vec:`, `hyde:`, `intent:` and `expand:` lines.

    lex: rollback "load balancer"        keyword (BM25) sub-query
    vec: how do we undo a bad release    vector sub-query
    hyde: To roll back, flip the ...      a hypothetical answer, embedded as a passage
    intent: deployment runbooks           steers reranking and snippets, not expansion
    expand: undo a release               run automatic expansion on this text

A text whose first line has none of these prefixes is a plain question.
"""

from __future__ import annotations

import re
from qmd.core.records import field, record

from qmd.core.query import SubQuery
from qmd.core.errors import QmdError

SEARCH_TYPES = ("lex", "vec", "hyde")
ALL_TYPES = (*SEARCH_TYPES, "intent", "expand")
MAX_SEARCHES = 10
MAX_LINE_CHARS = 2000
_LINE = re.compile(r"^\s*([A-Za-z]+)\s*:\s?(.*)$")
_HINT = "write one sub-query per line: lex: …, vec: …, hyde: …, optionally intent: … (or a single expand: … line)"


@record
class TypedQuery:
    """A parsed query: either `plain` text, or typed `searches` (or one `expand` text)."""

    plain: str | None = None
    searches: list[SubQuery] = field(default_factory=list)
    intent: str | None = None
    expand: str | None = None

    @property
    def question(self) -> str:
        """The text that stands for the whole query (rerank, snippets, cache keys)."""
        if self.plain is not None:
            return self.plain
        if self.expand is not None:
            return self.expand
        return " ".join(s.text for s in self.searches)


def _typed_prefix(line: str) -> str | None:
    match = _LINE.match(line)
    return match.group(1).lower() if match and match.group(1).lower() in ALL_TYPES else None


def parse_typed(text: str) -> TypedQuery:
    """Parse a query; typed documents are validated line by line (errors name the line)."""
    lines = [(n, line) for n, line in enumerate(text.splitlines(), start=1) if line.strip()]
    if not lines:
        raise QmdError("the query is empty", 'give a question, or typed lines such as: lex: "load balancer"')
    if _typed_prefix(lines[0][1]) is None:
        if any(_typed_prefix(line) for _, line in lines[1:]):
            raise QmdError(f"line {lines[0][0]}: a typed query needs a lex:, vec:, hyde:, intent: or expand: prefix on every line", _HINT)
        return TypedQuery(plain=" ".join(line.strip() for _, line in lines))
    query = TypedQuery()
    for n, line in lines:
        kind = _typed_prefix(line)
        if kind is None:
            raise QmdError(f"line {n}: expected lex:, vec:, hyde:, intent: or expand:, got {line.strip()[:40]!r}", _HINT)
        value = _LINE.match(line).group(2).strip()  # type: ignore[union-attr]
        if not value:
            raise QmdError(f"line {n}: '{kind}:' has no text", _HINT)
        if len(value) > MAX_LINE_CHARS:
            raise QmdError(f"line {n}: '{kind}:' is longer than {MAX_LINE_CHARS} characters", "agents truncate long lines; keep sub-queries short")
        if kind == "intent":
            if query.intent is not None:
                raise QmdError(f"line {n}: only one intent: line is allowed", _HINT)
            query.intent = value
        elif kind == "expand":
            if query.expand is not None:
                raise QmdError(f"line {n}: only one expand: line is allowed", _HINT)
            query.expand = value
        else:
            query.searches.append(SubQuery(kind, value))
    if query.expand is not None and query.searches:
        raise QmdError("expand: cannot be mixed with lex:, vec: or hyde: lines", "use expand: alone (with an optional intent:), or write the sub-queries yourself")
    if len(query.searches) > MAX_SEARCHES:
        raise QmdError(f"{len(query.searches)} sub-queries; at most {MAX_SEARCHES} are allowed", "merge or drop some lines")
    if query.expand is None and not query.searches:
        raise QmdError("intent: alone is not a query", "add a lex:, vec: or hyde: line (or ask a plain question)")
    return query
