"""The requests of the search commands, and the outcome each is answered with.

One record per kind of search holds every setting of one call: `SearchRequest` for
`search` and `vsearch`, `QueryRequest` for `query`. Whoever asks fills one — the CLI's
typer commands and its lean start-up path (qmd/cli/actions.py builds both from the same
option values), a library caller, the warm server's `/cli` route (which checks a JSON
request against the field types here, `json_fields`) — and `Store.search` / `vsearch` /
`query` / `answer` take it whole. Adding a setting is adding a field here (and, for the
CLI, its typer option). Records are frozen: a stage that needs another value makes a copy
(`qmd.core.records.replace`).

`Outcome` is what a search command prints: the hits and what goes beside them. An
in-process run (`Store.answer`) and a warm server's answer (qmd/cli/remote.py) both give
one, so the CLI renders them alike.
"""

from __future__ import annotations

from qmd.core.records import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.core.results import SearchHit

CLI_SNIPPET_CHARS = 500  # the terminal's snippet width
JSON_SNIPPET_CHARS = 300  # JSON and MCP: agents pay for every character
MATCHES = ("any", "all")  # search's `match`: all-terms hits then any-term fill, or all-terms only


@record(frozen=True)
class SearchRequest:
    """`search` (BM25) or, with `vector`, `vsearch` (nearest by meaning)."""

    text: str
    limit: int | None = 10  # None: every match
    collections: tuple[str, ...] | None = None  # None: the collections searched by default
    min_score: float = 0.0
    full: bool = False  # each hit's whole document as its body
    snippet_chars: int = CLI_SNIPPET_CHARS
    line_numbers: bool = False  # number the snippet's lines
    filter: object = None  # metadata filter: JSON text, its decoded object or a qmd/core/filters.py tree
    since: str | None = None  # an ISO date or an age (7d, 2w)
    until: str | None = None
    match: str = "any"  # keyword search: "all" keeps only documents holding every term
    vector: bool = False  # vsearch
    min_confidence: float | None = None  # hits below it are best guesses, not answers (None: the config's, else qmd's default)


@record(frozen=True)
class QueryRequest:
    """`query`: expansion, BM25 and vector lists, fusion, rerank, blend (qmd/search/hybrid.py)."""

    text: str
    limit: int = 10
    candidates: int = 40  # how many fused documents the reranker reads
    min_score: float = 0.0
    collections: tuple[str, ...] | None = None
    intent: str | None = None  # what the asker is after: steers rerank and snippets
    rerank: bool = True
    expand: bool | None = None  # None: only with a model trained for expansion; True: any generate model; False: never
    explain: bool = False  # each hit's lists, ranks and scores
    snippet_chars: int = CLI_SNIPPET_CHARS
    keyword: bool = True  # False: vector lists only (vsearch --expand)
    filter: object = None
    since: str | None = None
    until: str | None = None
    full: bool = False  # each hit's whole document as its body
    why: str | None = None  # a document (path, #docid, qmd:// URI): where it stood in each stage
    min_confidence: float | None = None  # hits below it are best guesses, not answers (None: the config's, else qmd's default)


Request = SearchRequest | QueryRequest


def command_of(request: Request) -> str:
    """The command a request runs: search, vsearch or query."""
    if isinstance(request, QueryRequest):
        return "query"
    return "vsearch" if request.vector else "search"


def request_for(kind: type[SearchRequest] | type[QueryRequest], text: str | Request, changes: dict[str, Any]) -> Any:
    """A `kind` request from text and keyword settings, or a given request with `changes`
    (how Store's search methods take either), checked (`checked`); TypeError names a
    setting it does not have."""
    if isinstance(changes.get("collections"), list):
        changes = {**changes, "collections": tuple(changes["collections"])}
    if isinstance(text, str):
        return checked(kind(text, **changes))  # TypeError names a keyword that is not a field
    from qmd.core.records import replace

    if not isinstance(text, kind):
        raise TypeError(f"expected a {kind.__name__} or the text to search for, not {type(text).__name__}")
    return checked(replace(text, **changes) if changes else text)


_PY_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,), "str | None": (str, type(None)), "int": (int,), "int | None": (int, type(None)),
    "float": (int, float), "float | None": (int, float, type(None)), "bool": (bool,), "bool | None": (bool, type(None)), "object": (object,),
    "tuple[str, ...] | None": (tuple, list, type(None)),
}
_FIELDS: dict[type, list[tuple[str, tuple[type, ...]]]] = {}


def checked(request: Request) -> Request:
    """`request` when each field holds its type and no restriction is empty: TypeError for a
    wrong type (`limit="5"`, `collections="notes"`, `limit=True`), QmdError for an empty
    collection list or a blank filter, since or until, which would otherwise search the
    whole index (the CLI refuses an empty --filter for the same reason)."""
    fields = _FIELDS.get(type(request))
    if fields is None:
        annotations: dict[str, str] = type(request).__annotations__
        fields = _FIELDS[type(request)] = [(name, _PY_KINDS[annotation]) for name, annotation in annotations.items()]
    for name, kinds in fields:
        value = getattr(request, name)
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds and kinds != (object,)):
            raise TypeError(f"{type(request).__name__}.{name} must be {_expected(kinds)}, not {type(value).__name__} {value!r:.60}")
    names = request.collections
    if names is not None and (not names or not all(isinstance(n, str) for n in names)):
        raise _empty("collections", "name at least one collection, or give None for the collections searched by default") if not names else TypeError("collections must be names (strings)")
    for name in ("filter", "since", "until"):
        value = getattr(request, name)
        if isinstance(value, str) and not value.strip():
            raise _empty(name, f"give None for no {name}")
    if request.min_confidence is not None:
        check_min_confidence(request.min_confidence)
    if request.snippet_chars < 1:
        from qmd.core.errors import QmdError

        raise QmdError(f"snippet_chars must be at least 1, not {request.snippet_chars}", "e.g. 300 (JSON) or 500 (terminal)")
    return request


def check_min_confidence(value: float) -> None:
    """A QmdError for a confidence threshold that is not a number from 0 to 1 (NaN included)."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0.0 <= value <= 1.0:
        from qmd.core.errors import QmdError

        raise QmdError(f"the minimum confidence must be a number from 0 to 1, not {value!r}", "e.g. --min-confidence 0.5 (0 calls every hit an answer)")


def _expected(kinds: tuple[type, ...]) -> str:
    names = {type(None): "None", tuple: "a list of names", list: ""}
    return " or ".join(filter(None, (names.get(k, k.__name__) for k in kinds)))


def _empty(name: str, hint: str) -> Exception:
    from qmd.core.errors import QmdError

    return QmdError(f"{name} is empty: that would search without it", hint)


# The JSON form of each field type, for a request sent over HTTP (the /cli route).
_JSON_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,), "str | None": (str, type(None)), "int": (int,), "int | None": (int, type(None)),
    "float": (int, float), "float | None": (int, float, type(None)), "bool": (bool,), "bool | None": (bool, type(None)), "object": (str, dict, type(None)),
    "tuple[str, ...] | None": (list, type(None)),
}


def json_fields(kind: type[SearchRequest] | type[QueryRequest]) -> dict[str, tuple[type, ...]]:
    """Field name → the JSON types it accepts (tests/qmd/core/test_requests.py: every field has one)."""
    annotations: dict[str, str] = kind.__annotations__
    return {name: _JSON_KINDS[annotation] for name, annotation in annotations.items()}


def from_json(data: object) -> Request:
    """The request a JSON object describes (`{"command": …, "request": {fields}}`); ValueError names what is wrong."""
    if not isinstance(data, dict) or set(data) != {"command", "request"} or not isinstance(data["request"], dict):
        raise ValueError("a request is an object of command and request")
    command, fields = data["command"], dict(data["request"])
    kind: type[SearchRequest] | type[QueryRequest]
    if command in ("search", "vsearch"):
        kind = SearchRequest
    elif command == "query":
        kind = QueryRequest
    else:
        raise ValueError("command must be one of search, vsearch, query")
    allowed = json_fields(kind)
    for name, value in fields.items():
        kinds = allowed.get(name)
        if kinds is None:
            raise ValueError(f"unknown setting {name[:60]!r} for {command}")
        if not isinstance(value, kinds) or (isinstance(value, bool) and bool not in kinds):
            raise ValueError(f"setting {name} has the wrong type")
        if name == "collections" and isinstance(value, list) and not all(isinstance(c, str) for c in value):
            raise ValueError("collections must be a list of strings")
    if not isinstance(fields.get("text"), str):
        raise ValueError("text must be a string")
    if fields.get("vector", command == "vsearch") != (command == "vsearch"):
        raise ValueError("vector must match the command")
    if command == "vsearch":
        fields["vector"] = True
    if fields.get("collections") is not None:
        fields["collections"] = tuple(fields["collections"])
    return kind(**fields)


def to_json(request: Request) -> dict[str, Any]:
    """The JSON object `from_json` reads back as `request`."""
    fields = {name: getattr(request, name) for name in type(request).__match_args__}
    if fields.get("collections") is not None:
        fields["collections"] = list(fields["collections"])
    return {"command": command_of(request), "request": fields}


@record
class Outcome:
    """What a search command prints: the hits, and beside them the notices, what ran and
    (vsearch) the model and how many documents lack its vectors. `roots`: the folder of
    each collection among the hits (for --full-path and terminal links)."""

    hits: list[SearchHit]
    roots: dict[str, str] = field(default_factory=dict)
    notices: list[str] = field(default_factory=list)
    stages: dict[str, Any] = field(default_factory=dict)
    searches: list[dict[str, Any]] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    model: str = ""
    pending: int = 0  # vsearch and query: documents whose current content has no vectors for `model`
    why: dict[str, Any] | None = None  # query --why: where the document stood (QueryResult.why)
    threshold: float = 0.0  # hits whose confidence is below it are best guesses (below_threshold)
    unmatched: list[str] = field(default_factory=list)  # words of the question no searched document holds
