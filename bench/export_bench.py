"""`qmd export` → `qmd import` against a fresh `update` + `embed`, on English tldr pages with MiniLM.

One run, one machine: (1) a fresh build (update + embed with MiniLM) of a fixed subset of
the English tldr pages (every `--stride`-th path-sorted page; 1 = all 7,424), which is the
baseline: what every teammate pays without an export; (2) `Store.export` of that index; (3)
into another index, config and folder (the same pages copied elsewhere) `Store.import_file`,
then `embed` (must embed nothing) and `update` (must change nothing); (4) 20 questions
(bench/queries_semantic.txt) by `vsearch`, `search` and `query` (no reranker, no expansion)
on both indexes: the hits (paths and scores) must be identical.
                                  target: (export + import) / (update + embed) <= 0.05
                                  target: 20 questions identical, 0 documents embedded on import

The embed rate of this machine (2 shared cores) makes the whole English set hours long, so
the default is every 10th page; per-page rates are extrapolated linearly to 38,405 pages
(embedding and import both scale with the pages; printed as an estimate, not a measurement).
"""

from __future__ import annotations

import shutil
import time
from pathlib import Path

import qmd

from _common import BENCH, Report, Target, arg_parser, cache_root, data_dir, isolated_home, resolve_model

ALL_PAGES = 38_405  # every tldr page in every language (the index)


def questions(n: int = 20) -> list[str]:
    lines = (line.strip() for line in (BENCH / "queries_semantic.txt").read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")][:n]


def answers(store: qmd.Store, qs: list[str]) -> list[object]:
    out: list[object] = []
    for q in qs:
        out.append([(h.path, round(h.score, 6)) for h in store.vsearch(q, limit=10).hits])
        out.append([(h.path, round(h.score, 6)) for h in store.search(q, limit=10)])
        out.append([(h.path, round(h.score, 6)) for h in store.query(q, limit=10, rerank=False, expand=False).hits])
    return out


def exactly(store: qmd.Store, qs: list[str]) -> list[object]:
    """answers() with QMD_VECTOR_INDEX=exact: past 50,000 chunks each index has an approximate
    index of its own (k-means centroids trained on each), which may miss different neighbours."""
    import os

    saved = os.environ.get("QMD_VECTOR_INDEX")
    os.environ["QMD_VECTOR_INDEX"] = "exact"
    try:
        return answers(store, qs)
    finally:
        if saved is None:
            os.environ.pop("QMD_VECTOR_INDEX", None)
        else:
            os.environ["QMD_VECTOR_INDEX"] = saved


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--stride", type=int, default=10, help="every N-th English page (1: all 7,424)")
    parser.add_argument("--model", default="minilm")
    parser.add_argument("--languages", choices=("en", "all"), default="en", help="English pages only (7,424; default) or every language (38,405: the issue's index)")
    parser.add_argument("--keep", metavar="DIR", help="copy the freshly built index (index.sqlite, index.yml, build.json) to DIR for later benches (ann_bench.py --from-index, --reuse)")
    parser.add_argument("--reuse", metavar="DIR", help="no build: start from the index a --keep run left in DIR (same --stride/--languages), its update and embed times read from DIR/build.json")
    args = parser.parse_args()
    tldr = data_dir() / "tldr-pages"
    roots = [tldr / "pages"] if args.languages == "en" else sorted(p for p in tldr.glob("pages*") if p.is_dir())
    every = sorted(p.relative_to(tldr).as_posix() for r in roots for p in r.rglob("*.md") if not p.name.startswith("."))
    chosen = every[:: args.stride]
    model = resolve_model(args.model, cache_root())
    report = Report("export_bench.py")
    qs = questions()
    with isolated_home("export") as root:
        import os

        os.environ["QMD_EMBED_MODEL"] = str(model)
        os.environ["QMD_RERANK_MODEL"] = str(root / "none.gguf")
        os.environ["QMD_GENERATE_MODEL"] = str(root / "none.gguf")
        for side in ("a", "b"):
            for rel in chosen:
                dest = root / side / "tldr" / rel
                dest.parent.mkdir(parents=True, exist_ok=True)
                shutil.copyfile(tldr / rel, dest)
        which = "English" if args.languages == "en" else "any-language"
        report.row("pages", f"{len(chosen):,} (every {args.stride}th {which} page)")

        if args.reuse:  # the kept index, its collection pointed at this run's copy of the pages
            import json

            kept = Path(args.reuse)
            shutil.copyfile(kept / "index.sqlite", root / "a" / "index.sqlite")
            (root / "a" / "index.yml").write_text(f"collections:\n  tldr:\n    path: {root / 'a' / 'tldr'}\n    pattern: '**/*.md'\n", encoding="utf-8")
            timed = json.loads((kept / "build.json").read_text(encoding="utf-8"))
            report.row("build", f"reused from {kept} (built {timed['at']})")
        with qmd.Store(root / "a" / "index.sqlite", root / "a" / "index.yml") as a:
            if args.reuse:
                t_update, t_embed, n_chunks = float(timed["update_s"]), float(timed["embed_s"]), int(timed["chunks"])
                t0 = time.perf_counter()
                same = a.update().collections[0]
                report.row("update of the reused index over this run's pages", f"{time.perf_counter() - t0:.1f} s, {same.new + same.updated + same.removed} changed")
                from qmd.backends.sqlite import approx, vectors

                conn = a.backend.connection()  # type: ignore[attr-defined]
                vectors.ensure_vec(conn)
                for (model_id,) in conn.execute("SELECT id FROM embed_models").fetchall():
                    approx.reset(conn, int(model_id))  # the approximate index as this code builds it (it is derived data)
                t0 = time.perf_counter()
                a.embed()
                report.row("approximate index rebuilt by this code (embed)", f"{time.perf_counter() - t0:.1f} s")
            else:
                t0 = time.perf_counter()
                a.add_collection(root / "a" / "tldr", name="tldr")
                t_update = time.perf_counter() - t0
                t0 = time.perf_counter()
                n_chunks = a.embed().chunks
                t_embed = time.perf_counter() - t0
            t0 = time.perf_counter()
            exported = a.export(root / "tldr.qmd.gz")
            t_export = time.perf_counter() - t0
            want = answers(a, qs)
            want_exact = exactly(a, qs)
        if args.keep:
            keep = Path(args.keep)
            keep.mkdir(parents=True, exist_ok=True)
            for name in ("index.sqlite", "index.yml"):
                shutil.copyfile(root / "a" / name, keep / name)
            (keep / "source.txt").write_text(f"{root / 'a' / 'tldr'}\n{len(chosen)} pages, model {model}\n", encoding="utf-8")
            if not args.reuse:
                import json

                from qmd.core.clock import now_iso

                build = {"update_s": t_update, "embed_s": t_embed, "chunks": n_chunks, "pages": len(chosen), "at": now_iso()}
                (keep / "build.json").write_text(json.dumps(build) + "\n", encoding="utf-8")
        report.row("fresh update", f"{t_update:.1f} s")
        report.row("fresh embed", f"{t_embed:.1f} s ({n_chunks:,} chunks)")
        report.row("export", f"{t_export:.2f} s, {exported.bytes / 1e6:.1f} MB, {exported.chunks:,} chunks")

        with qmd.Store(root / "b" / "index.sqlite", root / "b" / "index.yml") as b:
            t0 = time.perf_counter()
            imported = b.import_file(root / "tldr.qmd.gz", places={"tldr": root / "b" / "tldr"})
            t_import = time.perf_counter() - t0
            t0 = time.perf_counter()
            again = b.embed()
            t_noop = time.perf_counter() - t0
            upd = b.update()
            got = answers(b, qs)
            got_exact = exactly(b, qs)
        (c,) = imported.collections
        report.row("import", f"{t_import:.2f} s ({c.match:,} match, {c.differ} differ, {c.missing} missing)")
        report.row("embed after import", f"{again.documents} documents embedded ({again.already:,} had their vectors), {t_noop:.2f} s")
        report.row("update after import", f"{upd.collections[0].new + upd.collections[0].updated + upd.collections[0].removed} changed")
        fresh, moved = t_update + t_embed, t_export + t_import
        ratio = moved / fresh
        report.row("(export + import) / (update + embed)", f"{ratio:.4f} ({moved:.1f} s vs {fresh:.1f} s)")
        same = sum(1 for i in range(len(qs)) if want[3 * i : 3 * i + 3] == got[3 * i : 3 * i + 3])
        report.row("questions with identical vsearch/search/query hits", f"{same}/{len(qs)}")
        same_exact = sum(1 for i in range(len(qs)) if want_exact[3 * i : 3 * i + 3] == got_exact[3 * i : 3 * i + 3])
        report.row("... the same with exact vector search on both sides", f"{same_exact}/{len(qs)} (each side builds its own approximate index past 50,000 chunks)")
        per_page = fresh / len(chosen), moved / len(chosen)
        report.row(f"extrapolated to {ALL_PAGES:,} pages (linear)", f"build {per_page[0] * ALL_PAGES / 3600:.1f} h vs export+import {per_page[1] * ALL_PAGES / 60:.1f} min")
        report.data.update(identical_exact=same_exact, pages=len(chosen), update_s=t_update, embed_s=t_embed, export_s=t_export, import_s=t_import, ratio=ratio, identical=same, bytes=exported.bytes)
        report.target(Target("(export + import) / fresh build", ratio, 0.05))
        report.target(Target("questions identical", same, len(qs), kind="min"))
        report.target(Target("documents embedded after import", float(again.documents), 0))
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
