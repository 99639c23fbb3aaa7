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


def _normal_path(path: str) -> str:
    """A path as the original's bench compares them: no `qmd://collection/`, lower case, no edge slashes."""
    if path.startswith("qmd://"):
        rest = path[len("qmd://") :]
        path = rest.split("/", 1)[1] if "/" in rest else rest
    return path.lower().strip("/")


def paths_match(found: str, expected: str) -> bool:
    """The same file: equal, or one a path suffix of the other (`docs/api.md` ~ `api.md`)."""
    a, b = _normal_path(found), _normal_path(expected)
    return a == b or a.endswith(b) or b.endswith(a)


def score_files(found: list[str], expected: list[str], top_k: int) -> dict[str, Any]:
    """The original's per-query scores (its bench/score.ts definitions): P@k over min(k,
    expected), recall anywhere and within 1/3/5, MRR of the first match, F1 of P@k and recall."""

    def hits_within(k: int) -> int:
        return sum(1 for e in expected if any(paths_match(f, e) for f in found[:k]))

    matched = [e for e in expected if any(paths_match(f, e) for f in found)]
    rank = next((i for i, f in enumerate(found, start=1) if any(paths_match(f, e) for e in expected)), None)
    total = len(expected)
    hits_at_k = hits_within(top_k)
    denominator = min(top_k, total)
    precision = hits_at_k / denominator if denominator else 0.0
    recall = len(matched) / total if total else 0.0
    return {
        "precision_at_k": precision, "recall": recall,
        "recall_at_1": hits_within(1) / total if total else 0.0, "recall_at_3": hits_within(3) / total if total else 0.0,
        "recall_at_5": hits_within(5) / total if total else 0.0, "mrr": 1.0 / rank if rank else 0.0,
        "f1": 2 * precision * recall / (precision + recall) if precision + recall else 0.0,
        "hits_at_k": hits_at_k, "total_expected": total,
        "matched_files": matched, "unmatched_expected_files": [e for e in expected if e not in matched],
    }


SUMMARY_KEYS = (("avg_precision", "precision_at_k"), ("avg_recall", "recall"), ("avg_recall_at_1", "recall_at_1"), ("avg_recall_at_3", "recall_at_3"),
                ("avg_recall_at_5", "recall_at_5"), ("avg_mrr", "mrr"), ("avg_f1", "f1"), ("avg_latency_ms", "latency_ms"))


def fixture_benchmark(store: Any, fixture: dict[str, Any], fixture_path: str, collections: list[str] | None) -> dict[str, Any]:
    """A run over the original's fixture format, in the shape its `qmd bench --json` prints:
    `{timestamp, fixture, results: [{id, query, type, backends: {name: scores}}], summary}`.

    One divergence, on purpose: a backend that cannot run (no embeddings for vectors, no
    model) is flagged (`"unavailable": why`, in each result and in the summary) instead of
    scoring 0.000 everywhere as if it had run and found nothing."""
    from datetime import datetime, timezone

    items = fixture.get("queries")
    if not isinstance(items, list) or not items:
        raise QmdError("the fixture has no queries", 'expected {"queries": [{"id": …, "query": …, "expected_files": [...], "expected_in_top_k": 1}]}')
    queries = [(str(q.get("id", i)), str(q["query"])) for i, q in enumerate(items)]
    depth = max([10, *(int(q.get("expected_in_top_k", 1)) for q in items)])
    runs = run_backends(store, queries, collections, depth)
    results: list[dict[str, Any]] = []
    for i, (q, (qid, text)) in enumerate(zip(items, queries)):
        expected = [str(f) for f in q.get("expected_files") or []]
        backends: dict[str, Any] = {}
        for name, (hits, times, error) in runs.items():
            if error is not None:
                backends[name] = {"unavailable": error, "total_expected": len(expected)}
                continue
            found = [h.path for h in hits[i]]
            backends[name] = {**score_files(found, expected, int(q.get("expected_in_top_k", 1))), "latency_ms": round(times[i], 3), "top_files": found[:10]}
        results.append({"id": qid, "query": text, "type": str(q.get("type", "")), "backends": backends})
    summary: dict[str, Any] = {}
    for name, (_hits, _times, error) in runs.items():
        if error is not None:
            summary[name] = {"unavailable": error}
        else:
            summary[name] = {key: statistics.fmean(r["backends"][name][field] for r in results) for key, field in SUMMARY_KEYS}
    stamp = datetime.now(timezone.utc).strftime("%Y%m%dT%H%M%S")
    return {"timestamp": stamp, "fixture": fixture_path, "results": results, "summary": summary}


def check_bench_collection(collections: list[tuple[str, int]], name: str | None) -> None:
    """Fail before minutes of 0.00 (the original's rule): the fixture's collection must exist and hold documents."""
    if name is not None:
        found = next((count for n, count in collections if n == name), None)
        if found is None:
            names = [n for n, _ in collections]
            hint = f"collections here: {', '.join(names)} (pass -c NAME; `qmd ls` shows them)" if names else "add one: qmd collection add DIR --name NAME"
            raise QmdError(f"collection not found: {name}", hint)
        if found == 0:
            raise QmdError(f"collection '{name}' has no indexed documents", f"run qmd update, then qmd ls {name}")
        return
    if sum(count for _, count in collections) == 0:
        raise QmdError("no indexed documents", "index a collection first: qmd collection add DIR, then qmd update")


def _text_of(path: Path, fix: str) -> str:
    """The UTF-8 text of the regular file `path`; a QmdError naming `fix` for anything else
    (a file in another encoding crashed `qmd bench` with exit 3; a FIFO blocked it)."""
    from qmd.core.fileio import open_regular

    try:
        with open_regular(path) as fh:
            return fh.read().decode("utf-8")
    except UnicodeDecodeError as exc:
        raise QmdError(f"{path} is not UTF-8 text (byte {exc.start} is {exc.object[exc.start:exc.start + 1]!r})", fix) from None
    except OSError as exc:
        raise QmdError(f"cannot read {path}: {exc.strerror or exc}", fix) from exc


def read_tsv(path: Path, columns: int) -> list[list[str]]:
    lines = _text_of(path, "give a UTF-8 text file of tab-separated lines (queries: qid<TAB>text; qrels: qid<TAB>docid<TAB>gain)").splitlines()
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
    text = _text_of(path, "give a JSON file like qmd-eval/example.json")
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise QmdError(f"cannot read the fixture {path}: {exc}", "give a JSON file like qmd-eval/example.json") from exc
    if not isinstance(data, dict):
        raise QmdError(f"{path} is not a JSON object", "give a JSON file like qmd-eval/example.json")
    return data
