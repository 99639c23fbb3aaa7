"""Filter latency: filtered vs unfiltered keyword and vector search on tldr-pages, same run.

The corpus: every tldr page (38,405, all languages) copied into a temp folder with front
matter that tldr's own layout gives each page: `platform` (common, linux, osx, …, from its
folder), `lang` (en, de, …, from `pages.xx`), plus `bucket: i % 100` (a number) so one
filter matches exactly 1% of the documents. Filters timed, each against the unfiltered
search interleaved query by query:
  1%      {"key": "bucket", "operator": "eq", "value": 7}
  lang    {"key": "lang", "operator": "eq", "value": "en"}                 (~19%)
  broad   {"key": "platform", "operator": "eq", "value": "common"}         (~half)
  combo   and(lang in [en, de], not(platform eq windows), bucket lt 50)
(a) keyword: `store.search(q, limit=10, filter=…)` over bench/queries_keyword.txt
(b) vector: `backend.nearest_documents(model, q, 10, None, where)` + `backend.documents(…)`
    (vsearch after the query embedding, which is the same on both sides and excluded so
    the ratio is the strict one) over one vector per document; the vectors are random unit
    vectors of MiniLM's 384 dims (sqlite-vec's KNN is a scan whose cost does not depend on
    the values, and embedding 38k pages takes an hour here), the queries too.
Targets: filtered p50 / unfiltered p50 <= 1.5 for each filter, keyword and vector.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import qmd
from qmd.core.filters import parse_filter
from qmd.backends.base import ChunkVector

from _common import BENCH, Report, Target, arg_parser, data_dir, isolated_home, ms, p50, percentile, timed

FILTERS: dict[str, object] = {
    "1%": {"key": "bucket", "operator": "eq", "value": 7},
    "lang": {"key": "lang", "operator": "eq", "value": "en"},
    "broad": {"key": "platform", "operator": "eq", "value": "common"},
    "combo": {"operator": "and", "operands": [
        {"key": "lang", "operator": "in", "value": ["en", "de"]},
        {"operator": "not", "operand": {"key": "platform", "operator": "eq", "value": "windows"}},
        {"key": "bucket", "operator": "lt", "value": 50},
    ]},
}
DIMS = 384


def build_corpus(src: Path, dst: Path) -> int:
    """Copy every page with front matter from its place in tldr's tree; returns the pages written."""
    n = 0
    for page in sorted(src.glob("pages*/*/*.md")):
        if page.name.startswith("."):
            continue  # qmd never indexes dot-files (tldr's `..md`)
        lang = page.parent.parent.name.partition(".")[2] or "en"
        out = dst / page.parent.parent.name / page.parent.name / page.name
        out.parent.mkdir(parents=True, exist_ok=True)
        out.write_text(f"---\nplatform: {page.parent.name}\nlang: {lang}\nbucket: {n % 100}\n---\n" + page.read_text(encoding="utf-8"), encoding="utf-8")
        n += 1
    return n


def write_random_vectors(store: qmd.Store) -> tuple[object, int]:
    """One random unit vector per document, through the backend's own write path."""
    backend = store.backend
    model = backend.ensure_vector_model("bench-random-384", "random", DIMS)
    rows = backend.find()
    rng = np.random.default_rng(0)
    seen: set[str] = set()
    batch: list[tuple[str, list[ChunkVector]]] = []
    for row in rows:
        if row.hash in seen:
            continue
        seen.add(row.hash)
        v = rng.standard_normal(DIMS).astype(np.float32)
        batch.append((row.hash, [ChunkVector(row.hash, 0, 0, 10, 10, (v / np.linalg.norm(v)).tolist())]))
        if len(batch) == 2000:
            backend.write_vectors(model, batch)
            batch = []
    if batch:
        backend.write_vectors(model, batch)
    return model, len(seen)


CPU: dict[str, list[float]] = {"unfiltered": [], "filtered": []}  # this thread's CPU seconds per call, beside the wall times


def _cpu(fn: Callable[[], object], side: str) -> float:
    c0, t0 = time.thread_time(), time.perf_counter()
    fn()
    wall = time.perf_counter() - t0
    CPU[side].append(time.thread_time() - c0)
    return wall


def interleaved(pairs: list[tuple[Callable[[], object], Callable[[], object]]], rounds: int) -> tuple[list[float], list[float]]:
    """Wall seconds of (unfiltered, filtered) per call, alternating which runs first (CPU
    seconds go to CPU, cleared first: other jobs on a shared machine move them far less)."""
    for a, b in pairs:  # warm-up
        a()
        b()
    CPU["unfiltered"].clear()
    CPU["filtered"].clear()
    base: list[float] = []
    filt: list[float] = []
    for r in range(rounds):
        for a, b in pairs:
            if r % 2 == 0:
                base.append(_cpu(a, "unfiltered"))
                filt.append(_cpu(b, "filtered"))
            else:
                filt.append(_cpu(b, "filtered"))
                base.append(_cpu(a, "unfiltered"))
    return base, filt


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the queries (default 5)")
    parser.add_argument("--vector-queries", type=int, default=30, help="random query vectors (default 30)")
    args = parser.parse_args()
    data = data_dir()
    queries = [q for q in (line.strip() for line in (BENCH / "queries_keyword.txt").read_text().splitlines()) if q and not q.startswith("#")]
    report = Report("filter_bench")
    with isolated_home("filter") as tmp:
        corpus = tmp / "tldr-meta"
        seconds = timed(lambda: print(f"  wrote {build_corpus(data / 'tldr-pages', corpus)} pages with front matter", flush=True))
        print(f"  corpus in {seconds:.1f} s")
        store = qmd.Store(tmp / "idx" / "index.sqlite", tmp / "idx" / "index.yml")
        seconds = timed(lambda: store.add_collection(corpus, name="tldr"))
        total = store.document_count()
        print(f"  indexed {total} documents in {seconds:.1f} s", flush=True)
        backend = store.backend
        trees = {name: parse_filter(spec) for name, spec in FILTERS.items()}
        for name, tree in trees.items():
            assert tree is not None
            matching = backend.count_matching(tree)
            report.row(f"filter {name}: documents matching", f"{matching} of {total} ({100 * matching / total:.1f}%)")

        print(f"\n(a) keyword: {len(queries)} queries x {args.rounds} rounds, limit 10, each filter against the unfiltered search")
        keyword: dict[str, dict[str, list[float]]] = {}
        for name, spec in FILTERS.items():
            pairs: list[tuple[Callable[[], object], Callable[[], object]]] = [
                (partial(store.search, q, limit=10), partial(store.search, q, limit=10, filter=spec)) for q in queries
            ]
            base, filt = interleaved(pairs, args.rounds)
            short = sum(1 for q in queries if len(store.search(q, limit=10, filter=spec)) < min(10, len(store.search(q, limit=None, filter=spec))))
            fill = [sum(1 for q in queries if any(h.match == "any" for h in store.search(q, limit=10, filter=f))) for f in (None, spec)]
            keyword[name] = {"unfiltered": base, "filtered": filt, "cpu_unfiltered": list(CPU["unfiltered"]), "cpu_filtered": list(CPU["filtered"])}
            ratio = p50(filt) / p50(base)
            report.row(f"keyword {name}: unfiltered / filtered p50 (p95)", f"{ms(p50(base))} / {ms(p50(filt))} ({ms(percentile(base, 95))} / {ms(percentile(filt, 95))})")
            report.row(f"keyword {name}: ratio (CPU-time p50 ratio); short pages", f"{ratio:.2f}x ({p50(CPU['filtered']) / p50(CPU['unfiltered']):.2f}x); {short}")
            report.row(f"keyword {name}: queries running the any-term fill", f"unfiltered {fill[0]}, filtered {fill[1]} of {len(queries)}")
            report.target(Target(f"(a) keyword {name} filtered/unfiltered p50", ratio, 1.5, "x"))

        print("\n  writing one random 384-dim vector per document…", flush=True)
        seconds = timed(lambda: report.data.update(vectors=write_random_vectors(store)[1]))
        model = backend.vector_model("bench-random-384")
        assert model is not None
        print(f"  {report.data['vectors']} vectors in {seconds:.1f} s")
        rng = np.random.default_rng(1)
        qvecs = [(v / np.linalg.norm(v)).tolist() for v in rng.standard_normal((args.vector_queries, DIMS)).astype(np.float32)]

        def vsearch(q: list[float], where: object) -> int:
            found = backend.nearest_documents(model, q, 10, None, where)  # type: ignore[arg-type]
            rows = backend.documents([d for d, _, _ in found])
            assert len(found) == 10 and len(rows) == 10, "a short page"
            return len(rows)

        print(f"\n(b) vector: {len(qvecs)} query vectors x {args.rounds} rounds, limit 10")
        vector: dict[str, dict[str, list[float]]] = {}
        for name, tree in trees.items():
            pairs = [(partial(vsearch, q, None), partial(vsearch, q, tree)) for q in qvecs]
            base, filt = interleaved(pairs, args.rounds)
            vector[name] = {"unfiltered": base, "filtered": filt, "cpu_unfiltered": list(CPU["unfiltered"]), "cpu_filtered": list(CPU["filtered"])}
            ratio = p50(filt) / p50(base)
            report.row(f"vector {name}: unfiltered / filtered p50 (p95)", f"{ms(p50(base))} / {ms(p50(filt))} ({ms(percentile(base, 95))} / {ms(percentile(filt, 95))})")
            report.row(f"vector {name}: ratio (CPU-time p50 ratio)", f"{ratio:.2f}x ({p50(CPU['filtered']) / p50(CPU['unfiltered']):.2f}x)")
            report.target(Target(f"(b) vector {name} filtered/unfiltered p50", ratio, 1.5, "x"))
        report.data.update(keyword=keyword, vector=vector, filters=FILTERS)
        store.close()
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
