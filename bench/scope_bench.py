"""Collection-scoped vector search: scoped vs unscoped `nearest_documents`, same run, with recall.

A synthetic index of N documents (one chunk, one random unit vector each; sqlite-vec's KNN is
a scan whose cost does not depend on the values) in three collections: `big` (19%), `tiny`
(0.86%) and `rest`; each document also has the front-matter field `bucket: i % 10` (10%).
Rows are written straight into the index's tables (the bench times the search, not the
indexer). Scopes timed, each against the unscoped search interleaved query by query, limit 10:
  big (19%), tiny (0.86%), big+tiny (two collections), rest + bucket eq 3 (collection + filter).
Recall@10 of each scope against an exact scan (numpy) over the scope's vectors.
Targets: scoped p50 / unscoped p50 <= 1.2 and recall@10 = 1.0 for each scope.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from functools import partial

import numpy as np

import qmd
from qmd.core.filters import parse_filter
from qmd.backends.base import ChunkVector

from _common import Report, Target, arg_parser, isolated_home, ms, p50, percentile

SCOPES: dict[str, tuple[list[str], object]] = {
    "big 19%": (["big"], None),
    "tiny 0.86%": (["tiny"], None),
    "big+tiny": (["big", "tiny"], None),
    "rest+bucket": (["rest"], {"key": "bucket", "operator": "eq", "value": 3}),
}


def collection_of(i: int, n: int) -> str:
    share = i / n
    return "tiny" if share < 0.0086 else "big" if share < 0.0086 + 0.19 else "rest"


def build(store: qmd.Store, n: int, dims: int) -> tuple[object, np.ndarray, list[str], np.ndarray]:
    """n documents with one vector each; returns (model, vectors, collection per doc, bucket per doc)."""
    backend = store.backend
    backend.open(create=True)
    conn = backend.connection()
    rng = np.random.default_rng(0)
    vecs = rng.standard_normal((n, dims)).astype(np.float32)
    vecs /= np.linalg.norm(vecs, axis=1, keepdims=True)
    colls = [collection_of(i, n) for i in range(n)]
    buckets = np.arange(n) % 10
    with conn:
        for i in range(n):
            conn.execute(
                "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
                " VALUES (?, ?, ?, ?, ?, 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)",
                (i + 1, colls[i], f"d{i}.md", f"d{i}", f"h{i:08d}"),
            )
            conn.execute("INSERT INTO document_meta (doc_id, key, type, value) VALUES (?, 'bucket', 'number', ?)", (i + 1, int(buckets[i])))
    model = backend.ensure_vector_model(f"bench-random-{dims}", "random", dims)
    for lo in range(0, n, 2000):
        backend.write_vectors(model, [(f"h{i:08d}", [ChunkVector(f"h{i:08d}", 0, 0, 10, 10, vecs[i].tolist())]) for i in range(lo, min(n, lo + 2000))])
    return model, vecs, colls, buckets


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="documents (= vectors), default 10000")
    parser.add_argument("--dims", type=int, default=384, help="dimensions, default 384")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the queries (default 3)")
    parser.add_argument("--queries", type=int, default=30, help="random query vectors (default 30)")
    args = parser.parse_args()
    report = Report("scope_bench")
    with isolated_home("scope") as tmp:
        store = qmd.Store(tmp / "idx" / "index.sqlite", tmp / "idx" / "index.yml")
        t0 = time.perf_counter()
        model, vecs, colls, buckets = build(store, args.docs, args.dims)
        print(f"  {args.docs} documents x {args.dims} dims written in {time.perf_counter() - t0:.1f} s", flush=True)
        backend = store.backend
        rng = np.random.default_rng(1)
        qs = rng.standard_normal((args.queries, args.dims)).astype(np.float32)
        qs /= np.linalg.norm(qs, axis=1, keepdims=True)
        coll_arr = np.array(colls)

        def search(q: list[float], scope: list[str] | None, where: object) -> list[int]:
            return [d for d, _, _ in backend.nearest_documents(model, q, 10, scope, where)]  # type: ignore[arg-type]

        for name, (scope, spec) in SCOPES.items():
            where = parse_filter(spec) if spec is not None else None
            mask = np.isin(coll_arr, scope)
            if spec is not None:
                mask &= buckets == 3
            idx = np.nonzero(mask)[0]
            hits = 0
            for q in qs:  # recall against an exact scan over the scope
                exact = set((idx[np.argsort(-(vecs[idx] @ q), kind="stable")[:10]] + 1).tolist())
                got = search(q.tolist(), scope, where)
                hits += len(exact & set(got))
            recall = hits / (10 * len(qs))
            pairs: list[tuple[Callable[[], object], Callable[[], object]]] = [
                (partial(search, q.tolist(), None, None), partial(search, q.tolist(), scope, where)) for q in qs
            ]
            for a, b in pairs[:3]:
                a()
                b()
            base: list[float] = []
            scoped: list[float] = []
            cpu: tuple[list[float], list[float]] = ([], [])  # this thread's CPU seconds: less moved by other jobs
            for r in range(args.rounds):
                for a, b in pairs:
                    order = (a, b) if r % 2 == 0 else (b, a)
                    for fn in order:
                        c, s = time.thread_time(), time.perf_counter()
                        fn()
                        (base if fn is a else scoped).append(time.perf_counter() - s)
                        cpu[fn is not a].append(time.thread_time() - c)
            ratio = p50(scoped) / p50(base)
            report.row(f"{name} ({int(mask.sum())} docs): unscoped / scoped p50 (p95)", f"{ms(p50(base))} / {ms(p50(scoped))} ({ms(percentile(base, 95))} / {ms(percentile(scoped, 95))})")
            report.row(f"{name}: ratio (CPU-time p50 ratio); recall@10", f"{ratio:.2f}x ({p50(cpu[1]) / p50(cpu[0]):.2f}x); {recall:.3f}")
            report.data[name] = {"unscoped": base, "scoped": scoped, "cpu_unscoped": cpu[0], "cpu_scoped": cpu[1], "recall": recall}
            report.target(Target(f"{name} scoped/unscoped p50", ratio, 1.2, "x"))
            report.target(Target(f"{name} recall@10", recall, 1.0, "", "min"))
        store.close()
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
