"""Index `tldr-pages/` (one collection, `**/*.md`): full update, no-op update, peak RSS.

(a) full update (Store.add_collection on a fresh index) vs a bare FTS5 bulk loader
    (os.walk + read + sha256 + insert, one transaction)         target ratio <= 2x
(b) no-op update (nothing changed) vs a bare walk + stat        target ratio <= 3x
(c) peak RSS of a full update in a child process                target <= 150 MB

(a) and (b) are repeated (default 3 times, alternating which side runs first);
medians are compared.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from pathlib import Path

import apsw

import qmd

from _common import PYTHON, Report, Target, arg_parser, data_dir, isolated_home, p50, run_child, timed

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
print(r.collections[0].new)
"""


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="repetitions of (a) and (b) (default 3)")
    args = parser.parse_args()
    root = data_dir() / "tldr-pages"
    report = Report("index_bench")
    with isolated_home("index") as tmp:
        print(f"corpus {root}: {len(md_files(root))} .md files; temp dir {tmp}")
        for path in md_files(root):  # warm the page cache so neither side pays the first read
            Path(path).read_bytes()

        print(f"\n(a) full update vs bare FTS5 bulk load, {args.repeat} runs")
        bare_s: list[float] = []
        full_s: list[float] = []
        counts: dict[str, int] = {}
        for i in range(args.repeat):
            run_dir = tmp / f"run{i}"
            (run_dir / "bare").mkdir(parents=True)
            (run_dir / "qmd").mkdir()
            def do_bare() -> None:
                counts["bare"] = bare_load(root, run_dir / "bare" / "bare.sqlite")
            def do_qmd() -> None:
                counts["qmd"] = qmd_full(root, run_dir / "qmd")
            pair = [("bare", do_bare), ("qmd", do_qmd)]
            for name, fn in pair if i % 2 == 0 else reversed(pair):
                (bare_s if name == "bare" else full_s).append(timed(fn))
            print(f"  run {i + 1}: bare {bare_s[-1]:.2f} s ({counts['bare']} docs)   qmd {full_s[-1]:.2f} s ({counts['qmd']} docs)"
                  f"   ratio {full_s[-1] / bare_s[-1]:.2f}x", flush=True)
            if i < args.repeat - 1:
                shutil.rmtree(run_dir)
        index_dir = tmp / f"run{args.repeat - 1}" / "qmd"
        full_ratio = p50(full_s) / p50(bare_s)
        report.row("bare FTS5 bulk load, median", f"{p50(bare_s):.2f} s")
        report.row("qmd full update, median", f"{p50(full_s):.2f} s")
        report.row("full update / bare load (medians)", f"{full_ratio:.2f}x")
        report.row("documents indexed: qmd / bare", f"{counts['qmd']} / {counts['bare']}")
        report.target(Target("(a) full update / bare FTS5 load", full_ratio, 2.0, "x"))

        print(f"\n(b) no-op update vs bare walk+stat, {args.repeat} runs")
        stat_s: list[float] = []
        noop_s: list[float] = []
        for i in range(args.repeat):
            pair = [("stat", lambda: bare_stat(root)), ("noop", lambda: qmd_noop(index_dir))]
            for name, fn in pair if i % 2 == 0 else reversed(pair):
                (stat_s if name == "stat" else noop_s).append(timed(fn))
            print(f"  run {i + 1}: walk+stat {stat_s[-1] * 1000:.0f} ms   qmd no-op {noop_s[-1] * 1000:.0f} ms"
                  f"   ratio {noop_s[-1] / stat_s[-1]:.2f}x", flush=True)
        noop_ratio = p50(noop_s) / p50(stat_s)
        report.row("bare walk+stat, median", f"{p50(stat_s) * 1000:.0f} ms")
        report.row("qmd no-op update, median", f"{p50(noop_s) * 1000:.0f} ms")
        report.row("no-op update / walk+stat (medians)", f"{noop_ratio:.2f}x")
        report.target(Target("(b) no-op update / bare walk+stat", noop_ratio, 3.0, "x"))

        print("\n(c) peak RSS (ru_maxrss of the child, via wait4)")
        base = run_child([PYTHON, "-c", "import qmd"])
        rss_dir = tmp / "rss"
        rss_dir.mkdir()
        child = run_child([PYTHON, "-c", CHILD_FULL, str(rss_dir / "index.sqlite"), str(rss_dir / "index.yml"), str(root)])
        if child.returncode != 0:
            print(child.stderr, file=sys.stderr)
            return 2
        report.row("child `python -c 'import qmd'` peak RSS", f"{base.maxrss_kb / 1024:.1f} MB")
        report.row("child full update peak RSS", f"{child.maxrss_kb / 1024:.1f} MB ({child.seconds:.1f} s, {child.stdout.strip()} docs)")
        report.target(Target("(c) full update peak RSS", child.maxrss_kb / 1024, 150.0, "MB"))
        index_mb = sum(p.stat().st_size for p in index_dir.iterdir()) / 1e6
        report.row("qmd index size on disk (db + wal)", f"{index_mb:.1f} MB")
        report.data = {
            "bare_load_s": bare_s, "full_update_s": full_s, "walk_stat_s": stat_s, "noop_update_s": noop_s,
            "docs": counts, "import_qmd_rss_kb": base.maxrss_kb, "full_update_rss_kb": child.maxrss_kb,
        }
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
