"""Hybrid query (issue 5 targets): quality on the original's fixtures and Cranfield, latency.

1. qmd-eval/eval-deep-research.jsonl (25 hard paraphrases over 6 docs): hit@1 and MRR per
   backend (bm25, vector, hybrid = RRF without rerank); target hybrid hit@1 >= 23/25.
2. qmd-eval/example.json: MRR per backend; target hybrid MRR = 1.0.
3. Cranfield (225 questions): nDCG@10 of BM25, vector and RRF; target RRF >= BM25 + 0.03.
   `--gemma DIR_OR_GGUF` adds RRF + expansion with that generate model (e.g. the PyPI
   Gemma-3-270M) to the ablation; no added stage may lower nDCG@10 against RRF alone.
4. Latency in-process on the embedded tldr English pages: typed `lex:` + `vec:` queries
   with rerank off, p50 <= 60 ms, and --explain's stage times summed against it.

Embedding model: all-MiniLM-L6-v2 imported from PyPI by qmd's own importer (no rerank
model can be had here). Embedding Cranfield and tldr takes minutes on 2 cores; `--skip-tldr`
and `--skip-cranfield` shorten a run.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

from _common import Report, Target, data_dir, import_minilm, isolated_home, p50

LATENCY_QUERIES = [
    ("compress a directory", "how do I make an archive of a folder"),
    ("list processes", "show what programs are running"),
    ("git branch", "create a new branch in version control"),
    ("docker logs", "see the output of a container"),
    ("disk usage", "how much space is left on the drive"),
    ("kill process", "stop a program that hangs"),
    ("ssh key", "log in to a server without a password"),
    ("find files", "search for a file by name"),
    ("network interfaces", "show my ip address"),
    ("cron job", "run a command every night"),
    ("tar extract", "unpack a tarball"),
    ("grep recursive", "search text in many files"),
]


def rank_of(paths: list[str], expected: list[str]) -> int | None:
    return next((i for i, p in enumerate(paths, 1) if any(e in p for e in expected)), None)


def fixture_quality(store, report: Report, bench: Path) -> None:  # type: ignore[no-untyped-def]
    deep = [json.loads(line) for line in (bench / "qmd-eval" / "eval-deep-research.jsonl").read_text().splitlines() if line.strip()]
    example = json.loads((bench / "qmd-eval" / "example.json").read_text())["queries"]
    sets = {"deep-research": [(q["query"], [q["expected_doc"]]) for q in deep], "example": [(q["query"], q["expected_files"]) for q in example]}
    backends = {
        "bm25": lambda q: [h.path for h in store.search(q, limit=10)],
        "vector": lambda q: [h.path for h in store.vsearch(q, limit=10).hits],
        "hybrid": lambda q: [h.path for h in store.query(q, limit=10, rerank=False).hits],
    }
    for name, queries in sets.items():
        for backend, run in backends.items():
            ranks = [rank_of(run(q), exp) for q, exp in queries]
            hit1 = sum(1 for r in ranks if r == 1)
            mrr = statistics.fmean(1 / r if r else 0.0 for r in ranks)
            report.row(f"{name} {backend}: hit@1 / MRR", f"{hit1}/{len(queries)} / {mrr:.3f}")
            report.data[f"{name}/{backend}"] = {"hit@1": hit1, "mrr": mrr}
            if backend == "hybrid" and name == "deep-research":
                report.target(Target("deep-research hybrid hit@1", hit1, 23, kind="min"))
            if backend == "hybrid" and name == "example":
                report.target(Target("example.json hybrid MRR", mrr, 1.0, kind="min"))


def cranfield(store, report: Report, bench: Path, tmp: Path, gemma: Path | None) -> None:  # type: ignore[no-untyped-def]
    queries = [line.split("\t", 1) for line in (bench / "cranfield" / "queries.tsv").read_text().splitlines() if line.strip()]
    runs = {
        "BM25": lambda q: store.search(q, limit=10, collections=["cranfield"]),
        "vector": lambda q: store.vsearch(q, limit=10, collections=["cranfield"]).hits,
        "RRF": lambda q: store.query(q, limit=10, collections=["cranfield"], rerank=False, expand=False).hits,
    }
    if gemma is not None:
        runs["RRF + expansion"] = lambda q: store.query(q, limit=10, collections=["cranfield"], rerank=False, expand=True).hits
    scores = {}
    for name, run in runs.items():
        path = tmp / f"cran-{name.replace(' ', '')}.tsv"
        with path.open("w") as fh:
            for qid, text in queries:
                for rank, hit in enumerate(run(text), 1):
                    fh.write(f"{qid}\t{Path(hit.path).stem}\t{rank}\n")
        out = subprocess.run([sys.executable, str(bench / "score.py"), str(bench / "cranfield" / "qrels.tsv"), str(path)], capture_output=True, text=True, check=True).stdout
        fields = dict(p.split("=") for p in out.split() if "=" in p)
        scores[name] = float(fields["nDCG@10"])
        report.row(f"Cranfield {name}: nDCG@10 / Recall@10 / MRR@10", f"{fields['nDCG@10']} / {fields['Recall@10']} / {fields['MRR@10']}")
    report.data["cranfield"] = scores
    report.target(Target("Cranfield RRF nDCG@10 - (BM25 + 0.03)", scores["RRF"] - (scores["BM25"] + 0.03), 0.0, kind="min"))
    if "RRF + expansion" in scores:
        report.target(Target("Cranfield expansion nDCG@10 - RRF", scores["RRF + expansion"] - scores["RRF"], 0.0, kind="min"))


def latency(store, report: Report) -> None:  # type: ignore[no-untyped-def]
    totals, staged = [], []
    for _ in range(5):
        for lex, vec in LATENCY_QUERIES:
            t0 = time.perf_counter()
            result = store.query(f"lex: {lex}\nvec: {vec}", limit=10, rerank=False, explain=True, collections=["tldr"])
            totals.append((time.perf_counter() - t0) * 1000)
            staged.append(sum(v for k, v in result.timings_ms.items() if k != "total"))
    report.row("typed lex+vec query, no rerank: p50 / p95 ms", f"{p50(totals):.1f} / {sorted(totals)[int(len(totals) * 0.95) - 1]:.1f}")
    report.row("  --explain stage times summed, p50 ms", f"{p50(staged):.1f}")
    report.target(Target("typed query p50 (tldr, no rerank)", p50(totals), 60.0, "ms"))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", dest="json_path")
    parser.add_argument("--skip-tldr", action="store_true")
    parser.add_argument("--skip-cranfield", action="store_true")
    parser.add_argument("--gemma", type=Path, help="a generate-model GGUF for the expansion ablation")
    parser.add_argument("--tldr-stride", type=int, default=1, help="embed every Nth English tldr page (1 = all 7,425)")
    args = parser.parse_args()
    bench = data_dir()
    report = Report("hybrid_bench")
    with isolated_home("hybrid") as tmp:
        os.environ["QMD_EMBED_MODEL"] = str(import_minilm(tmp))
        os.environ["QMD_RERANK_MODEL"] = str(tmp / "no-reranker.gguf")
        os.environ["QMD_GENERATE_MODEL"] = str(args.gemma or tmp / "no-generator.gguf")
        import qmd

        store = qmd.Store(tmp / "index.sqlite", tmp / "index.yml")
        store.add_collection(bench / "qmd-eval" / "eval-docs", name="eval-docs")
        store.embed(collections=["eval-docs"])
        print("qmd-eval fixtures (eval-docs, MiniLM, no reranker)")
        fixture_quality(store, report, bench)
        if not args.skip_cranfield:
            store.add_collection(bench / "cranfield" / "docs", name="cranfield")
            t0 = time.perf_counter()
            done = store.embed(collections=["cranfield"])
            report.row("Cranfield embed: documents / chunks / seconds", f"{done.documents} / {done.chunks} / {time.perf_counter() - t0:.0f}")
            cranfield(store, report, bench, tmp, args.gemma)
        if not args.skip_tldr:
            pages = bench / "tldr-pages" / "pages"
            if args.tldr_stride > 1:  # a deterministic subset, copied into the temp dir
                import shutil

                subset = tmp / "tldr-subset"
                for i, page in enumerate(sorted(pages.rglob("*.md"))):
                    if i % args.tldr_stride == 0:
                        target = subset / page.relative_to(pages)
                        target.parent.mkdir(parents=True, exist_ok=True)
                        shutil.copy(page, target)
                pages = subset
                report.row("tldr subset", f"every {args.tldr_stride}th English page")
            store.add_collection(pages, name="tldr")
            t0 = time.perf_counter()
            done = store.embed(collections=["tldr"])
            report.row("tldr English embed: documents / chunks / seconds", f"{done.documents} / {done.chunks} / {time.perf_counter() - t0:.0f}")
            latency(store, report)
        store.close()
    return report.finish(args.json_path)


if __name__ == "__main__":
    sys.exit(main())
