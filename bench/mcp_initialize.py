"""How soon `qmd mcp` (stdio) answers `initialize` and the first tool call, against bare interpreter starts.

Prints p50/p90 over N runs of: `python -I -c pass` (process start to exit), `qmd mcp`
(process start to the initialize response on stdout, and to the answer of a 2026-07-28
`server/discover` with its `_meta`, the probe Claude Code 2.1.332 waits 3 s for), both again
on a first start (a copy of the home as `qmd collection add` left it: no kept instructions)
with the first keyword query there too (these rows also print each whole process's CPU time,
which other load moves far less than wall time), and, each in a fresh process sent
`initialize`, `notifications/initialized` and one `tools/call` at once (as an agent whose
first turn calls a tool), process start to that call's answer: a keyword-only `query`
(`searches: [{type: lex}]`), `get` of one note, `status`; the same keyword query sent
PAUSE_S after the answer to `initialize` (a client whose model turn comes first), timed from
sending it to its answer (the server prepares its path in that pause); a 2026-07-28 session's
`server/discover` and keyword query (with its `_meta`) sent at once; each one's ratio to
`python -I -c pass`, and the first query's ratio to `initialize` (issue 31), all measured interleaved in the same run on an index with the
bundled example notes (or --notes DIR; no embedding), in a home as install.sh leaves it:
its `models.yml` names the embedding model (`qmd models import --set-default`; --bare: none,
the home `qmd collection add` alone leaves).

    python bench/mcp_initialize.py [-n 30] [--notes DIR] [--bare] [--cmd qmd [--cmd other-qmd]]
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
from collections.abc import Callable
from pathlib import Path

from _common import INSTALL_EMBEDDER, stdio_first_answer, with_child_cpu

REPO = Path(__file__).resolve().parents[1]
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
FIRST_CALLS: dict[str, dict[str, object]] = {  # the first tools/call of a session, by what it asks
    "first query (lex only)": {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}},
    "first get": {"name": "get", "arguments": {"file": "notes/onboarding.md"}},
    "first status": {"name": "status", "arguments": {}},
}
FIRST = "first query (lex only)"
PAUSE_S = 0.3  # between the answer to initialize and the first call: a client's model turn takes longer
AFTER_PAUSE = f"query {PAUSE_S:g} s after initialize"
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
META = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
DISCOVER = {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": META}}  # Claude Code 2.1.332's probe (3 s over stdio)
MODERN_FIRST = "discover, then query (_meta)"  # the 2026-07-28 session: no initialize, each request carries its _meta


def env_for(home: Path, pycache: Path) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_")) and k != "PYTHONDONTWRITEBYTECODE"}
    env["HOME"] = str(home)
    # Installed packages ship .pyc files: cache bytecode in the temp home (as bench/_common.py
    # does), or an editable checkout under PYTHONDONTWRITEBYTECODE=1 recompiles every module
    # each start and the figures measure the compiler.
    env["PYTHONPYCACHEPREFIX"] = str(pycache)
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share")):
        env[var] = str(home / sub)
    return env


def time_initialize(cmd: list[str], env: dict[str, str]) -> float:
    elapsed, reply = stdio_first_answer(cmd, env, [INIT], 1)
    assert reply.get("result", {}).get("serverInfo", {}).get("name") == "qmd", reply
    return elapsed


def time_discover(cmd: list[str], env: dict[str, str]) -> float:
    elapsed, reply = stdio_first_answer(cmd, env, [DISCOVER], 1)
    assert "2026-07-28" in reply.get("result", {}).get("supportedVersions", []), reply
    return elapsed


def first_start(template: Path, home: Path, pycache: Path) -> dict[str, str]:
    """The home at `home` as `qmd collection add` left it there, before any server start: what
    a client's first `qmd mcp` after an install finds (no kept instructions, whatever the add
    itself kept; a copy made elsewhere would miss caches named by their path)."""
    shutil.rmtree(home, ignore_errors=True)
    shutil.copytree(template, home, symlinks=True)  # times kept: the index is as old as the template
    return env_for(home, pycache)


def time_first_call(cmd: list[str], env: dict[str, str], call: dict[str, object]) -> float:
    """Process start to the answer of the first `tools/call`, sent right behind `initialize`."""
    elapsed, reply = stdio_first_answer(cmd, env, [INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call}], 2)
    result = reply.get("result", {})
    assert not result.get("isError") and result.get("content"), reply
    return elapsed


def time_call_after_pause(cmd: list[str], env: dict[str, str], call: dict[str, object]) -> float:
    """From sending the first `tools/call` PAUSE_S after `initialize` was answered to its answer."""
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    try:
        proc.stdin.write(json.dumps(INIT).encode() + b"\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline()).get("id") == 1
        time.sleep(PAUSE_S)
        started = time.perf_counter()
        proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in (INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": call})))
        proc.stdin.flush()
        reply = json.loads(proc.stdout.readline())
        elapsed = time.perf_counter() - started
        assert reply.get("id") == 2 and not reply.get("result", {}).get("isError"), reply
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        proc.kill()
        proc.wait()
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
    ap.add_argument("--bare", action="store_true", help="no models.yml in the homes (a home install.sh did not set up)")
    ap.add_argument("--cmd", action="append", help="the qmd launcher to time (default: qmd on PATH); given twice or more, each is timed, interleaved, on its own copy of the index (before/after a change)")
    args = ap.parse_args()
    cmds: list[str] = args.cmd or [shutil.which("qmd") or "qmd"]
    roots = [Path(tempfile.mkdtemp(prefix="qmd-bench-init-")) for _ in cmds]  # each its own kept instructions
    homes, templates, fresh, pycaches = ([root / sub for root in roots] for sub in ("home", "template", "fresh", "pycache"))
    envs = [env_for(home, pycache) for home, pycache in zip(homes, pycaches)]
    labels = [f"[{i + 1}] " if len(cmds) > 1 else "" for i in range(len(cmds))]
    try:
        for cmd, env, template, scratch, pycache in zip(cmds, envs, templates, fresh, pycaches):
            for where in (env, env_for(scratch, pycache)):  # the first-start home made where it is used: same paths
                subprocess.run([cmd, "collection", "add", str(args.notes), "--name", "notes"], env=where, check=True, capture_output=True)
                if not args.bare:  # install.sh's `qmd models import --set-default` (this checkout's code writes it)
                    subprocess.run([sys.executable, "-c", INSTALL_EMBEDDER], env=where, check=True, capture_output=True)
            shutil.copytree(scratch, template, symlinks=True)
        # The kept instructions are written once the index has settled for 2 s, as every real
        # one has; a first start after that writes them (the "first start" rows copy the
        # home as `collection add` left it, so they find none).
        time.sleep(2.2)
        bare = [sys.executable, "-I", "-c", "pass"]
        for cmd, env in zip(cmds, envs):
            time_initialize([cmd, "mcp"], env)
            for call in FIRST_CALLS.values():  # warm-up: bytecode, the page cache
                time_first_call([cmd, "mcp"], env, call)
        runs: dict[str, list[float]] = {"python -I -c pass": []}
        cpu: dict[str, list[float]] = {}  # CPU of the whole process (to its exit), for the rows timed through `record`

        def record(name: str, fn: Callable[[], float]) -> None:
            spent, elapsed = with_child_cpu(fn)
            runs[name].append(elapsed)
            cpu.setdefault(name, []).append(spent)

        for label in labels:
            runs.update({f"{label}{start}{what}": [] for start in ("", "first start: ") for what in ("qmd mcp initialize", "qmd mcp server/discover")})
            runs.update({f"{label}{name}": [] for name in FIRST_CALLS})
            runs[f"{label}{AFTER_PAUSE}"] = []
            runs[f"{label}{MODERN_FIRST}"] = []
            runs[f"{label}first start: {FIRST}"] = []
        for _ in range(args.n):  # interleaved, so load drifts hit all alike
            record("python -I -c pass", lambda: time_process(bare, envs[0]))
            for cmd, env, label, template, scratch, pycache in zip(cmds, envs, labels, templates, fresh, pycaches):
                record(f"{label}qmd mcp initialize", lambda: time_initialize([cmd, "mcp"], env))
                record(f"{label}qmd mcp server/discover", lambda: time_discover([cmd, "mcp"], env))
                first = (template, scratch, pycache)
                record(f"{label}first start: qmd mcp initialize", lambda: time_initialize([cmd, "mcp"], first_start(*first)))
                record(f"{label}first start: qmd mcp server/discover", lambda: time_discover([cmd, "mcp"], first_start(*first)))
                record(f"{label}first start: {FIRST}", lambda: time_first_call([cmd, "mcp"], first_start(*first), FIRST_CALLS[FIRST]))
                for name, call in FIRST_CALLS.items():
                    runs[f"{label}{name}"].append(time_first_call([cmd, "mcp"], env, call))
                runs[f"{label}{AFTER_PAUSE}"].append(time_call_after_pause([cmd, "mcp"], env, FIRST_CALLS[FIRST]))
                modern = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**FIRST_CALLS[FIRST], "_meta": META}}
                runs[f"{label}{MODERN_FIRST}"].append(stdio_first_answer([cmd, "mcp"], env, [DISCOVER, modern], 2)[0])
        for cmd, label in zip(cmds, labels):
            if label:
                print(f"{label}{cmd}")
        base = statistics.median(runs["python -I -c pass"])
        base_cpu = statistics.median(cpu["python -I -c pass"])
        for name, values in runs.items():
            spent = f"  CPU {statistics.median(cpu[name]) * 1000:6.1f} ms ({statistics.median(cpu[name]) / base_cpu:5.2f}x)" if name in cpu else ""
            print(f"{name:30} p50 {pct(values, 0.5):7.1f} ms  p90 {pct(values, 0.9):7.1f} ms  ratio {statistics.median(values) / base:5.2f}x{spent}")
        for label in labels:  # issue 31's target: the first keyword call answered within 1.3x initialize
            p50 = {name: statistics.median(runs[f"{label}{name}"]) for name in (FIRST, "qmd mcp initialize", MODERN_FIRST, "qmd mcp server/discover")}
            print(f"{label}first query ÷ initialize {p50[FIRST] / p50['qmd mcp initialize']:.2f}x; discover, then query ÷ discover {p50[MODERN_FIRST] / p50['qmd mcp server/discover']:.2f}x")
    finally:
        for root in roots:
            shutil.rmtree(root, ignore_errors=True)
    return 0

if __name__ == "__main__":
    sys.exit(main())
