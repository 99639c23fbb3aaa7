"""Index `tldr-pages/` (one collection, `**/*.md`): full update, no-op update, peak RSS.

(a) full update (Store.add_collection on a fresh index) vs a bare FTS5 bulk loader
    (os.walk + read + sha256 + insert, one transaction)         target ratio <= 2x
(b) no-op update (nothing changed) vs a bare walk + stat        target ratio <= 3x
(c) peak RSS (VmHWM) of a full update in a child process       target <= 150 MB

(a) runs 3 times and (b) 7 times by default, alternating which side runs first; the
medians of wall time are compared (CPU-time medians are printed too: other load on a
shared machine moves them much less).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from dataclasses import asdict
from functools import partial
from pathlib import Path

import apsw

import qmd

from _common import PRINT_PEAK_RSS, PYTHON, Report, Sample, Target, arg_parser, data_dir, isolated_home, measure, p50, run_child

COLLECTION = "tldr"
PATTERN = "**/*.md"


def md_files(root: Path) -> list[str]:
    return [os.path.join(d, f) for d, _, files in os.walk(root) for f in files if f.endswith(".md")]


def bare_load(root: Path, db_path: Path) -> int:
    """The floor: walk, read, sha256, insert into FTS5 in one transaction. Returns rows."""
    conn = apsw.Connection(str(db_path))
    conn.execute("PRAGMA journal_mode = WAL; PRAGMA synchronous = NORMAL")
    conn.execute("CREATE VIRTUAL TABLE docs USING fts5 (filepath, title, body, tokenize = 'porter unicode61')")
    conn.execute("CREATE TABLE hashes (rowid INTEGER PRIMARY KEY, hash TEXT NOT NULL)")
    rows = 0
    with conn:  # one transaction
        for path in md_files(root):
            with open(path, "rb") as fh:
                data = fh.read()
            text = data.decode("utf-8", "replace")
            digest = hashlib.sha256(data).hexdigest()
            title = text.split("\n", 1)[0].lstrip("# ").strip()
            conn.execute("INSERT INTO docs (filepath, title, body) VALUES (?, ?, ?)", (os.path.relpath(path, root), title, text))
            conn.execute("INSERT INTO hashes (rowid, hash) VALUES (last_insert_rowid(), ?)", (digest,))
            rows += 1
    conn.close()
    return rows


def bare_stat(root: Path) -> int:
    """The floor of a no-op update: walk the tree and stat every .md file."""
    n = 0
    for path in md_files(root):
        os.stat(path)
        n += 1
    return n


def qmd_full(root: Path, index_dir: Path) -> int:
    with qmd.Store(index_dir / "index.sqlite", index_dir / "index.yml") as store:
        report = store.add_collection(root, name=COLLECTION, pattern=PATTERN)
    assert report is not None
    return report.collections[0].new


def qmd_noop(index_dir: Path) -> int:
    with qmd.Store(index_dir / "index.sqlite", index_dir / "index.yml") as store:
        report = store.update()
    coll = report.collections[0]
    assert coll.new == coll.updated == coll.removed == 0, coll
    return coll.unchanged


CHILD_FULL = """
import sys, qmd
with qmd.Store(sys.argv[1], sys.argv[2]) as s:
    r = s.add_collection(sys.argv[3], name="tldr", pattern="**/*.md")
print("docs", r.collections[0].new)
"""


def paired(label_a: str, a: list[Sample], label_b: str, b: list[Sample], unit_ms: bool) -> str:
    """One line per run: both wall times and their ratio."""
    fmt = (lambda x: f"{x * 1000:.0f} ms") if unit_ms else (lambda x: f"{x:.2f} s")
    return f"{label_a} {fmt(a[-1].wall)}   {label_b} {fmt(b[-1].wall)}   ratio {b[-1].wall / a[-1].wall:.2f}x"


def compare(report: Report, base_name: str, base: list[Sample], qmd_name: str, runs: list[Sample]) -> float:
    """Report medians (wall and CPU) of both sides; return the wall-time ratio of medians."""
    wall = p50([r.wall for r in runs]) / p50([b.wall for b in base])
    cpu = p50([r.cpu for r in runs]) / p50([b.cpu for b in base])
    report.row(f"{base_name}, median wall / cpu", f"{p50([b.wall for b in base]):.3f} s / {p50([b.cpu for b in base]):.3f} s")
    report.row(f"{qmd_name}, median wall / cpu", f"{p50([r.wall for r in runs]):.3f} s / {p50([r.cpu for r in runs]):.3f} s")
    report.row(f"{qmd_name} / {base_name}: wall (target) / cpu", f"{wall:.2f}x / {cpu:.2f}x")
    return wall


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs of (a), full index each (default 3)")
    parser.add_argument("--noop-repeat", type=int, default=7, help="runs of (b), about 1 s each (default 7)")
    args = parser.parse_args()
    root = data_dir() / "tldr-pages"
    report = Report("index_bench")
    with isolated_home("index") as tmp:
        print(f"corpus {root}: {len(md_files(root))} .md files; temp dir {tmp}")
        for path in md_files(root):  # warm the page cache so neither side pays the first read
            Path(path).read_bytes()

        print(f"\n(a) full update vs bare FTS5 bulk load, {args.repeat} runs, alternating order")
        full: dict[str, list[Sample]] = {"bare": [], "qmd": []}
        counts: dict[str, int] = {}
        for i in range(args.repeat):
            run_dir = tmp / f"run{i}"
            for side in ("bare", "qmd") if i % 2 == 0 else ("qmd", "bare"):
                out = run_dir / side
                out.mkdir(parents=True)
                load = partial(bare_load, root, out / "bare.sqlite") if side == "bare" else partial(qmd_full, root, out)
                sample, counts[side] = measure(load)
                full[side].append(sample)
            print(f"  run {i + 1}: " + paired("bare", full["bare"], "qmd", full["qmd"], unit_ms=False), flush=True)
            if i < args.repeat - 1:
                shutil.rmtree(run_dir)
        index_dir = tmp / f"run{args.repeat - 1}" / "qmd"
        ratio = compare(report, "bare FTS5 bulk load", full["bare"], "qmd full update", full["qmd"])
        report.row("documents indexed: qmd / bare", f"{counts['qmd']} / {counts['bare']}")
        report.target(Target("(a) full update / bare FTS5 load", ratio, 2.0, "x"))

        print(f"\n(b) no-op update vs bare walk+stat, {args.noop_repeat} runs, alternating order")
        noop: dict[str, list[Sample]] = {"stat": [], "qmd": []}
        for i in range(args.noop_repeat):
            pair = [("stat", partial(bare_stat, root)), ("qmd", partial(qmd_noop, index_dir))]
            for side, fn in pair if i % 2 == 0 else reversed(pair):
                noop[side].append(measure(fn)[0])
            print(f"  run {i + 1}: " + paired("walk+stat", noop["stat"], "qmd no-op", noop["qmd"], unit_ms=True), flush=True)
        ratio = compare(report, "bare walk+stat", noop["stat"], "qmd no-op update", noop["qmd"])
        report.target(Target("(b) no-op update / bare walk+stat", ratio, 3.0, "x"))

        print("\n(c) peak RSS of a child process (its own VmHWM)")
        run_child([PYTHON, "-c", "import qmd"])  # warm-up: fills the temp bytecode cache
        base = run_child([PYTHON, "-c", "import qmd\n" + PRINT_PEAK_RSS])
        rss_dir = tmp / "rss"
        rss_dir.mkdir()
        child = run_child([PYTHON, "-c", CHILD_FULL + PRINT_PEAK_RSS, str(rss_dir / "index.sqlite"), str(rss_dir / "index.yml"), str(root)])
        shutil.rmtree(rss_dir)
        docs = child.stdout.split()[1]
        report.row("child `python -c 'import qmd'` peak RSS", f"{base.peak_rss_kb / 1024:.1f} MB")
        report.row("child full update peak RSS", f"{child.peak_rss_kb / 1024:.1f} MB ({child.seconds:.1f} s, {docs} docs)")
        report.target(Target("(c) full update peak RSS", child.peak_rss_kb / 1024, 150.0, "MB"))
        index_mb = sum(p.stat().st_size for p in index_dir.iterdir()) / 1e6
        report.row("qmd index size on disk (db + wal)", f"{index_mb:.1f} MB")
        report.data = {
            "full_update": {k: [asdict(x) for x in v] for k, v in full.items()},
            "noop_update": {k: [asdict(x) for x in v] for k, v in noop.items()},
            "docs": counts, "import_qmd_peak_rss_kb": base.peak_rss_kb, "full_update_peak_rss_kb": child.peak_rss_kb,
        }
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
