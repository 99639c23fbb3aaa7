"""The MCP server: a real stdio handshake, and every HTTP server a PID file names."""

from __future__ import annotations

import qmd
import qmd.serve as servers

from .context import Context, home_path, qmd_command
from .model import CheckResult, Clock, fail, ok, warn


def _stdio(ctx: Context) -> CheckResult:
    name = f"stdio handshake [{ctx.primary}]"
    if ctx.quick:
        return ok(name, "skipped (--quick)")
    with Clock() as c:
        shake = servers.stdio_handshake(ctx.primary)
    if not shake.ok:
        return fail(name, f"`qmd mcp` failed the MCP handshake: {shake.error}", qmd_command("mcp", index=ctx.primary) + "  # run it to see the error", ms=c.ms)
    if shake.missing_tools:
        return fail(name, f"the server lacks tools {', '.join(shake.missing_tools)} (has {', '.join(shake.tools)})", "./install.sh  # reinstall qmd", ms=c.ms)
    return ok(name, f"initialize + tools/list in {shake.seconds:.1f}s: {shake.server} {shake.version}, protocol {shake.protocol}, tools {', '.join(shake.tools)}", ms=c.ms)


def restart(index: str, info: servers.PidInfo | None) -> str:
    """Stop the index's server if one runs, then start it again where it was (this build)."""
    host, port = (info.host, info.port) if info else ("127.0.0.1", None)
    new = servers.restart(index, host, port)
    return f"restarted the HTTP server: pid {new.pid} at {new.url}, build {new.build_id}"


def _server(ctx: Context, index: str) -> list[CheckResult]:
    name = f"HTTP server [{index}]"
    with Clock() as c:
        state = servers.inspect(index)
        info = state.info
        start = qmd_command("mcp", "--http", "--daemon", index=index)
        if state.state == "none":
            return []
        if state.state == "stale":
            what = f"pid {info.pid}, {info.url}" if info else "unreadable"
            return [fail(name, f"stale PID file ({what}): {state.reason}", start, ms=c.ms, repair=lambda: restart(index, info))]
        if state.state == "unverified" or info is None:
            return [fail(name, f"a server holds the lock but {state.reason or 'wrote no PID file'}", f"ps aux | grep 'qmd.*mcp'  # stop it, then: {start}", ms=c.ms)]
        health = servers.health(info.url)
        if health is None:
            return [fail(name, f"pid {info.pid} runs but {info.url}/health does not answer", qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info))]
        installed = qmd.build_id()
        running = str(health.get("build_id") or info.build_id)
        if running != installed:
            return [
                fail(
                    name,
                    f"stale: pid {info.pid} runs build {running}, but {installed} is installed (started {info.started_at}, before an upgrade)",
                    qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info),
                )
            ]
        shake = None if ctx.quick else servers.http_handshake(info.url)
    if shake is not None and not shake.ok:
        return [fail(name, f"pid {info.pid} answers /health but the MCP handshake at {info.url}/mcp failed: {shake.error}", qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info))]
    uptime = health.get("uptime_s")
    return [ok(name, f"pid {info.pid} at {info.url}, build {running}, up {uptime}s, {health.get('documents')} documents; " + ("MCP handshake skipped (--quick)" if shake is None else "MCP handshake ok"), ms=c.ms)]


def check(ctx: Context) -> list[CheckResult]:
    results = [_stdio(ctx)]
    for index in servers.served_indexes():
        try:
            results += _server(ctx, index)
        except qmd.QmdError as exc:
            results.append(warn(f"HTTP server [{index}]", exc.message, exc.hint))
    return results
