"""What the read commands agents shell out to do, once their options are parsed (no typer).

The typer commands (read.py, update.py) and the lean entry path (fast.py) call these same
functions with the same values, so both paths print the same bytes.
"""

from __future__ import annotations

from qmd.cli.base import _usage_error, display_names, err, filter_arg, fs_paths, open_store, out, result_limit, shape_hits, snippet_chars
from qmd.cli.formats import format_document, format_search
from qmd.cli.remote import ask

MATCHES = ("any", "all")  # --match: all-terms hits then any-term fill (default), or all-terms only


def search(
    query: list[str], n: int | None, all_: bool, min_score: float, full: bool, line_numbers: bool,
    collection: list[str] | None, full_path: bool, kind: str, match: str = "any",
    filter_: str | None = None, since: str | None = None, until: str | None = None, local: bool = False,
) -> None:
    """`qmd search`: keyword search, printed in `kind` (cli, json, csv, md, xml, files).

    `match="all"` keeps only documents holding every term (the original's behaviour). The
    all-terms hits rank before any fill, so dropping the fill leaves the exact top-k."""
    from qmd.cli.terminal import style_for

    limit = result_limit(kind, n, all_)
    text = " ".join(query)
    style = style_for() if kind == "cli" else None
    options = {
        "limit": limit, "collections": collection, "min_score": min_score, "full": full,
        "snippet_chars": snippet_chars(kind), "line_numbers": line_numbers, "filter": filter_arg(filter_), "since": since, "until": until,
    }
    answer = ask("search", text, options, local)  # a warm server's answer (qmd/cli/remote.py), or None
    with answer or open_store() as store:
        hits = answer.hits if answer is not None else store.search(text, **options)  # type: ignore[union-attr,arg-type]
        if match == "all":
            hits = [h for h in hits if h.match != "any"]
        names = display_names(store, hits, full_path)  # type: ignore[arg-type]
        files = fs_paths(store, hits) if style is not None and style.links else None  # type: ignore[arg-type]
    if style is None:
        out(format_search(hits, kind, names))
    else:
        out(format_search(hits, kind, names, style, text, files))


def vsearch(
    query: list[str], n: int | None, all_: bool, min_score: float, full: bool, line_numbers: bool,
    collection: list[str] | None, full_path: bool, expand: bool, kind: str,
    filter_: str | None = None, since: str | None = None, until: str | None = None, local: bool = False,
) -> None:
    """`qmd vsearch`: vector search (with `expand`: the query's vec/hyde expansions too, fused)."""
    from qmd.cli.trustask import ask_local_trust

    ask_local_trust()  # a project-local config's custom models: asked for on a terminal, else skipped
    limit = result_limit(kind, n, all_)
    text = " ".join(query)
    if expand:
        fuse = {
            "limit": limit or 10_000, "min_score": min_score, "collections": collection, "rerank": False, "expand": True,
            "snippet_chars": snippet_chars(kind), "keyword": False, "filter": filter_arg(filter_), "since": since, "until": until,
        }
        answer = ask("query", text, fuse, local)  # a warm server's answer (qmd/cli/remote.py), or None
        with answer or open_store() as store:
            fused = answer if answer is not None else store.query(text, **fuse)  # type: ignore[union-attr,arg-type]
            paths = display_names(store, fused.hits, full_path)  # type: ignore[arg-type]
        for notice in fused.notices:
            err(f"Note: {notice}")
        out(format_search(fused.hits, kind, paths))
        return
    options = {
        "limit": limit, "collections": collection, "min_score": min_score, "full": full,
        "snippet_chars": snippet_chars(kind), "line_numbers": line_numbers, "filter": filter_arg(filter_), "since": since, "until": until,
    }
    answer = ask("vsearch", text, options, local)
    with answer or open_store() as store:
        result = answer if answer is not None else store.vsearch(text, **options)  # type: ignore[union-attr,arg-type]
        paths = display_names(store, result.hits, full_path)  # type: ignore[arg-type]
    if result.pending:
        err(f"Note: {result.pending} documents have no vectors for {result.model} yet; run 'qmd embed'")
    out(format_search(result.hits, kind, paths))


ALL_FUSED = 100_000  # `query --all`: more than any fused list holds


def query(
    text: list[str], n: int | None, candidates: int, min_score: float, intent: str | None, no_rerank: bool, expand: bool | None,
    explain: bool, collection: list[str] | None, full_path: bool, all_: bool, full: bool, line_numbers: bool, kind: str,
    filter_: str | None = None, since: str | None = None, until: str | None = None, local: bool = False,
) -> None:
    """`qmd query`: the hybrid pipeline; with `explain` its lists, scores and timings on stderr."""
    from qmd.cli.trustask import ask_local_trust

    ask_local_trust()  # a project-local config's custom models: asked for on a terminal, else skipped
    limit = result_limit(kind, n)
    if all_:  # every document the pipeline fuses (its lists are bounded, so this is bounded too)
        limit = ALL_FUSED
    if candidates < 1:
        raise _usage_error("must be at least 1", "-C")
    import sys

    tty = sys.stderr.isatty() and kind == "cli"

    def progress(message: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    joined = "\n".join(text)
    options = {
        "limit": limit or 5, "candidates": candidates, "min_score": min_score, "collections": collection, "intent": intent,
        "rerank": not no_rerank, "expand": expand, "explain": explain, "snippet_chars": snippet_chars(kind),
        "filter": filter_arg(filter_), "since": since, "until": until,
    }
    answer = ask("query", joined, {**options, "full": full}, local)  # a warm server's answer (qmd/cli/remote.py), or None
    with answer or open_store() as store:
        # With a server, `full` bodies come filled from it (qmd/serve/cliroute.py); the numbering is done here alike.
        result = answer if answer is not None else store.query(joined, progress=progress, **options)  # type: ignore[union-attr,arg-type]
        paths = display_names(store, result.hits, full_path)  # type: ignore[arg-type]
        shape_hits(store, result.hits, full and answer is None, line_numbers)  # type: ignore[arg-type]
    if tty:
        sys.stderr.write("\r\033[K")
    for notice in result.notices:
        err(f"Note: {notice}")
    if kind == "json":
        import json

        from qmd.cli.formats import search_json_rows

        rows = search_json_rows(result.hits, paths)
        for row, hit in zip(rows, result.hits):
            row["stages"] = result.stages
            if hit.explain is not None:
                row["explain"] = hit.explain
        payload = rows
        out(json.dumps(payload, indent=2, ensure_ascii=False) + "\n")
    else:
        out(format_search(result.hits, kind, paths))
    if explain:
        err("Searches: " + "; ".join(f"{s['type']}: {s['query']}" for s in result.searches))
        err("Stages:   " + ", ".join(f"{k}={v}" for k, v in result.stages.items()))
        err("Timings:  " + ", ".join(f"{k} {v:.1f} ms" for k, v in result.timings_ms.items()))
        if kind != "json":
            for hit in result.hits:
                e = hit.explain or {}
                lists = ", ".join(f"{x['list']}#{x['rank']} (+{x['rrf']:.4f})" for x in e.get("lists", []))
                err(f"  {hit.uri}: rrf {e.get('rrf')} (rank {e.get('rrf_rank')}) [{lists}] rerank {e.get('rerank')} → {e.get('score')}")


def get(ref: str, from_line: int | None, lines: int | None, line_numbers: bool, raw: bool, full_path: bool, kind: str) -> None:
    """`qmd get`: one document or a range of its lines."""
    with open_store() as store:
        doc = store.get(ref, from_line, lines)
    if raw:
        out(doc.text + ("\n" if doc.text and not doc.text.endswith("\n") else ""))
        return
    from qmd.cli.base import index_uri, render_full_path

    name = render_full_path(doc.abs_path) if full_path and doc.abs_path else index_uri(doc.uri)
    out(format_document(doc, kind, line_numbers, name))


def status(json_: bool) -> None:
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
    if json_:
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
