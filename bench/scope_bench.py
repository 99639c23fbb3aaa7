"""Collection-scoped vector search: scoped vs unscoped `nearest_documents`, same run, with recall.

A synthetic index of N documents (one chunk, one random unit vector each; sqlite-vec's KNN is
a scan whose cost does not depend on the values) in three collections: `big` (19%), `tiny`
(0.86%) and `rest`; each document also has the front-matter field `bucket: i % 10` (10%).
Rows are written straight into the index's tables (the bench times the search, not the
indexer). Scopes timed, each against the unscoped search interleaved query by query, limit 10:
  big (19%), tiny (0.86%), big+tiny (two collections), rest + bucket eq 3 (collection + filter).
Recall@10 of each scope against an exact scan (numpy) over the scope's vectors.
Targets: scoped p50 / unscoped p50 <= 1.2 and recall@10 = 1.0 for each scope (SQLite: exact).

`--backend postgres` runs the same on a throwaway embedded PostgreSQL + pgvector (HNSW built
once after the vectors are written; `--noise X` draws clustered vectors as postgres_bench's
recall set, 1.4 its hard near-uniform one, instead of uniform ones), adds the unscoped search's
recall, and targets recall@10 >= 0.95. `--before REV` also times that git revision's
`nearest_documents` of the same backend on the same index, interleaved: before and after
ratios from one run. On a local PostgreSQL it also totals the server process's CPU time per
scope (from /proc: where a search's work is, and less moved by other jobs than wall time).
`--scopes rest+bucket,big` times only those. `--exact` also times QMD_VECTOR_INDEX=exact
(every distance computed) on the same index, interleaved. `--measure` runs what `qmd embed`
runs after writing (build_vector_index: SQLite builds its approximate index from 50k chunks;
both measure its recall@10 against exact on 60 queries drawn from its own chunks, which
decides whether auto searches take it), reports that measurement, and also times QMD_VECTOR_INDEX=approx (the
index whatever it measured): the measured recall beside the held-out queries' true one.
"""

from __future__ import annotations

import os
import sys
import time
import argparse
import contextlib
import subprocess
import types
from collections.abc import Callable
from functools import partial
from pathlib import Path

import numpy as np

import qmd
from qmd.core.filters import parse_filter
from qmd.backends.base import ChunkVector, forced_vector_index

from _common import REPO, Report, Target, arg_parser, isolated_home, ms, p50, percentile

SCOPES: dict[str, tuple[list[str] | None, object]] = {
    "all": (None, None),
    "big": (["big"], None),  # 19%
    "tiny": (["tiny"], None),  # 0.86%
    "big+tiny": (["big", "tiny"], None),
    "rest+bucket": (["rest"], {"key": "bucket", "operator": "eq", "value": 3}),  # 8%
}


def collection_of(i: int, n: int) -> str:
    share = i / n
    return "tiny" if share < 0.0086 else "big" if share < 0.0086 + 0.19 else "rest"


def draw(n: int, dims: int, noise: float | None) -> np.ndarray:
    """n unit vectors: uniform on the sphere, or postgres_bench's clustered set at `noise`."""
    rng = np.random.default_rng(0)
    if noise is None:
        vecs = rng.standard_normal((n, dims)).astype(np.float32)
    else:
        centers = rng.standard_normal((max(10, n // 100), dims)).astype(np.float32)
        centers /= np.linalg.norm(centers, axis=1, keepdims=True)
        vecs = centers[rng.integers(0, len(centers), n)] + noise * rng.standard_normal((n, dims)).astype(np.float32) / np.sqrt(dims)
    out: np.ndarray = vecs / np.linalg.norm(vecs, axis=1, keepdims=True)
    return out


def build(store: qmd.Store, n: int, dims: int, noise: float | None = None, reuse: bool = False) -> tuple[object, np.ndarray, list[str], np.ndarray]:
    """n documents with one vector each; returns (model, vectors, collection per doc, bucket per doc).
    `reuse`: the index holds them already (the same draw: seeded)."""
    backend = store.backend
    backend.open(create=True)
    conn = backend.connection()
    vecs = draw(n, dims, noise)
    colls = [collection_of(i, n) for i in range(n)]
    buckets = np.arange(n) % 10
    if reuse and store.document_count() == n:
        return backend.ensure_vector_model(f"bench-random-{dims}", "random", dims), vecs, colls, buckets
    if getattr(backend, "url", None) is not None:
        _rows_postgres(conn, colls, buckets)
    else:
        with conn:
            for i in range(n):
                conn.execute(
                    "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
                    " VALUES (?, ?, ?, ?, ?, 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)",
                    (i + 1, colls[i], f"d{i}.md", f"d{i}", f"h{i:08d}"),
                )
                conn.execute("INSERT INTO document_meta (doc_id, key, type, value) VALUES (?, 'bucket', 'number', ?)", (i + 1, int(buckets[i])))
    model = backend.ensure_vector_model(f"bench-random-{dims}", "random", dims)
    with backend.bulk_vectors(model, n):  # PostgreSQL: HNSW built once at the end
        for lo in range(0, n, 2000):
            backend.write_vectors(model, [(f"h{i:08d}", [ChunkVector(f"h{i:08d}", 0, 0, 10, 10, vecs[i].tolist())]) for i in range(lo, min(n, lo + 2000))])
    if getattr(backend, "url", None) is not None:
        conn.execute("VACUUM ANALYZE")  # as autovacuum would after such a load: the planner's statistics
    return model, vecs, colls, buckets


def _rows_postgres(conn: object, colls: list[str], buckets: np.ndarray) -> None:
    import psycopg

    assert isinstance(conn, psycopg.Connection)
    with conn.transaction(), conn.cursor() as cur:
        with cur.copy("COPY documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns) FROM STDIN") as copy:
            for i, c in enumerate(colls):
                copy.write_row((i + 1, c, f"d{i}.md", f"d{i}", f"h{i:08d}", 1, 0, "2026-01-01", "2026-01-01", True, 1, 0))
        with cur.copy("COPY document_meta (doc_id, key, type, n) FROM STDIN") as copy:
            for i, b in enumerate(buckets):
                copy.write_row((i + 1, "bucket", "number", float(b)))
        cur.execute("SELECT setval(pg_get_serial_sequence('documents', 'id'), %s)", (len(colls),))


def backend_pid(backend: object) -> int | None:
    """The server process of a PostgreSQL backend's connection when it runs on this machine."""
    if getattr(backend, "url", None) is None:
        return None
    row = backend.connection().execute("SELECT pg_backend_pid()").fetchone()  # type: ignore[attr-defined]
    return int(row[0]) if row and Path(f"/proc/{int(row[0])}/stat").exists() else None


def before_module(rev: str, backend: str) -> types.ModuleType:
    """`qmd/backends/<backend>/vectors.py` as of git revision `rev`, loaded as a module of its own."""
    name = f"qmd.backends.{backend}.vectors"
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:{name.replace('.', '/')}.py"], check=True, capture_output=True, text=True).stdout
    mod = types.ModuleType(f"{name}_before")
    mod.__dict__["__file__"] = str(Path(REPO, f"{rev}:{name}"))
    exec(compile(source, f"{rev}:{name}", "exec"), mod.__dict__)
    return mod


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--docs", type=int, default=10_000, help="documents (= vectors), default 10000")
    parser.add_argument("--dims", type=int, default=384, help="dimensions, default 384")
    parser.add_argument("--rounds", type=int, default=3, help="timed passes over the queries (default 3)")
    parser.add_argument("--queries", type=int, default=30, help="random query vectors (default 30)")
    parser.add_argument("--backend", choices=("sqlite", "postgres"), default="sqlite")
    parser.add_argument("--noise", type=float, default=None, help="clustered vectors at this spread (postgres_bench's set) instead of uniform")
    parser.add_argument("--reuse", action="store_true", help="postgres: keep the index a previous run with the same --docs/--dims/--noise left (QMD_BENCH_DATABASE_URL)")
    parser.add_argument("--before", default=None, metavar="REV", help="also time this git revision's nearest_documents, same run")
    parser.add_argument("--exact", action="store_true", help="also time QMD_VECTOR_INDEX=exact (every distance computed), interleaved, on the same index")
    parser.add_argument("--measure", action="store_true", help="run build_vector_index (as qmd embed does: the recall measurement) and also time QMD_VECTOR_INDEX=approx")
    parser.add_argument("--scopes", default=",".join(SCOPES), help=f"comma-separated scopes to time (default all: {','.join(SCOPES)})")
    args = parser.parse_args()
    report = Report("scope_bench")
    with contextlib.ExitStack() as stack:
        tmp = stack.enter_context(isolated_home("scope"))
        if args.backend == "postgres":
            from _postgres import backend_env, postgres_server

            url = stack.enter_context(postgres_server())
            stack.enter_context(backend_env("postgres", url, "bench_scope", fresh=not args.reuse))
        store = stack.enter_context(qmd.Store(tmp / "idx" / "index.sqlite", tmp / "idx" / "index.yml"))
        run(store, args, report)
    return report.finish(args.json)


def run(store: qmd.Store, args: argparse.Namespace, report: Report) -> None:
    t0 = time.perf_counter()
    model, vecs, colls, buckets = build(store, args.docs, args.dims, args.noise, reuse=args.reuse)
    print(f"  {args.backend}: {args.docs} documents x {args.dims} dims written in {time.perf_counter() - t0:.1f} s", flush=True)
    backend = store.backend
    rng = np.random.default_rng(1)
    if args.noise is None:
        qs = rng.standard_normal((args.queries, args.dims)).astype(np.float32)
    else:  # near the data, as postgres_bench's queries
        qs = vecs[rng.integers(0, len(vecs), args.queries)] + args.noise / 0.7 * rng.standard_normal((args.queries, args.dims)).astype(np.float32) / np.sqrt(args.dims)
    qs /= np.linalg.norm(qs, axis=1, keepdims=True)
    coll_arr = np.array(colls)
    impls: dict[str, Callable[..., list[tuple[int, float, tuple[int, int]]]]] = {"after": partial(backend.nearest_documents, model)}
    if args.before:
        old = before_module(args.before, args.backend)
        impls["before"] = lambda *a: old.nearest_documents(backend.connection(), model, *a)  # type: ignore[attr-defined,union-attr]
    def in_mode(mode: str) -> Callable[..., list[tuple[int, float, tuple[int, int]]]]:
        def impl(*a: object) -> list[tuple[int, float, tuple[int, int]]]:
            with forced_vector_index(mode):
                return backend.nearest_documents(model, *a)  # type: ignore[arg-type]
        return impl

    if args.exact:
        impls["exact"] = in_mode("exact")
    if args.measure:
        t0 = time.perf_counter()
        coded = backend.build_vector_index(model)
        check = backend.vector_recall(model)
        report.data["measured"] = {"seconds": time.perf_counter() - t0, "coded": coded, "recall": check.recall if check else None, "queries": check.queries if check else 0}
        print(f"  build_vector_index: {coded} chunks coded, {check.words() if check else 'no approximate index: searches exact'}"
              f" ({time.perf_counter() - t0:.1f} s); auto searches take the index: {backend.recall_status(model)['recall_trusted']}", flush=True)
        impls["approx"] = in_mode("approx")
    goal = 1.0 if args.backend == "sqlite" else 0.95
    server_pid = backend_pid(backend)

    def server_cpu() -> float:
        """CPU seconds of the PostgreSQL backend serving this connection (a local server: its
        /proc entry; 0 otherwise). In clock ticks: read as totals over many calls, not per call."""
        if server_pid is None:
            return 0.0
        fields = Path(f"/proc/{server_pid}/stat").read_text().rsplit(")", 1)[1].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")

    def search(impl: str, q: list[float], scope: list[str] | None, where: object) -> list[int]:
        return [d for d, _, _ in impls[impl](q, 10, scope, where)]

    chosen = args.scopes.split(",")
    if unknown := [c for c in chosen if c not in SCOPES]:
        raise SystemExit(f"scope_bench: unknown scope {unknown[0]!r}; pick from {','.join(SCOPES)}")
    for name, (scope, spec) in ((n, SCOPES[n]) for n in chosen):
        where = parse_filter(spec) if spec is not None else None
        mask = np.isin(coll_arr, scope) if scope is not None else np.ones(len(colls), dtype=bool)
        if spec is not None:
            mask &= buckets == 3
        idx = np.nonzero(mask)[0]
        exact = [set((idx[np.argsort(-(vecs[idx] @ q), kind="stable")[:10]] + 1).tolist()) for q in qs]
        for impl in impls:
            got = [search(impl, q.tolist(), scope, where) for q in qs]
            recall = sum(len(e & set(g)) for e, g in zip(exact, got)) / (10 * len(qs))
            short = sum(len(g) < min(10, len(idx)) for g in got)
            report.data.setdefault(name, {})[impl] = {"recall": recall, "short": short}
        # Timed: per query, each implementation's unscoped and scoped search, the order rotating.
        calls = [(impl, sc, partial(search, impl, q.tolist(), *( (scope, where) if sc else (None, None)))) for q in qs for impl in impls for sc in (False, True)]
        group = 2 * len(impls)
        for c in calls[: 3 * group]:
            c[2]()
        times: dict[tuple[str, bool], list[float]] = {}
        cpu: dict[tuple[str, bool], list[float]] = {}  # this thread's CPU seconds: less moved by other jobs
        server: dict[tuple[str, bool], list[float]] = {}  # the PostgreSQL backend's CPU seconds (where the work is)
        for r in range(args.rounds):
            for g in range(0, len(calls), group):
                block = calls[g:g + group]
                shift = r % len(block)
                for impl, sc, fn in block[shift:] + block[:shift]:
                    b, c, s = server_cpu(), time.thread_time(), time.perf_counter()
                    fn()
                    times.setdefault((impl, sc), []).append(time.perf_counter() - s)
                    cpu.setdefault((impl, sc), []).append(time.thread_time() - c)
                    server.setdefault((impl, sc), []).append(server_cpu() - b)
        for impl in impls:
            base, scoped = times[(impl, False)], times[(impl, True)]
            ratio = p50(scoped) / p50(base)
            cpu_ratio = p50(cpu[(impl, True)]) / p50(cpu[(impl, False)])
            server_ratio = sum(server[(impl, True)]) / max(sum(server[(impl, False)]), 1e-9)
            res = report.data[name][impl]
            res.update({"unscoped": base, "scoped": scoped, "cpu_unscoped": cpu[(impl, False)], "cpu_scoped": cpu[(impl, True)], "ratio": ratio})
            if server_pid is not None:
                res["server_ratio"] = server_ratio
            label = f"{name} ({int(mask.sum())} docs) {impl}" if len(impls) > 1 else f"{name} ({int(mask.sum())} docs)"
            report.row(f"{label}: unscoped / scoped p50 (p95)", f"{ms(p50(base))} / {ms(p50(scoped))} ({ms(percentile(base, 95))} / {ms(percentile(scoped, 95))})")
            report.row(f"{label}: ratio (CPU-time p50 ratio); recall@10; short pages", f"{ratio:.2f}x ({cpu_ratio:.2f}x); {res['recall']:.3f}; {res['short']}")
            if server_pid is not None:
                report.row(f"{label}: server CPU scoped / unscoped (mean ms)", f"{server_ratio:.2f}x ({ms(sum(server[(impl, True)]) / len(server[(impl, True)]))} / {ms(sum(server[(impl, False)]) / len(server[(impl, False)]))})")
        after = report.data[name]["after"]
        if scope is not None:
            report.target(Target(f"{name} scoped/unscoped p50", after["ratio"], 1.2, "x"))
        report.target(Target(f"{name} recall@10", after["recall"], goal, "", "min"))
        report.target(Target(f"{name} short pages", after["short"], 0, "", "max"))


if __name__ == "__main__":
    sys.exit(main())
