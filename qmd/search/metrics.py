"""`qmd bench`: retrieval quality and latency of each backend on a fixture or on qrels.

Backends: bm25 (`search`), vector (`vsearch`), hybrid (query without rerank: RRF),
full (query with every stage whose model is available). Metrics (pure functions below):
fixture mode P@k, R@1/3/5, MRR, F1; IR mode nDCG@10 (graded, log2 discount, as trec_eval's
ndcg_cut), Recall@10 and MRR@10, averaged over queries with at least one relevant document.
"""

from __future__ import annotations

import json
import math
import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmd.core.errors import QmdError
from qmd.core.results import SearchHit

BACKENDS = ("bm25", "vector", "hybrid", "full")


def first_rank(results: list[str], relevant: set[str]) -> int | None:
    return next((i for i, r in enumerate(results, start=1) if r in relevant), None)


def precision_at(results: list[str], relevant: set[str], k: int) -> float:
    return sum(1 for r in results[:k] if r in relevant) / k if k else 0.0


def recall_at(results: list[str], relevant: set[str], k: int) -> float:
    return sum(1 for r in results[:k] if r in relevant) / len(relevant) if relevant else 0.0


def mrr_at(results: list[str], relevant: set[str], k: int = 10) -> float:
    rank = first_rank(results[:k], relevant)
    return 1.0 / rank if rank else 0.0


def ndcg_at(results: list[str], gains: dict[str, int], k: int = 10) -> float:
    seen: list[str] = []
    for r in results:
        if r not in seen:
            seen.append(r)
    dcg = sum(max(gains.get(d, 0), 0) / math.log2(i + 2) for i, d in enumerate(seen[:k]))
    ideal = sorted((g for g in gains.values() if g > 0), reverse=True)[:k]
    idcg = sum(g / math.log2(i + 2) for i, g in enumerate(ideal))
    return dcg / idcg if idcg else 0.0


@dataclass
class BackendReport:
    backend: str
    metrics: dict[str, float] = field(default_factory=dict)
    latency_ms: list[float] = field(default_factory=list)
    per_query: list[dict[str, Any]] = field(default_factory=list)
    error: str | None = None

    @property
    def p50_ms(self) -> float:
        return statistics.median(self.latency_ms) if self.latency_ms else 0.0


def _runner(store: Any, backend: str, collections: list[str] | None) -> Callable[[str, int], list[Any]]:
    if backend == "bm25":
        return lambda q, n: store.search(q, limit=n, collections=collections)
    if backend == "vector":
        return lambda q, n: store.vsearch(q, limit=n, collections=collections).hits
    if backend == "hybrid":
        return lambda q, n: store.query(q, limit=n, collections=collections, rerank=False).hits
    return lambda q, n: store.query(q, limit=n, collections=collections).hits


def run_backends(store: Any, queries: list[tuple[str, str]], collections: list[str] | None, depth: int = 10) -> dict[str, tuple[list[list[Any]], list[float], str | None]]:
    """For each backend: (hits per query, latency per query in ms, error if it cannot run)."""
    out: dict[str, tuple[list[list[Any]], list[float], str | None]] = {}
    for backend in BACKENDS:
        run = _runner(store, backend, collections)
        hits: list[list[Any]] = []
        times: list[float] = []
        try:
            for _, text in queries:
                t0 = time.perf_counter()
                hits.append(run(text, depth))
                times.append((time.perf_counter() - t0) * 1000)
            out[backend] = (hits, times, None)
        except QmdError as exc:
            out[backend] = ([], [], exc.message)
    return out


def _file_name(hit: SearchHit) -> str:
    return hit.path.rsplit("/", 1)[-1]


def fixture_report(store: Any, fixture: dict[str, Any], collections: list[str] | None) -> list[BackendReport]:
    """P@k, R@1/3/5, MRR, F1 per backend over the original's fixture format."""
    queries = [(str(q.get("id", i)), str(q["query"])) for i, q in enumerate(fixture.get("queries") or [])]
    if not queries:
        raise QmdError("the fixture has no queries", 'expected {"queries": [{"query": …, "expected_files": [...]}]}')
    expected = [set(q.get("expected_files") or []) for q in fixture["queries"]]
    ks = [int(q.get("expected_in_top_k", 1)) for q in fixture["queries"]]
    reports = []
    for backend, (hits, times, error) in run_backends(store, queries, collections).items():
        report = BackendReport(backend, latency_ms=times, error=error)
        if error is None:
            rows: list[dict[str, Any]] = []
            for (qid, text), rel, k, found in zip(queries, expected, ks, hits):
                names = [_file_name(h) for h in found]
                p, r = precision_at(names, rel, k), recall_at(names, rel, k)
                rows.append({"id": qid, "query": text, "p@k": p, "r@1": recall_at(names, rel, 1), "r@3": recall_at(names, rel, 3),
                             "r@5": recall_at(names, rel, 5), "mrr": mrr_at(names, rel), "f1": 2 * p * r / (p + r) if p + r else 0.0,
                             "top": names[:3]})
            report.per_query = rows
            report.metrics = {m: statistics.fmean(row[m] for row in rows) for m in ("p@k", "r@1", "r@3", "r@5", "mrr", "f1")}
        reports.append(report)
    return reports


def read_tsv(path: Path, columns: int) -> list[list[str]]:
    try:
        lines = path.read_text(encoding="utf-8").splitlines()
    except OSError as exc:
        raise QmdError(f"cannot read {path}: {exc.strerror or exc}", "check the path") from exc
    rows = [line.split("\t") for line in lines if line.strip() and not line.startswith("#")]
    bad = next((i for i, r in enumerate(rows, 1) if len(r) < columns), None)
    if bad:
        raise QmdError(f"{path}: line {bad} has fewer than {columns} tab-separated columns", "queries: qid<TAB>text; qrels: qid<TAB>docid<TAB>gain")
    return rows


def qrels_report(store: Any, queries_tsv: Path, qrels_tsv: Path, collections: list[str] | None) -> list[BackendReport]:
    """nDCG@10, Recall@10, MRR@10 per backend; qrels docids are paths without extension."""
    queries = [(r[0], r[1]) for r in read_tsv(queries_tsv, 2)]
    gains: dict[str, dict[str, int]] = {}
    for qid, docid, gain, *_ in read_tsv(qrels_tsv, 3):
        if gain.lstrip("-").isdigit():
            gains.setdefault(qid, {})[docid] = int(gain)
    judged = [(qid, text) for qid, text in queries if any(g > 0 for g in gains.get(qid, {}).values())]
    reports = []
    for backend, (hits, times, error) in run_backends(store, judged, collections).items():
        report = BackendReport(backend, latency_ms=times, error=error)
        if error is None:
            rows: list[dict[str, Any]] = []
            for (qid, text), found in zip(judged, hits):
                docs = [h.path.rsplit(".", 1)[0] for h in found]
                rel = {d for d, g in gains[qid].items() if g > 0}
                rows.append({"id": qid, "ndcg@10": ndcg_at(docs, gains[qid]), "recall@10": recall_at(docs, rel, 10), "mrr@10": mrr_at(docs, rel)})
            report.per_query = rows
            report.metrics = {m: statistics.fmean(r[m] for r in rows) for m in ("ndcg@10", "recall@10", "mrr@10")} if rows else {}
        reports.append(report)
    return reports


def load_fixture(path: Path) -> dict[str, Any]:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        raise QmdError(f"cannot read the fixture {path}: {exc}", "give a JSON file like qmd-eval/example.json") from exc
    if not isinstance(data, dict):
        raise QmdError(f"{path} is not a JSON object", "give a JSON file like qmd-eval/example.json")
    return data
