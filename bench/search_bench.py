"""Search latency: keyword queries on tldr-pages, questions on Cranfield, whole-process CLI.

(a) in-process `store.search(q, limit=10)` on the tldr index vs a bare FTS5 MATCH of the
    same form ('"w1"* AND "w2"*' ORDER BY rank LIMIT 10) on the same database,
    queries from bench/queries_keyword.txt      targets: p50 ratio <= 2x, p50 <= 5 ms
(b) in-process search of the 225 Cranfield questions         target: p50 <= 25 ms
(c) `qmd --index tldr search "..." --json` as a subprocess vs `python -c "import apsw"`,
    interleaved, bytecode cached as in an installed package   target: p50 <= 150 ms
"""

from __future__ import annotations

import json
import os
import sys
from functools import partial
from pathlib import Path

import apsw

import qmd

from _common import BENCH, PYTHON, QMD_BIN, Report, Target, arg_parser, data_dir, isolated_home, ms, p50, percentile, run_child, timed

INDEX_NAME = "tldr"


def load_queries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def bare_match_expr(query: str) -> str:
    """The all-terms prefix form qmd runs first: "w1"* AND "w2"* ..."""
    return " AND ".join('"' + w.replace('"', '""') + '"*' for w in query.split())


def bare_search(conn: apsw.Connection, query: str) -> list[tuple[int, float]]:
    sql = "SELECT rowid, rank FROM documents_fts WHERE documents_fts MATCH ? ORDER BY rank LIMIT 10"
    return conn.execute(sql, (bare_match_expr(query),)).fetchall()


def build_index(store: qmd.Store, folder: Path, name: str) -> float:
    seconds = timed(lambda: store.add_collection(folder, name=name, pattern="**/*.md"))
    print(f"  indexed {folder} as '{name}' in {seconds:.1f} s", flush=True)
    return seconds


def keyword_latency(store: qmd.Store, bare: apsw.Connection, queries: list[str], rounds: int) -> tuple[dict[str, list[float]], int]:
    """Per-call seconds for "qmd" and "bare" over `rounds` passes (after one warm-up pass)."""
    empty = 0
    for q in queries:  # warm-up: page cache, statement cache
        empty += not store.search(q, limit=10)
        bare_search(bare, q)
    times: dict[str, list[float]] = {"qmd": [], "bare": []}
    for r in range(rounds):
        for q in queries:
            pair = [("qmd", partial(store.search, q, limit=10)), ("bare", partial(bare_search, bare, q))]
            for side, fn in pair if r % 2 == 0 else reversed(pair):
                times[side].append(timed(fn))
    return times, empty


def question_latency(store: qmd.Store, questions: list[str], rounds: int) -> list[float]:
    for q in questions:  # warm-up
        store.search(q, limit=10)
    return [timed(partial(store.search, q, limit=10)) for _ in range(rounds) for q in questions]


def no_pyc_env() -> dict[str, str]:
    """The isolated env without a bytecode cache: an editable checkout compiles qmd each run."""
    env = {k: v for k, v in os.environ.items() if k != "PYTHONPYCACHEPREFIX"}
    env["PYTHONDONTWRITEBYTECODE"] = "1"
    return env


def cli_latency(queries: list[str], runs: int) -> dict[str, list[float]]:
    """Interleaved whole-process timings of qmd search --json (with and without .pyc) and import apsw."""
    cmd = [QMD_BIN, "--index", INDEX_NAME, "search", queries[0], "--json"]
    assert json.loads(run_child(cmd).stdout), "qmd search --json returned no hits"  # also fills the .pyc cache
    run_child([PYTHON, "-c", "import apsw"])
    times: dict[str, list[float]] = {"qmd": [], "apsw": [], "qmd_no_pyc": []}
    for i in range(runs):
        cmd[4] = queries[i % len(queries)]
        times["qmd"].append(run_child(cmd).seconds)
        times["apsw"].append(run_child([PYTHON, "-c", "import apsw"]).seconds)
        times["qmd_no_pyc"].append(run_child(cmd, env=no_pyc_env()).seconds)
    return times


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the keyword queries (default 5)")
    parser.add_argument("--question-rounds", type=int, default=3, help="timed passes over the Cranfield questions (default 3)")
    parser.add_argument("--cli-runs", type=int, default=20, help="qmd search subprocess runs (default 20)")
    args = parser.parse_args()
    data = data_dir()
    queries = load_queries(BENCH / "queries_keyword.txt")
    questions = [line.split("\t", 1)[1].strip() for line in (data / "cranfield" / "queries.tsv").read_text().splitlines() if "\t" in line]
    report = Report("search_bench")
    with isolated_home("search") as tmp:
        paths = qmd.resolve_index(INDEX_NAME)  # inside the temp XDG dirs: the CLI finds it with --index tldr
        print(f"temp dir {tmp}\nindex {paths.index_path}")
        store = qmd.Store(paths.index_path, paths.config_path)
        build_index(store, data / "tldr-pages", "tldr")

        print(f"\n(a) {len(queries)} keyword queries x {args.rounds} rounds, in-process, limit 10")
        bare = apsw.Connection(str(paths.index_path), flags=apsw.SQLITE_OPEN_READONLY)
        times, empty = keyword_latency(store, bare, queries, args.rounds)
        qmd_s, bare_s = times["qmd"], times["bare"]
        bare.close()
        ratio = p50(qmd_s) / p50(bare_s)
        report.row("bare FTS5 MATCH p50 / p95", f"{ms(p50(bare_s))} / {ms(percentile(bare_s, 95))}")
        report.row("store.search p50 / p95", f"{ms(p50(qmd_s))} / {ms(percentile(qmd_s, 95))}")
        report.row("store.search / bare MATCH (p50s)", f"{ratio:.2f}x")
        report.row("keyword queries with no result", f"{empty} of {len(queries)}")
        report.target(Target("(a) keyword search p50 / bare MATCH p50", ratio, 2.0, "x"))
        report.target(Target("(a) keyword search p50", p50(qmd_s) * 1000, 5.0, "ms"))

        print(f"\n(b) {len(questions)} Cranfield questions x {args.question_rounds} rounds, in-process, limit 10")
        with qmd.Store(tmp / "cranfield" / "index.sqlite", tmp / "cranfield" / "index.yml") as cran:
            build_index(cran, data / "cranfield" / "docs", "cranfield")
            q_s = question_latency(cran, questions, args.question_rounds)
        report.row("question search p50 / p95 / max", f"{ms(p50(q_s))} / {ms(percentile(q_s, 95))} / {ms(max(q_s))}")
        report.target(Target("(b) Cranfield question search p50", p50(q_s) * 1000, 25.0, "ms"))
        store.close()

        print(f"\n(c) whole process: qmd search --json vs python -c 'import apsw', {args.cli_runs} runs each")
        cli = cli_latency(queries, args.cli_runs)
        cli_s, apsw_s = cli["qmd"], cli["apsw"]
        report.row("python -c 'import apsw' p50", ms(p50(apsw_s)))
        report.row("qmd search --json p50 / p95", f"{ms(p50(cli_s))} / {ms(percentile(cli_s, 95))}")
        report.row("qmd search / import apsw (p50s)", f"{p50(cli_s) / p50(apsw_s):.2f}x")
        report.row("(info) same, no .pyc cache (PYTHONDONTWRITEBYTECODE=1)", ms(p50(cli["qmd_no_pyc"])))
        report.target(Target("(c) qmd search process p50", p50(cli_s) * 1000, 150.0, "ms"))
        report.data = {"keyword_qmd_s": qmd_s, "keyword_bare_s": bare_s, "question_s": q_s, "cli_qmd_s": cli_s, "cli_import_apsw_s": apsw_s, "cli_qmd_no_pyc_s": cli["qmd_no_pyc"]}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
