"""Decide the protocol layer by measurement (issue 30): the `mcp` SDK against qmd's own, over stdio.

Process start to the first answer, both MCP revisions, interleaved in the same run with
`python -I -c pass` (the budget's unit):

- qmd's own server (`qmd mcp`): `initialize` answered; `initialize` + `notifications/initialized`
  + a keyword `tools/call query` sent at once, to that call's answer (2025-11-25); and a
  `tools/call query` carrying the 2026-07-28 `_meta` envelope, no handshake.
- a minimal server on the installed `mcp` SDK (bench/_sdk_server.py: `MCPServer`, stdio, one
  `query` tool answered by the same qmd core, qmd.serve.service.ToolService): the same three.
- where the time goes: `python -I -c 'import X'` for the SDK's layers (pydantic, anyio,
  mcp_types, mcp.server.lowlevel, mcp.server.mcpserver, mcp.server) and qmd's own
  (qmd.serve.stdio, what `qmd mcp` imports before it reads stdin).

Each row: wall-clock p50 and its ratio to `python -I -c pass`, and (less moved by other load
on the shared cores) the child's CPU time (user + sys, the whole process) p50 and its ratio.
Both servers read the same index (examples/notes, no embedding) in one temp HOME; bytecode
is cached there. Target (issue 30): the first tool answer over stdio <= 4x `python -I -c pass`,
for each server and revision; the SDK may replace qmd's layer only if it holds it.

    python bench/mcp_sdk_bench.py [--rounds 10] [--json out.json]
"""

from __future__ import annotations

import importlib.metadata
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from _common import BENCH, PYTHON, REPO, Report, Target, arg_parser, isolated_home, ms, p50, percentile, stdio_first_answer, timed, with_child_cpu

MODERN = "2026-07-28"
LEGACY = "2025-11-25"
QUERY_CALL = {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}}
META = {"io.modelcontextprotocol/protocolVersion": MODERN, "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "bench", "version": "0"}}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": LEGACY, "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
# One message list per measured exchange, and the id whose answer ends it.
EXCHANGES: dict[str, tuple[list[dict[str, Any]], int]] = {
    "initialize": ([INIT], 1),
    f"first query, {LEGACY}": ([INIT, INITIALIZED, {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": QUERY_CALL}], 2),
    f"first query, {MODERN}": ([{"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {**QUERY_CALL, "_meta": META}}], 2),
}
IMPORTS = ["pydantic", "anyio", "mcp_types", "mcp.server.lowlevel", "mcp.server.mcpserver", "mcp.server", "qmd.serve.stdio"]
BUDGET = 4.0  # x `python -I -c pass`


def qmd_command() -> list[str]:
    """The `qmd` console script beside the interpreter (what agents start), else `python -m qmd`."""
    script = Path(PYTHON).parent / "qmd"
    return [str(script), "mcp"] if script.is_file() else [PYTHON, "-m", "qmd", "mcp"]


def check(server: str, exchange: str, reply: dict[str, Any]) -> None:
    """The answer is what was asked: the handshake, or a query answer with hits."""
    result = reply.get("result")
    if not isinstance(result, dict):
        sys.exit(f"{server} {exchange}: no result: {str(reply)[:300]}")
    if exchange == "initialize":
        if result.get("protocolVersion") != LEGACY:
            sys.exit(f"{server} initialize: {str(result)[:300]}")
    elif result.get("isError") or not (result.get("structuredContent") or {}).get("results"):
        sys.exit(f"{server} {exchange}: {str(result)[:300]}")


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=10, help="interleaved rounds (default 10)")
    args = parser.parse_args()
    try:
        sdk_version = importlib.metadata.version("mcp")
    except importlib.metadata.PackageNotFoundError:
        sys.exit("the mcp SDK is not installed here; install the dev extra (pip install -e '.[dev]')")
    servers = {"qmd": qmd_command(), f"mcp SDK {sdk_version}": [PYTHON, str(BENCH / "_sdk_server.py")]}
    report = Report("mcp_sdk_bench")
    with isolated_home("mcp-sdk") as tmp:
        env = dict(os.environ)
        env["PYTHONPATH"] = os.pathsep.join(p for p in (str(REPO), env.get("PYTHONPATH", "")) if p)  # this checkout's qmd in every child
        add = subprocess.run([*qmd_command()[:-1], "collection", "add", str(REPO / "examples" / "notes"), "--name", "notes"], env=env, capture_output=True, text=True)
        if add.returncode:
            sys.exit(f"qmd collection add failed: {add.stderr}")
        print(f"temp dir {tmp}; mcp {sdk_version}; {args.rounds} rounds, interleaved", flush=True)
        bare = [sys.executable, "-I", "-c", "pass"]
        imports = {name: [sys.executable, "-I", "-c", f"import {name}"] for name in IMPORTS}
        # qmd.serve.stdio lives in this checkout: -I drops PYTHONPATH, so that one runs without -I.
        imports["qmd.serve.stdio"] = [sys.executable, "-c", "import qmd.serve.stdio"]
        for server, cmd in servers.items():  # warm-up: bytecode, the page cache, qmd's kept instructions
            for exchange, (messages, want) in EXCHANGES.items():
                check(server, exchange, stdio_first_answer(cmd, env, messages, want)[1])
        for cmd in imports.values():
            subprocess.run(cmd, env=env, check=True)
        labels = ["python -I -c pass", *(f"import {name}" for name in imports), *(f"{server}: {exchange}" for server in servers for exchange in EXCHANGES)]
        wall: dict[str, list[float]] = {label: [] for label in labels}
        cpu: dict[str, list[float]] = {label: [] for label in labels}

        def run_process(label: str, cmd: list[str]) -> None:
            spent, seconds = with_child_cpu(lambda: timed(lambda: subprocess.run(cmd, env=env, check=True)))
            wall[label].append(seconds)
            cpu[label].append(spent)

        for r in range(args.rounds):
            run_process("python -I -c pass", bare)
            for name, cmd in imports.items():
                run_process(f"import {name}", cmd)
            order = list(servers.items()) if r % 2 == 0 else list(reversed(servers.items()))
            for server, cmd in order:
                for exchange, (messages, want) in EXCHANGES.items():
                    def exchange_once(cmd: list[str] = cmd, messages: list[dict[str, Any]] = messages, want: int = want) -> tuple[float, dict[str, Any]]:
                        return stdio_first_answer(cmd, env, messages, want)

                    spent, (seconds, reply) = with_child_cpu(exchange_once)
                    check(server, exchange, reply)
                    wall[f"{server}: {exchange}"].append(seconds)
                    cpu[f"{server}: {exchange}"].append(spent)
        base, base_cpu = p50(wall["python -I -c pass"]), p50(cpu["python -I -c pass"])
        print(f"\n  {'':<52} {'wall p50':>10} {'p90':>10} {'ratio':>7}   {'CPU p50':>10} {'ratio':>7}")
        for label in labels:
            report.row(label, f"{ms(p50(wall[label])):>10} {ms(percentile(wall[label], 90)):>10} {p50(wall[label]) / base:6.2f}x   {ms(p50(cpu[label])):>10} {p50(cpu[label]) / base_cpu:6.2f}x")
        for server in servers:
            for exchange in EXCHANGES:
                if exchange != "initialize":
                    report.target(Target(f"{server}: {exchange} / pass", p50(wall[f"{server}: {exchange}"]) / base, BUDGET, "x"))
        report.data = {"mcp_version": sdk_version, "rounds": args.rounds, "wall_s": wall, "cpu_s": cpu}
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
