"""`qmd search`, `qmd get`, `qmd multi-get`, `qmd ls`."""

from __future__ import annotations

import os
from typing import Annotated

import typer

from ..formats import format_document, format_ls, format_ls_root, format_multi, format_search
from ..search.snippets import CLI_SNIPPET_CHARS, JSON_SNIPPET_CHARS
from .common import CsvOpt, FilesOpt, FormatOpt, JsonOpt, MdOpt, XmlOpt, open_store, out, pick_format

CollectionOpt = Annotated[list[str] | None, typer.Option("-c", "--collection", help="Search only this collection (repeatable).")]


def search(
    query: Annotated[list[str], typer.Argument(metavar="QUERY", help='Words (prefix match), "exact phrases", -excluded words.')],
    n: Annotated[int | None, typer.Option("-n", help="Number of results (default 5; 20 for json/files).", show_default=False)] = None,
    all_: Annotated[bool, typer.Option("--all", help="Return every match.")] = False,
    min_score: Annotated[float, typer.Option("--min-score", help="Drop hits scoring below this (0-1).")] = 0.0,
    full: Annotated[bool, typer.Option("--full", help="Whole documents instead of snippets.")] = False,
    line_numbers: Annotated[bool, typer.Option("--line-numbers", help="Number the snippet lines.")] = False,
    collection: CollectionOpt = None,
    full_path: Annotated[bool, typer.Option("--full-path", help="Show file-system paths instead of qmd:// paths.")] = False,
    fmt: FormatOpt = None, json_: JsonOpt = False, csv_: CsvOpt = False, md: MdOpt = False, xml: XmlOpt = False, files: FilesOpt = False,
) -> None:
    """Keyword search (BM25): all-terms matches first, then documents sharing most terms."""
    kind = pick_format(fmt, json_, csv_, md, xml, files)
    if n is not None and n < 1:
        raise typer.BadParameter("must be at least 1", param_hint="-n")
    limit = None if all_ else (n or (20 if kind in ("json", "files") else 5))
    with open_store() as store:
        hits = store.search(
            " ".join(query), limit=limit, collections=collection, min_score=min_score, full=full,
            snippet_chars=JSON_SNIPPET_CHARS if kind == "json" else CLI_SNIPPET_CHARS, line_numbers=line_numbers,
        )
        paths = _fs_paths(store, hits) if full_path else None
    out(format_search(hits, kind, paths))


def _fs_paths(store, items) -> dict[str, str]:  # type: ignore[no-untyped-def]
    roots = {c.name: c.path for c in store.collections()}
    return {it.uri: os.path.join(roots[it.collection], it.path) for it in items if it.collection in roots}


def get(
    ref: Annotated[str, typer.Argument(help="path, qmd://collection/path, #docid; path:FROM or path:FROM:COUNT for a line range.")],
    from_line: Annotated[int | None, typer.Option("--from", help="First line (1-based).")] = None,
    lines: Annotated[int | None, typer.Option("-l", "--lines", help="Number of lines.")] = None,
    line_numbers: Annotated[bool, typer.Option("--line-numbers/--no-line-numbers", help="Number the lines.")] = True,
    raw: Annotated[bool, typer.Option("--raw", help="Only the text, no header or numbers.")] = False,
    full_path: Annotated[bool, typer.Option("--full-path", help="Show the file-system path.")] = False,
    fmt: FormatOpt = None, json_: JsonOpt = False, csv_: CsvOpt = False, md: MdOpt = False, xml: XmlOpt = False, files: FilesOpt = False,
) -> None:
    """Print a document, or a range of its lines."""
    kind = pick_format(fmt, json_, csv_, md, xml, files)
    with open_store() as store:
        doc = store.get(ref, from_line, lines)
    if raw:
        out(doc.text + ("\n" if doc.text and not doc.text.endswith("\n") else ""))
        return
    out(format_document(doc, kind, line_numbers, doc.abs_path if full_path else None))


def multi_get(
    pattern: Annotated[str, typer.Argument(help="Glob over collection/path ('notes/**/*.md'), or a comma-separated list of paths/#docids.")],
    lines: Annotated[int | None, typer.Option("-l", "--lines", help="At most this many lines per document.")] = None,
    max_bytes: Annotated[int, typer.Option("--max-bytes", help="Skip documents larger than this.")] = 65536,
    line_numbers: Annotated[bool, typer.Option("--line-numbers/--no-line-numbers", help="Number the lines.")] = True,
    fmt: FormatOpt = None, json_: JsonOpt = False, csv_: CsvOpt = False, md: MdOpt = False, xml: XmlOpt = False, files: FilesOpt = False,
) -> None:
    """Print several documents at once."""
    kind = pick_format(fmt, json_, csv_, md, xml, files)
    with open_store() as store:
        items = store.multi_get(pattern, lines, max_bytes)
    out(format_multi(items, kind, line_numbers))


def ls(target: Annotated[str | None, typer.Argument(help="A collection, collection/sub-path or qmd:// path; none lists collections.")] = None) -> None:
    """List collections, or the files in one."""
    with open_store() as store:
        if not target:
            out(format_ls_root(store.collections()))
        else:
            out(format_ls(store.ls(target)))
