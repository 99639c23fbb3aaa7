"""`qmd mcp`: the MCP server for agents (stdio, or HTTP with --http), `stop`, `install`.

This module stays light (`qmd --help` imports it): the servers (qmd/serve/stdio.py,
qmd/serve/httpd.py) are imported only when one actually starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from qmd.core.paths import DEFAULT_INDEX, check_index_name, resolve_index
from qmd.cli.common import STATE, err, open_store, out

if TYPE_CHECKING:
    from qmd.serve.service import ToolService

mcp_app = typer.Typer(
    help="The MCP server for agents: `qmd mcp` (stdio), `qmd mcp --http [--daemon]`, `qmd mcp stop`, `qmd mcp install`.",
    invoke_without_command=True,
    no_args_is_help=False,
    add_completion=False,
    rich_markup_mode=None,
)


def _index() -> str:
    return resolve_index(STATE.index_name).name


@mcp_app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve Streamable HTTP (/mcp) plus /query, /search and /health instead of stdio.")] = False,
    port: Annotated[int | None, typer.Option("--port", help="HTTP port (default 8181 for the default index, the next free port for another).", show_default=False)] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on. Anything but loopback exposes unauthenticated endpoints.")] = "127.0.0.1",
    daemon: Annotated[bool, typer.Option("--daemon", help="With --http: run in the background (PID file in the state dir; stop with qmd mcp stop).")] = False,
) -> None:
    """Serve the index to agents over MCP (stdio by default)."""
    if ctx.invoked_subcommand is not None:
        return
    if not http and (daemon or port is not None or host != "127.0.0.1"):
        raise typer.BadParameter("--port, --host and --daemon need --http", param_hint="--http")
    if port is not None and not 0 < port < 65536:
        raise typer.BadParameter("must be between 1 and 65535", param_hint="--port")
    index = _index()
    if daemon:
        _start_daemon(index, host, port)
    elif http:
        _serve_http(index, host, port)
    else:
        _serve_stdio(index)


def _service(index: str) -> ToolService:
    from qmd import build_id
    from qmd.serve.logsafe import stderr_log
    from qmd.serve.service import ToolService

    return ToolService(open_store(), index, build_id=build_id(), log=stderr_log).start()


def _serve_stdio(index: str) -> None:
    from qmd.serve.stdio import run

    code = run(index)
    if code:
        raise typer.Exit(code)


def _serve_http(index: str, host: str, port: int | None) -> None:
    from qmd.serve.httpd import run_http

    run_http(index, host, port, lambda: _service(index), err)


def _start_daemon(index: str, host: str, port: int | None) -> None:
    from qmd.serve import start_daemon

    info, log = start_daemon(index, host, port, err)
    flag = "" if index == DEFAULT_INDEX else f" --index {index}"
    out(f"qmd MCP server for index '{index}' running at {info.url}/mcp (pid {info.pid})\n")
    out(f"log: {log}\nstop: qmd mcp stop{flag}\n")


@mcp_app.command("stop")
def stop(
    index: Annotated[str | None, typer.Option("--index", help="The index whose server to stop (default: the one chosen with qmd --index, else index).", show_default=False)] = None,
) -> None:
    """Stop the HTTP server of an index (after checking the PID is really qmd's server)."""
    from qmd.serve import stop as stop_server

    name = check_index_name(index or _index())
    report = stop_server(name)
    out(report.message + "\n")


@mcp_app.command("install")
def install(
    claude: Annotated[bool, typer.Option("--claude", help="Register with Claude Code.")] = False,
    codex: Annotated[bool, typer.Option("--codex", help="Register with Codex.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Claude Code: user (~/.claude.json) or project (./.mcp.json).")] = "user",
    http: Annotated[bool, typer.Option("--http", help="Register the HTTP server's URL (run qmd mcp --http --daemon) instead of a stdio command.")] = False,
    port: Annotated[int | None, typer.Option("--port", help="With --http: the server's port (default 8181 for the default index).", show_default=False)] = None,
    print_: Annotated[bool, typer.Option("--print", help="Show what would be run or written; change nothing.")] = False,
) -> None:
    """Register qmd's MCP server with Claude Code and/or Codex."""
    from qmd.agents import apply, plan_claude, plan_codex
    from qmd.serve import DEFAULT_PORT, inspect, read_pid_file
    from qmd.serve.daemon import choose_port

    if not claude and not codex:
        raise typer.BadParameter("choose --claude and/or --codex", param_hint="--claude/--codex")
    index = _index()
    if http and port is None:
        running = read_pid_file(index)
        port = running.port if running is not None else choose_port(index, None, "127.0.0.1")
    plans = []
    if claude:
        plans.append(plan_claude(index, scope, http, port or DEFAULT_PORT))
    if codex:
        plans.append(plan_codex(index, http, port or DEFAULT_PORT))
    for plan in plans:
        if print_:
            out(plan.describe() + "\n")
        else:
            out(apply(plan) + "\n")
    if http and not print_:
        state = inspect(index)
        if state.state != "running":
            flag = "" if index == DEFAULT_INDEX else f"--index {index} "
            err(f"note: no HTTP server runs for index '{index}' yet; start one with: qmd {flag}mcp --http --daemon")
