"""`qmd query`: the hybrid pipeline (expansion, BM25 + vectors, RRF, rerank, blend)."""

from __future__ import annotations

import json
import sys
from typing import Annotated

import typer

from qmd.cli.formats import format_search, search_json_rows
from qmd.cli.base import display_names, shape_hits
from qmd.cli.common import (
    AllOpt,
    CollectionOpt,
    FilterOpt,
    SinceOpt,
    UntilOpt,
    FullOpt,
    LineNumbersOpt,
    FullPathOpt,
    MinScoreOpt,
    NOpt,
    err,
    open_store,
    out,
    result_limit,
    with_output_format,
    snippet_chars,
)


@with_output_format
def query(
    text: Annotated[list[str], typer.Argument(metavar="QUERY", help="A question, or typed lines: 'lex: …', 'vec: …', 'hyde: …', 'intent: …', 'expand: …'.")],
    n: NOpt = None,
    candidates: Annotated[int, typer.Option("-C", "--candidates", help="How many fused candidates the reranker reads.")] = 40,
    min_score: MinScoreOpt = 0.0,
    intent: Annotated[str | None, typer.Option("--intent", help="What you are after (steers rerank and snippets; disables the keyword shortcut).")] = None,
    no_rerank: Annotated[bool, typer.Option("--no-rerank", help="Skip reranking: rank by fusion only.")] = False,
    expand: Annotated[bool | None, typer.Option("--expand/--no-expand", help="Force query expansion even with a generate model not trained for it, or skip it (default: expand only with a model trained for expansion).")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Per hit: list ranks, RRF contributions, rerank score, blend; stage timings.")] = False,
    collection: CollectionOpt = None,
    full_path: FullPathOpt = False,
    all_: AllOpt = False,
    full: FullOpt = False,
    line_numbers: LineNumbersOpt = False,
    filter_: FilterOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    kind: str = "cli",
) -> None:
    """Hybrid search: the best of keyword and vector search, reranked."""
    limit = result_limit(kind, n)
    if all_:  # the original's --all: every candidate the pipeline fuses (it has no unbounded list)
        limit = max(candidates, limit or 0)
    if candidates < 1:
        raise typer.BadParameter("must be at least 1", param_hint="-C")
    tty = sys.stderr.isatty() and kind == "cli"

    def progress(message: str) -> None:
        if tty:
            sys.stderr.write(f"\r\033[K{message}")
            sys.stderr.flush()

    with open_store() as store:
        result = store.query(
            "\n".join(text), limit=limit or 5, candidates=candidates, min_score=min_score,
            collections=collection, intent=intent, rerank=not no_rerank, expand=expand, explain=explain,
            snippet_chars=snippet_chars(kind), progress=progress, filter=filter_, since=since, until=until,
        )
        paths = display_names(store, result.hits, full_path)
        shape_hits(store, result.hits, full, line_numbers)
    if tty:
        sys.stderr.write("\r\033[K")
    for notice in result.notices:
        err(f"Note: {notice}")
    if kind == "json":
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
