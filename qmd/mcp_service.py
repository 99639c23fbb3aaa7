"""What the MCP server does, without the MCP SDK: the four tools, /query, /health.

`ToolService.call(tool, arguments)` validates raw JSON arguments (unknown names are
refused with the list of valid ones; numbers given as strings are accepted, as agents
send them), runs the tool over one `Store` and returns a `ToolOutput`: text for the
model, structured content for programs, or an error with a message naming the fix.
It never raises for bad input or a failing search. qmd/mcp_server.py adapts it to the
SDK (stdio and Streamable HTTP) and to the plain HTTP routes.

Every answer to `query` and `status` carries the index's freshness: when it was last
updated and whether the updater's health flag (`<state>/health.json`) is raised.

Models are loaded once and kept across calls; after `QMD_MODEL_IDLE_S` seconds (default
300; 0 = never) without a search they are released, and the next search loads them again.
"""

from __future__ import annotations

import difflib
import json
import os
import sys
import threading
import time
import traceback
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from . import __version__
from .errors import QmdError
from .formats import ago, numbered
from .paths import state_dir
from .results import QueryResult, SearchHit, StatusInfo
from .search.snippets import JSON_SNIPPET_CHARS
from .search.typed import MAX_LINE_CHARS, MAX_SEARCHES, SEARCH_TYPES
from .store import MULTI_GET_MAX_BYTES, Store

DEFAULT_IDLE_S = 300.0
MAX_LIMIT = 100
MAX_CANDIDATES = 200
MAX_COLLECTIONS = 50
MAX_TEXT = 4000  # characters of a plain query, an intent or a file reference
MULTI_GET_TOTAL_BYTES = 512 * 1024  # one multi_get answer; the rest is listed as skipped
INSTRUCTIONS_MAX_BYTES = 2000  # Claude Code truncates server instructions at 2 KB

Log = Callable[[str], None]

QUERY_PARAMS = {
    "query": "A plain question or keywords; expanded automatically into keyword and meaning sub-queries. Give either query or searches.",
    "searches": "Typed sub-queries, 1 to 10: [{type: lex|vec|hyde, query}]. The first one weighs double.",
    "limit": "Maximum results (default 10).",
    "minScore": "Drop results scoring below this, 0-1 (default 0).",
    "candidateLimit": "How many fused candidates the reranker reads (default 40; fewer is faster).",
    "collections": "Search only these collections (a list; default: every collection included by default).",
    "intent": "What you are after, to disambiguate (e.g. query 'performance', intent 'web page load times'). Steers ranking and snippets; does not search on its own.",
    "rerank": "Rerank with the local model (default true); false is faster.",
}
GET_PARAMS = {
    "file": "A path or qmd:// path from search results, a docid (#abc123), or path:FROM[:COUNT] for a line range.",
    "fromLine": "First line to return (1-based).",
    "maxLines": "At most this many lines.",
    "lineNumbers": "Prefix each line with its number, 'N: ' (default false).",
}
MULTI_GET_PARAMS = {
    "pattern": "A glob over collection/path (e.g. 'notes/runbooks/*.md'), or a comma-separated list of paths and docids.",
    "maxLines": "At most this many lines per document.",
    "maxBytes": f"Skip documents larger than this many bytes (default {MULTI_GET_MAX_BYTES}).",
    "lineNumbers": "Prefix each line with its number, 'N: ' (default false).",
}
TOOL_PARAMS: dict[str, dict[str, str]] = {"query": QUERY_PARAMS, "get": GET_PARAMS, "multi_get": MULTI_GET_PARAMS, "status": {}}
REST_PARAMS = {k: v for k, v in QUERY_PARAMS.items()}  # POST /query and /search take the query tool's body

TOOL_DESCRIPTIONS = {
    "query": (
        "Search the user's indexed markdown notes (runbooks, decisions, meeting notes, docs) by keywords and by meaning. "
        "Give `query` (a plain question) or `searches` (typed sub-queries): "
        "lex = BM25 keywords (prefix match, \"exact phrase\", -exclude), e.g. {type:'lex', query:'\"connection pool\" timeout -redis'}; "
        "vec = a natural-language question, e.g. {type:'vec', query:'why do database connections time out under load'}; "
        "hyde = a short passage that looks like the answer, e.g. {type:'hyde', query:'Connections run out when every pooled connection is busy...'}. "
        "Combine lex + vec for best recall; put the strongest first. Results: docid, file (qmd://collection/path), title, context, score, line, snippet, "
        "plus the index's last update time and health flag."
    ),
    "get": "Read one document (or a line range of it) by path, qmd:// path or docid from search results. Not found: up to 5 similar paths are suggested.",
    "multi_get": f"Read several documents by glob over collection/path or a comma-separated list. Documents over maxBytes are skipped with the reason; one answer holds at most {MULTI_GET_TOTAL_BYTES // 1024} KB.",
    "status": "The index: documents, collections with their contexts, vectors, when it was last updated and whether the update health flag is raised.",
}


class ArgError(QmdError):
    """Arguments that do not fit a tool (HTTP 400)."""


@dataclass
class ToolOutput:
    """A tool's answer: `text` for the model, `structured` for programs."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    summary: str = ""  # for the request log line


def error_output(exc: QmdError) -> ToolOutput:
    text = f"Error: {exc.message}" + (f"\nhint: {exc.hint}" if exc.hint else "")
    return ToolOutput(text, None, True, f"error: {exc.message[:80]}")


# --- argument checks (lax about types, strict about names and ranges) -----------------


def check_names(tool: str, args: dict[str, Any], valid: dict[str, str]) -> None:
    unknown = [k for k in args if k not in valid]
    if not unknown:
        return
    names = ", ".join(valid) if valid else "(none)"
    close = [m for k in unknown for m in difflib.get_close_matches(k, list(valid), n=1, cutoff=0.6)]
    hint = f"did you mean {', '.join(repr(c) for c in dict.fromkeys(close))}? valid parameters: {names}" if close else f"valid parameters: {names}"
    plural = "s" if len(unknown) > 1 else ""
    raise ArgError(f"unknown parameter{plural} {', '.join(repr(k) for k in unknown)} for {tool}", hint)


def _int(name: str, value: Any, lo: int, hi: int) -> int:
    if isinstance(value, bool):
        raise ArgError(f"{name} must be a whole number, got {value!r}", f"for example {name}: {lo}")
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        value = int(value)
    if not isinstance(value, int):
        raise ArgError(f"{name} must be a whole number, got {value!r}"[:200], f"for example {name}: {lo}")
    if not lo <= value <= hi:
        raise ArgError(f"{name} must be between {lo} and {hi}, got {value}")
    return value


def _num(name: str, value: Any, lo: float, hi: float) -> float:
    if isinstance(value, str):
        try:
            value = float(value)
        except ValueError:
            pass
    if isinstance(value, bool) or not isinstance(value, int | float) or value != value:
        raise ArgError(f"{name} must be a number, got {value!r}"[:200])
    if not lo <= value <= hi:
        raise ArgError(f"{name} must be between {lo:g} and {hi:g}, got {value:g}")
    return float(value)


def _bool(name: str, value: Any) -> bool:
    if isinstance(value, bool):
        return value
    if isinstance(value, str) and value.strip().lower() in ("true", "false"):
        return value.strip().lower() == "true"
    raise ArgError(f"{name} must be true or false, got {value!r}"[:200])


def _str(name: str, value: Any, max_len: int = MAX_TEXT) -> str:
    if not isinstance(value, str):
        raise ArgError(f"{name} must be a string, got {type(value).__name__}")
    if not value.strip():
        raise ArgError(f"{name} is empty")
    if len(value) > max_len:
        raise ArgError(f"{name} is longer than {max_len} characters", "shorten it")
    return value


def _json_list(name: str, value: Any) -> Any:
    # Some clients send arrays as JSON text.
    if isinstance(value, str) and value.strip().startswith("["):
        try:
            return json.loads(value)
        except ValueError:
            raise ArgError(f"{name} is not a valid JSON array") from None
    return value


def _str_list(name: str, value: Any) -> list[str]:
    value = _json_list(name, value)
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, list) or not all(isinstance(v, str) and v.strip() for v in value):
        raise ArgError(f"{name} must be a list of names", f'for example {name}: ["notes"]')
    if len(value) > MAX_COLLECTIONS:
        raise ArgError(f"{name} has more than {MAX_COLLECTIONS} entries")
    return [v.strip() for v in value]


def _searches(value: Any) -> list[tuple[str, str]]:
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
        text = _str(f"searches[{i}].query", item.get("query"), MAX_LINE_CHARS)
        out.append((kind, " ".join(text.split())))  # one line each: a newline would start another sub-query
    return out


@dataclass
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


def parse_query_args(args: dict[str, Any], tool: str = "query") -> QueryArgs:
    """Validate the query tool's (and POST /query's) arguments."""
    check_names(tool, args, QUERY_PARAMS)
    given = {k: v for k, v in args.items() if v is not None}
    if ("query" in given) == ("searches" in given):
        raise ArgError("give exactly one of query (a plain question) or searches (typed sub-queries)", 'for example {"query": "how do we roll back a deploy"}')
    if "query" in given:
        text = _str("query", given["query"])
        shown, searches = " ".join(text.split()), 0
    else:
        subs = _searches(given["searches"])
        text = "\n".join(f"{kind}: {q}" for kind, q in subs)
        shown, searches = "; ".join(f"{kind}: {q}" for kind, q in subs), len(subs)
    return QueryArgs(
        text=text, shown=shown,
        limit=_int("limit", given.get("limit", 10), 1, MAX_LIMIT),
        min_score=_num("minScore", given.get("minScore", 0.0), 0.0, 1.0),
        candidates=_int("candidateLimit", given.get("candidateLimit", 40), 1, MAX_CANDIDATES),
        collections=_str_list("collections", given["collections"]) if "collections" in given else [],
        intent=_str("intent", given["intent"]) if "intent" in given else None,
        rerank=_bool("rerank", given.get("rerank", True)),
        searches=searches,
    )


# --- freshness and instructions -------------------------------------------------------


def read_health_flag(path: os.PathLike[str] | str | None = None) -> dict[str, Any]:
    """The updater's flag: {health: ok|raised|unknown, since, failures}. Absent or malformed = unknown."""
    target = os.fspath(path) if path is not None else os.fspath(state_dir() / "health.json")
    try:
        with open(target, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return {"health": "unknown", "since": None, "failures": 0}
    if not isinstance(data, dict) or not isinstance(data.get("raised"), bool):
        return {"health": "unknown", "since": None, "failures": 0}
    failures = data.get("failures")
    return {
        "health": "raised" if data["raised"] else "ok",
        "since": data.get("since") if data["raised"] else None,
        "failures": len(failures) if isinstance(failures, list) else 0,
    }


class HealthFlag:
    """`read_health_flag` of one file, re-read only when the file changes (one stat per call)."""

    def __init__(self, path: os.PathLike[str] | str | None = None) -> None:
        self.path = os.fspath(path) if path is not None else os.fspath(state_dir() / "health.json")
        self._key: tuple[int, int, int] | None = None
        self._value = read_health_flag(self.path)

    def get(self) -> dict[str, Any]:
        try:
            st = os.stat(self.path)
            key: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except OSError:
            key = None
        if key != self._key:
            self._key, self._value = key, read_health_flag(self.path)
        return self._value


def freshness(updated_at: str | None, flag: dict[str, Any], now: float | None = None) -> dict[str, Any]:
    age = None
    if updated_at:
        from datetime import datetime

        try:
            then = datetime.fromisoformat(updated_at.replace("Z", "+00:00")).timestamp()
            age = max(0, int((now or time.time()) - then))
        except ValueError:
            age = None
    return {"updated_at": updated_at, "age_s": age, "health": flag["health"], "health_since": flag["since"], "failures": flag["failures"]}


def freshness_line(f: dict[str, Any]) -> str:
    when = f"last updated {ago(f['updated_at'])} ({f['updated_at']})" if f["updated_at"] else "never updated"
    if f["health"] == "raised":
        n = f["failures"]
        flag = f"health flag RAISED since {f['health_since']} ({n} failing update{'s' if n != 1 else ''}): results may be stale; `qmd health` says why"
    elif f["health"] == "ok":
        flag = "health flag: ok"
    else:
        flag = "health flag: unknown (no updater has reported)"
    return f"Index {when}; {flag}."


def build_instructions(status: StatusInfo | None, index: str, vectors: bool | None) -> str:
    """Server instructions from the index: size, collections, how to query. Under 2 KB."""
    head = []
    if status is None or not status.collections:
        head.append(f"qmd searches the user's local markdown notes (index '{index}'), but the index is empty: the user can add a folder with `qmd collection add DIR`.")
    else:
        head.append(f"qmd: local search over {status.documents} markdown documents (index '{index}') — the user's notes, runbooks, decisions and docs.")
        head.append("Search here before answering from general knowledge about the user's projects, systems or past decisions; cite the qmd:// paths you used.")
        if status.global_context:
            head.append(f"About: {status.global_context[:200]}")
    tail = [
        "Tools: query (search), get (one document; 'path:FROM:COUNT' or #docid for a part), multi_get (glob or comma list), status (collections, freshness).",
        "query takes `query` (a plain question, expanded automatically) or `searches`: up to 10 typed sub-queries, the first weighs double:",
        "- lex: keywords, \"exact phrase\", -exclude. {\"type\":\"lex\",\"query\":\"\\\"connection pool\\\" timeout -redis\"}",
        "- vec: a natural-language question. {\"type\":\"vec\",\"query\":\"why do database connections time out under load\"}",
        "- hyde: a short passage that looks like the answer. {\"type\":\"hyde\",\"query\":\"Pools run out when every connection is busy and new requests wait.\"}",
        "Add `intent` to disambiguate; narrow with `collections` (a list).",
        "Every answer says when the index was last updated and whether its health flag is raised: if raised, tell the user results may be stale.",
    ]
    if vectors is False:
        tail.append("Vector search is off here (no embeddings yet): lex does the work; vec/hyde add nothing until `qmd embed` runs.")
    lines: list[str] = []
    if status is not None and status.collections:
        lines.append("Collections (scope with `collections`):")
        for c in status.collections:
            ctx = c.contexts.get("/") or c.contexts.get("") or ""
            extra = "" if c.include_by_default else " (excluded by default)"
            lines.append(f"- {c.name} ({c.documents} docs){extra}" + (f": {ctx[:160]}" if ctx else ""))

    def render(coll_lines: list[str]) -> str:
        return "\n".join([*head, *coll_lines, *tail])

    text = render(lines)
    shown = len(lines)
    while len(text.encode("utf-8")) > INSTRUCTIONS_MAX_BYTES and shown > 1:
        shown -= 1
        rest = len(lines) - shown
        text = render([*lines[:shown], f"- … and {rest} more (see the status tool)"])
    if len(text.encode("utf-8")) > INSTRUCTIONS_MAX_BYTES:
        text = text.encode("utf-8")[: INSTRUCTIONS_MAX_BYTES - 3].decode("utf-8", "ignore") + "..."
    return text


# --- results --------------------------------------------------------------------------


def hit_row(hit: SearchHit) -> dict[str, Any]:
    """One result as the original's MCP tool and HTTP API return it."""
    return {
        "docid": f"#{hit.docid}", "file": hit.uri, "title": hit.title, "score": round(hit.score, 2),
        "context": hit.context, "line": hit.line, "snippet": hit.snippet,
    }


def query_text(shown: str, result: QueryResult, fresh: dict[str, Any], notices: list[str] | None = None) -> str:
    hits = result.hits
    lines = [f"No results for {shown!r}." if not hits else f"Found {len(hits)} result{'s' if len(hits) != 1 else ''} for {shown!r}:"]
    for h in hits:
        lines.append("")
        lines.append(f"#{h.docid} {round(h.score * 100)}% {h.uri}:{h.line} — {h.title}")
        if h.context:
            lines.append(f"Context: {h.context}")
        lines.append(h.snippet)
    lines.append("")
    for notice in result.notices if notices is None else notices:
        lines.append(f"Note: {notice}")
    lines.append(freshness_line(fresh))
    return "\n".join(lines)


# --- the service ----------------------------------------------------------------------


def idle_seconds() -> float:
    raw = os.environ.get("QMD_MODEL_IDLE_S", "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_IDLE_S
    return max(value, 0.0)


def stderr_log(line: str) -> None:
    try:
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass


class ToolService:
    """The tools over one Store; thread-safe (one call at a time touches the Store)."""

    def __init__(self, store: Store, index: str, *, idle_s: float | None = None, log: Log | None = None, build_id: str = "") -> None:
        self.store = store
        self.index = index
        self.idle_s = idle_seconds() if idle_s is None else idle_s
        self.log = log or stderr_log
        self.build_id = build_id
        self.started = time.monotonic()
        self._lock = threading.RLock()
        self._last_model_use = time.monotonic()
        self._stop = threading.Event()
        self._idler: threading.Thread | None = None
        self._doc_count: tuple[str | None, int] | None = None  # (last update, documents)
        self._flag = HealthFlag()
        self._said: set[str] = set()  # notices already in a text answer (each is said once)

    # lifecycle

    def start(self) -> ToolService:
        """Start the idle watcher (a daemon thread) if models are ever to be released."""
        if self.idle_s > 0 and self._idler is None:
            self._idler = threading.Thread(target=self._watch_idle, name="qmd-model-idle", daemon=True)
            self._idler.start()
        return self

    def close(self) -> None:
        self._stop.set()
        with self._lock:
            self.store.close()

    def _watch_idle(self) -> None:
        interval = max(0.2, min(self.idle_s / 4, 30.0))
        while not self._stop.wait(interval):
            self.release_if_idle()

    def release_if_idle(self) -> list[str]:
        """Release loaded models when none was used for `idle_s` seconds (never mid-call)."""
        if not self._lock.acquire(blocking=False):
            return []
        try:
            idle = time.monotonic() - self._last_model_use
            if self.idle_s <= 0 or idle < self.idle_s or not self.store.loaded_models():
                return []
            released = self.store.release_models()
        finally:
            self._lock.release()
        self.log(f"released idle models ({', '.join(released)}) after {idle:.0f}s without a search")
        return released

    # the tools

    def call(self, tool: str, arguments: dict[str, Any] | None) -> ToolOutput:
        """Run a tool on raw JSON arguments; errors come back as error outputs, never raised."""
        args = arguments or {}
        try:
            if not isinstance(args, dict):
                raise ArgError("arguments must be a JSON object")
            if tool == "query":
                return self.query(parse_query_args(args))
            if tool == "get":
                check_names(tool, args, GET_PARAMS)
                return self.get(args)
            if tool == "multi_get":
                check_names(tool, args, MULTI_GET_PARAMS)
                return self.multi_get(args)
            if tool == "status":
                check_names(tool, args, {})
                return self.status()
            raise ArgError(f"unknown tool {tool!r}", f"tools: {', '.join(TOOL_PARAMS)}")
        except QmdError as exc:
            return error_output(exc)
        except Exception as exc:  # a bug must not take the server down
            self.log(f"{tool} failed unexpectedly:\n{traceback.format_exc().rstrip()}")
            return ToolOutput(f"Error: internal error in {tool}: {type(exc).__name__}: {exc}\nhint: this is a bug in qmd; the server log has the traceback", None, True, "internal error")

    def _refresh(self) -> None:
        self.store.refresh_config()

    def freshness(self) -> dict[str, Any]:
        with self._lock:
            updated = self.store.last_updated()
        return freshness(updated, self._flag.get())

    def run_query(self, q: QueryArgs) -> tuple[QueryResult, dict[str, Any]]:
        with self._lock:
            self._refresh()
            try:
                result = self.store.query(
                    q.text, limit=q.limit, candidates=q.candidates, min_score=q.min_score, collections=q.collections or None,
                    intent=q.intent, rerank=q.rerank, snippet_chars=JSON_SNIPPET_CHARS,
                )
            finally:
                self._last_model_use = time.monotonic()
            fresh = freshness(self.store.last_updated(), self._flag.get())
        return result, fresh

    def query(self, q: QueryArgs) -> ToolOutput:
        result, fresh = self.run_query(q)
        rows = [hit_row(h) for h in result.hits]
        structured: dict[str, Any] = {"results": rows, "freshness": fresh}
        if result.notices:
            structured["notices"] = result.notices
        fresh_notices = [n for n in result.notices if n not in self._said]
        self._said.update(fresh_notices)
        text = query_text(q.shown, result, fresh, fresh_notices)
        return ToolOutput(text, structured, False, f"{q.shown[:60]!r} → {len(rows)} results")

    def get(self, args: dict[str, Any]) -> ToolOutput:
        ref = _str("file", args.get("file"))
        from_line = _int("fromLine", args["fromLine"], 1, 10**9) if args.get("fromLine") is not None else None
        max_lines = _int("maxLines", args["maxLines"], 0, 10**9) if args.get("maxLines") is not None else None
        line_numbers = _bool("lineNumbers", args.get("lineNumbers", False))
        with self._lock:
            self._refresh()
            doc = self.store.get(ref, from_line, max_lines)
        body = numbered(doc.text, doc.from_line) if line_numbers and doc.text else doc.text
        last = doc.from_line + max(doc.lines_shown, 1) - 1
        structured = {
            "docid": f"#{doc.docid}", "file": doc.uri, "title": doc.title, "context": doc.context,
            "fromLine": doc.from_line, "lines": doc.lines_shown, "totalLines": doc.total_lines, "text": body,
        }
        header = f"{doc.uri} #{doc.docid} — {doc.title} (lines {doc.from_line}-{last} of {doc.total_lines})"
        text = header + (f"\nContext: {doc.context}" if doc.context else "") + "\n\n" + body
        return ToolOutput(text, structured, False, f"{doc.uri} {doc.lines_shown} lines")

    def multi_get(self, args: dict[str, Any]) -> ToolOutput:
        pattern = _str("pattern", args.get("pattern"))
        max_lines = _int("maxLines", args["maxLines"], 0, 10**9) if args.get("maxLines") is not None else None
        max_bytes = _int("maxBytes", args.get("maxBytes", MULTI_GET_MAX_BYTES), 1, 100 * 1024 * 1024)
        line_numbers = _bool("lineNumbers", args.get("lineNumbers", False))
        with self._lock:
            self._refresh()
            items = self.store.multi_get(pattern, max_lines, max_bytes)
        docs: list[dict[str, Any]] = []
        blocks: list[str] = []
        total = 0
        for it in items:
            row: dict[str, Any] = {"docid": f"#{it.docid}", "file": it.uri, "title": it.title, "context": it.context}
            skipped = it.skipped
            if it.text is not None and total + len(it.text.encode("utf-8")) > MULTI_GET_TOTAL_BYTES:
                skipped = f"this answer already holds {total} bytes (limit {MULTI_GET_TOTAL_BYTES}); fetch it with get"
            if skipped is not None or it.text is None:
                row["skipped"] = skipped
                blocks.append(f"=== {it.uri} #{it.docid} — {it.title}\n[skipped: {skipped}]")
            else:
                total += len(it.text.encode("utf-8"))
                body = numbered(it.text, 1) if line_numbers and it.text else it.text
                row.update({"totalLines": it.total_lines, "truncatedLines": it.truncated_lines, "text": body})
                more = f"\n[... truncated {it.truncated_lines} more lines]" if it.truncated_lines else ""
                ctx = f"Context: {it.context}\n" if it.context else ""
                blocks.append(f"=== {it.uri} #{it.docid} — {it.title}\n{ctx}{body}{more}")
            docs.append(row)
        return ToolOutput("\n\n".join(blocks), {"documents": docs}, False, f"{pattern[:60]!r} → {len(docs)} documents")

    def status(self) -> ToolOutput:
        with self._lock:
            self._refresh()
            info = self.store.status()
            try:
                vec = self.store.vector_status()
                vectors: dict[str, Any] | None = {"model": vec.model, "embedded_documents": vec.embedded_documents, "pending_documents": vec.pending_documents}
            except QmdError as exc:
                vectors = {"model": None, "embedded_documents": 0, "pending_documents": info.documents, "note": exc.message}
            loaded = self.store.loaded_models()
        fresh = freshness(info.updated_at, self._flag.get())
        colls = [
            {"name": c.name, "path": c.path, "pattern": c.pattern, "documents": c.documents, "updated_at": c.updated_at,
             "includeByDefault": c.include_by_default, "contexts": c.contexts}
            for c in info.collections
        ]
        structured = {
            "index": self.index, "documents": info.documents, "collections": colls, "vectors": vectors,
            "freshness": fresh, "skipped_files": sum(1 for i in info.issues if i[2] == "skipped"),
            "global_context": info.global_context,
            "server": {"version": __version__, "build_id": self.build_id, "models_loaded": loaded, "model_idle_s": self.idle_s},
        }
        lines = [f"qmd index '{self.index}': {info.documents} documents in {len(colls)} collection{'s' if len(colls) != 1 else ''}."]
        for c in info.collections:
            ctx = c.contexts.get("/") or ""
            lines.append(f"  - {c.name}: {c.documents} docs, {c.path}, updated {ago(c.updated_at)}" + (f" — {ctx}" if ctx else ""))
        if vectors is not None:
            lines.append(f"Vectors: {vectors['embedded_documents']} documents embedded, {vectors['pending_documents']} pending (model {vectors['model'] or 'none'}).")
        lines.append(freshness_line(fresh))
        return ToolOutput("\n".join(lines), structured, False, f"{info.documents} documents")

    # HTTP helpers

    def rest_query(self, body: Any) -> tuple[int, dict[str, Any], str]:
        """POST /query and /search: (status, JSON body, log summary)."""
        try:
            if not isinstance(body, dict):
                raise ArgError("the body must be a JSON object", '{"searches": [{"type": "lex", "query": "rollback"}]}')
            q = parse_query_args(body, tool="/query")
            result, fresh = self.run_query(q)
        except QmdError as exc:
            return 400, {"error": exc.message, "hint": exc.hint}, f"400 {exc.message[:80]}"
        return 200, {"results": [hit_row(h) for h in result.hits], "freshness": fresh}, f"{q.searches or 'plain'} searches → {len(result.hits)} results"

    def health(self) -> dict[str, Any]:
        """GET /health (design §7): never waits behind a running search.

        The document count (a table scan: ~10 ms on 38k documents) is recounted only
        after the index was updated.
        """
        if self._lock.acquire(blocking=False):
            try:
                updated = self.store.last_updated()
                if self._doc_count is None or self._doc_count[0] != updated:
                    self._doc_count = (updated, self.store.document_count())
            except QmdError:
                self._doc_count = (None, 0)
            finally:
                self._lock.release()
        return {
            "status": "ok", "uptime_s": round(time.monotonic() - self.started, 1), "version": __version__,
            "build_id": self.build_id, "index": self.index, "documents": self._doc_count[1] if self._doc_count else 0,
        }

    def instructions(self) -> str:
        with self._lock:
            try:
                info = self.store.status()
            except QmdError:
                return build_instructions(None, self.index, None)
            vectors: bool | None = None
            try:
                vectors = self.store.vector_status().embedded_documents > 0
            except QmdError:
                vectors = False
        return build_instructions(info, self.index, vectors)
