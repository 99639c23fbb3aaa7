"""The PostgreSQL backend against the SQLite backend, in the same run, as ratios.

(a) tldr-pages (38k documents, one collection): full index (add_collection on a fresh
    index), no-op update, keyword search p50/p99 in-process (bench/queries_keyword.txt,
    `store.search(q, limit=10)`), vector search p50/p99 in-process (`store.vsearch`-path
    backend call `nearest_documents(limit=10)` over one synthetic 384-d unit vector per
    document, the same vectors in both backends; no model is run), on each backend.
(b) pgvector recall@10 of qmd's HNSW settings (m 16, ef_construction 64, ef_search 100)
    against exact search on a synthetic set (`--vectors N`, a Gaussian mixture of 384-d
    unit vectors, 200 queries near held-out points): build time, recall, p50/p99.

    python bench/postgres_bench.py [--docs N] [--vectors 100000] [--skip-tldr]
"""

from __future__ import annotations

import os
import sys
import time
from pathlib import Path

import numpy as np

import qmd

from _common import Report, Target, arg_parser, data_dir, isolated_home, ms, percentile
from _postgres import backend_env, postgres_server

DIMS = 384


def load_queries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def unit(rows: np.ndarray) -> np.ndarray:
    return rows / np.linalg.norm(rows, axis=1, keepdims=True)


def tldr_run(backend: str, url: str | None, tldr: Path, queries: list[str], rounds: int) -> dict[str, object]:
    from qmd.storage.backend import ChunkVector

    out: dict[str, object] = {}
    with isolated_home(f"pg-{backend}") as tmp, backend_env(backend, url, "bench_tldr"):
        with qmd.Store(tmp / "index.sqlite", tmp / "index.yml") as store:
            t = time.perf_counter()
            store.add_collection(tldr, name="tldr", pattern="**/*.md")
            out["full_index_s"] = time.perf_counter() - t
            t = time.perf_counter()
            store.update()
            out["noop_update_s"] = time.perf_counter() - t
            times = []
            for _ in range(rounds):
                for q in queries:
                    t = time.perf_counter()
                    store.search(q, limit=10)
                    times.append(time.perf_counter() - t)
            out["keyword_p50_s"], out["keyword_p99_s"] = percentile(times, 50), percentile(times, 99)
            backend_obj = store.backend
            hashes = sorted({row.hash for row in backend_obj.find()})
            rng = np.random.default_rng(7)
            vecs = unit(rng.standard_normal((len(hashes), DIMS)).astype(np.float32))
            model = backend_obj.ensure_vector_model("bench-synthetic", "synthetic", DIMS)
            t = time.perf_counter()
            for i in range(0, len(hashes), 2000):
                backend_obj.write_vectors(model, [(h, [ChunkVector(h, 0, 0, 10, 5, vecs[j].tolist())]) for j, h in enumerate(hashes[i:i + 2000], start=i)])
            out["vector_write_s"] = time.perf_counter() - t
            qs = unit(rng.standard_normal((100, DIMS)).astype(np.float32))
            times = []
            for q in qs:
                t = time.perf_counter()
                backend_obj.nearest_documents(model, q.tolist(), 10, None)
                times.append(time.perf_counter() - t)
            out["vector_p50_s"], out["vector_p99_s"] = percentile(times, 50), percentile(times, 99)
            out["documents"] = store.document_count()
    return out


def recall_run(url: str, n: int, dims: int = DIMS, queries: int = 200) -> dict[str, float]:
    import psycopg

    rng = np.random.default_rng(11)
    centers = unit(rng.standard_normal((max(10, n // 100), dims)).astype(np.float32))
    data = unit(centers[rng.integers(0, len(centers), n)] + 0.35 * rng.standard_normal((n, dims)).astype(np.float32) / np.sqrt(dims) * 4)
    qv = unit(data[rng.integers(0, n, queries)] + 0.5 * rng.standard_normal((queries, dims)).astype(np.float32) / np.sqrt(dims) * 4)
    exact = np.argsort(-(qv @ data.T), axis=1)[:, :10]
    out: dict[str, float] = {}
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("DROP SCHEMA IF EXISTS bench_recall CASCADE")
        conn.execute("CREATE SCHEMA bench_recall")
        conn.execute(f"CREATE TABLE bench_recall.v (id INTEGER PRIMARY KEY, embedding vector({dims}))")
        t = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY bench_recall.v (id, embedding) FROM STDIN") as copy:
            for i, row in enumerate(data):
                copy.write_row((i, "[" + ",".join(f"{x:.6f}" for x in row) + "]"))
        out["load_s"] = time.perf_counter() - t
        conn.execute("SET maintenance_work_mem = '1GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")
        t = time.perf_counter()
        conn.execute("CREATE INDEX ON bench_recall.v USING hnsw (embedding vector_cosine_ops) WITH (m = 16, ef_construction = 64)")
        out["hnsw_build_s"] = time.perf_counter() - t
        conn.execute("SET hnsw.ef_search = 100")
        hits, times = 0, []
        for qi, q in enumerate(qv):
            lit = "[" + ",".join(f"{x:.6f}" for x in q) + "]"
            t = time.perf_counter()
            got = [r[0] for r in conn.execute("SELECT id FROM bench_recall.v ORDER BY embedding <=> %s::vector LIMIT 10", (lit,))]
            times.append(time.perf_counter() - t)
            hits += len(set(got) & set(exact[qi].tolist()))
        out["recall_at_10"] = hits / (10 * queries)
        out["hnsw_p50_s"], out["hnsw_p99_s"] = percentile(times, 50), percentile(times, 99)
        conn.execute("SET enable_indexscan = off")
        times = []
        for q in qv[:20]:
            lit = "[" + ",".join(f"{x:.6f}" for x in q) + "]"
            t = time.perf_counter()
            conn.execute("SELECT id FROM bench_recall.v ORDER BY embedding <=> %s::vector LIMIT 10", (lit,)).fetchall()
            times.append(time.perf_counter() - t)
        out["exact_p50_s"] = percentile(times, 50)
        conn.execute("DROP SCHEMA bench_recall CASCADE")
    return out


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000, help="size of the synthetic recall set (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the keyword queries")
    parser.add_argument("--skip-tldr", action="store_true")
    args = parser.parse_args()
    report = Report("postgres_bench")
    queries = load_queries(Path(__file__).parent / "queries_keyword.txt")
    with postgres_server() as url:
        if not args.skip_tldr:
            tldr = data_dir() / "tldr-pages"
            res = {b: tldr_run(b, url, tldr, queries, args.rounds) for b in ("sqlite", "postgres")}
            report.row("documents", f"{res['sqlite']['documents']} / {res['postgres']['documents']}")
            for key, label in (("full_index_s", "full index"), ("noop_update_s", "no-op update"), ("keyword_p50_s", "keyword p50"),
                               ("keyword_p99_s", "keyword p99"), ("vector_write_s", "write synthetic vectors"), ("vector_p50_s", "vector p50"),
                               ("vector_p99_s", "vector p99")):
                s, p = float(res["sqlite"][key]), float(res["postgres"][key])  # type: ignore[arg-type]
                report.row(f"{label}: sqlite / postgres (ratio)", f"{ms(s)} / {ms(p)} ({p / s:.2f}x)")
            report.data = {"tldr": res}
        if args.vectors:
            r = recall_run(url, args.vectors)
            report.row(f"recall set: {args.vectors} x {DIMS}-d, load / HNSW build", f"{r['load_s']:.1f} s / {r['hnsw_build_s']:.1f} s")
            report.row("HNSW recall@10 (ef_search 100)", f"{r['recall_at_10']:.4f}")
            report.row("HNSW p50 / p99; exact scan p50", f"{ms(r['hnsw_p50_s'])} / {ms(r['hnsw_p99_s'])}; {ms(r['exact_p50_s'])}")
            report.target(Target("recall@10", r["recall_at_10"], 0.95, kind="min"))
            report.data = {**(report.data or {}), "recall": r, "vectors": args.vectors}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
