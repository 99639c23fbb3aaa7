"""Code search (issue 20): regex vs `--chunk-strategy auto` on a real Python project.

The fixture is bench/data/code/: the source of `packaging` (26.4, Apache-2.0 OR BSD-2-Clause,
its license files beside it; the 800-line SPDX data table left out), 21 files kept as an
archive (packaging-26.4.tar.gz, unpacked into each run's temp home, so that no tool reads
them as this project's code), and 30
questions (questions.jsonl) each naming what one function does without its name; the
answer is the file. The same files are indexed twice, with chunk_strategy regex and auto,
embedded with all-MiniLM-L6-v2 (imported from PyPI by qmd's own importer, cached in
~/.cache/qmd-bench/models, outside the repo); each index lives in a temp home.

Printed per strategy: chunks, embed seconds, and hit@1 / MRR@10 (file level) of vsearch
and of query (BM25 + vectors fused, no reranker or expansion: none can be had here).
BM25 `search` does not depend on the chunking; it is printed once for reference.

    .venv/bin/python bench/code_search_bench.py [--json OUT]
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import tarfile
import time
from collections.abc import Callable
from pathlib import Path

from _common import BENCH, import_minilm, isolated_home

DATA = BENCH / "data" / "code"
MODELS = Path(os.environ.get("QMD_BENCH_MODELS") or Path.home() / ".cache" / "qmd-bench" / "models")


def minilm() -> Path:
    cached = MODELS / "all-MiniLM-L6-v2-f16.gguf"
    if cached.exists():
        return cached
    MODELS.mkdir(parents=True, exist_ok=True)
    return import_minilm(MODELS)


def score(questions: list[dict[str, str]], ranked: Callable[[str], list[str]]) -> tuple[int, float, list[str]]:
    """(hit@1 count, MRR@10, ids missed at rank 1)."""
    hits, rr, missed = 0, 0.0, []
    for q in questions:
        paths = ranked(q["query"])[:10]
        rank = paths.index(q["answer"]) + 1 if q["answer"] in paths else None
        hits += rank == 1
        rr += 1.0 / rank if rank else 0.0
        if rank != 1:
            missed.append(f"{q['id']}:{rank or '-'}")
    return hits, rr / len(questions), missed


def run(strategy: str, model: Path, questions: list[dict[str, str]]) -> dict[str, object]:
    import qmd

    with isolated_home(f"code-{strategy}") as tmp:
        os.environ["QMD_EMBED_MODEL"] = str(model)
        os.environ["QMD_RERANK_MODEL"] = str(tmp / "no-reranker.gguf")
        store = qmd.Store(tmp / "index.sqlite", tmp / "index.yml")
        source = tmp / "code"
        with tarfile.open(DATA / "packaging-26.4.tar.gz") as archive:
            archive.extractall(source, filter="data")
        store.add_collection(source, name="code", pattern="**/*.py")
        coll = store.config.collections()["code"]
        coll.chunk_strategy = strategy
        store.config.set_collection(coll)
        store.config.save()
        start = time.perf_counter()
        report = store.embed()
        seconds = time.perf_counter() - start
        out: dict[str, object] = {"strategy": strategy, "documents": report.documents, "chunks": report.chunks, "embed_s": round(seconds, 1), "not_parsed": report.not_parsed}
        runs = {
            "search": lambda q: [h.path for h in store.search(q, limit=10)],
            "vsearch": lambda q: [h.path for h in store.vsearch(q, limit=10).hits],
            "query": lambda q: [h.path for h in store.query(q, limit=10, rerank=False, expand=False).hits],
        }
        for name, fn in runs.items():
            h1, mrr, missed = score(questions, fn)
            out[name] = {"hit@1": h1, "mrr": round(mrr, 3), "missed": missed}
        store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", type=Path, help="write the figures here")
    args = parser.parse_args()
    questions = [json.loads(line) for line in (DATA / "questions.jsonl").read_text().splitlines() if line.strip()]
    model = minilm()
    results = [run(s, model, questions) for s in ("regex", "auto")]
    n = len(questions)
    print(f"code search: {n} questions over {results[0]['documents']} files of packaging (MiniLM, no reranker)\n")
    print(f"{'strategy':9} {'chunks':>6} {'embed s':>8}   {'vsearch hit@1':>13} {'MRR':>6}   {'query hit@1':>11} {'MRR':>6}")
    for r in results:
        v, q = r["vsearch"], r["query"]
        assert isinstance(v, dict) and isinstance(q, dict)
        print(f"{r['strategy']:9} {r['chunks']:>6} {r['embed_s']:>8}   {str(v['hit@1']) + '/' + str(n):>13} {v['mrr']:>6.3f}   {str(q['hit@1']) + '/' + str(n):>11} {q['mrr']:>6.3f}")
    s = results[0]["search"]
    assert isinstance(s, dict)
    print(f"\nBM25 search (chunking-independent): hit@1 {s['hit@1']}/{n}, MRR {s['mrr']:.3f}")
    for r in results:
        print(f"missed at rank 1 ({r['strategy']}): vsearch {r['vsearch']['missed']}, query {r['query']['missed']}")  # type: ignore[index]
        if r["not_parsed"]:
            print(f"  not parsed (cut by regex): {r['not_parsed']}")
    if args.json:
        args.json.write_text(json.dumps(results, indent=2) + "\n")


if __name__ == "__main__":
    sys.exit(main())
