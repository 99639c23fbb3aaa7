"""Keyword query syntax → backend text queries (pure; table-driven tests).

Syntax, as the original: plain words are prefix terms, `"..."` is a phrase, a leading
`-` negates a word or phrase. The backend quotes every term, so no user input can be a
syntax error there.
"""

from __future__ import annotations

import re
from qmd.core.records import field, record

from qmd.backends.base import Term, TextQuery

_TOKEN = re.compile(r'(-?)"([^"]*)"?|(\S+)')
_WORDISH = re.compile(r"\w")
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")

STOPWORDS = frozenset(
    """a about above after again against all am an and any are as at be because been before
    being below between both but by can could did do does doing down during each few for from
    further had has have having he her here hers herself him himself his how i if in into is it
    its itself just me more most my myself no nor not now of off on once only or other our ours
    ourselves out over own same she should so some such than that the their theirs them
    themselves then there these they this those through to too under until up very was we were
    what when where which while who whom why will with would you your yours yourself yourselves
    also may might must shall us whether""".split()
)


@record(frozen=True)
class ParsedQuery:
    positive: list[Term] = field(default_factory=list)
    negative: list[Term] = field(default_factory=list)

    @property
    def words(self) -> list[str]:
        """Lower-cased words of the positive terms, for snippet line selection."""
        out: list[str] = []
        for term in self.positive:
            out.extend(w for w in re.findall(r"\w+", term.text.lower()) if w not in out)
        return out


def parse_query(query: str) -> ParsedQuery:
    """Split a keyword query into positive and negated terms; drop punctuation-only tokens."""
    positive: list[Term] = []
    negative: list[Term] = []
    query = _CONTROL.sub(" ", query)  # a NUL or other control character separates words
    for match in _TOKEN.finditer(query):
        neg_quote, quoted, bare = match.groups()
        if quoted is not None:
            term, negated = Term(quoted.strip(), phrase=True), bool(neg_quote)
        else:
            negated = bare.startswith("-") and len(bare) > 1
            term = Term(bare[1:] if negated else bare)
        if not term.text or not _WORDISH.search(term.text):
            continue
        target = negative if negated else positive
        if term not in target:
            target.append(term)
    return ParsedQuery(positive, negative)


def text_query(parsed: ParsedQuery, mode: str) -> TextQuery | None:
    """The backend query for `mode` "all" (every term) or "any" (any non-stop-word term).

    Returns None when nothing positive is left to search for.
    """
    terms = parsed.positive
    if mode == "any":
        content = [t for t in terms if t.phrase or t.text.lower() not in STOPWORDS]
        terms = content or terms
    elif mode != "all":
        raise ValueError(f"unknown mode {mode!r}")
    if not terms:
        return None
    return TextQuery(tuple(terms), tuple(parsed.negative), require_all=mode == "all")
