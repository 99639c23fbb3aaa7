"""Text the MCP server writes: freshness of the index, server instructions, result rows (pure)."""

from __future__ import annotations

import json
import os
import time
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

    from qmd.store.store import Store

from qmd.core.clock import ago, parse_iso
from qmd.core.paths import state_dir
from qmd.core.results import MultiGetItem, QueryResult, SearchHit, StatusInfo

INSTRUCTIONS_MAX_BYTES = 2000  # Claude Code truncates server instructions at 2 KB


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
    then = parse_iso(updated_at)
    age = None if then is None else max(0, int((now or time.time()) - then))
    fresh: dict[str, Any] = {"updated_at": updated_at, "age_s": age, "health": flag["health"], "health_since": flag["since"], "failures": flag["failures"]}
    # Clients hand the model only the structured answer: it says in words what the text says.
    fresh["summary"] = freshness_line(fresh)
    if flag["health"] == "raised":
        fresh["warning"] = "The index may be stale: its updater has been failing. Tell the user the results may be out of date (`qmd health` says why)."
    return fresh


def freshness_line(f: dict[str, Any]) -> str:
    when = f"last updated {ago(f['updated_at'])} ({f['updated_at']})" if f["updated_at"] else "never updated"
    if f["health"] == "raised":
        n = f["failures"]
        flag = f"health flag: raised since {f['health_since']} ({n} failing update{'s' if n != 1 else ''}): results may be stale; `qmd health` says why"
    elif f["health"] == "ok":
        flag = "health flag: not raised"
    else:
        flag = "health flag: unknown (no updater has reported)"
    return f"Index {when}; {flag}."


BUSY_LINE = "The index is being written by another process right now, so its size and collections are not listed here: the status tool lists them, and searches wait for the write."


def build_instructions(status: StatusInfo | None, index: str, vectors: bool | None, busy: bool = False) -> str:
    """Server instructions from the index: size, collections, how to query. Under 2 KB.
    `busy`: the index could not be read (another process holds it locked): no counts."""
    head = []
    if busy:
        head.append(f"qmd: local search over the user's markdown notes (index '{index}') — their notes, runbooks, decisions and docs.")
        head.append("Search here before answering from general knowledge about the user's projects, systems or past decisions; cite the qmd:// paths you used.")
        head.append(BUSY_LINE)
    elif status is None or not status.collections:
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
        "Each hit has a confidence (0-1: how likely it answers). An answer opening 'No note answers this with confidence' means the notes likely do not hold the answer: say so, or verify the closest hits before citing them.",
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


def store_instructions(store: Store, index: str) -> str:
    """The instructions for `store`'s index (an unreadable index: the empty-index text; one
    another process holds locked: the text without counts, `BUSY_LINE`)."""
    from qmd.core.errors import IndexBusyError, QmdError

    try:
        info = store.status(grammars=False)  # the text names no grammar: tree-sitter stays unloaded
        try:
            vectors: bool | None = store.vector_status().embedded_documents > 0
        except IndexBusyError:
            raise  # locked since the status: the busy text, not "vector search is off"
        except QmdError:
            vectors = False
    except IndexBusyError:
        return build_instructions(None, index, None, busy=True)
    except QmdError:
        return build_instructions(None, index, None)
    return build_instructions(info, index, vectors)


# --- results --------------------------------------------------------------------------


def hit_row(hit: SearchHit, threshold: float | None = None) -> dict[str, Any]:
    """One result as the original's MCP tool and HTTP API return it, with its confidence
    (and, given the threshold, below_threshold) after the original's fields."""
    return hit.to_json(mcp=True, threshold=threshold)


NOTHING_RELEVANT = "No note answers this with confidence; the closest hits follow — verify before citing."


def nothing_relevant(result: QueryResult) -> bool:
    """Hits, none of which reaches the threshold: best guesses only."""
    return bool(result.hits) and all(h.below(result.threshold) for h in result.hits)


def judged(result: QueryResult) -> dict[str, Any]:
    """What the structured answer and POST /query say beside the results: the threshold, the
    question's words no note holds and, when no hit reaches the threshold, the verdict."""
    out: dict[str, Any] = {"threshold": result.threshold, "unmatched": list(result.unmatched)}
    if nothing_relevant(result):
        out["verdict"] = NOTHING_RELEVANT
    return out


def query_text(shown: str, result: QueryResult, fresh: dict[str, Any], notices: list[str] | None = None) -> str:
    """The query tool's text: the verdict first when no hit reaches the threshold (a sentence
    no agent can take for a source), then each hit with its confidence."""
    hits = result.hits
    lines = [NOTHING_RELEVANT] if nothing_relevant(result) else []
    lines.append(f"No results for {shown!r}." if not hits else f"Found {len(hits)} result{'s' if len(hits) != 1 else ''} for {shown!r}:")
    for h in hits:
        lines.append("")
        rated = f"confidence {round(h.confidence * 100)}%" + (" (a best guess)" if h.below(result.threshold) else "") if h.confidence is not None else f"{round(h.score * 100)}%"
        lines.append(f"#{h.docid} {rated} {h.uri}:{h.line} — {h.title}")
        if h.context:
            lines.append(f"Context: {h.context}")
        lines.append(h.snippet)
    lines.append("")
    if result.unmatched:
        lines.append("No note contains: " + ", ".join(f"'{w}'" for w in result.unmatched) + ".")
    for notice in result.notices if notices is None else notices:
        lines.append(f"Note: {notice}")
    if result.pending:  # every answer while it holds: their new text is found by keywords only
        from qmd.search.vector import embed_advice

        lines.append(f"Note: {embed_advice(result.pending)}: {'its' if result.pending == 1 else 'their'} new text is found by keywords, not yet by meaning.")
    if result.why is not None:
        from qmd.search.why import why_lines

        lines += why_lines(result.why)
    lines.append(freshness_line(fresh))
    return "\n".join(lines)


def documents_answer(items: list[MultiGetItem], line_numbers: bool) -> tuple[str, list[dict[str, Any]]]:
    """multi_get's text and structured documents: each document whole (numbered with
    `line_numbers`) until the answer holds MULTI_GET_TOTAL_BYTES, the rest skipped with why."""
    from qmd.core.text import numbered
    from qmd.serve.arguments import MULTI_GET_TOTAL_BYTES

    docs: list[dict[str, Any]] = []
    blocks: list[str] = []
    total = 0
    for it in items:
        if not it.found:  # a name in the list that finds no document
            docs.append({"file": it.uri, "skipped": it.skipped})
            blocks.append(f"=== {it.uri}\n[skipped: {it.skipped}]")
            continue
        row: dict[str, Any] = {"docid": f"#{it.docid}", "file": it.uri, "title": it.title, "context": it.context}
        skipped = it.skipped
        if it.text is not None and total + len(it.text.encode("utf-8")) > MULTI_GET_TOTAL_BYTES:
            skipped = f"this answer already holds {total} bytes (limit {MULTI_GET_TOTAL_BYTES}); fetch it with get"
        if skipped is not None or it.text is None:
            row["skipped"] = skipped
            blocks.append(f"=== {it.uri} #{it.docid} — {it.title}\n[skipped: {skipped}]")
        else:
            total += len(it.text.encode("utf-8"))
            body = numbered(it.text, it.from_line) if line_numbers and it.text else it.text
            if it.ranged:  # the line range the list asked for (get's keys)
                row.update({"fromLine": it.from_line, "lines": it.lines_shown})
            row.update({"totalLines": it.total_lines, "truncatedLines": it.truncated_lines, "text": body})
            more = f"\n[... truncated {it.truncated_lines} more lines]" if it.truncated_lines else ""
            ctx = f"Context: {it.context}\n" if it.context else ""
            span = f" (lines {it.line_span})" if it.ranged else ""
            blocks.append(f"=== {it.uri} #{it.docid} — {it.title}{span}\n{ctx}{body}{more}")
        docs.append(row)
    return "\n\n".join(blocks), docs


def status_answer(
    info: StatusInfo, vectors: dict[str, Any] | None, fresh: dict[str, Any], index: str, server: dict[str, Any], *, paths: bool,
) -> tuple[str, dict[str, Any]]:
    """The status tool's text and structured answer; `paths` False (a scoped token) shows no server path."""
    from qmd.store.maintenance import NOT_PARSED

    colls = [
        {"name": c.name, "path": c.path if paths else "", "pattern": c.pattern, "documents": c.documents, "updated_at": c.updated_at,
         "includeByDefault": c.include_by_default, "contexts": c.contexts}
        for c in info.collections
    ]
    structured = {
        "index": index, "documents": info.documents, "collections": colls, "vectors": vectors,
        "freshness": fresh, "skipped_files": sum(1 for i in info.issues if i[2] == "skipped"),
        "global_context": info.global_context,
        "grammars": [{"language": g.language, "available": g.available, "install": g.install} for g in info.grammars],
        "chunking_fallbacks": [f"qmd://{i[0]}/{i[1]}" for i in info.issues if i[3] == NOT_PARSED],
        "server": server,
    }
    lines = [f"qmd index '{index}': {info.documents} documents in {len(colls)} collection{'s' if len(colls) != 1 else ''}."]
    for c in info.collections:
        ctx = c.contexts.get("/") or ""
        where = f", {c.path}" if paths else ""
        lines.append(f"  - {c.name}: {c.documents} docs{where}, updated {ago(c.updated_at)}" + (f" — {ctx}" if ctx else ""))
    if vectors is not None:
        lines.append(f"Vectors: {vectors['embedded_documents']} documents embedded, {vectors['pending_documents']} pending (model {vectors['model'] or 'none'}).")
    lines.append(freshness_line(fresh))
    return "\n".join(lines), structured
