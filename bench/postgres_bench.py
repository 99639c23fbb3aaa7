"""The PostgreSQL backend against the SQLite backend, in the same run, as ratios.

(a) tldr-pages (38k documents, one collection): full index (add_collection on a fresh
    index), no-op update, keyword search p50/p99 in-process (bench/queries_keyword.txt,
    `store.search(q, limit=10)`), writing one synthetic 384-d unit vector per document
    (2,000 documents a batch inside `bulk_vectors`, as `qmd embed` writes), vector search
    p50/p99 in-process (the backend's `nearest_documents(limit=10)`; no model is run), on
    each backend.
(b) through the HTTP server (`qmd mcp --http`, loopback, no token) with 1, 8 and 32
    concurrent clients (`--clients`), each a keep-alive connection: POST /query
    `{searches: [{type: lex}], rerank: false}` over the keyword queries, and the same with
    `type: vec` (the query embedded by all-MiniLM-L6-v2, imported from PyPI; the documents'
    vectors are (a)'s synthetic ones, stored under MiniLM's fingerprint, so the search does
    the real work): p50/p99 per request and requests/s, on each backend.
(c) pgvector recall@10 against exact search on a synthetic set (`--vectors N`, a Gaussian
    mixture of 384-d unit vectors, 200 queries near the data, loaded by binary COPY), for
    each index structure of `--structure` (hnsw, ivfflat or both, built in turn on the same
    table): build time and index size, then
    HNSW: recall and p50/p99 of plain `LIMIT 10` at ef_search 100 and of qmd's own query
    shape (40 nearest chunks with the iterative scan at qmd's ef_search, the best 10 kept;
    `--ef` sweeps other ef_search values), and a collection-filtered search (10% of the
    rows) in qmd's shape (the filter inside the index-ordered query, the iterative scan
    walking on until 40 rows pass, the best 10 kept): how many pages came back short (must
    be 0) and the recall;
    ivfflat (`--lists`, default rows/1000): the same two queries at each `--probes` value
    (ivfflat.iterative_scan relaxed_order), and the fewest probes reaching 0.95 on both.

    python bench/postgres_bench.py [--vectors 100000] [--skip-tldr] [--skip-http] [--clients 1,8,32]
        [--structure hnsw|ivfflat|both] [--probes 10,20,40,80] [--lists N] [--noise 1.4] [--ef 200,400]
"""

from __future__ import annotations

import json
import os
import sys
import threading
import time
from pathlib import Path

import numpy as np

import qmd

from _common import Report, Target, arg_parser, data_dir, import_minilm, isolated_home, ms, percentile
from _postgres import backend_env, postgres_server

DIMS = 384


def load_queries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def unit(rows: np.ndarray) -> np.ndarray:
    out: np.ndarray = rows / np.linalg.norm(rows, axis=1, keepdims=True)
    return out


def tldr_run(backend: str, url: str | None, tldr: Path, queries: list[str], rounds: int, clients: list[int], minilm: Path | None) -> dict[str, object]:
    from qmd.backends.base import ChunkVector

    out: dict[str, object] = {}
    with isolated_home(f"pg-{backend}") as tmp, backend_env(backend, url, "bench_tldr"):
        if minilm is not None:
            os.environ["QMD_EMBED_MODEL"] = str(minilm)
        paths = qmd.resolve_index("tldr")  # the default paths, so that `qmd --index tldr mcp` serves it
        with qmd.Store(paths.index_path, paths.config_path) as store:
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
            if minilm is not None:  # MiniLM's fingerprint, so the server's vector search reads these
                from qmd.index.embedding import fingerprint

                embedder = store.embedder()
                model = backend_obj.ensure_vector_model(fingerprint(embedder), embedder.info.name, embedder.dims)
            else:
                model = backend_obj.ensure_vector_model("bench-synthetic", "synthetic", DIMS)
            t = time.perf_counter()
            with backend_obj.bulk_vectors(model, len(hashes)):
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
        if clients:
            out["http"] = http_run(tmp, queries, clients, vector=minilm is not None)
    return out


def _body(kind: str, q: str) -> bytes:
    return json.dumps({"searches": [{"type": kind, "query": q}], "limit": 10, "rerank": False}).encode()


def http_run(tmp: Path, queries: list[str], clients: list[int], *, vector: bool) -> dict[str, dict[str, float]]:
    """{"lex 8": {p50_s, p99_s, rps}, …}: POST /query through `qmd --index tldr mcp --http`."""
    from mcp_bench import RawClient, start_server, stop_server

    proc, port = start_server("tldr", tmp / "server.log", dict(os.environ))
    out: dict[str, dict[str, float]] = {}
    try:
        kinds = ["lex", "vec"] if vector else ["lex"]
        for kind in kinds:  # warm: every query once (the server's caches, the model's first call)
            warm = RawClient(port)
            for q in queries:
                warm.post("/query", _body(kind, q))
            warm.close()
        for kind in kinds:
            for n in clients:
                per = max(8, 128 // n)  # requests per client
                lat: list[float] = []
                lock = threading.Lock()

                def client(k: int) -> None:
                    c = RawClient(port)
                    mine = []
                    for j in range(per):
                        body = _body(kind, queries[(k * 7 + j) % len(queries)])
                        t = time.perf_counter()
                        c.post("/query", body)
                        mine.append(time.perf_counter() - t)
                    c.close()
                    with lock:
                        lat.extend(mine)

                threads = [threading.Thread(target=client, args=(k,)) for k in range(n)]
                t = time.perf_counter()
                for th in threads:
                    th.start()
                for th in threads:
                    th.join()
                wall = time.perf_counter() - t
                out[f"{kind} {n}"] = {"p50_s": percentile(lat, 50), "p99_s": percentile(lat, 99), "rps": len(lat) / wall}
    finally:
        stop_server(proc)
    return out


def recall_set(n: int, dims: int, queries: int, noise: float) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(data, queries, collection of each row) of the synthetic set: `noise` is the norm of
    each point's Gaussian offset from its cluster centre (a unit vector), queries get 1/0.7 of
    it. The offsets are drawn in blocks (the same stream as one draw, without its 3 GB of
    float64 at 1M x 384)."""
    rng = np.random.default_rng(11)
    centers = unit(rng.standard_normal((max(10, n // 100), dims)).astype(np.float32))
    which = rng.integers(0, len(centers), n)
    data = np.empty((n, dims), dtype=np.float32)
    for i in range(0, n, 100_000):
        m = min(n, i + 100_000) - i
        data[i:i + m] = unit(centers[which[i:i + m]] + noise * rng.standard_normal((m, dims)).astype(np.float32) / np.sqrt(dims))
    qv = unit(data[rng.integers(0, n, queries)] + noise / 0.7 * rng.standard_normal((queries, dims)).astype(np.float32) / np.sqrt(dims))
    coll = (rng.random(n) < 0.1).astype(np.int16)  # 10% of the rows in "collection" 1
    return data, qv, coll


def _copy_rows(data: np.ndarray, coll: np.ndarray, start: int) -> bytes:
    """Binary COPY rows (id int4, coll int2, embedding vector) of `data`, ids from `start`."""
    n, dims = data.shape
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i4"), ("l2", ">i4"), ("coll", ">i2"), ("l3", ">i4"), ("dim", ">i2"), ("unused", ">i2"),
                    ("v", ">f4", (dims,))])
    out = np.zeros(n, dtype=row)
    out["nf"], out["l1"], out["l2"], out["l3"], out["dim"] = 3, 4, 2, 4 + 4 * dims, dims
    out["id"], out["coll"], out["v"] = np.arange(start, start + n), coll, data
    return out.tobytes()


def recall_run(url: str, n: int, dims: int = DIMS, queries: int = 200, sweep: tuple[int, ...] = (), noise: float = 1.4,
               structures: tuple[str, ...] = ("hnsw",), probes: tuple[int, ...] = (), lists: int | None = None) -> dict[str, float]:
    """Recall@10 against exact search of each index structure in `structures` (hnsw, ivfflat),
    built in turn on the same table. At the default noise 1.4 the set is close to uniform on
    the sphere (the 10th neighbour's cosine 0.22 against the 100th's 0.18: a hard set); text
    embeddings have tighter neighbourhoods (try 0.5). ivfflat: `lists` (default rows/1000),
    each of `probes` measured in qmd's shape, unscoped and filtered."""
    import psycopg

    from qmd.backends.sql import count

    data, qv, coll = recall_set(n, dims, queries, noise)
    exact = np.empty((queries, 10), dtype=np.int64)
    exact_f = np.empty((queries, 10), dtype=np.int64)
    sub = np.flatnonzero(coll == 1)

    def top10(sims: np.ndarray) -> np.ndarray:
        part = np.argpartition(-sims, 10, axis=1)[:, :10]
        order = np.argsort(-np.take_along_axis(sims, part, axis=1), axis=1)
        out: np.ndarray = np.take_along_axis(part, order, axis=1)
        return out

    for i in range(0, queries, 20):  # in blocks: a 200 x 1M score matrix is 800 MB
        sims = qv[i:i + 20] @ data.T
        exact[i:i + 20] = top10(sims)
        exact_f[i:i + 20] = sub[top10(sims[:, sub])]
    out: dict[str, float] = {}
    lits = ["[" + ",".join(f"{x:.6f}" for x in q) + "]" for q in qv]
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector")
        conn.execute("DROP SCHEMA IF EXISTS bench_recall CASCADE")
        conn.execute("CREATE SCHEMA bench_recall")
        conn.execute(f"CREATE TABLE bench_recall.v (id INTEGER PRIMARY KEY, coll SMALLINT NOT NULL, embedding vector({dims}))")
        t = time.perf_counter()
        with conn.cursor() as cur, cur.copy("COPY bench_recall.v (id, coll, embedding) FROM STDIN (FORMAT BINARY)") as copy:
            copy.write(b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00")
            for i in range(0, n, 20_000):
                copy.write(_copy_rows(data[i:i + 20_000], coll[i:i + 20_000], i))
            copy.write(b"\xff\xff")
        del data
        out["load_s"] = time.perf_counter() - t
        conn.execute("ANALYZE bench_recall.v")
        conn.execute("SET maintenance_work_mem = '2GB'")
        conn.execute("SET max_parallel_maintenance_workers = 1")

        def run(sql: str, truth: np.ndarray) -> tuple[float, list[float], int]:
            hits, times, short = 0, [], 0
            for qi, lit in enumerate(lits):
                t = time.perf_counter()
                got = [r[0] for r in conn.execute(sql, {"q": lit})]
                times.append(time.perf_counter() - t)
                short += len(got) < 10
                hits += len(set(got) & set(truth[qi].tolist()))
            return hits / (10 * queries), times, short

        def measure(key: str, sql: str, truth: np.ndarray) -> None:
            out[f"{key}_recall_at_10"], times, short = run(sql, truth)
            out[f"{key}_short_pages"] = short
            out[f"{key}_p50_s"], out[f"{key}_p99_s"] = percentile(times, 50), percentile(times, 99)

        plain = "SELECT id FROM bench_recall.v ORDER BY embedding <=> %(q)s::vector LIMIT 10"
        shaped = (  # qmd's shape: the 40 nearest chunks (iterative scan), the best 10 kept
            "WITH near AS MATERIALIZED (SELECT id, embedding <=> %(q)s::vector AS d FROM bench_recall.v ORDER BY embedding <=> %(q)s::vector LIMIT 40)"
            " SELECT id FROM near ORDER BY d LIMIT 10"
        )
        filtered = (  # the collection filter inside the index-ordered query, the iterative scan walking on until 40 rows pass
            "WITH near AS MATERIALIZED (SELECT id, embedding <=> %(q)s::vector AS d FROM bench_recall.v WHERE coll = 1"
            " ORDER BY embedding <=> %(q)s::vector LIMIT 40) SELECT id FROM near ORDER BY d LIMIT 10"
        )
        from qmd.backends.postgres.vectors import HNSW_EF_CONSTRUCTION, HNSW_M, ef_search

        for structure in structures:
            t = time.perf_counter()
            if structure == "hnsw":
                conn.execute(f"CREATE INDEX v_idx ON bench_recall.v USING hnsw (embedding vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})")
            else:
                out["ivfflat_lists"] = nlists = lists or max(1, n // 1000)
                conn.execute(f"CREATE INDEX v_idx ON bench_recall.v USING ivfflat (embedding vector_cosine_ops) WITH (lists = {nlists})")
            out[f"{structure}_build_s"] = time.perf_counter() - t
            out[f"{structure}_size_bytes"] = count(conn, "SELECT pg_relation_size('bench_recall.v_idx')")
            if structure == "hnsw":
                conn.execute("SET hnsw.ef_search = 100")
                out["recall_at_10"], times, _ = run(plain, exact)
                out["hnsw_p50_s"], out["hnsw_p99_s"] = percentile(times, 50), percentile(times, 99)
                conn.execute("SET hnsw.iterative_scan = relaxed_order")
                out["qmd_ef_search"] = ef_search(40, n)
                conn.execute(f"SET hnsw.ef_search = {ef_search(40, n)}")  # what qmd sets for a page of 10 (k = 40) on n rows
                measure("qmd", shaped, exact)
                measure("filtered", filtered, exact_f)
                for ef in sweep:  # what another ef_search buys on this set
                    conn.execute(f"SET hnsw.ef_search = {int(ef)}")
                    measure(f"ef{ef}", shaped, exact)
            else:
                conn.execute("SET ivfflat.iterative_scan = relaxed_order")
                for p in probes:
                    conn.execute(f"SET ivfflat.probes = {int(p)}")
                    measure(f"probes{p}", shaped, exact)
                    measure(f"probes{p}_filtered", filtered, exact_f)
            conn.execute("DROP INDEX bench_recall.v_idx")
        times = []
        for lit in lits[:20]:
            t = time.perf_counter()
            conn.execute(plain, {"q": lit}).fetchall()
            times.append(time.perf_counter() - t)
        out["exact_p50_s"] = percentile(times, 50)
        conn.execute("DROP SCHEMA bench_recall CASCADE")
    return out


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--vectors", type=int, default=100_000, help="size of the synthetic recall set (0: skip)")
    parser.add_argument("--rounds", type=int, default=3, help="passes over the keyword queries")
    parser.add_argument("--skip-tldr", action="store_true")
    parser.add_argument("--skip-http", action="store_true", help="no HTTP server runs in (a)")
    parser.add_argument("--clients", default="1,8,32", help="concurrent HTTP clients, comma-separated")
    parser.add_argument("--noise", type=float, default=1.4, help="spread of the synthetic clusters in (c) (see recall_run)")
    parser.add_argument("--ef", default="200,400,800,1000", help="ef_search values to sweep for qmd's shape in (c), comma-separated")
    parser.add_argument("--structure", choices=("hnsw", "ivfflat", "both"), default="hnsw", help="the index structure(s) measured in (c)")
    parser.add_argument("--probes", default="10,20,40,80", help="ivfflat.probes values measured in (c), comma-separated")
    parser.add_argument("--lists", type=int, default=None, help="ivfflat lists in (c) (default: rows / 1000)")
    args = parser.parse_args()
    report = Report("postgres_bench")
    queries = load_queries(Path(__file__).parent / "queries_keyword.txt")
    clients = [] if args.skip_http else [int(c) for c in args.clients.split(",") if c]
    with postgres_server() as url:
        if not args.skip_tldr:
            tldr = data_dir() / "tldr-pages"
            minilm = None
            if clients:
                with isolated_home("pg-minilm") as tmp:
                    minilm = import_minilm(Path(os.environ.get("QMD_BENCH_MODELS", tmp)))
                    res = {b: tldr_run(b, url, tldr, queries, args.rounds, clients, minilm) for b in ("sqlite", "postgres")}
            else:
                res = {b: tldr_run(b, url, tldr, queries, args.rounds, clients, minilm) for b in ("sqlite", "postgres")}
            report.row("documents", f"{res['sqlite']['documents']} / {res['postgres']['documents']}")
            for key, label in (("full_index_s", "full index"), ("noop_update_s", "no-op update"), ("keyword_p50_s", "keyword p50"),
                               ("keyword_p99_s", "keyword p99"), ("vector_write_s", "write synthetic vectors"), ("vector_p50_s", "vector p50"),
                               ("vector_p99_s", "vector p99")):
                s, p = float(res["sqlite"][key]), float(res["postgres"][key])  # type: ignore[arg-type]
                report.row(f"{label}: sqlite / postgres (ratio)", f"{ms(s)} / {ms(p)} ({p / s:.2f}x)")
            if clients:
                hs, hp = res["sqlite"]["http"], res["postgres"]["http"]
                assert isinstance(hs, dict) and isinstance(hp, dict)
                for key in hs:
                    a, b = hs[key], hp[key]
                    report.row(
                        f"HTTP /query {key} clients: p50, p99, req/s sqlite / postgres",
                        f"{ms(a['p50_s'])}, {ms(a['p99_s'])}, {a['rps']:.0f} / {ms(b['p50_s'])}, {ms(b['p99_s'])}, {b['rps']:.0f}"
                        f" (p50 {b['p50_s'] / a['p50_s']:.2f}x, req/s {b['rps'] / a['rps']:.2f}x)",
                    )
            report.data = {"tldr": res}
        if args.vectors:
            sweep = tuple(int(e) for e in args.ef.split(",") if e)
            structures = ("hnsw", "ivfflat") if args.structure == "both" else (args.structure,)
            probes = tuple(int(p) for p in args.probes.split(",") if p)
            r = recall_run(url, args.vectors, sweep=sweep, noise=args.noise, structures=structures, probes=probes, lists=args.lists)
            report.row(f"recall set: {args.vectors} x {DIMS}-d (noise {args.noise}), load", f"{r['load_s']:.1f} s")
            report.row("exact scan p50", ms(r["exact_p50_s"]))
            if "hnsw" in structures:
                report.row("HNSW build; index size", f"{r['hnsw_build_s']:.1f} s; {r['hnsw_size_bytes'] / 2**20:.0f} MiB")
                report.row("HNSW recall@10, LIMIT 10 at ef_search 100; p50 / p99", f"{r['recall_at_10']:.4f}; {ms(r['hnsw_p50_s'])} / {ms(r['hnsw_p99_s'])}")
                report.row(f"HNSW recall@10, qmd's shape (40 nearest, iterative scan, qmd's ef_search {r['qmd_ef_search']:.0f}); p50 / p99",
                           f"{r['qmd_recall_at_10']:.4f}; {ms(r['qmd_p50_s'])} / {ms(r['qmd_p99_s'])}")
                report.row("  filtered to 10% (qmd's one pass): recall@10, short pages, p50 / p99",
                           f"{r['filtered_recall_at_10']:.4f}, {int(r['filtered_short_pages'])}, {ms(r['filtered_p50_s'])} / {ms(r['filtered_p99_s'])}")
                for ef in sweep:
                    report.row(f"  ef_search {ef}: recall@10; p50 / p99", f"{r[f'ef{ef}_recall_at_10']:.4f}; {ms(r[f'ef{ef}_p50_s'])} / {ms(r[f'ef{ef}_p99_s'])}")
                report.target(Target("HNSW recall@10 (qmd's shape)", r["qmd_recall_at_10"], 0.95, kind="min"))
                report.target(Target("HNSW filtered short pages", r["filtered_short_pages"], 0, kind="max"))
            if "ivfflat" in structures:
                report.row(f"ivfflat build ({r['ivfflat_lists']:.0f} lists); index size", f"{r['ivfflat_build_s']:.1f} s; {r['ivfflat_size_bytes'] / 2**20:.0f} MiB")
                for p in probes:
                    report.row(f"  probes {p}, qmd's shape (iterative scan): recall@10; p50 / p99 | 10% filtered: recall@10, short pages, p50 / p99",
                               f"{r[f'probes{p}_recall_at_10']:.4f}; {ms(r[f'probes{p}_p50_s'])} / {ms(r[f'probes{p}_p99_s'])}"
                               f" | {r[f'probes{p}_filtered_recall_at_10']:.4f}, {int(r[f'probes{p}_filtered_short_pages'])},"
                               f" {ms(r[f'probes{p}_filtered_p50_s'])} / {ms(r[f'probes{p}_filtered_p99_s'])}")
                met = [p for p in probes if r[f"probes{p}_recall_at_10"] >= 0.95 and r[f"probes{p}_filtered_recall_at_10"] >= 0.95]
                report.row("ivfflat: fewest probes with recall@10 >= 0.95 (unscoped and filtered)", str(min(met)) if met else "none measured")
                if probes:
                    best = max(probes)
                    report.target(Target(f"ivfflat recall@10 at probes {best}", r[f"probes{best}_recall_at_10"], 0.95, kind="min"))
                    report.target(Target(f"ivfflat filtered short pages at probes {best}", r[f"probes{best}_filtered_short_pages"], 0, kind="max"))
            report.data = {**(report.data or {}), "recall": r, "vectors": args.vectors}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
