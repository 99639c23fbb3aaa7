"""How soon `qmd mcp` (stdio) answers `initialize`, against bare interpreter starts.

Prints p50/p90 over N runs of: `python -I -c pass` (process start to exit), and `qmd mcp`
(process start to the initialize response on stdout), and their ratio, all measured in
the same run on an index with the bundled example notes (or --notes DIR).

    python bench/mcp_initialize.py [-n 30] [--notes DIR] [--cmd qmd]
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}


def env_for(home: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_"))}
    env["HOME"] = str(home)
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share")):
        env[var] = str(home / sub)
    return env


def time_initialize(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(json.dumps(INIT).encode() + b"\n")
    proc.stdin.flush()
    line = proc.stdout.readline()
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    proc.wait(timeout=30)
    reply = json.loads(line)
    assert reply.get("result", {}).get("serverInfo", {}).get("name") == "qmd", reply
    return elapsed


def time_process(cmd: list[str], env: dict[str, str]) -> float:
    started = time.perf_counter()
    subprocess.run(cmd, env=env, check=True, stdout=subprocess.DEVNULL)
    return time.perf_counter() - started


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))] * 1000


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("-n", type=int, default=30)
    ap.add_argument("--notes", type=Path, default=REPO / "examples" / "notes")
    ap.add_argument("--cmd", default=shutil.which("qmd") or "qmd", help="the qmd launcher to time")
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="qmd-bench-init-"))
    env = env_for(home)
    try:
        subprocess.run([args.cmd, "collection", "add", str(args.notes), "--name", "notes"], env=env, check=True, capture_output=True)
        # A config is cached (parsed, as JSON) once it has settled for 2 s, as every real
        # one has; a first start after that writes the cache.
        time.sleep(2.2)
        time_initialize([args.cmd, "mcp"], env)
        bare = [sys.executable, "-I", "-c", "pass"]
        runs: dict[str, list[float]] = {"python -I -c pass": [], "qmd mcp initialize": []}
        for _ in range(args.n):  # interleaved, so load drifts hit both alike
            runs["python -I -c pass"].append(time_process(bare, env))
            runs["qmd mcp initialize"].append(time_initialize([args.cmd, "mcp"], env))
        base = statistics.median(runs["python -I -c pass"])
        for name, values in runs.items():
            print(f"{name:24} p50 {pct(values, 0.5):7.1f} ms  p90 {pct(values, 0.9):7.1f} ms  ratio {statistics.median(values) / base:5.2f}x")
    finally:
        shutil.rmtree(home, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
