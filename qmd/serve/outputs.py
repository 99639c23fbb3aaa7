"""The shape of each tool's structured answer: its MCP `outputSchema` (pure, the one copy).

MCP (since 2025-06-18) lets a tool declare a JSON Schema for its `structuredContent`; a
server that declares one MUST answer in that shape, and clients SHOULD check it (the MCP
SDKs do). So every schema here is closed (`additionalProperties: false`) and names each
field qmd/serve/service.py and qmd/serve/answers.py write: a field added there without its
line here fails tests/qmd/serve/test_mcp_outputs.py, which validates real answers against
these. Error results (`isError`) carry no structured content and are not checked.
Nullable fields are `"type": [T, "null"]` (plain JSON Schema, no `anyOf`), and each
property says what it means: these descriptions are what a client shows of the answer.
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

Schema = dict[str, "Any"]


def _t(kind: str | list[str], description: str = "", **extra: Any) -> Schema:
    out: Schema = {"type": kind, **extra}
    if description:
        out["description"] = description
    return out


def _obj(properties: dict[str, Schema], required: list[str] | None = None, description: str = "", *, closed: bool = True) -> Schema:
    """An object with these properties, all required unless `required` names fewer."""
    out: Schema = {"type": "object", "properties": properties, "required": list(properties) if required is None else required}
    if closed:
        out["additionalProperties"] = False
    if description:
        out["description"] = description
    return out


def _optional(properties: dict[str, Schema], *optional: str) -> list[str]:
    return [k for k in properties if k not in optional]


STR, INT, NUM, BOOL = "string", "integer", "number", "boolean"
STR_OR_NULL, INT_OR_NULL, NUM_OR_NULL = [STR, "null"], [INT, "null"], [NUM, "null"]
DOCID = _t(STR, "The document's short id: '#' and 6 hex digits (more when documents share them); `get` takes it.", pattern="^#[0-9a-f]{6,}$")
FILE = _t(STR, "The document's qmd://collection/path; `get` takes it.")

FRESHNESS = _obj({
    "updated_at": _t(STR_OR_NULL, "When the index (or the visible collections) was last updated, ISO 8601 UTC; null: never."),
    "age_s": _t(INT_OR_NULL, "Seconds since that update.", minimum=0),
    "health": _t(STR, "The updater's health flag: raised means updates are failing and results may be stale.", enum=["ok", "raised", "unknown"]),
    "health_since": _t(STR_OR_NULL, "When the flag was raised (null when it is not)."),
    "failures": _t(INT, "Failing updates behind a raised flag.", minimum=0),
    "summary": _t(STR, "The same in one sentence, as the text answer ends."),
    "warning": _t(STR, "Only when the flag is raised: tell the user the results may be out of date."),
}, ["updated_at", "age_s", "health", "health_since", "failures", "summary"], "How fresh the index is, and whether its updater's health flag is raised.")

_HIT = {
    "docid": DOCID,
    "file": FILE,
    "title": _t(STR, "The document's title."),
    "score": _t(NUM, "The ranking score (0-1, 2 decimals)."),
    "context": _t(STR_OR_NULL, "What the user says this part of the notes is about (null: nothing)."),
    "line": _t(INT, "The line the snippet starts at (1-based).", minimum=1),
    "snippet": _t(STR, "The best-matching lines, headed '@@ -start,count @@'."),
    "metadata": _t("object", "The document's typed front-matter metadata (only when it has some)."),
    "confidence": _t(NUM, "How likely the hit answers the question, 0-1 (2 decimals).", minimum=0, maximum=1),
    "below_threshold": _t(BOOL, "True: the confidence is below `threshold`, so the hit is a best guess, not an answer."),
}
HIT = _obj(_HIT, _optional(_HIT, "metadata", "confidence", "below_threshold"), "One hit, best first.")

_WHY_LIST = _obj({
    "list": _t(STR), "label": _t(STR), "rank": _t(INT_OR_NULL), "score": _t(NUM_OR_NULL), "note": _t(STR),
}, description="The document in one of the query's lists: its rank and score there, or why absent.")
WHY = _obj({
    "ref": _t(STR, "The reference asked about."),
    "document": _t(["object", "null"], "The document it names: uri, docid, title (null: none)."),
    "verdict": _t(STR, "Why it was shown, or what left it out."),
    "missing": _t(STR, "Why no document was found ('' : found)."),
    "outside": _t(STR, "Why its collection is not searched ('' : it is)."),
    "filtered": _t(STR, "Why the filter leaves it out ('' : it does not)."),
    "vectors": _t(["object", "null"], "Its vectors: model, state, chunks, orphaned."),
    "lists": _t("array", items=_WHY_LIST),
    "fused": _t(["object", "null"], "Its fused rank (rank, of, rrf, lists)."),
    "rerank": _t(["object", "null"], "The reranker's score, or a note why it did not read it."),
    "final": _t(["object", "null"], "Its final rank and score."),
    "shown": _t(BOOL, "Whether it is among the results."),
    "confidence": _t(NUM_OR_NULL, "Its confidence when shown."),
    "threshold": _t(NUM_OR_NULL, "The minConfidence asked for (null: the default threshold)."),
}, ["ref", "document", "verdict"], "With `why`: where that document stood in each stage of this query.")

_QUERY = {
    "results": _t("array", "The hits, best first (empty: nothing matched).", items=HIT),
    "freshness": FRESHNESS,
    "threshold": _t(NUM, "The confidence a hit needs to count as an answer (minConfidence, or the default).", minimum=0, maximum=1),
    "unmatched": _t("array", "Words of the question no searched note contains.", items=_t(STR)),
    "verdict": _t(STR, "Only when there are hits and none reaches the threshold: the notes likely do not answer this; verify before citing."),
    "pending": _t(INT, "Documents whose current text has no vectors yet (found by keywords only).", minimum=1),
    "why": WHY,
    "notices": _t("array", "What the search skipped or changed (each said once per server).", items=_t(STR)),
}
QUERY = _obj(_QUERY, ["results", "freshness", "threshold", "unmatched"])

GET = _obj({
    "docid": DOCID,
    "file": FILE,
    "title": _t(STR, "The document's title."),
    "context": _t(STR_OR_NULL, "What the user says this part of the notes is about."),
    "fromLine": _t(INT, "The first line shown (1-based).", minimum=1),
    "lines": _t(INT, "How many lines are shown.", minimum=0),
    "totalLines": _t(INT, "The document's length in lines.", minimum=0),
    "text": _t(STR, "The lines shown (numbered when lineNumbers was asked for)."),
})

_DOCUMENT = {
    "docid": DOCID,
    "file": _t(STR, "The document's qmd:// path (for a name that found none: the name as given)."),
    "title": _t(STR, "The document's title."),
    "context": _t(STR_OR_NULL, "What the user says this part of the notes is about."),
    "skipped": _t(STR_OR_NULL, "Why the text is not here (too large, the answer full, no such document); then no text."),
    "fromLine": _t(INT, "With a line range in the pattern: the first line shown.", minimum=1),
    "lines": _t(INT, "With a line range in the pattern: the lines shown.", minimum=0),
    "totalLines": _t(INT, "The document's length in lines.", minimum=0),
    "truncatedLines": _t(INT, "Lines cut by maxLines.", minimum=0),
    "text": _t(STR, "The document's text."),
}
MULTI_GET = _obj({"documents": _t("array", "Each document the pattern names, in order.", items=_obj(_DOCUMENT, ["file"]))})

_COLLECTION = _obj({
    "name": _t(STR), "path": _t(STR, "The folder it indexes ('' for a scoped token)."), "pattern": _t(STR, "The glob of files it indexes."),
    "documents": _t(INT, minimum=0), "updated_at": _t(STR_OR_NULL), "includeByDefault": _t(BOOL, "Searched when a query names no collection."),
    "contexts": _t("object", "Context per path prefix ('/' : the whole collection).", additionalProperties=_t(STR)),
})
_VECTORS = {
    "model": _t(STR_OR_NULL, "The embed model (null: none)."),
    "embedded_documents": _t(INT, minimum=0), "pending_documents": _t(INT, minimum=0),
    "note": _t(STR, "Why vectors cannot be counted now."),
}
STATUS = _obj({
    "index": _t(STR, "The index's name."),
    "documents": _t(INT, minimum=0),
    "collections": _t("array", items=_COLLECTION),
    "vectors": _obj(_VECTORS, _optional(_VECTORS, "note"), "Documents with and without vectors of the embed model."),
    "freshness": FRESHNESS,
    "skipped_files": _t(INT, "Files the last update skipped (`qmd status` lists them).", minimum=0),
    "global_context": _t(STR_OR_NULL, "What the user says the whole index is about."),
    "grammars": _t("array", "Tree-sitter grammars for code chunking: loaded, or how to install.", items=_obj({
        "language": _t(STR), "available": _t(BOOL), "install": _t(STR_OR_NULL),
    })),
    "chunking_fallbacks": _t("array", "Code files chunked as plain text (their grammar did not parse them).", items=_t(STR)),
    "server": _obj({
        "version": _t(STR), "build_id": _t(STR), "models_loaded": _t("array", items=_t(STR)),
        "model_idle_s": _t(NUM, "Seconds without a search after which models are released (0: never).", minimum=0),
    }, description="This server: version, build, models in memory."),
})

OUTPUT_SCHEMAS: dict[str, Schema] = {"query": QUERY, "get": GET, "multi_get": MULTI_GET, "status": STATUS}
