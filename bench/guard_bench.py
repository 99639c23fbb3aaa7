"""Agent guard latency: the whole `qmd-guard` process on a deny and an allow payload.

Every shell call an agent makes pays for this hook, so it is measured as the agent sees
it: a fresh process reading a Claude Code PreToolUse payload on stdin, deciding and
exiting. Baseline, interleaved in the same run: `python -I -c pass` from the same venv
(the floor for any Python hook). Bytecode is cached as in an installed package
(`PYTHONPYCACHEPREFIX` in the temp dir, warmed first).

    deny : `grep -rn "retry policy" .` from a repo holding the notes collection
           (narrowed command, reason text, MCP lookup, block-log append with retry check)
    allow: `grep -rn "retry policy" src` (parsed and checked, nothing printed)
    trivial allow: `ls -la` (no search in it)
    targets: p50 <= 50 ms each; p50 overhead over the baseline <= 25 ms each
"""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

import qmd
from qmd import harness

from _common import PYTHON, VENV_BIN, Report, Target, arg_parser, isolated_home, ms, p50, percentile

GUARD = str(VENV_BIN / "qmd-guard")
LIMIT_MS = 50.0
OVERHEAD_MS = 25.0


def build_world(root: Path) -> Path:
    """A repo with 300 notes in a collection and some code; the folder cache written by qmd."""
    repo = root / "repo"
    for i in range(300):
        note = repo / "notes" / f"area{i % 10}" / f"note{i:03d}.md"
        note.parent.mkdir(parents=True, exist_ok=True)
        note.write_text(f"# Note {i}\n\nThe retry policy for service {i} is exponential backoff.\n", encoding="utf-8")
    for sub in ("src", "tests", "scripts", "docs"):
        (repo / sub).mkdir(parents=True)
        (repo / sub / "main.py").write_text("RETRY = 3\n", encoding="utf-8")
    (repo / "README.md").write_text("# repo\n", encoding="utf-8")
    paths = qmd.resolve_index(None)
    with qmd.Store(paths.index_path, paths.config_path) as store:
        store.add_collection(str(repo / "notes"), name="notes")
    assert harness.StateLayout.current().guard_folders.exists(), "qmd did not write folders.json"
    return repo


def payload(repo: Path, command: str) -> bytes:
    return json.dumps({
        "session_id": "bench-session", "transcript_path": "/tmp/t.jsonl", "cwd": str(repo), "permission_mode": "default",
        "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": command}, "tool_use_id": "toolu_bench",
    }).encode()


def run(argv: list[str], data: bytes, env: dict[str, str]) -> tuple[float, bytes]:
    start = time.perf_counter()
    proc = subprocess.run(argv, input=data, capture_output=True, env=env)
    elapsed = time.perf_counter() - start
    if proc.returncode != 0:
        raise SystemExit(f"{argv[0]} exited {proc.returncode}: {proc.stderr.decode()[:500]}")
    return elapsed, proc.stdout


def main() -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=30, help="measured runs per case (default 30)")
    args = parser.parse_args()
    report = Report("guard_bench.py")
    with isolated_home("guard") as root:
        repo = build_world(root)
        env = dict(os.environ)
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        env["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        cases = {
            "baseline: python -I -c pass": ([PYTHON, "-I", "-c", "pass"], b""),
            "deny: grep -rn … . (repo root)": ([GUARD], payload(repo, 'grep -rn "retry policy" .')),
            "allow: grep -rn … src": ([GUARD], payload(repo, 'grep -rn "retry policy" src')),
            "allow: ls -la (no search)": ([GUARD], payload(repo, "ls -la")),
        }
        for argv, data in cases.values():  # warm the bytecode cache and the page cache
            for _ in range(3):
                run(argv, data, env)
        _, out = run(*cases["deny: grep -rn … . (repo root)"], env)
        reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
        assert "grep -rn 'retry policy' README.md docs scripts src tests" in reason, reason
        assert run(*cases["allow: grep -rn … src"], env)[1] == b""

        times: dict[str, list[float]] = {name: [] for name in cases}
        names = list(cases)
        for i in range(args.runs):
            for name in names[i % len(names) :] + names[: i % len(names)]:  # rotate the order each round
                times[name].append(run(*cases[name], env)[0])

        print(f"\nqmd-guard whole-process time, {args.runs} runs each, interleaved (p50 / p90):")
        for name in names:
            value = p50(times[name])
            base = p50(times[names[0]])
            extra = "" if name == names[0] else f"   ratio {value / base:.2f}x, +{(value - base) * 1000:.1f} ms over the baseline"
            report.row(name, f"{ms(value)} / {ms(percentile(times[name], 90))}{extra}")
        blocks = harness.StateLayout.current().guard_blocks
        report.row("block-log lines written by the deny runs", str(len(blocks.read_text().splitlines())))
        report.data = {name: times[name] for name in names}
        report.target(Target("deny p50", p50(times[names[1]]) * 1000, LIMIT_MS, "ms"))
        report.target(Target("allow p50", p50(times[names[2]]) * 1000, LIMIT_MS, "ms"))
        report.target(Target("trivial allow p50", p50(times[names[3]]) * 1000, LIMIT_MS, "ms"))
        floor = p50(times[names[0]])
        for label, name in (("deny", names[1]), ("allow", names[2]), ("trivial allow", names[3])):
            report.target(Target(f"{label} p50 over the baseline", (p50(times[name]) - floor) * 1000, OVERHEAD_MS, "ms"))
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
