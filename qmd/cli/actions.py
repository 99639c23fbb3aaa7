"""What the read commands agents shell out to do, once their options are parsed (no typer).

The typer commands (read.py, update.py) and the lean entry path (fast.py) call these same
functions with the same values, so both paths print the same bytes.
"""

from __future__ import annotations

from qmd.cli.base import display_names, err, fs_paths, open_store, out, result_limit, snippet_chars
from qmd.cli.formats import format_document, format_search

MATCHES = ("any", "all")  # --match: all-terms hits then any-term fill (default), or all-terms only


def search(
    query: list[str], n: int | None, all_: bool, min_score: float, full: bool, line_numbers: bool,
    collection: list[str] | None, full_path: bool, kind: str, match: str = "any",
    filter_: str | None = None, since: str | None = None, until: str | None = None,
) -> None:
    """`qmd search`: keyword search, printed in `kind` (cli, json, csv, md, xml, files).

    `match="all"` keeps only documents holding every term (the original's behaviour). The
    all-terms hits rank before any fill, so dropping the fill leaves the exact top-k."""
    from qmd.cli.terminal import style_for

    limit = result_limit(kind, n, all_)
    text = " ".join(query)
    style = style_for() if kind == "cli" else None
    with open_store() as store:
        hits = store.search(
            text, limit=limit, collections=collection, min_score=min_score, full=full,
            snippet_chars=snippet_chars(kind), line_numbers=line_numbers, filter=filter_, since=since, until=until,
        )
        if match == "all":
            hits = [h for h in hits if h.match != "any"]
        names = display_names(store, hits, full_path)
        files = fs_paths(store, hits) if style is not None and style.links else None
    if style is None:
        out(format_search(hits, kind, names))
    else:
        out(format_search(hits, kind, names, style, text, files))


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
        payload = dict(info.__dict__, vectors=vectors, vector_error=vector_error, models=models, config_warnings=warnings)
        out(to_json(payload, default=lambda o: o.__dict__))
        return
    for warning in warnings:
        err(f"warning: {warning}")
    out(format_status(info, vectors, vector_error, models))
