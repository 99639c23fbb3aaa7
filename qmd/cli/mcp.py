"""`qmd mcp`: the MCP server for agents (stdio, or HTTP with --http), `stop`, `install`.

This module stays light (`qmd --help` imports it): the servers (qmd/serve/stdio.py,
qmd/serve/httpd.py) are imported only when one actually starts.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

import typer

from qmd.core.paths import DEFAULT_INDEX, resolve_index
from qmd.cli.shared import STATE, err, open_store, out

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
    """The index's key: its name, or for a project-local index the path of its config (its
    HTTP server has PID, lock and log files of its own: qmd/serve/pidfile.py)."""
    return resolve_index(STATE.index_name).key


@mcp_app.callback(invoke_without_command=True)
def serve(
    ctx: typer.Context,
    http: Annotated[bool, typer.Option("--http", help="Serve Streamable HTTP (/mcp) plus /query, /search and /health instead of stdio.")] = False,
    port: Annotated[int | None, typer.Option("--port", help="HTTP port (default 8181 for the default index, the next free port for another or a project-local one).", show_default=False)] = None,
    host: Annotated[str, typer.Option("--host", help="Address to listen on. Anything but loopback needs a token (qmd token add NAME) or --no-auth.")] = "127.0.0.1",
    daemon: Annotated[bool, typer.Option("--daemon", help="With --http: run in the background (PID file in the state dir; stop with qmd mcp stop).")] = False,
    no_auth: Annotated[bool, typer.Option("--no-auth", help="With --http: check no tokens, even beyond loopback (anyone who can connect reads every note).")] = False,
) -> None:
    """Serve the index to agents over MCP (stdio by default)."""
    if ctx.invoked_subcommand is not None:
        return
    if not http and (daemon or port is not None or host != "127.0.0.1" or no_auth):
        raise typer.BadParameter("--port, --host, --daemon and --no-auth need --http", param_hint="--http")
    if port is not None and not 0 < port < 65536:
        raise typer.BadParameter("must be between 1 and 65535", param_hint="--port")
    index = _index()
    if daemon:
        _start_daemon(index, host, port, no_auth)
    elif http:
        _serve_http(index, host, port, no_auth)
    else:
        _serve_stdio(index)


def _service(index: str) -> ToolService:
    from qmd.core.buildinfo import build_id
    from qmd.serve.logsafe import stderr_log
    from qmd.serve.service import ToolService

    return ToolService(open_store(), index, build_id=build_id(), log=stderr_log).start()


def _serve_stdio(index: str) -> None:
    from qmd.serve.stdio import run

    code = run(index)
    if code:
        raise typer.Exit(code)


def _serve_http(index: str, host: str, port: int | None, no_auth: bool = False) -> None:
    from qmd.serve.httpd import run_http

    run_http(index, host, port, lambda: _service(index), err, no_auth)


def _start_daemon(index: str, host: str, port: int | None, no_auth: bool = False) -> None:
    from qmd.serve import start_daemon
    from qmd.serve.httpd import authenticator

    authenticator(index, host, no_auth, lambda _line: None)  # refuse here, not in the detached server's log
    from qmd.serve.pidfile import stop_hint

    info, log = start_daemon(index, host, port, err, no_auth)
    out(f"qmd MCP server for index '{index}' running at {info.url}/mcp (pid {info.pid})\n")
    out(f"log: {log}\nstop: {stop_hint(index)}\n")


@mcp_app.command("stop", short_help="Stop an index's HTTP server.")
def stop(
    index: Annotated[str | None, typer.Option("--index", help="The index whose server to stop: a name, or the path of a project's .qmd/index.yml (default: the one chosen with qmd --index, else the project-local index found from here, else index).", show_default=False)] = None,
) -> None:
    """Stop the HTTP server of an index (after checking the PID is really qmd's server)."""
    from qmd.serve import stop as stop_server

    key = resolve_index(index).key if index is not None else _index()
    report = stop_server(key)
    out(report.message + "\n")


@mcp_app.command("install", short_help="Register qmd's MCP server with Claude Code or Codex.")
def install(
    claude: Annotated[bool, typer.Option("--claude", help="Register with Claude Code.")] = False,
    codex: Annotated[bool, typer.Option("--codex", help="Register with Codex.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Claude Code: user (~/.claude.json) or project (./.mcp.json).")] = "user",
    http: Annotated[bool, typer.Option("--http", help="Register the HTTP server's URL (run qmd mcp --http --daemon) instead of a stdio command.")] = False,
    port: Annotated[int | None, typer.Option("--port", help="With --http: the server's port (default 8181 for the default index).", show_default=False)] = None,
    token_env: Annotated[str | None, typer.Option("--token-env", metavar="VAR", help="With --http: the client sends the token held in $VAR (Authorization: Bearer); the token itself is never written.", show_default=False)] = None,
    url: Annotated[str | None, typer.Option("--url", help="With --http: the server's URL when it is not this machine's (a team server behind TLS: https://notes.example.com/mcp).", show_default=False)] = None,
    print_: Annotated[bool, typer.Option("--print", help="Show what would be run or written; change nothing.")] = False,
) -> None:
    """Register qmd's MCP server with Claude Code and/or Codex."""
    from qmd.agents import apply, check_changeable, plan_claude, plan_codex
    from qmd.serve import DEFAULT_PORT, inspect, read_pid_file
    from qmd.serve.daemon import choose_port

    if not claude and not codex:
        raise typer.BadParameter("choose --claude and/or --codex", param_hint="--claude/--codex")
    if url is not None:
        http = True
        if not url.startswith(("http://", "https://")):
            raise typer.BadParameter("must start with http:// or https://", param_hint="--url")
    if token_env is not None and not http:
        raise typer.BadParameter("a stdio server needs no token: add --http (or --url)", param_hint="--token-env")
    index = resolve_index(STATE.index_name).name  # what the entry pins (a local index is found from the agent's folder)
    server = _index()  # whose HTTP server's port is registered
    if http and port is None and url is None:
        running = read_pid_file(server)
        port = running.port if running is not None else choose_port(server, None, "127.0.0.1")
    plans = []
    if claude:
        plans.append(plan_claude(index, scope, http, port or DEFAULT_PORT, token_env=token_env, url=url))
    if codex:
        plans.append(plan_codex(index, http, port or DEFAULT_PORT, token_env=token_env, url=url))
    if not print_:  # both clients' files checked first: registered with both or neither
        check_changeable([path for plan in plans if (path := plan.writes) is not None])
    for plan in plans:
        if print_:
            out(plan.describe() + "\n")
        else:
            out(apply(plan) + "\n")
    if token_env and not print_:
        import os

        if not os.environ.get(token_env):
            err(f"note: ${token_env} is not set in this shell; the client must see it when it starts (export {token_env}=<token from qmd token add NAME>)")
    if http and url is None and not print_:
        state = inspect(server)
        if state.state != "running":
            flag = "" if server == DEFAULT_INDEX else f"--index {server} "
            err(f"note: no HTTP server runs for index '{server}' yet; start one with: qmd {flag}mcp --http --daemon")
