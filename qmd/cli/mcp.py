"""`qmd mcp`: the MCP server for agents (stdio, or HTTP with --http), `stop`, `install`.

This module stays light (`qmd --help` imports it): the MCP SDK, starlette and uvicorn
are imported only when a server actually starts (qmd/mcp_server.py).
"""

from __future__ import annotations

import os
import sys
import time
from typing import TYPE_CHECKING, Annotated

import typer

from qmd.core.errors import QmdError
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
    from qmd.serve.service import ToolService, stderr_log

    return ToolService(open_store(), index, build_id=build_id(), log=stderr_log).start()


def _serve_stdio(index: str) -> None:
    from qmd.serve.service import stderr_log

    service = _service(index)
    try:
        from qmd.serve.server import serve_stdio

        serve_stdio(service, stderr_log)
    finally:
        service.close()


def _warn_exposed(host: str, port: int) -> None:
    from qmd.serve.origin import is_loopback

    if is_loopback(host):
        return
    err(
        f"warning: listening on {host}:{port}: /mcp, /query, /search and /health are unauthenticated; "
        "anyone who can reach this port can read every indexed note."
    )
    err("warning: requests must still name a loopback Host or one listed in QMD_ALLOWED_HOSTS (e.g. QMD_ALLOWED_HOSTS=myhost.lan).")


def _serve_http(index: str, host: str, port: int | None) -> None:
    from qmd import build_id
    from qmd.serve import daemon
    from qmd.serve.origin import Guard
    from qmd.serve.service import stderr_log

    lock = daemon.InstanceLock(index).acquire()  # refuses a second server for this index
    pid_file = daemon.pid_path(index)
    try:
        stale = daemon.read_pid_file(pid_file)
        if stale is not None or pid_file.exists():
            # We hold the lock, so whoever wrote it is gone.
            pid_file.unlink(missing_ok=True)
            err(f"removed a stale PID file ({pid_file}" + (f", pid {stale.pid})" if stale else ")"))
        chosen = daemon.choose_port(index, port, host)
        sock = daemon.bind_socket(host, chosen)
        _warn_exposed(host, chosen)
        service = _service(index)
        info = daemon.PidInfo(
            pid=os.getpid(), started_at=time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), host=host, port=chosen,
            index=index, argv=list(getattr(sys, "orig_argv", sys.argv)), build_id=build_id(),
        )
        guard = Guard.for_bind(host)

        done = []

        def shutdown() -> None:
            if done:
                return
            done.append(True)
            daemon.remove_pid_file(pid_file, os.getpid())
            service.close()
            stderr_log(f"qmd MCP server for index '{index}' stopped")

        try:
            from qmd.serve.server import serve_http

            daemon.write_pid_file(pid_file, info)
            err(f"qmd MCP server for index '{index}': {info.url}/mcp (also /query, /search, /health), pid {info.pid}")
            started = serve_http(service, sock, guard, stderr_log, shutdown)
        finally:
            shutdown()
            sock.close()
        if not started:
            raise QmdError("the HTTP server failed to start (see the messages above)", "check the port and host, then retry")
    finally:
        daemon.remove_pid_file(pid_file, os.getpid())
        lock.release()


def _start_daemon(index: str, host: str, port: int | None) -> None:
    from qmd.serve import daemon

    state = daemon.inspect(index)
    if state.state in ("running", "unverified"):
        raise daemon.already_running(index, state.info if state.state == "running" else None)
    if state.state == "stale":
        daemon.pid_path(index).unlink(missing_ok=True)
        err(f"removed a stale PID file ({state.reason})")
    proc, log = daemon.spawn(daemon.daemon_argv(index, host, port), index)
    info = daemon.wait_ready(proc, index, log)
    flag = "" if index == DEFAULT_INDEX else f" --index {index}"
    out(f"qmd MCP server for index '{index}' running at {info.url}/mcp (pid {info.pid})\n")
    out(f"log: {log}\nstop: qmd mcp stop{flag}\n")


@mcp_app.command("stop")
def stop(
    index: Annotated[str | None, typer.Option("--index", help="The index whose server to stop (default: the one chosen with qmd --index, else index).", show_default=False)] = None,
) -> None:
    """Stop the HTTP server of an index (after checking the PID is really qmd's server)."""
    from qmd.serve import daemon

    name = check_index_name(index or _index())
    report = daemon.stop(name)
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
    from qmd.serve import daemon
    from qmd.agents.registration import apply, plan_claude, plan_codex

    if not claude and not codex:
        raise typer.BadParameter("choose --claude and/or --codex", param_hint="--claude/--codex")
    index = _index()
    if http and port is None:
        running = daemon.read_pid_file(daemon.pid_path(index))
        port = running.port if running is not None else daemon.choose_port(index, None, "127.0.0.1")
    plans = []
    if claude:
        plans.append(plan_claude(index, scope, http, port or daemon.DEFAULT_PORT))
    if codex:
        plans.append(plan_codex(index, http, port or daemon.DEFAULT_PORT))
    for plan in plans:
        if print_:
            out(plan.describe() + "\n")
        else:
            out(apply(plan) + "\n")
    if http and not print_:
        state = daemon.inspect(index)
        if state.state != "running":
            flag = "" if index == DEFAULT_INDEX else f"--index {index} "
            err(f"note: no HTTP server runs for index '{index}' yet; start one with: qmd {flag}mcp --http --daemon")
