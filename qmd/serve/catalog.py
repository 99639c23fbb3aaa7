"""What the MCP server offers: the four tools with their JSON schemas, and one prompt (pure).

Each tool describes itself as far as the client's protocol version can read: 2025-03-26
added `annotations` (qmd's tools only read the index: readOnlyHint, idempotentHint, not
destructive, no open world), 2025-06-18 the tool's `title` and an `outputSchema` its
`structuredContent` conforms to (qmd/serve/outputs.py). `tools_for(version)` leaves out
what a version does not define.

The schemas are written out, not derived from function signatures: they are what the
model reads, so each property is one plain type with a description (no `anyOf` with
null), every schema is closed (`additionalProperties: false`: clients that check
arguments before sending learn at once that unknown names are refused), and the same
names are checked by qmd/serve/arguments.py for the tools and POST /query.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

from qmd.serve.arguments import (
    GET_PARAMS,
    MAX_CANDIDATES,
    MAX_LIMIT,
    MULTI_GET_MAX_BYTES,
    MULTI_GET_PARAMS,
    QUERY_PARAMS,
    TOOL_DESCRIPTIONS,
)
from qmd.serve.outputs import OUTPUT_SCHEMAS

READ_ONLY = {"readOnlyHint": True, "destructiveHint": False, "idempotentHint": True, "openWorldHint": False}
TITLES = {"query": "Search notes", "get": "Get a document", "multi_get": "Get several documents", "status": "Index status"}
ANNOTATIONS_SINCE, OUTPUT_SCHEMA_SINCE = "2025-03-26", "2025-06-18"  # protocol versions are dates: they compare as strings
SEARCH_TYPE_HELP = 'lex = BM25 keywords (prefix match, "phrase", -exclude); vec = a natural-language question; hyde = a short passage that looks like the answer'


def _p(description: str, kind: str, **extra: Any) -> dict[str, Any]:
    return {"type": kind, "description": description, **extra}


def _schema(properties: dict[str, Any], required: list[str] | None = None) -> dict[str, Any]:
    schema: dict[str, Any] = {"type": "object", "properties": properties, "additionalProperties": False}
    if required:
        schema["required"] = required
    return schema


SUB_QUERY = _schema({
    "type": _p(SEARCH_TYPE_HELP, "string", enum=["lex", "vec", "hyde"]),
    "query": _p("The sub-query text (one line).", "string"),
}, ["type", "query"])

INPUT_SCHEMAS: dict[str, dict[str, Any]] = {
    "query": _schema({
        "query": _p(QUERY_PARAMS["query"], "string"),
        "searches": _p(QUERY_PARAMS["searches"], "array", items=SUB_QUERY, minItems=1, maxItems=10),
        "limit": _p(QUERY_PARAMS["limit"], "integer", minimum=1, maximum=MAX_LIMIT, default=10),
        "minScore": _p(QUERY_PARAMS["minScore"], "number", minimum=0, maximum=1, default=0),
        "minConfidence": _p(QUERY_PARAMS["minConfidence"], "number", minimum=0, maximum=1),
        "candidateLimit": _p(QUERY_PARAMS["candidateLimit"], "integer", minimum=1, maximum=MAX_CANDIDATES, default=40),
        "collections": _p(QUERY_PARAMS["collections"], "array", items={"type": "string"}),
        "intent": _p(QUERY_PARAMS["intent"], "string"),
        "rerank": _p(QUERY_PARAMS["rerank"], "boolean", default=True),
        "filter": _p(QUERY_PARAMS["filter"], "object"),
        "since": _p(QUERY_PARAMS["since"], "string"),
        "until": _p(QUERY_PARAMS["until"], "string"),
        "why": _p(QUERY_PARAMS["why"], "string"),
    }),
    "get": _schema({
        "file": _p(GET_PARAMS["file"], "string"),
        "fromLine": _p(GET_PARAMS["fromLine"], "integer", minimum=1),
        "maxLines": _p(GET_PARAMS["maxLines"], "integer", minimum=0),
        "lineNumbers": _p(GET_PARAMS["lineNumbers"], "boolean", default=False),
    }, ["file"]),
    "multi_get": _schema({
        "pattern": _p(MULTI_GET_PARAMS["pattern"], "string"),
        "maxLines": _p(MULTI_GET_PARAMS["maxLines"], "integer", minimum=0),
        "maxBytes": _p(MULTI_GET_PARAMS["maxBytes"], "integer", minimum=1, default=MULTI_GET_MAX_BYTES),
        "lineNumbers": _p(MULTI_GET_PARAMS["lineNumbers"], "boolean", default=False),
    }, ["pattern"]),
    "status": _schema({}),
}

TOOL_NAMES = ("query", "get", "multi_get", "status")
# The newest protocol's list: every field (annotations repeat the title, for 2025-03-26, whose tools have no `title`).
TOOLS: list[dict[str, Any]] = [
    {"name": name, "title": TITLES[name], "description": TOOL_DESCRIPTIONS[name], "inputSchema": INPUT_SCHEMAS[name],
     "outputSchema": OUTPUT_SCHEMAS[name], "annotations": {"title": TITLES[name], **READ_ONLY}}
    for name in TOOL_NAMES
]
_ADDED = {"annotations": ANNOTATIONS_SINCE, "title": OUTPUT_SCHEMA_SINCE, "outputSchema": OUTPUT_SCHEMA_SINCE}


def tools_for(version: str) -> list[dict[str, Any]]:
    """The tools as a client of protocol `version` reads them: without the fields added later."""
    return [{k: v for k, v in t.items() if _ADDED.get(k, "") <= version} for t in TOOLS]

# --- the prompt ------------------------------------------------------------------------------

SEARCH_FIRST = "search-first"
PROMPTS: list[dict[str, Any]] = [{
    "name": SEARCH_FIRST,
    "title": "Search the notes first",
    "description": "The rule for answering from the user's notes: search qmd before general knowledge, with lex/vec/hyde examples.",
    "arguments": [{"name": "question", "description": "The question to answer from the notes (optional).", "required": False}],
}]


def search_first_text(question: str | None, instructions: str) -> str:
    """The search-first prompt: the rule, how to search, and the question if one was given."""
    lines = [
        "Before answering from general knowledge about the user's projects, systems, runbooks or past decisions, search their notes with qmd's `query` tool, and cite the qmd:// paths you used.",
        "Search with typed sub-queries, strongest first:",
        '- lex (keywords, "exact phrase", -exclude): {"type": "lex", "query": "rollback \\"load balancer\\""}',
        '- vec (a plain question): {"type": "vec", "query": "how do we undo a bad deploy"}',
        '- hyde (a passage that looks like the answer): {"type": "hyde", "query": "To roll back, flip the load balancer to the previous pool."}',
        "Read a whole note with `get` (a qmd:// path or #docid from the results). If an answer says the health flag is raised, tell the user the results may be stale.",
        "",
        instructions,
    ]
    if question:
        lines += ["", f"Question: {question}"]
    return "\n".join(lines)
