"""`qmd bench`: compare bm25, vector, hybrid and full query on a fixture or on qrels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from qmd.search.metrics import fixture_report, load_fixture, qrels_report
from qmd.cli.common import CollectionOpt, open_store, out


def bench(
    fixture: Annotated[Path | None, typer.Argument(help="A fixture in the original's format (qmd-eval/example.json).")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="IR mode: qid<TAB>query lines.")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="IR mode: qid<TAB>docid<TAB>gain; docid = path in the collection without extension.")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
    collection: CollectionOpt = None,
) -> None:
    """Retrieval quality (P@k, R@k, MRR, F1 or nDCG@10) and latency per backend."""
    if (fixture is None) == (queries is None and qrels is None) or (queries is None) != (qrels is None):
        raise typer.BadParameter("give a FIXTURE, or both --queries and --qrels")
    with open_store() as store:
        if fixture is not None:
            data = load_fixture(fixture)
            names = collection or ([str(data["collection"])] if data.get("collection") else None)
            reports = fixture_report(store, data, names)
        else:
            reports = qrels_report(store, queries, qrels, collection)  # type: ignore[arg-type]
    if json_:
        out(json.dumps([{"backend": r.backend, "metrics": r.metrics, "p50_ms": r.p50_ms, "error": r.error, "queries": r.per_query} for r in reports], indent=2) + "\n")
        return
    metrics = next((list(r.metrics) for r in reports if r.metrics), [])
    out(f"{'backend':8} " + " ".join(f"{m:>9}" for m in metrics) + f" {'p50 ms':>8}\n")
    for r in reports:
        if r.error:
            out(f"{r.backend:8} unavailable: {r.error}\n")
            continue
        out(f"{r.backend:8} " + " ".join(f"{r.metrics[m]:9.3f}" for m in metrics) + f" {r.p50_ms:8.1f}\n")
