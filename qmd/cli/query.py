"""`qmd query`: the hybrid pipeline (expansion, BM25 + vectors, RRF, rerank, blend)."""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli import actions
from qmd.cli.options import (
    AllOpt,
    CollectionOpt,
    FilterOpt,
    LocalOpt,
    SinceOpt,
    UntilOpt,
    FullOpt,
    LineNumbersOpt,
    FullPathOpt,
    MinConfidenceOpt,
    MinScoreOpt,
    NOpt,
    with_output_format,
)


@with_output_format
def query(
    text: Annotated[list[str], typer.Argument(metavar="QUERY", help="A question, or typed lines: 'lex: …', 'vec: …', 'hyde: …', 'intent: …', 'expand: …'.")],
    n: NOpt = None,
    candidates: Annotated[int, typer.Option("-C", "--candidates", help="How many fused candidates the reranker reads.")] = 40,
    min_score: MinScoreOpt = 0.0,
    min_confidence: MinConfidenceOpt = None,
    intent: Annotated[str | None, typer.Option("--intent", help="What you are after (steers rerank and snippets; disables the keyword shortcut).")] = None,
    no_rerank: Annotated[bool, typer.Option("--no-rerank", help="Skip reranking: rank by fusion only.")] = False,
    expand: Annotated[bool | None, typer.Option("--expand/--no-expand", help="Force query expansion even with a generate model not trained for it, or skip it (default: expand only with a model trained for expansion).")] = None,
    explain: Annotated[bool, typer.Option("--explain", help="Per hit: list ranks, RRF contributions, rerank score, blend; stage timings.")] = False,
    why: Annotated[str | None, typer.Option("--why", metavar="REF", help="Say where this document (path, #docid or qmd:// URI) stood: its rank and score in each list, fused, reranked and final, whether its collection, the filter or the candidate limit cut it, and the state of its chunks' vectors.", show_default=False)] = None,
    collection: CollectionOpt = None,
    full_path: FullPathOpt = False,
    all_: AllOpt = False,
    full: FullOpt = False,
    line_numbers: LineNumbersOpt = False,
    filter_: FilterOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    local: LocalOpt = False,
    chunk_strategy: Annotated[str | None, typer.Option("--chunk-strategy", help="regex or auto: accepted as the original's; the reranker reads the chunks cut at embed time (each collection's chunk_strategy:).", show_default=False)] = None,
    kind: str = "cli",
) -> None:
    """Hybrid search: the best of keyword and vector search, reranked."""
    actions.query(locals())
