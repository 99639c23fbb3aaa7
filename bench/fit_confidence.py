"""Fit the confidence (issue 28): the logistic models of qmd/search/confidence.py, and the threshold.

Data: the FIT split of the trust set (bench/data/trust/questions.jsonl) only; the held-out
half is never read here (bench/trust_bench.py measures on it). Index: as trust_bench builds
it (examples/notes and the paraphrase notes, rerank and generate models absent), once per
`--model` (default: minilm and embeddinggemma), the rows of all models pooled so that one
set of coefficients serves every embed model.

For `search`, `vsearch` and `query` (limit 5), each hit is one row: its features
(`confidence.features(kind, Evidence)`, from the evidence the pipeline attached to it) and
whether it is the question's answer note (never, for an unanswerable question). Each
method's model is an L2-regularised logistic regression (Newton's method, penalty 1 on the
weights, not the intercept). The script prints the coefficients as the literal that
`COEFFICIENTS` holds, the in-sample AUROC and ECE of the top hit, and the threshold: the
highest `query` top-hit confidence that keeps the right-first answers lost at most 10% on
fit (pooled models), midway between observed values; it also prints the caught - lost
optimum for comparison. Paste both into qmd/search/confidence.py with the date.

`--cv` also prints, for each L2 penalty of L2_GRID, the leave-one-question-out AUROC and ECE
of the top hit on fit (every row of a question, both models', held out together): how the
penalty was chosen, on fit alone. `--rows PATH` keeps the rows (built once, read back after).

    .venv/bin/python bench/fit_confidence.py [--model minilm] [--model embeddinggemma] [--cv] [--rows rows.json] [--json out.json]
"""

from __future__ import annotations

import datetime
import json
import os
import sys
from pathlib import Path
from typing import Any

import numpy as np

from _common import arg_parser, cache_root, isolated_home, resolve_model
from trust_bench import COLLECTIONS, METHODS, auroc, best_threshold, build, rates
from trust_check import load

DEPTH = 5  # hits per question used as rows
L2 = 1.0
L2_GRID = (0.1, 0.3, 1.0, 3.0, 10.0, 30.0)
MAX_LOST = 0.10  # the default threshold keeps at most this share of right-first answers below it (on fit)


def rows_of(store: Any, method: str, questions: list[dict[str, Any]]) -> list[tuple[str, int, list[float], int]]:
    """(question id, rank, features, label) of each hit of `method` for `questions`."""
    from qmd.search.confidence import Evidence, features

    names = list(COLLECTIONS)
    call = {
        "search": lambda q: store.search(q, limit=DEPTH, collections=names),
        "vsearch": lambda q: store.vsearch(q, limit=DEPTH, collections=names).hits,
        "query": lambda q: store.query(q, limit=DEPTH, collections=names, rerank=False).hits,
    }[method]
    out = []
    for row in questions:
        for rank, hit in enumerate(call(row["query"]), 1):
            ev = Evidence(**hit.evidence)
            out.append((row["id"], rank, features(method, ev), int(f"{hit.collection}/{hit.path}" == row["answer"])))
    return out


def fit(x: np.ndarray, y: np.ndarray, l2: float = L2) -> np.ndarray:
    """Weights (intercept first) of the L2-regularised logistic regression of y on x."""
    x = np.c_[np.ones(len(x)), x]
    w = np.zeros(x.shape[1])
    penalty = l2 * np.diag(np.r_[0.0, np.ones(x.shape[1] - 1)])
    for _ in range(100):
        p = 1.0 / (1.0 + np.exp(-x @ w))
        step = np.linalg.solve((x.T * (p * (1 - p))) @ x + penalty, x.T @ (p - y) + penalty @ w)
        w -= step
        if np.abs(step).max() < 1e-9:
            break
    return w


def predict(w: np.ndarray, x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-(np.c_[np.ones(len(x)), x] @ w)))


def ece(conf: list[float], right: list[int], bins: int = 10) -> float:
    groups: list[list[tuple[float, int]]] = [[] for _ in range(bins)]
    for c, r in zip(conf, right):
        groups[min(int(c * bins), bins - 1)].append((c, r))
    return sum(len(g) / len(conf) * abs(float(np.mean([c for c, _ in g])) - float(np.mean([r for _, r in g]))) for g in groups if g)


def cross_validated(rows: list[tuple[str, str, int, list[float], int]], kinds: dict[str, str], l2: float) -> tuple[float, float]:
    """Leave-one-question-out (AUROC, ECE) of the top hit: each question's rows (both models')
    predicted by the model fitted on the other questions' rows."""
    predicted: dict[int, float] = {}
    for qid in sorted({r[1] for r in rows}):
        train = [r for r in rows if r[1] != qid]
        w = fit(np.array([r[3] for r in train], dtype=float), np.array([r[4] for r in train], dtype=float), l2)
        for i, r in enumerate(rows):
            if r[1] == qid and r[2] == 1:
                predicted[i] = float(predict(w, np.array([r[3]], dtype=float))[0])
    conf = list(predicted.values())
    right = [rows[i][4] for i in predicted]
    neg = [c for i, c in predicted.items() if kinds[rows[i][1]] == "unanswerable"]
    return auroc([c for c, r in zip(conf, right) if r], neg), ece(conf, right)


def threshold_for(pos: list[float], neg: list[float], max_lost: float = MAX_LOST) -> float:
    """The highest t (midway between observed values) losing at most `max_lost` of `pos`."""
    values = sorted(set(pos) | set(neg))
    candidates = [0.0] + [(a + b) / 2 for a, b in zip(values, values[1:])]
    return max(t for t in candidates if rates(pos, neg, t)[1] <= max_lost)


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="minilm, embeddinggemma, or an embedding GGUF; repeatable (default: both)")
    parser.add_argument("--cv", action="store_true", help="leave-one-question-out AUROC and ECE on fit for each L2 penalty")
    parser.add_argument("--l2", type=float, default=L2, help=f"the L2 penalty of the printed coefficients (default {L2})")
    parser.add_argument("--rows", metavar="PATH", help="read the rows from PATH if it exists, else build them and write them there")
    args = parser.parse_args()
    questions = [r for r in load() if r["split"] == "fit"]
    kinds = {r["id"]: r["kind"] for r in questions}
    data: dict[str, list[tuple[str, str, int, list[float], int]]] = {m: [] for m in METHODS}
    if args.rows and Path(args.rows).is_file():
        data = {m: [tuple(r) for r in rows] for m, rows in json.loads(Path(args.rows).read_text(encoding="utf-8")).items()}  # type: ignore[misc]
    else:
        build_rows(args.model or ["minilm", "embeddinggemma"], questions, data)
        if args.rows:
            Path(args.rows).write_text(json.dumps(data), encoding="utf-8")
    fitted(data, kinds, args)
    return 0


def build_rows(specs: list[str], questions: list[dict[str, Any]], data: dict[str, list[tuple[str, str, int, list[float], int]]]) -> None:
    """Each method's rows over `questions`, for an index embedded with each model."""
    cache = cache_root()
    with isolated_home("fit-confidence") as tmp:
        os.environ["QMD_RERANK_MODEL"] = str(tmp / "no-reranker.gguf")
        os.environ["QMD_GENERATE_MODEL"] = str(tmp / "no-generator.gguf")
        for spec in specs:
            model = resolve_model(spec, cache)
            print(f"{model.name}", flush=True)
            store = build(model)
            for m in METHODS:
                data[m] += [(model.name, qid, rank, f, y) for qid, rank, f, y in rows_of(store, m, questions)]
            store.close()


def fitted(data: dict[str, list[tuple[str, str, int, list[float], int]]], kinds: dict[str, str], args: Any) -> None:
    """Fit, report and print the coefficients and the threshold."""
    from qmd.search.confidence import FEATURES

    questions = sorted({r[1] for r in data["query"]})

    coefficients: dict[str, list[float]] = {}
    report: dict[str, Any] = {}
    tops: dict[str, tuple[list[float], list[int], list[str]]] = {}
    print(f"\nfit split: {len(questions)} questions; rows = hits 1-{DEPTH} per question, method and model")
    for m in METHODS:
        rows = data[m]
        if args.cv:
            for l2 in L2_GRID:
                a, e = cross_validated(rows, kinds, l2)
                print(f"  {m:<8} L2 {l2:<5g} leave-one-question-out on fit: top hit AUROC {a:.3f}, ECE {e:.3f}")
        x = np.array([f for *_, f, _ in rows], dtype=float)
        y = np.array([label for *_, label in rows], dtype=float)
        w = fit(x, y, args.l2)
        coefficients[m] = [round(float(v), 4) for v in w]
        p = predict(w, x)
        top = [(i, r) for i, r in enumerate(rows) if r[2] == 1]
        conf = [float(p[i]) for i, _ in top]
        right = [r[4] for _, r in top]
        kind = [kinds[r[1]] for _, r in top]
        tops[m] = (conf, right, kind)
        pos = [c for c, r in zip(conf, right) if r]
        neg = [c for c, k in zip(conf, kind) if k == "unanswerable"]
        report[m] = {"rows": len(rows), "positives": int(y.sum()), "auroc_top": auroc(pos, neg), "ece_top": ece(conf, right), "coefficients": coefficients[m]}
        names = ", ".join(("intercept", *FEATURES[m]))
        print(f"  {m:<8} rows {len(rows):>4} (answers {int(y.sum())}), top hit in-sample AUROC {report[m]['auroc_top']:.3f}, ECE {report[m]['ece_top']:.3f}")
        print(f"           {names}: {coefficients[m]}")
    conf, right, kind = tops["query"]
    pos = [c for c, r in zip(conf, right) if r]
    neg = [c for c, k in zip(conf, kind) if k == "unanswerable"]
    t = threshold_for(pos, neg)
    t_best = best_threshold(pos, neg)
    report["threshold"] = {"chosen": t, "caught_minus_lost": t_best}
    for label, value in (("chosen (<= 10% of right-first lost)", t), ("caught - lost optimum", t_best)):
        caught, lost = rates(pos, neg, value)
        print(f"  query threshold {label}: {value:.4f}: caught {caught:.0%}, lost {lost:.0%} (fit)")
    for m in ("search", "vsearch"):
        c, r, k = tops[m]
        caught, lost = rates([a for a, b in zip(c, r) if b], [a for a, b in zip(c, k) if b == "unanswerable"], t)
        print(f"  {m} at that threshold: caught {caught:.0%}, lost {lost:.0%} (fit)")
    today = datetime.date.today().isoformat()
    print(f"\n# Fitted by bench/fit_confidence.py on {today} (trust set, fit split; {', '.join(sorted({r[0] for r in data['query']}))} pooled).")
    print("COEFFICIENTS: dict[str, tuple[float, ...]] = {")
    for m in METHODS:
        print(f'    "{m}": ({", ".join(str(v) for v in coefficients[m])}),')
    print("}")
    print(f"THRESHOLD = {round(t, 2)}")
    if args.json:
        Path(args.json).write_text(json.dumps(report, indent=2) + "\n", encoding="utf-8")


if __name__ == "__main__":
    sys.exit(main())
