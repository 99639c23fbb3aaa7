"""The MCP server: a real stdio handshake, and every HTTP server a PID file names."""

from __future__ import annotations

import qmd
from qmd import harness
import qmd.serve

from .context import Context, home_path, qmd_command
from .results import CheckResult, Clock, fail, ok, warn


def _stdio(ctx: Context) -> CheckResult:
    name = f"stdio handshake [{ctx.primary}]"
    if ctx.quick:
        return ok(name, "skipped (--quick)")
    with Clock() as c:
        shake = qmd.serve.stdio_handshake(ctx.primary)
    if not shake.ok:
        return fail(name, f"`qmd mcp` failed the MCP handshake: {shake.error}", qmd_command("mcp", index=ctx.primary) + "  # run it to see the error", ms=c.ms)
    if shake.missing_tools:
        return fail(name, f"the server lacks tools {', '.join(shake.missing_tools)} (has {', '.join(shake.tools)})", "./install.sh  # reinstall qmd", ms=c.ms)
    return ok(name, f"initialize + tools/list and server/discover + tools/list in {shake.seconds:.1f}s: {shake.server} {shake.version}, protocol {shake.protocol}, tools {', '.join(shake.tools)}; {_speaks(shake)}", ms=c.ms)


def _speaks(shake: qmd.serve.Handshake) -> str:
    """The versions the server says it speaks (its server/discover answer)."""
    return "speaks " + ", ".join(shake.supported)


def _health(url: str, token: str | None) -> dict[str, object] | None:
    """GET /health, asked again with a longer wait before a server counts as not answering:
    a sound server on a machine whose cores are busy can take over 2 s to answer (a false
    failure there would send the user to restart a healthy server)."""
    for timeout in HEALTH_WAITS_S:
        health = qmd.serve.health(url, timeout=timeout, token=token)
        if health is not None:
            return health
    return None


HEALTH_WAITS_S = (2.0, 10.0)


def restart(index: str, info: qmd.serve.PidInfo | None) -> str:
    """Stop the index's server if one runs, then start it again where it was (this build,
    with --no-auth only if it had it)."""
    host, port = (info.host, info.port) if info else ("127.0.0.1", None)
    new = qmd.serve.restart(index, host, port, no_auth=bool(info and "--no-auth" in info.argv))
    return f"restarted the HTTP server: pid {new.pid} at {new.url}, build {new.build_id}"


def _server(ctx: Context, index: str) -> list[CheckResult]:
    name = f"HTTP server [{index}]"
    with Clock() as c:
        state = qmd.serve.inspect(index)
        info = state.info
        start = qmd_command("mcp", "--http", "--daemon", index=index)
        if state.state == "none":
            return []
        if state.state == "stale":
            what = f"pid {info.pid}, {info.url}" if info else "unreadable"
            return [fail(name, f"stale PID file ({what}): {state.reason}", start, ms=c.ms, repair=lambda: restart(index, info))]
        if state.state == "unverified" or info is None:
            return [fail(name, f"a server holds the lock but {state.reason or 'wrote no PID file'}", f"ps aux | grep 'qmd.*mcp'  # stop it, then: {start}", ms=c.ms)]
        impostor = qmd.serve.prove(info.url, info.key)
        if impostor is not None:  # a token is sent to nothing that cannot prove it is the server
            return [fail(name, f"pid {info.pid} holds the server lock, but {impostor}; no token was sent to it", qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info))]
        token, source = qmd.serve.probe_token(index)
        health = _health(info.url, token)
        if health is None and token and _health(info.url, None) is not None:
            return [fail(name, f"pid {info.pid} at {info.url} refuses the token from {source} (revoked, or another index's)", qmd_command("token", "list", index=index) + f"  # then export a valid token in {source.lstrip('$')}", ms=c.ms)]
        if health is None:
            return [fail(name, f"pid {info.pid} runs but {info.url}/health does not answer", qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info))]
        installed = harness.build_id()
        running = str(health.get("build_id") or info.build_id)
        if running != installed:
            return [
                fail(
                    name,
                    f"stale: pid {info.pid} runs build {running}, but {installed} is installed (started {info.started_at}, before an upgrade)",
                    qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info),
                )
            ]
        if "uptime_s" not in health:  # liveness only: the server asks for a token and none was sent
            return [warn(name, f"pid {info.pid} at {info.url} is alive but asks for a token: the MCP handshake was not tried (build {running}, from its PID file)", "export QMD_TOKEN=<a token from: " + qmd_command("token", "add", "NAME", index=index) + ">, then: qmd doctor", ms=c.ms)]
        shake = None if ctx.quick else qmd.serve.http_handshake(info.url, token=token)
    if shake is not None and not shake.ok:
        return [fail(name, f"pid {info.pid} answers /health but the MCP handshake at {info.url}/mcp failed: {shake.error}", qmd_command("mcp", "stop", index=index) + " && " + start, ms=c.ms, repair=lambda: restart(index, info))]
    uptime = health.get("uptime_s")
    via = f" (token from {source})" if token else ""
    return [ok(name, f"pid {info.pid} at {info.url}, build {running}, up {uptime}s, {health.get('documents')} documents; " + ("MCP handshake skipped (--quick)" + via if shake is None else f"MCP handshake ok{via}; {_speaks(shake)}"), ms=c.ms)]


def check(ctx: Context) -> list[CheckResult]:
    results = [_stdio(ctx)]
    for index in qmd.serve.served_indexes():
        try:
            results += _server(ctx, index)
        except qmd.QmdError as exc:
            results.append(warn(f"HTTP server [{index}]", exc.message, exc.cli_hint))
    return results
