"""`qmd bench`: compare bm25, vector, hybrid and full query on a fixture or on qrels."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Annotated

import typer

from qmd.search.metrics import check_bench_collection, fixture_benchmark, load_fixture, qrels_report
from qmd.cli.options import CollectionOpt
from qmd.cli.shared import open_store, out


def bench(
    fixture: Annotated[Path | None, typer.Argument(help="A fixture in the original's format (qmd-eval/example.json).")] = None,
    queries: Annotated[Path | None, typer.Option("--queries", help="IR mode: qid<TAB>query lines.")] = None,
    qrels: Annotated[Path | None, typer.Option("--qrels", help="IR mode: qid<TAB>docid<TAB>gain; docid = path in the collection without extension.")] = None,
    json_: Annotated[bool, typer.Option("--json")] = False,
    collection: CollectionOpt = None,
) -> None:
    """Retrieval quality (P@k, R@k, MRR, F1 or nDCG@10) and latency per backend.

    A fixture (the original's format) prints its per-query table and summary, or with --json
    the original's `{timestamp, fixture, results[].backends, summary}`; a backend that cannot
    run is flagged as unavailable. IR mode (--queries/--qrels) prints nDCG@10, Recall@10, MRR@10."""
    if (fixture is None) == (queries is None and qrels is None) or (queries is None) != (qrels is None):
        raise typer.BadParameter("give a FIXTURE, or both --queries and --qrels")
    with open_store() as store:
        if fixture is not None:
            data = load_fixture(fixture)
            names = collection or ([str(data["collection"])] if data.get("collection") else None)
            info = store.status()
            have = [(c.name, c.documents) for c in info.collections]
            targets: list[str | None] = list(names) if names else [None]
            for name in targets:
                check_bench_collection(have, name)
            result = fixture_benchmark(store, data, str(fixture), names)
        else:
            reports = qrels_report(store, queries, qrels, collection)  # type: ignore[arg-type]
    if fixture is not None:
        out(json.dumps(result, indent=2) + "\n" if json_ else fixture_table(result))
        return
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


def fixture_table(result: dict[str, object]) -> str:
    """The original's per-query table and summary; a backend that could not run says why."""
    def pad(text: str, n: int) -> str:
        return text[:n].ljust(n)

    lines = [f"{pad('Query', 25)} {pad('Backend', 8)} {pad('P@k', 6)} {pad('R@1', 6)} {pad('R@3', 6)} {pad('R@5', 6)} {pad('MRR', 6)} {pad('F1', 6)} {pad('ms', 8)}", "-" * 88]
    for r in result["results"]:  # type: ignore[attr-defined]
        for name, b in r["backends"].items():
            if "unavailable" in b:
                lines.append(f"{pad(r['id'], 25)} {pad(name, 8)} unavailable")
                continue
            nums = " ".join(f"{b[k]:5.2f} " for k in ("precision_at_k", "recall_at_1", "recall_at_3", "recall_at_5", "mrr", "f1"))
            lines.append(f"{pad(r['id'], 25)} {pad(name, 8)} {nums}{round(b['latency_ms']):>7}ms")
        lines.append("")
    lines += ["Summary:", "-" * 70]
    for name, s in result["summary"].items():  # type: ignore[attr-defined]
        if "unavailable" in s:
            lines.append(f"  {pad(name, 8)} unavailable: {s['unavailable']}")
            continue
        lines.append(
            f"  {pad(name, 8)} P@k={s['avg_precision']:6.3f} R@1={s['avg_recall_at_1']:6.3f} R@3={s['avg_recall_at_3']:6.3f} "
            f"R@5={s['avg_recall_at_5']:6.3f} MRR={s['avg_mrr']:6.3f} F1={s['avg_f1']:6.3f} Avg={round(s['avg_latency_ms'])}ms"
        )
    return "\n".join(lines) + "\n"
