"""Whole-process start-up of the commands agents shell out to, against bare Python.

One note in one collection (so the process start is nearly all of the time), built with the
real CLI in an isolated home; then, interleaved round by round, each command as a
subprocess of the installed console script, with bytecode cached as in an installed package:

    python -I -c pass                 baseline: the interpreter alone
    python -I -c "import apsw"        baseline: the interpreter and the SQLite binding
    qmd search --json rollback        target: p50 <= 3x the "import apsw" p50
    qmd search rollback               (cli output)
    qmd get notes/rollback.md
    qmd status
    qmd search rollback (QMD_FAST=0)  (info) the same search through the typer app

Prints each p50 / p95 and its ratio to both baselines measured in the same run.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from _common import PYTHON, QMD_BIN, Report, Target, arg_parser, isolated_home, ms, p50, percentile, run_child

NOTE = "# Rollback\n\nHow to roll back a bad release: flip the load balancer back to blue.\n"


def commands() -> dict[str, tuple[list[str], dict[str, str] | None]]:
    typer_env = dict(os.environ, QMD_FAST="0")
    return {
        "python -I -c pass": ([PYTHON, "-I", "-c", "pass"], None),
        "python -I -c 'import apsw'": ([PYTHON, "-I", "-c", "import apsw"], None),
        "qmd search --json": ([QMD_BIN, "search", "--json", "rollback"], None),
        "qmd search (cli output)": ([QMD_BIN, "search", "rollback"], None),
        "qmd get": ([QMD_BIN, "get", "notes/rollback.md"], None),
        "qmd status": ([QMD_BIN, "status"], None),
        "(info) qmd search, typer app (QMD_FAST=0)": ([QMD_BIN, "search", "rollback"], typer_env),
    }


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=40, help="interleaved rounds (default 40)")
    args = parser.parse_args()
    report = Report("startup")
    with isolated_home("startup") as tmp:
        notes = tmp / "notes"
        notes.mkdir()
        (notes / "rollback.md").write_text(NOTE, encoding="utf-8")
        run_child([QMD_BIN, "collection", "add", str(notes), "--name", "notes"])
        # The parsed-config cache takes a config only once it has settled for 2 s (a copy of a
        # file changed within the file system's timestamp granularity could be stale).
        time.sleep(2.1)
        cmds = commands()
        for argv, env in cmds.values():  # warm-up: bytecode, the config cache, the page cache
            run_child(argv, env=env)
        hits = json.loads(run_child(cmds["qmd search --json"][0]).stdout)
        assert hits and hits[0]["file"] == "qmd://notes/rollback.md", hits
        assert Path(os.environ["XDG_CACHE_HOME"], "qmd", "config").is_dir(), "the config cache was not written"
        times: dict[str, list[float]] = {name: [] for name in cmds}
        for _ in range(args.runs):
            for name, (argv, env) in cmds.items():
                times[name].append(run_child(argv, env=env).seconds)
        bare, apsw = p50(times["python -I -c pass"]), p50(times["python -I -c 'import apsw'"])
        print(f"\n{args.runs} interleaved runs each; p50 / p95, then p50 ratios to the same run's baselines")
        for name, values in times.items():
            report.row(name, f"{ms(p50(values))} / {ms(percentile(values, 95))}   {p50(values) / bare:5.2f}x pass   {p50(values) / apsw:5.2f}x import apsw")
        report.target(Target("qmd search --json p50 / import apsw p50", p50(times["qmd search --json"]) / apsw, 3.0, "x"))
        report.data = {name: values for name, values in times.items()}
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
