"""What the read commands agents shell out to do, once their options are parsed (no typer).

The typer commands (read.py, query.py, vectors.py, update.py) declare the options; they and
the lean entry path (fast.py, whose option table is generated from them) call these same
functions with the same values by parameter name (`Params`), so both paths print the same
bytes. A search command turns its values into one request record (qmd/core/requests.py,
`*_request`) and an `Invocation` (format, names, where it runs), and prints the `Outcome`
that the warm server or the in-process Store gives for it.
"""

from __future__ import annotations

from qmd.cli.shared import _usage_error, display_names, err, filter_arg, fs_paths, named_index, number_hits, open_store, out, result_limit, snippet_chars
from qmd.cli.formats import Judged, confidence_lines, explain_lines, format_document, format_search, unmatched_line, verdict
from qmd.cli.remote import ask
from qmd.core.records import record
from qmd.core.requests import MATCHES, Outcome, QueryRequest, Request, SearchRequest

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from typing import Any

    Params = Mapping[str, Any]  # a command's option values by parameter name, as typer passes them (fast.py alike)

ALL_FUSED = 100_000  # `query --all`: more than any fused list holds


@record(frozen=True)
class Invocation:
    """How a search command was asked, beyond its request: output format, names, where it runs."""

    kind: str = "cli"  # cli, json, csv, md, xml, files
    full_path: bool = False  # file-system paths instead of qmd:// URIs
    line_numbers: bool = False  # query: number the snippet or body lines
    local: bool = False  # in this process even when a warm server runs
    notes: tuple[str, ...] = ()  # said on stderr before the search


# --- the requests, from the option values (the typer commands and fast.py call these) ---


def search_request(p: Params) -> tuple[SearchRequest, Invocation]:
    """`qmd search`'s request; a usage error for a bad option value."""
    kind = p["kind"]
    if p["match"] not in MATCHES:
        raise _usage_error("choose all (every term, as the original) or any (all-terms hits, then the best partial ones)", "--match")
    request = SearchRequest(
        _query_text(p["query"]), result_limit(kind, p["n"], p["all_"]), _names(p["collection"]), p["min_score"], p["full"], snippet_chars(kind),
        p["line_numbers"], filter_arg(p["filter_"]), p["since"], p["until"], p["match"], min_confidence=p["min_confidence"],
    )
    return request, Invocation(kind, p["full_path"], local=p["local"])


def vsearch_request(p: Params) -> tuple[SearchRequest | QueryRequest, Invocation]:
    """`qmd vsearch`'s request (with --expand a vector-only hybrid query)."""
    kind = p["kind"]
    limit = result_limit(kind, p["n"], p["all_"])
    how = Invocation(kind, p["full_path"], local=p["local"])
    text, names, where = _query_text(p["query"]), _names(p["collection"]), filter_arg(p["filter_"])
    if p["expand"]:
        return QueryRequest(
            text, limit or 10_000, min_score=p["min_score"], collections=names, rerank=False, expand=True, snippet_chars=snippet_chars(kind),
            keyword=False, filter=where, since=p["since"], until=p["until"], min_confidence=p["min_confidence"],
        ), how
    request = SearchRequest(
        text, limit, names, p["min_score"], p["full"], snippet_chars(kind), p["line_numbers"], where, p["since"], p["until"], vector=True,
        min_confidence=p["min_confidence"],
    )
    return request, how


def query_request(p: Params) -> tuple[QueryRequest, Invocation]:
    """`qmd query`'s request; a usage error for a bad option value."""
    kind, strategy = p["kind"], p["chunk_strategy"]
    if p["candidates"] < 1:
        raise _usage_error("must be at least 1", "-C")
    if strategy not in (None, "regex", "auto"):
        raise _usage_error("choose regex or auto", "--chunk-strategy")
    limit = result_limit(kind, p["n"]) or 5
    if p["all_"]:  # every document the pipeline fuses (its lists are bounded, so this is bounded too)
        limit = ALL_FUSED
    request = QueryRequest(
        _query_text(p["text"], "\n"), limit, p["candidates"], p["min_score"], _names(p["collection"]), p["intent"], not p["no_rerank"], p["expand"],
        p["explain"], snippet_chars(kind), filter=filter_arg(p["filter_"]), since=p["since"], until=p["until"], full=p["full"], why=_why_ref(p["why"]),
        min_confidence=p["min_confidence"],
    )
    notes = () if strategy is None else (
        f"note: --chunk-strategy {strategy}: the reranker reads each document's chunks as embedded (set chunk_strategy: in the config and run qmd embed)",
    )
    return request, Invocation(kind, p["full_path"], p["line_numbers"], p["local"], notes)


def _query_text(words: list[str], sep: str = " ") -> str:
    """The query the words make; an empty or blank one is a usage error, as the original
    prints its usage for `qmd search ""` (a script's unset "$Q" must not search for nothing)."""
    text = sep.join(words)
    if not text.strip():
        raise _usage_error("the query is empty; give words to search for", "QUERY")
    return text


def _why_ref(ref: str | None) -> str | None:
    """--why's reference; a file path made absolute (a warm server resolves it from elsewhere)."""
    import os

    if ref is None:
        return None
    if not ref.strip():
        raise _usage_error("--why needs a document: a path, #docid or qmd:// URI", "--why")
    return os.path.abspath(ref) if not ref.startswith(("qmd://", "#")) and os.path.exists(ref) else ref


def _names(collections: list[str] | None) -> tuple[str, ...] | None:
    return None if collections is None else tuple(collections)


# --- running them ---


def outcome(request: Request, how: Invocation, progress: Callable[[str], None] | None = None) -> Outcome:
    """The outcome of `request`: a warm server's answer (qmd/cli/remote.py), else an in-process run."""
    answer = ask(request, how.local)
    if answer is not None:
        return answer
    with open_store() as store:
        return store.answer(request, progress)


def search(p: Params) -> None:
    """`qmd search`: keyword search, printed in the chosen format (cli, json, csv, md, xml, files)."""
    from qmd.cli.terminal import style_for

    request, how = search_request(p)
    found = outcome(request, how)
    style = style_for() if how.kind == "cli" else None
    names = display_names(found.roots, found.hits, how.full_path)
    judgement(found, how.kind)
    if style is None:
        out(format_search(found.hits, how.kind, names, judged=judged(found)))
    else:
        files = fs_paths(found.roots, found.hits) if style.links else None
        out(format_search(found.hits, how.kind, names, style, request.text, files, judged=judged(found)))


def vsearch(p: Params) -> None:
    """`qmd vsearch`: vector search (with --expand: the query's vec/hyde expansions too, fused)."""
    from qmd.cli.trustask import ask_local_trust

    request, how = vsearch_request(p)
    ask_local_trust()  # a project-local config's custom models: asked for on a terminal, else skipped
    found = outcome(request, how)
    for notice in found.notices:
        err(f"Note: {notice}")
    said_pending(found)
    judgement(found, how.kind)
    out(format_search(found.hits, how.kind, display_names(found.roots, found.hits, how.full_path), judged=judged(found)))


def said_pending(found: Outcome) -> None:
    """vsearch and query: a note when documents in scope lack vectors for their current content."""
    if found.pending:
        from qmd.search.vector import embed_advice

        err(f"Note: {embed_advice(found.pending)}")


def query(p: Params) -> None:
    """`qmd query`: the hybrid pipeline; with --explain its lists, scores and timings on stderr."""
    import sys

    from qmd.cli.trustask import ask_local_trust

    request, how = query_request(p)
    for note in how.notes:
        err(note)
    ask_local_trust()  # a project-local config's custom models: asked for on a terminal, else skipped
    tty = sys.stderr.isatty() and how.kind == "cli"

    def progress(message: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    found = outcome(request, how, progress)
    if tty:
        sys.stderr.write("\r\033[K")
    number_hits(found.hits, how.line_numbers)
    paths = display_names(found.roots, found.hits, how.full_path)
    for notice in found.notices:
        err(f"Note: {notice}")
    said_pending(found)
    judgement(found, how.kind)
    if how.kind == "json":
        import json

        from qmd.cli.formats import search_json_rows

        rows = search_json_rows(found.hits, paths, judged(found))
        for row, hit in zip(rows, found.hits):
            row["stages"] = found.stages
            if hit.explain is not None:
                row["explain"] = {**hit.explain, "confidence": hit.evidence}
        out(json.dumps(rows, indent=2, ensure_ascii=False) + "\n")
    elif request.explain and how.kind == "cli":  # each hit's explanation under it, as the original
        lines = {h.uri: explain_lines(h.explain or {}, found.stages.get("rerank")) + confidence_lines(h) for h in found.hits}
        out(format_search(found.hits, how.kind, paths, explain=lines, judged=judged(found)))
    else:
        out(format_search(found.hits, how.kind, paths, judged=judged(found)))
    if request.explain:
        explain(found, how.kind not in ("json", "cli"))
    if found.why is not None:  # under the hits on a terminal; on stderr beside a format a script reads
        from qmd.search.why import why_lines

        (out if how.kind == "cli" else err)("\n" + "\n".join(why_lines(found.why)) + "\n")


def judged(found: Outcome) -> Judged:
    """What the formats say of the hits' confidence: the threshold and the unmatched words."""
    return Judged(found.threshold, tuple(found.unmatched))


def judgement(found: Outcome, kind: str) -> None:
    """On stderr: the words no searched note holds (every format), and, for the formats
    other than the terminal's (which says it above its hits), that no hit reaches the threshold."""
    if found.unmatched:
        err(f"Note: {unmatched_line(found.unmatched)}")
    line = verdict(found.hits, found.threshold)
    if line is not None and kind != "cli":
        err(f"Note: {line[0].lower()}{line[1:]}")


def explain(found: Outcome, per_hit: bool) -> None:
    """`query --explain` on stderr: the searches, stages, timings and (per_hit: formats that
    cannot hold it) each hit's explanation under its URI."""
    err("Searches: " + "; ".join(f"{s['type']}: {s['query']}" for s in found.searches))
    err("Stages:   " + ", ".join(f"{k}={v}" for k, v in found.stages.items()))
    err("Timings:  " + ", ".join(f"{k} {v:.1f} ms" for k, v in found.timings_ms.items()))
    if per_hit:
        for hit in found.hits:
            err(hit.uri)
            for line in explain_lines(hit.explain or {}, found.stages.get("rerank")) + confidence_lines(hit):
                err(f"  {line}")


def get_request(p: Params) -> None:
    """`qmd get`'s usage checks (the fast path runs them too)."""
    from qmd.cli.shared import non_negative

    non_negative(p["from_line"], "--from")
    non_negative(p["lines"], "-l")


def get(p: Params) -> None:
    """`qmd get`: one document or a range of its lines."""
    get_request(p)
    ref = named_index(p["ref"])  # a URI printed for a named index reads that index
    with open_store() as store:
        doc = store.get(ref, p["from_line"], p["lines"])
    if p["raw"]:
        out(doc.text + ("\n" if doc.text and not doc.text.endswith("\n") else ""))
        return
    from qmd.cli.shared import index_uri, render_full_path

    name = render_full_path(doc.abs_path) if p["full_path"] and doc.abs_path else index_uri(doc.uri)
    out(format_document(doc, p["kind"], p["line_numbers"], name))


def status(p: Params) -> None:
    """`qmd status`: documents, vectors, collections, models, skipped files."""
    from qmd.cli.formats import format_status, to_json
    from qmd.core.errors import QmdError

    from qmd.cli.trustask import _current

    paths, decision = _current()
    trust = decision if paths.local else None
    with open_store() as store:
        warnings = store.config_warnings()
        info = store.status()
        models = store.models()
        vectors, vector_error = None, None
        if info.documents or store.backend.exists():
            try:
                vectors = store.vector_status()
            except QmdError as exc:
                vector_error = exc.message
    if p["json_"]:
        where: dict[str, object] = {"name": paths.name, "source": paths.source, "index_path": str(paths.index_path), "config_path": str(paths.config_path), "reason": paths.reason()}
        if trust is not None:
            where["trust"] = {"trusted": trust.allowed, "why": trust.why, "gated": trust.gated.lines()}
        payload = dict(info.__dict__, vectors=vectors, vector_error=vector_error, models=models, config_warnings=warnings, index=where)
        out(to_json(payload, default=lambda o: o.__dict__))
        return
    for warning in warnings:
        err(f"warning: {warning}")
    if trust is not None and trust.skipped:
        from qmd.core.trust import skip_notice

        err(f"Note: {skip_notice(trust)}")
        err("hint: approve them with 'qmd trust', or set QMD_TRUST_LOCAL_CONFIG=1 for unattended runs")
    # The original's layout ("QMD Status", then "Index: <file>"), with why this index under it.
    lines = format_status(info, vectors, vector_error, models).split("\n")
    at = next((i + 1 for i, line in enumerate(lines) if line.startswith("Size:")), 1)
    lines.insert(at, f"In use: {paths.reason()}")
    out("\n".join(lines))
