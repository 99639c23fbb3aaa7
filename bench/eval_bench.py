"""Retrieval quality on the original qmd's fixture (`qmd-eval/`): BM25 vs vector search.

`eval-docs/` (6 markdown documents) is indexed as the collection `eval-docs` and embedded
with all-MiniLM-L6-v2 (imported from PyPI by qmd's own importer). Every query of each
fixture file is run through `store.search(q, limit=10)` (BM25) and
`store.vsearch(q, limit=10)` (vector), and scored by the rank of the expected document:
hit@1, hit@3 and MRR over the top 10 (reciprocal rank, 0 when not in the top 10).

Fixture formats:
- `example.json`: {"collection", "queries": [{"id", "query", "type", "expected_files":
  [file names], "expected_in_top_k"}]} -- a hit is a result whose file name is one of
  `expected_files`.
- `eval-deep-research.jsonl`: one {"query", "expected_doc", "difficulty", "intent",
  "notes"} per line; `expected_doc` is a fragment of the file name ("api-design"), matched
  as the original's tests do (`filepath.toLowerCase().includes(expectedDoc)`), here on
  the file name.

No targets (issue 3 asks for the numbers; hybrid targets come later). With 6 documents a
random ranking already scores hit@1 0.167, hit@3 0.500, MRR 0.408: printed for scale.
"""

from __future__ import annotations

import json
import os
import sys
from dataclasses import dataclass
from pathlib import Path, PurePosixPath

import qmd

from _common import Report, arg_parser, data_dir, import_minilm, isolated_home, measure

METHODS = ("bm25", "vector")


@dataclass
class Query:
    id: str
    text: str
    group: str  # example.json "type", or the jsonl "difficulty"
    expected: list[str]  # example.json: exact file names; jsonl: one file-name fragment
    exact: bool
    top_k: int | None = None  # example.json's expected_in_top_k

    def matches(self, path: str) -> bool:
        name = PurePosixPath(path).name
        if self.exact:
            return name in self.expected
        return any(e.lower() in name.lower() for e in self.expected)


def load_example(path: Path) -> list[Query]:
    raw = json.loads(path.read_text(encoding="utf-8"))
    return [Query(q["id"], q["query"], q.get("type", ""), list(q["expected_files"]), True, q.get("expected_in_top_k")) for q in raw["queries"]]


def load_jsonl(path: Path) -> list[Query]:
    out = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines()):
        if line.strip():
            q = json.loads(line)
            out.append(Query(f"{path.stem}-{i + 1}", q["query"], q.get("difficulty", ""), [q["expected_doc"]], False))
    return out


def rank_of(query: Query, paths: list[str]) -> int | None:
    """1-based rank of the first result that is the expected document (None: not in the list)."""
    return next((i + 1 for i, p in enumerate(paths) if query.matches(p)), None)


def scores(ranks: list[int | None]) -> dict[str, float]:
    n = len(ranks)
    return {
        "hit@1": sum(r == 1 for r in ranks) / n,
        "hit@3": sum(r is not None and r <= 3 for r in ranks) / n,
        "mrr@10": sum(1.0 / r for r in ranks if r is not None and r <= 10) / n,
    }


def random_baseline(n_docs: int) -> dict[str, float]:
    """Expected scores of a uniformly random ranking of n_docs documents, one relevant."""
    return {"hit@1": 1 / n_docs, "hit@3": min(3, n_docs) / n_docs, "mrr@10": sum(1 / r for r in range(1, min(10, n_docs) + 1)) / n_docs}


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--per-query", action="store_true", help="also print every query with its BM25 and vector rank")
    args = parser.parse_args()
    fixture = data_dir() / "qmd-eval"
    docs_dir = fixture / "eval-docs"
    files = sorted(p.name for p in docs_dir.glob("*.md"))
    suites = {"example.json": load_example(fixture / "example.json"), "eval-deep-research.jsonl": load_jsonl(fixture / "eval-deep-research.jsonl")}
    for name, queries in suites.items():  # every expected document names exactly one file
        for q in queries:
            found = [f for f in files if q.matches(f)]
            if len(found) != 1:
                sys.exit(f"{name} {q.id}: expected {q.expected} matches {found} in {docs_dir}")

    report = Report("eval_bench")
    results: dict[str, list[dict]] = {}
    with isolated_home("eval") as tmp:
        gguf = import_minilm(tmp / "models")
        os.environ["QMD_EMBED_MODEL"] = str(gguf)  # restored by isolated_home
        with qmd.Store(tmp / "index" / "index.sqlite", tmp / "index" / "index.yml") as store:
            store.add_collection(docs_dir, name="eval-docs")
            sample, emb = measure(lambda: store.embed())
            print(f"temp dir {tmp}\nindexed {len(files)} documents of {docs_dir}; embedded {emb.chunks} chunks with {emb.model} in {sample.wall:.1f} s")
            for name, queries in suites.items():
                rows = []
                for q in queries:
                    bm25 = [h.path for h in store.search(q.text, limit=10)]
                    vec = [h.path for h in store.vsearch(q.text, limit=10).hits]
                    rows.append({"id": q.id, "query": q.text, "group": q.group, "expected": q.expected, "expected_in_top_k": q.top_k,
                                 "bm25_rank": rank_of(q, bm25), "vector_rank": rank_of(q, vec),
                                 "bm25_results": len(bm25), "bm25_top": bm25[:3], "vector_top": vec[:3]})
                results[name] = rows

    base = random_baseline(len(files))
    print(f"\n{'fixture':<26} {'method':<8} {'queries':>7} {'hit@1':>7} {'hit@3':>7} {'MRR@10':>7} {'no result':>9}")
    for name, rows in results.items():
        for method in METHODS:
            s = scores([r[f"{method}_rank"] for r in rows])
            empty = sum(r["bm25_results"] == 0 for r in rows) if method == "bm25" else 0
            print(f"{name:<26} {method:<8} {len(rows):>7} {s['hit@1']:>7.3f} {s['hit@3']:>7.3f} {s['mrr@10']:>7.3f} {empty:>9}")
            for key, value in s.items():
                report.rows.append((f"{name} {method} {key}", f"{value:.3f}"))
        print(f"{'':<26} {'random':<8} {'':>7} {base['hit@1']:>7.3f} {base['hit@3']:>7.3f} {base['mrr@10']:>7.3f}")

    print("\nBy query group (hit@1 / MRR@10)")
    for name, rows in results.items():
        groups = sorted({r["group"] for r in rows})
        for g in groups:
            sub = [r for r in rows if r["group"] == g]
            b, v = scores([r["bm25_rank"] for r in sub]), scores([r["vector_rank"] for r in sub])
            print(f"  {name:<26} {g:<13} n={len(sub):<3} bm25 {b['hit@1']:.2f} / {b['mrr@10']:.2f}   vector {v['hit@1']:.2f} / {v['mrr@10']:.2f}")

    for name, rows in results.items():
        graded = [r for r in rows if r["expected_in_top_k"]]
        if graded:
            within = {m: sum(r[f"{m}_rank"] is not None and r[f"{m}_rank"] <= r["expected_in_top_k"] for r in graded) for m in METHODS}
            print(f"  {name}: expected document within the fixture's expected_in_top_k: bm25 {within['bm25']}/{len(graded)}, vector {within['vector']}/{len(graded)}")

    if args.per_query:
        print("\nPer query: rank of the expected document (- = not in the top 10)")
        for name, rows in results.items():
            for r in rows:
                fmt = lambda x: "-" if x is None else str(x)  # noqa: E731
                print(f"  {name[:12]:<12} bm25 {fmt(r['bm25_rank']):>2} vec {fmt(r['vector_rank']):>2}  {r['query']}")

    report.data = {"documents": files, "random_baseline": base, "queries": results}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
