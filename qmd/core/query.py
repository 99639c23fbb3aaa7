"""A typed sub-query (`lex:`, `vec:`, `hyde:`): written by people, produced by query expansion."""

from __future__ import annotations

from qmd.core.records import record


@record(frozen=True)
class SubQuery:
    """One line of a typed query: `type` is lex (keywords), vec (a question) or hyde (an answer)."""

    type: str  # lex | vec | hyde
    text: str
