"""Fusion ablation: BM25, vectors, RRF as before, and qmd's fusion, on every set and model.

Sets (rerank off, expansion off: no reranker or expansion weights can be had here):
- paraphrase: bench/data/paraphrase (questions.jsonl) over examples/notes plus the 20
  benchmark notes in bench/data/paraphrase/notes: paraphrase questions sharing no stemmed
  keyword with their answer, and keyword questions;
- deep-research (25) and example (10): the original qmd's fixtures over qmd-eval/eval-docs;
- cranfield: 225 questions, graded qrels (nDCG@10, and hit@1 / MRR@10 with rel > 0).

Each question runs once through `Store.query` with the fused lists captured (the BM25 and
vector lists of the question, with their scores); every fusion rule is then applied to the
same captured lists, so the columns differ only by the rule. `search` and `vsearch` are the
Store's own commands. "RRF (before)" is the rule qmd shipped before (fusion.rrf with the
any-term-only BM25 list at weight 1); "no feedback" is evidence-weighted fusion of the
question's lists without the pseudo-relevance feedback list (what `query` did before it);
"qmd" is what `query` returns now, checked to equal the rule applied offline. "stale: miss"
and "stale: qmd" take each question's relevant notes out of the vector lists, as if edited
since the last embed (the feedback list as captured): fused as a vector miss (the rule
before issue 28) and as `query` fuses a document without vectors now (fusion.stand_ins).

Embedded indexes are cached (one per model file) under $QMD_BENCH_CACHE (default
~/.cache/qmd-bench, outside the repo and the temp HOME): Cranfield with MiniLM takes a
few minutes to embed once, EmbeddingGemma much longer.

    .venv/bin/python bench/fusion_bench.py [--model minilm] [--model embeddinggemma | /path/model.gguf]
        [--sets paraphrase,deep-research,example,cranfield] [--per-query] [--json out.json]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from _common import REPO, Report, Target, cache_root, data_dir, isolated_home, model_key, resolve_model, variant_suffix

PARAPHRASE = REPO / "bench" / "data" / "paraphrase"
SETS = ("paraphrase", "deep-research", "example", "cranfield")


@dataclass
class Question:
    id: str
    text: str
    group: str  # paraphrase/keyword; example.json type; deep-research difficulty; "cranfield"
    relevant: dict[str, int]  # document key (collection/path, or Cranfield docid) -> gain


@dataclass
class BenchSet:
    name: str
    collections: list[str]
    questions: list[Question]
    key: Callable[[str, str], str]  # (collection, path) of a hit -> the document key questions name
    graded: bool = False  # nDCG@10 too (Cranfield)


def load_sets(bench: Path, names: Sequence[str]) -> list[BenchSet]:
    out: list[BenchSet] = []
    for name in names:
        if name == "paraphrase":
            rows = [json.loads(line) for line in (PARAPHRASE / "questions.jsonl").read_text().splitlines() if line.strip()]
            qs = [Question(r["id"], r["query"], r["kind"], {r["answer"]: 1}) for r in rows]
            out.append(BenchSet(name, ["notes", "paraphrase"], qs, lambda c, p: f"{c}/{p}"))
        elif name == "deep-research":
            rows = [json.loads(line) for line in (bench / "qmd-eval" / "eval-deep-research.jsonl").read_text().splitlines() if line.strip()]
            docs = sorted(p.name for p in (bench / "qmd-eval" / "eval-docs").glob("*.md"))
            qs = []
            for i, r in enumerate(rows, 1):
                match = [d for d in docs if r["expected_doc"].lower() in d.lower()]
                assert len(match) == 1, (r, match)
                qs.append(Question(f"dr-{i}", r["query"], r.get("difficulty", ""), {match[0]: 1}))
            out.append(BenchSet(name, ["eval-docs"], qs, lambda c, p: Path(p).name))
        elif name == "example":
            rows = json.loads((bench / "qmd-eval" / "example.json").read_text())["queries"]
            qs = [Question(r["id"], r["query"], r.get("type", ""), {f: 1 for f in r["expected_files"]}) for r in rows]
            out.append(BenchSet(name, ["eval-docs"], qs, lambda c, p: Path(p).name))
        elif name == "cranfield":
            cran = bench / "cranfield"
            qrels: dict[str, dict[str, int]] = {}
            for line in (cran / "qrels.tsv").read_text().splitlines():
                p = line.split()
                if len(p) >= 3 and int(p[2]) > 0:
                    qrels.setdefault(p[0], {})[p[1]] = int(p[2])
            qs = []
            for line in (cran / "queries.tsv").read_text().splitlines():
                if "\t" in line:
                    qid, text = line.split("\t", 1)
                    if qid.strip() in qrels:
                        qs.append(Question(qid.strip(), text.strip(), "cranfield", qrels[qid.strip()]))
            out.append(BenchSet(name, ["cranfield"], qs, lambda c, p: Path(p).stem, graded=True))
        else:
            sys.exit(f"unknown set {name!r}; known: {', '.join(SETS)}")
    return out


COLLECTIONS = {
    "notes": lambda bench: REPO / "examples" / "notes",
    "paraphrase": lambda bench: PARAPHRASE / "notes",
    "eval-docs": lambda bench: bench / "qmd-eval" / "eval-docs",
    "cranfield": lambda bench: bench / "cranfield" / "docs",
}


EMBED_SECONDS: dict[str, float] = {}  # index folder -> seconds its embed took in this run
EMBED_CPU: dict[str, float] = {}  # index folder -> CPU seconds (user+sys) of that embed: steadier than wall time on a shared machine


def open_store(model: Path, cache: Path, bench: Path, needed: set[str]):  # type: ignore[no-untyped-def]
    """The cached index for this model file, with `needed` collections indexed and embedded
    (one folder per heading-path setting: QMD_CHUNK_HEADINGS=1 embeds each chunk with its
    headings, qmd.index.embedding.heading_paths)."""
    import qmd

    folder = cache / "index" / (model_key(model) + variant_suffix())
    folder.mkdir(parents=True, exist_ok=True)
    store = qmd.Store(folder / "index.sqlite", folder / "index.yml")
    have = {c.name for c in store.collections()}
    for name in sorted(needed - have):
        store.add_collection(COLLECTIONS[name](bench), name=name, index=False)
    store.update(sorted(needed), run_commands=False)
    t0, c0 = time.perf_counter(), time.process_time()
    done = store.embed(collections=sorted(needed))
    if done.documents:
        EMBED_SECONDS[str(folder)] = time.perf_counter() - t0
        EMBED_CPU[str(folder)] = time.process_time() - c0
        print(f"  embedded {done.documents} documents / {done.chunks} chunks in {time.perf_counter() - t0:.0f} s, "
              f"{EMBED_CPU[str(folder)]:.0f} CPU s ({folder})", flush=True)
    return store


def token_cost(store, collections: Sequence[str]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """Tokens the model reads to embed `collections`' documents: their chunk inputs one by one,
    and late chunking's passes over each document (qmd.index.late_chunks; chunk settings as set)."""
    from qmd.index.embedding import is_markdown, prepare
    from qmd.index.late_chunks import late_tokens

    embedder = store.embedder()
    ordinary = late = 0
    seen: set[str] = set()
    for row in (r for name in collections for r in store.backend.find(collection=name)):
        text = store.backend.content(row.hash)
        if row.hash in seen or text is None:
            continue
        seen.add(row.hash)
        doc = prepare(embedder, text, row.title, row.hash, markdown=is_markdown(row.path))
        ordinary += sum(doc.costs)
        late += late_tokens(embedder, embedder.family.document(doc.title, ""), text, [(s, e) for _, s, e, _ in doc.starts])
    return ordinary, late


def embed_work(store, collections: Sequence[str]) -> tuple[int, int]:  # type: ignore[no-untyped-def]
    """(units, tokens) the model embeds for `collections`' distinct contents, as `qmd embed`
    cuts them now (qmd.index.embedding.prepare; no model call): the cost side of quality."""
    from qmd.index.embedding import is_markdown, prepare

    embedder = store.embedder()
    embedder.load()
    seen: set[str] = set()
    units = tokens = 0
    for name in collections:
        for row in store.backend.find(collection=name):
            text = store.backend.content(row.hash)
            if row.hash in seen or text is None:
                continue
            seen.add(row.hash)
            doc = prepare(embedder, text, row.title, row.hash, markdown=is_markdown(row.path))
            units, tokens = units + len(doc.starts), tokens + sum(doc.costs)
    return units, tokens


# --- capture and scoring --------------------------------------------------------------


@dataclass
class Run:
    """One question's captured lists and each method's ranking (document keys)."""

    question: Question
    lists: list = field(default_factory=list)  # the RankedList objects fusion received
    ranked: dict[str, list[str]] = field(default_factory=dict)


def capture(store, bset: BenchSet) -> list[Run]:  # type: ignore[no-untyped-def]
    import qmd.search.hybrid as hybrid

    real_fuse = hybrid.fuse
    seen: list[list] = []

    def spy(named, *rest):  # type: ignore[no-untyped-def]
        seen.append(list(named))
        return real_fuse(named, *rest)

    hybrid.fuse = spy
    runs: list[Run] = []
    paths: dict[int, str] = {}
    try:
        for q in bset.questions:
            seen.clear()
            result = store.query(q.text, limit=10, collections=bset.collections, rerank=False, expand=False)
            run = Run(q, seen[-1])
            run.ranked["qmd"] = [bset.key(h.collection, h.path) for h in result.hits]
            run.ranked["search"] = [bset.key(h.collection, h.path) for h in store.search(q.text, limit=10, collections=bset.collections)]
            run.ranked["vsearch"] = [bset.key(h.collection, h.path) for h in store.vsearch(q.text, limit=10, collections=bset.collections).hits]
            runs.append(run)
    finally:
        hybrid.fuse = real_fuse
    ids = {k for r in runs for lst in r.lists for k in lst.keys}
    for doc_id, (row, _) in store.backend.documents(sorted(ids - set(paths))).items():
        paths[doc_id] = bset.key(row.collection, row.path)
    for r in runs:
        r.lists = [_with_paths(lst, paths) for lst in r.lists]
    return runs


def _with_paths(lst, paths):  # type: ignore[no-untyped-def]
    from qmd.search.fusion import RankedList

    return RankedList(lst.name, lst.weight, [paths[k] for k in lst.keys], list(lst.scores), lst.kind, lst.exact, list(lst.coverage))


def metrics(ranked: list[str], q: Question, graded: bool) -> dict[str, float]:
    from qmd.search.metrics import mrr_at, ndcg_at

    rel = set(q.relevant)
    out = {"hit@1": float(bool(ranked) and ranked[0] in rel), "mrr": mrr_at(ranked, rel, 10)}
    if graded:
        out["ndcg@10"] = ndcg_at(ranked, q.relevant, 10)
    return out


def mean(rows: list[dict[str, float]], key: str) -> float:
    return statistics.fmean(r[key] for r in rows) if rows else 0.0



def rule_rankings(lists: list, relevant: set[str]) -> dict[str, list[str]]:  # type: ignore[type-arg,unused-ignore]
    """Each fusion rule applied offline to one question's captured lists. "stale: miss" and
    "stale: qmd": the relevant notes as if edited since the last embed (no vectors: out of the
    vector lists), fused as a vector miss (the rule before) and as `query` fuses them now."""
    from qmd.search import fusion

    first = [x for x in lists if x.name != fusion.FEEDBACK_LIST]  # the question's own lists
    stale = [_without(x, relevant) if x.kind == "vector" else x for x in lists]
    return {
        "RRF (before)": [str(f.key) for f in fusion.legacy_rrf(first)][:10],
        "no feedback": [str(f.key) for f in fusion.fuse_lists(first)][:10],
        "fusion (offline)": [str(f.key) for f in fusion.fuse_lists(lists)][:10],
        "stale: miss": [str(f.key) for f in fusion.fuse_lists(stale)][:10],
        "stale: qmd": [str(f.key) for f in fusion.fuse_lists(stale, without_vectors=frozenset(relevant))][:10],
    }


def _without(lst, keys: set[str]):  # type: ignore[no-untyped-def]
    from qmd.search.fusion import RankedList

    kept = [i for i, k in enumerate(lst.keys) if k not in keys]
    return RankedList(lst.name, lst.weight, [lst.keys[i] for i in kept], [lst.scores[i] for i in kept], lst.kind, lst.exact, list(lst.coverage))


METHODS = ("search", "vsearch", "RRF (before)", "no feedback", "qmd", "stale: miss", "stale: qmd")


def evaluate(runs: list[Run], bset: BenchSet) -> dict[str, dict[str, dict[str, float]]]:
    """{group: {method: {metric: mean}}}; group "all" plus each question group (paraphrase set)."""
    for r in runs:
        r.ranked.update(rule_rankings(r.lists, set(r.question.relevant)))
        if r.ranked["fusion (offline)"] != r.ranked["qmd"][:10]:
            raise SystemExit(f"{bset.name} {r.question.id}: query returned {r.ranked['qmd'][:3]}, the rule gives {r.ranked['fusion (offline)'][:3]}")
    groups = {"all": runs}
    if bset.name == "paraphrase":
        groups |= {g: [r for r in runs if r.question.group == g] for g in ("paraphrase", "keyword")}
    out: dict[str, dict[str, dict[str, float]]] = {}
    for g, rs in groups.items():
        out[g] = {}
        for m in METHODS:
            rows = [metrics(r.ranked[m], r.question, bset.graded) for r in rs]
            out[g][m] = {k: mean(rows, k) for k in rows[0]} | {"n": len(rows)}
    return out


def build_only(models: list[str], names: list[str]) -> None:
    """Index and embed what the sets need for each model (the slow part, cached), nothing else."""
    bench, cache = data_dir(), cache_root()
    with isolated_home("fusion"):
        os.environ["QMD_RERANK_MODEL"] = os.environ["QMD_GENERATE_MODEL"] = str(cache / "none.gguf")
        for spec in models:
            model = resolve_model(spec, cache)
            os.environ["QMD_EMBED_MODEL"] = str(model)
            needed = {c for b in load_sets(bench, names) for c in b.collections}
            print(f"{model.name}: {sorted(needed)}", flush=True)
            open_store(model, cache, bench, needed).close()


def compare_headings(data: dict[str, object]) -> None:
    """Before (no heading paths) → after, per model, set and group: query and vsearch."""
    print("\nHeading paths: before -> after (hit@1, MRR@10; nDCG@10 where graded)")
    for key, after in data.items():
        label, _, name = key.rpartition("/")
        if not label.endswith(" +headings") or not isinstance(after, dict) or name in ("embed seconds", "tokens"):
            continue
        before = data.get(f"{label.removesuffix(' +headings')}/{name}")
        if not isinstance(before, dict):
            continue
        for g in after:
            for m in ("qmd", "vsearch"):
                b, a = before[g][m], after[g][m]
                nd = f"  nDCG {b['ndcg@10']:.3f} -> {a['ndcg@10']:.3f}" if "ndcg@10" in a else ""
                print(f"  {label.removesuffix(' +headings')[:18]:<18} {name + ('' if g == 'all' else '/' + g):<22} {m:<8} "
                      f"hit@1 {b['hit@1']:.2f} -> {a['hit@1']:.2f}  MRR {b['mrr']:.3f} -> {a['mrr']:.3f}{nd}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", action="append", help="minilm (default), embeddinggemma or an embedding GGUF; repeatable")
    parser.add_argument("--sets", default=",".join(SETS))
    parser.add_argument("--per-query", action="store_true")
    parser.add_argument("--sections", action=argparse.BooleanOptionalAction, default=None,
                        help="each heading-bounded section embedded beside the windows, or not (QMD_CHUNK_SECTIONS=1 / 0; issue 29); default: qmd's")
    parser.add_argument("--late", action="store_true", help="chunk vectors by late chunking (QMD_LATE_CHUNKS=1, issue 29: one pass per document, each chunk's tokens mean-pooled)")
    parser.add_argument("--headings", choices=("off", "on", "both"), default="off",
                        help="each chunk embedded with its heading path (issue 29; off: qmd's default); both: off then on, each its own cached index, compared")
    parser.add_argument("--dump", metavar="PATH", help="write the captured lists as JSON (for trying rules offline)")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    bench, cache = data_dir(), cache_root()
    names = [n for n in args.sets.split(",") if n]
    report = Report("fusion_bench")
    dump: dict[str, object] = {}
    with isolated_home("fusion"):
        os.environ["QMD_RERANK_MODEL"] = os.environ["QMD_GENERATE_MODEL"] = str(cache / "none.gguf")
        if args.sections is not None:
            os.environ["QMD_CHUNK_SECTIONS"] = "1" if args.sections else "0"
        if args.late:
            os.environ["QMD_LATE_CHUNKS"] = "1"
        variants = {"off": ["0"], "on": ["1"], "both": ["0", "1"]}[args.headings]
        for spec, headings in [(s, h) for s in args.model or ["minilm"] for h in variants]:
            model = resolve_model(spec, cache)
            os.environ["QMD_EMBED_MODEL"] = str(model)
            os.environ["QMD_CHUNK_HEADINGS"] = headings
            sets = load_sets(bench, names)
            store = open_store(model, cache, bench, {c for b in sets for c in b.collections})
            label = store.embedder().info.name + (" +headings" if headings == "1" else "")
            seconds = next((v for k, v in EMBED_SECONDS.items() if k.endswith(model_key(model) + variant_suffix())), None)
            report.data[f"{label}/embed seconds"] = seconds
            tokens = token_cost(store, sorted({c for b in sets for c in b.collections}))
            report.data[f"{label}/tokens"] = {"chunks": tokens[0], "late": tokens[1]}
            report.row(f"{label} tokens read: chunk by chunk / late chunking", f"{tokens[0]} / {tokens[1]}")
            if seconds is not None:
                report.row(f"{label} embed (s)", f"{seconds:.1f}")
            print(f"\n{label} ({model})", flush=True)
            print(f"  {'set':<22} {'method':<14} {'hit@1':>11} {'MRR@10':>7} {'nDCG@10':>8}")
            folder = str(store.index_path.parent)
            for bset in sets:
                units, tokens = embed_work(store, bset.collections)
                cpu = EMBED_CPU.get(folder) if len(sets) == 1 else None
                report.data[f"{label}/{bset.name}/embed work"] = {"units": units, "tokens": tokens, "cpu_s": cpu}
                print(f"  {bset.name}: {units} units, {tokens} tokens to embed" + (f", {units / cpu:.2f} units/CPU-s, {tokens / cpu:.0f} tokens/CPU-s" if cpu else ""), flush=True)
                runs = capture(store, bset)
                dump[f"{label}/{bset.name}"] = [
                    {"id": r.question.id, "text": r.question.text, "group": r.question.group, "relevant": r.question.relevant,
                     "lists": [(x.name, x.weight, list(x.keys), list(x.scores), x.kind, x.exact, list(x.coverage)) for x in r.lists], "ranked": r.ranked}
                    for r in runs
                ]
                result = evaluate(runs, bset)
                report.data[f"{label}/{bset.name}"] = result
                for g, by_method in result.items():
                    name = bset.name if g == "all" else f"{bset.name}/{g}"
                    for m, v in by_method.items():
                        nd = f"{v['ndcg@10']:8.3f}" if "ndcg@10" in v else ""
                        print(f"  {name:<22} {m:<14} {round(v['hit@1'] * v['n']):>4}/{v['n']:<3} {v['hit@1']:.2f} {v['mrr']:7.3f} {nd}", flush=True)
                    if g in ("all", "paraphrase"):
                        best = max(by_method["search"]["hit@1"], by_method["vsearch"]["hit@1"])
                        report.target(Target(f"{label[:18]} {name} query hit@1 - best signal", by_method["qmd"]["hit@1"] - best, 0.0, kind="min"))
                        best = max(by_method["search"]["mrr"], by_method["vsearch"]["mrr"])
                        report.target(Target(f"{label[:18]} {name} query MRR - best signal", by_method["qmd"]["mrr"] - best, 0.0, kind="min"))
                    if g == "keyword":
                        report.target(Target(f"{label[:18]} keyword hit@1 query - before", by_method["qmd"]["hit@1"] - by_method["RRF (before)"]["hit@1"], 0.0, kind="min"))
                if bset.name == "cranfield" and "minilm" in label.lower():
                    report.target(Target(f"{label[:18]} cranfield query nDCG@10", result["all"]["qmd"]["ndcg@10"], 0.43, kind="min"))
                if bset.name == "paraphrase" and "gemma" in label.lower():
                    report.target(Target(f"{label[:18]} paraphrase query hit@1", result["paraphrase"]["qmd"]["hit@1"], 0.90, kind="min"))
                if args.per_query:
                    for r in runs:
                        ranks = {m: next((i for i, k in enumerate(r.ranked[m], 1) if k in r.question.relevant), None) for m in METHODS}
                        print("    " + " ".join(f"{m.replace('stale: ', 'stale-').split()[0][:10]}={ranks[m] or '-'}" for m in METHODS) + f"  {r.question.id} {r.question.text[:70]}")
            store.close()
    if args.headings == "both":
        compare_headings(report.data)
    if args.dump:
        Path(args.dump).write_text(json.dumps(dump))
    return report.finish(args.json_path)


if __name__ == "__main__":
    sys.exit(main())
