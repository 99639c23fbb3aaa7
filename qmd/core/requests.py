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


Request = SearchRequest | QueryRequest


def command_of(request: Request) -> str:
    """The command a request runs: search, vsearch or query."""
    if isinstance(request, QueryRequest):
        return "query"
    return "vsearch" if request.vector else "search"


def request_for(kind: type[SearchRequest] | type[QueryRequest], text: str | Request, changes: dict[str, Any]) -> Any:
    """A `kind` request from text and keyword settings, or a given request with `changes`
    (how Store's search methods take either); TypeError names a setting it does not have."""
    if changes.get("collections") is not None:
        changes = {**changes, "collections": tuple(changes["collections"])}
    if isinstance(text, str):
        return kind(text, **changes)  # TypeError names a keyword that is not a field
    from qmd.core.records import replace

    if not isinstance(text, kind):
        raise TypeError(f"expected a {kind.__name__} or the text to search for, not {type(text).__name__}")
    return replace(text, **changes) if changes else text


# The JSON form of each field type, for a request sent over HTTP (the /cli route).
_JSON_KINDS: dict[str, tuple[type, ...]] = {
    "str": (str,), "str | None": (str, type(None)), "int": (int,), "int | None": (int, type(None)),
    "float": (int, float), "bool": (bool,), "bool | None": (bool, type(None)), "object": (str, dict, type(None)),
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
    pending: int = 0
