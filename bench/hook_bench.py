"""Git hook cost: median `git commit` of a one-line change with qmd's post-commit hook vs without.

Identical repositories in the same temp dir: one with `qmd hooks install` (post-commit,
post-merge, post-rewrite; no legacy hook), one without hooks (the baseline), and, for
scale, one whose post-commit is an empty `#!/bin/sh` script (what git's running of any
hook costs). Each round commits a one-line change in each, rotating the order; only the
`git commit` process is timed (the edit and `git add` are not), wall time and the CPU
time of git and its children (less moved by other load on a shared machine). No updater
runs: the queue just grows. Also times the hook script alone (`sh .git/hooks/post-commit`).

    target: p50 (with hook) - p50 (without) <= 10 ms
"""

from __future__ import annotations

import os
import resource
import subprocess
import time
from pathlib import Path

from _common import QMD_BIN, Report, Target, arg_parser, isolated_home, ms, p50, percentile

LIMIT_MS = 10.0
GIT_ENV = {"GIT_AUTHOR_NAME": "bench", "GIT_AUTHOR_EMAIL": "b@b", "GIT_COMMITTER_NAME": "bench", "GIT_COMMITTER_EMAIL": "b@b", "GIT_CONFIG_NOSYSTEM": "1"}


def git(repo: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(repo), *args], check=True, capture_output=True)


def make_repo(path: Path) -> Path:
    path.mkdir(parents=True)
    git(path, "init", "-q", "-b", "main")
    (path / "notes.md").write_text("# Notes\n\nline 0\n")
    git(path, "add", "-A")
    git(path, "commit", "-q", "-m", "init")
    return path


def _child_cpu() -> float:
    usage = resource.getrusage(resource.RUSAGE_CHILDREN)
    return usage.ru_utime + usage.ru_stime


def timed_commit(repo: Path, n: int) -> tuple[float, float]:
    """(wall, CPU) seconds of one `git commit` of a one-line change."""
    with open(repo / "notes.md", "a") as fh:
        fh.write(f"line {n}\n")
    git(repo, "add", "notes.md")
    cpu, start = _child_cpu(), time.perf_counter()
    subprocess.run(["git", "-C", str(repo), "commit", "-q", "-m", f"change {n}"], check=True, capture_output=True)
    return time.perf_counter() - start, _child_cpu() - cpu


def main() -> int:
    parser = arg_parser(__doc__.split("\n")[0])
    parser.add_argument("--commits", type=int, default=50, help="measured commits per side (default 50)")
    args = parser.parse_args()
    report = Report("hook_bench.py")
    with isolated_home("hooks") as root:
        os.environ.update(GIT_ENV)
        os.environ["QMD_STATE_DIR"] = str(root / "state")
        hooked, plain, empty = make_repo(root / "hooked"), make_repo(root / "plain"), make_repo(root / "empty-hook")
        subprocess.run([QMD_BIN, "hooks", "install", str(hooked)], check=True, capture_output=True)
        (empty / ".git" / "hooks" / "post-commit").write_text("#!/bin/sh\n")
        (empty / ".git" / "hooks" / "post-commit").chmod(0o755)
        sides = {"without hooks (baseline)": plain, "with qmd's hooks": hooked, "an empty post-commit hook (scale)": empty}
        wall: dict[str, list[float]] = {name: [] for name in sides}
        cpu: dict[str, list[float]] = {name: [] for name in sides}
        names = list(sides)
        for n in range(3):  # warm the page cache on every side
            for name in names:
                timed_commit(sides[name], 1000 + n)
        for n in range(args.commits):
            for name in names[n % 3 :] + names[: n % 3]:  # rotate the order each round
                w, c = timed_commit(sides[name], n)
                wall[name].append(w)
                cpu[name].append(c)
        queued = len(os.listdir(root / "state" / "queue" / "new"))
        hook_alone = []
        for _ in range(args.commits):
            start = time.perf_counter()
            subprocess.run(["sh", ".git/hooks/post-commit"], cwd=hooked, check=True, capture_output=True)
            hook_alone.append(time.perf_counter() - start)
        base, ours = names[0], names[1]
        added = p50(wall[ours]) - p50(wall[base])
        print(f"\n`git commit` of a one-line change, {args.commits} commits each, interleaved: wall p50 / p90, CPU p50 (git + children)")
        for name in names:
            extra = "" if name == base else f"   +{(p50(wall[name]) - p50(wall[base])) * 1000:.1f} ms wall, +{(p50(cpu[name]) - p50(cpu[base])) * 1000:.1f} ms CPU"
            report.row(name, f"{ms(p50(wall[name]))} / {ms(percentile(wall[name], 90))}, CPU {ms(p50(cpu[name]))}{extra}")
        report.row("the hook script alone (sh post-commit, wall p50 / p90)", f"{ms(p50(hook_alone))} / {ms(percentile(hook_alone, 90))}")
        report.row("requests queued (warm-up + measured)", str(queued))
        report.data = {"wall": wall, "cpu": cpu, "hook_alone": hook_alone}
        assert queued == args.commits + 3, f"expected {args.commits + 3} requests, found {queued}"
        report.target(Target("commit p50 added by the hook", added * 1000, LIMIT_MS, "ms"))
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
