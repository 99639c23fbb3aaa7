"""Arguments of the MCP tools and of POST /query: names, descriptions and checks (pure).

Lax about JSON types, as agents send them (numbers as strings, arrays as JSON text),
strict about names and ranges: an unknown name is refused with the list of valid ones,
so a singular `collection` cannot quietly search everything.
"""

from __future__ import annotations

import json
from qmd.core.records import field, record
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

from qmd.core.errors import QmdError
from qmd.core.requests import QueryRequest
from qmd.search.typed import MAX_LINE_CHARS, MAX_SEARCHES, SEARCH_TYPES
from qmd.store.store import MULTI_GET_MAX_BYTES

MAX_LIMIT = 100
MAX_CANDIDATES = 200
MAX_COLLECTIONS = 50
MAX_TEXT = 4000  # characters of a plain query, an intent or a file reference
MAX_FILTER_CHARS = 16000  # a filter given as JSON text
MULTI_GET_TOTAL_BYTES = 512 * 1024  # one multi_get answer; the rest is listed as skipped

QUERY_PARAMS = {
    "query": "A plain question or keywords; expanded automatically into keyword and meaning sub-queries. Give either query or searches.",
    "searches": "Typed sub-queries, 1 to 10: [{type: lex|vec|hyde, query}]. The first one weighs double.",
    "limit": "Maximum results (default 10).",
    "minScore": "Drop results scoring below this, 0-1 (default 0).",
    "minConfidence": (
        "Below this confidence (0-1: how likely a hit answers the question) a hit is a best guess, flagged below_threshold; "
        "when no hit reaches it the answer opens by saying no note answers (default: the index's search: min_confidence, else qmd's measured 0.36)."
    ),
    "candidateLimit": "How many fused candidates the reranker reads (default 40; fewer is faster).",
    "collections": "Search only these collections (a list; default: every collection included by default).",
    "intent": "What you are after, to disambiguate (e.g. query 'performance', intent 'web page load times'). Steers ranking and snippets; does not search on its own.",
    "rerank": "Rerank with the local model (default true); false is faster.",
    "filter": (
        'Only documents whose front-matter metadata matches: a condition {"key": "status", "operator": "eq", "value": "published"} '
        "(operators eq ne gt gte lt lte in nin all exists; typed: 3 never matches \"3\"), or groups "
        '{"operator": "and"|"or", "operands": [...]}, {"operator": "not", "operand": {...}}. Applied before ranking.'
    ),
    "since": "Only documents dated since: an ISO date (2024-05-01) or an age (7d, 2w); by front-matter date/updated, else the file's time.",
    "until": "Only documents dated until: an ISO date (that day included) or an age.",
    "why": (
        "A document you expected (path, qmd:// path or #docid): the answer also says where it stood — its rank and score in each keyword "
        "and vector list, fused, reranked and final, whether its collection, the filter or candidateLimit cut it, and whether its vectors are current."
    ),
}
GET_PARAMS = {
    "file": "A path or qmd:// path from search results, a docid (#abc123), or path:FROM[:COUNT] for a line range.",
    "fromLine": "First line to return (1-based).",
    "maxLines": "At most this many lines.",
    "lineNumbers": "Prefix each line with its number, 'N: ' (default false).",
}
MULTI_GET_PARAMS = {
    "pattern": "A glob over collection/path (e.g. 'notes/runbooks/*.md'), or a comma-separated list of paths and docids, each with an optional line range path:FROM[:COUNT] (e.g. 'notes/a.md:10:5,#abc123').",
    "maxLines": "At most this many lines per document.",
    "maxBytes": f"Skip documents larger than this many bytes (default {MULTI_GET_MAX_BYTES}).",
    "lineNumbers": "Prefix each line with its number, 'N: ' (default false).",
}
TOOL_PARAMS: dict[str, dict[str, str]] = {"query": QUERY_PARAMS, "get": GET_PARAMS, "multi_get": MULTI_GET_PARAMS, "status": {}}

TOOL_DESCRIPTIONS = {
    "query": (
        "Search the user's indexed markdown notes (runbooks, decisions, meeting notes, docs) by keywords and by meaning. "
        "Give `query` (a plain question) or `searches` (typed sub-queries): "
        "lex = BM25 keywords (prefix match, \"exact phrase\", -exclude), e.g. {type:'lex', query:'\"connection pool\" timeout -redis'}; "
        "vec = a natural-language question, e.g. {type:'vec', query:'why do database connections time out under load'}; "
        "hyde = a short passage that looks like the answer, e.g. {type:'hyde', query:'Connections run out when every pooled connection is busy...'}. "
        "Combine lex + vec for best recall; put the strongest first. Results: docid, file (qmd://collection/path), title, context, score, line, snippet, "
        "confidence (0-1, how likely the hit answers) and below_threshold, the question's words no note contains, "
        "plus the index's last update time and health flag. When no hit reaches the threshold the answer says so first: the notes likely do not answer."
    ),
    "get": "Read one document (or a line range of it) by path, qmd:// path or docid from search results. Not found: up to 5 similar paths are suggested.",
    "multi_get": f"Read several documents by glob over collection/path or a comma-separated list. Documents over maxBytes are skipped with the reason; one answer holds at most {MULTI_GET_TOTAL_BYTES // 1024} KB.",
    "status": "The index: documents, collections with their contexts, vectors, when it was last updated and whether the update health flag is raised.",
}


class ArgError(QmdError):
    """Arguments that do not fit a tool (HTTP 400)."""


def check_names(tool: str, args: dict[str, Any], valid: dict[str, str]) -> None:
    unknown = [k for k in args if k not in valid]
    if not unknown:
        return
    import difflib

    names = ", ".join(valid) if valid else "(none)"
    close = [m for k in unknown for m in difflib.get_close_matches(k, list(valid), n=1, cutoff=0.6)]
    hint = f"did you mean {', '.join(repr(c) for c in dict.fromkeys(close))}? valid parameters: {names}" if close else f"valid parameters: {names}"
    plural = "s" if len(unknown) > 1 else ""
    raise ArgError(f"unknown parameter{plural} {', '.join(repr(k) for k in unknown)} for {tool}", hint)


MAX_DIGITS = 18  # a whole number given as text: longer is out of every range (and slow to convert)


def _shown(value: int | float) -> str:
    """A number as an error message names it; huge ones by size (str() of one is slow or refused)."""
    if isinstance(value, int) and not -(10**18) <= value <= 10**18:
        return f"a number with {'more than 18' if value.bit_length() > 64 else 'about 19'} digits"
    return f"{value:g}" if isinstance(value, float) else str(value)


def int_arg(name: str, value: object, lo: int, hi: int) -> int:
    """A whole number in [lo, hi]; JSON numbers, integral floats and digit strings are accepted."""
    if isinstance(value, bool):
        raise ArgError(f"{name} must be a whole number, got {value!r}", f"for example {name}: {lo}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        digits = value.strip().lstrip("-")
        if len(digits.lstrip("0")) > MAX_DIGITS:
            raise ArgError(f"{name} must be between {lo} and {hi}, got a number with {len(digits)} digits")
        value = int(value)
    if not isinstance(value, int):
        raise ArgError(f"{name} must be a whole number, got {_type_or_value(value)}", f"for example {name}: {lo}")
    if not lo <= value <= hi:
        raise ArgError(f"{name} must be between {lo} and {hi}, got {_shown(value)}")
    return value


def num_arg(name: str, value: object, lo: float, hi: float) -> float:
    """A number in [lo, hi] (not NaN); numbers given as text are accepted."""
    if isinstance(value, str):
        try:
            value = float(value) if len(value) <= 64 else value
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ArgError(f"{name} must be a number, got {_type_or_value(value)}")
    if not lo <= value <= hi:
        raise ArgError(f"{name} must be between {lo:g} and {hi:g}, got {_shown(value)}")
    return float(value)


def _type_or_value(value: object) -> str:
    """How an error names a value of the wrong type: short scalars by value, the rest by type."""
    if isinstance(value, str | int | float | bool) or value is None:
        text = repr(value) if not isinstance(value, int) or isinstance(value, bool) or abs(value) < 10**18 else _shown(value)
        return text if len(text) <= 60 else f"{text[:57]}..."
    return f"a JSON {'array' if isinstance(value, list) else 'object' if isinstance(value, dict) else type(value).__name__}"


def no_nul(name: str, value: str) -> str:
    """`value` unless it holds a NUL character, which no query, path or name can contain."""
    if "\x00" in value:
        raise ArgError(f"{name} contains a NUL character (\\x00) at position {value.index(chr(0)) + 1}", "remove it: text sent to qmd cannot contain NUL")
    return value


def bool_arg(name: str, value: object) -> bool:
    """true/false (also as the strings "true"/"false")."""
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ArgError(f"{name} must be true or false, got {_type_or_value(value)}")


def str_arg(name: str, value: object, max_len: int = MAX_TEXT) -> str:
    """A non-empty string of at most `max_len` characters, without NUL."""
    if not isinstance(value, str):
        raise ArgError(f"{name} must be a string, got {_json_type(value)}")
    if not value.strip():
        raise ArgError(f"{name} is empty")
    if len(value) > max_len:
        raise ArgError(f"{name} is longer than {max_len} characters", "shorten it")
    return no_nul(name, value)


def _json_type(value: object) -> str:
    names = {bool: "a boolean", int: "a number", float: "a number", list: "an array", dict: "an object", type(None): "null"}
    return names.get(type(value), type(value).__name__)


def _json_list(name: str, value: object) -> object:
    # Some clients send arrays as JSON text.
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            raise ArgError(f"{name} is not a valid JSON array") from None
    return value


def str_list_arg(name: str, value: object) -> list[str]:
    value = _json_list(name, value)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ArgError(f"{name} must be a list of names", f'for example {name}: ["notes"]')
    if len(value) > MAX_COLLECTIONS:
        raise ArgError(f"{name} has more than {MAX_COLLECTIONS} entries")
    return [no_nul(f"{name}[{i}]", v.strip()) for i, v in enumerate(value, start=1)]


def searches_arg(value: object) -> list[tuple[str, str]]:
    example = 'searches: [{"type": "lex", "query": "rollback"}, {"type": "vec", "query": "how do we undo a bad deploy"}]'
    value = _json_list("searches", value)
    if not isinstance(value, list) or not value:
        raise ArgError("searches must be a non-empty list of {type, query}", example)
    if len(value) > MAX_SEARCHES:
        raise ArgError(f"searches has {len(value)} entries; at most {MAX_SEARCHES} are allowed", "merge or drop some")
    out = []
    for i, item in enumerate(value, start=1):
        if not isinstance(item, dict):
            raise ArgError(f"searches[{i}] must be an object {{type, query}}", example)
        extra = [k for k in item if k not in ("type", "query")]
        if extra:
            raise ArgError(f"searches[{i}] has unknown field {extra[0]!r}", "each sub-query has exactly: type (lex, vec or hyde) and query")
        kind = item.get("type")
        if kind not in SEARCH_TYPES:
            raise ArgError(f"searches[{i}].type must be lex, vec or hyde, got {kind!r}"[:200], example)
        text = str_arg(f"searches[{i}].query", item.get("query"), MAX_LINE_CHARS)
        out.append((kind, " ".join(text.split())))  # one line each: a newline would start another sub-query
    return out


@record
class QueryArgs:
    text: str
    shown: str  # how the query is named in the text answer and the log
    limit: int = 10
    min_score: float = 0.0
    candidates: int = 40
    collections: list[str] = field(default_factory=list)
    intent: str | None = None
    rerank: bool = True
    searches: int = 0
    kinds: tuple[str, ...] = ()  # the sub-queries' types, in order
    where: Any = None  # the filter tree (qmd/core/filters.py) of filter / since / until
    why: str | None = None  # a document to say where it stood
    min_confidence: float | None = None  # None: the index's config, else qmd's default

    @property
    def keyword_only(self) -> bool:
        """Only lex sub-queries and no rerank: BM25 alone answers (no model runs)."""
        return bool(self.kinds) and all(k == "lex" for k in self.kinds) and not self.rerank

    def request(self, snippet_chars: int) -> QueryRequest:
        """The Store's request for these arguments."""
        return QueryRequest(
            self.text, self.limit, self.candidates, self.min_score, tuple(self.collections) or None, self.intent, self.rerank,
            snippet_chars=snippet_chars, filter=self.where, why=self.why, min_confidence=self.min_confidence,
        )


def parse_query_args(args: dict[str, Any], tool: str = "query") -> QueryArgs:
    """Validate the query tool's (and POST /query's) arguments."""
    check_names(tool, args, QUERY_PARAMS)
    given = {k: v for k, v in args.items() if v is not None}
    if ("query" in given) == ("searches" in given):
        raise ArgError("give exactly one of query (a plain question) or searches (typed sub-queries)", 'for example {"query": "how do we roll back a deploy"}')
    kinds: tuple[str, ...]
    if "query" in given:
        text = str_arg("query", given["query"])
        shown, searches, kinds = " ".join(text.split()), 0, ()
    else:
        subs = searches_arg(given["searches"])
        text = "\n".join(f"{kind}: {q}" for kind, q in subs)
        shown, searches, kinds = "; ".join(f"{kind}: {q}" for kind, q in subs), len(subs), tuple(kind for kind, _ in subs)
    return QueryArgs(
        text=text, shown=shown,
        limit=int_arg("limit", given.get("limit", 10), 1, MAX_LIMIT),
        min_score=num_arg("minScore", given.get("minScore", 0.0), 0.0, 1.0),
        candidates=int_arg("candidateLimit", given.get("candidateLimit", 40), 1, MAX_CANDIDATES),
        collections=str_list_arg("collections", given["collections"]) if "collections" in given else [],
        intent=str_arg("intent", given["intent"]) if "intent" in given else None,
        rerank=bool_arg("rerank", given.get("rerank", True)),
        searches=searches,
        kinds=kinds,
        where=filter_arg(given.get("filter"), given.get("since"), given.get("until")),
        why=str_arg("why", given["why"]) if "why" in given else None,
        min_confidence=num_arg("minConfidence", given["minConfidence"], 0.0, 1.0) if "minConfidence" in given else None,
    )


def filter_arg(spec: object, since: object, until: object) -> Any:
    """The filter tree of the filter / since / until arguments; an ArgError (HTTP 400) when bad."""
    if spec is None and since is None and until is None:
        return None
    from qmd.core.filters import build

    for name, value in (("since", since), ("until", until)):
        if value is not None and not isinstance(value, str):
            raise ArgError(f"{name} must be a string, got {_json_type(value)}", f'an ISO date or an age, e.g. "{name}": "2024-05-01" or "7d"')
        if value is not None:
            str_arg(name, value, 64)
    if isinstance(spec, str) and len(spec) > MAX_FILTER_CHARS:
        raise ArgError(f"filter is longer than {MAX_FILTER_CHARS} characters", "simplify it")
    try:
        return build(spec, since, until)  # type: ignore[arg-type]
    except QmdError as exc:
        raise ArgError(exc.message, exc.cli_hint) from None
