"""The HTTP server's process bookkeeping: state, stop, ports, the detached launcher.

Built on the PID file and the single-instance lock (qmd/serve/pidfile.py):

- a PID file whose lock nobody holds is stale (the server died without cleaning up);
- a second server for the same index fails to take the lock and is refused;
- `stop` signals the recorded PID only if that process's command line is the one the
  PID file recorded and looks like `qmd … mcp --http` (PIDs are reused).

Library code: returns data and raises QmdError; the CLI prints.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

from qmd.core.errors import QmdError
from qmd.core.fileio import replace_file
from qmd.core.paths import DEFAULT_INDEX
from qmd.serve.pidfile import PidInfo, already_running, load_pid_file, lock_is_held, lock_path, log_path, pid_path, remove_pid_file
from qmd.serve.process import is_our_server, process_alive

DEFAULT_PORT = 8181
PORT_SCAN = 100  # how far past 8181 a non-default index looks for a free port
STOP_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 60.0
GONE_TIMEOUT_S = 15.0
LOG_ROTATE_BYTES = 10 * 1024 * 1024

State = Literal["running", "stale", "none", "unverified"]
Say = Callable[[str], None]


@dataclass
class ServerState:
    """What runs for an index: `running`, `stale` (a PID file nobody backs), `none`, or
    `unverified` (a server holds the lock but the PID file names a process that is not it)."""

    state: State
    info: PidInfo | None
    reason: str = ""


def inspect(index: str) -> ServerState:
    """The server state of `index`, from its lock, PID file and process table (no changes)."""
    path = pid_path(index)
    info = load_pid_file(path)
    held = lock_is_held(index)
    if info is None:
        if held:
            return ServerState("running", None, "the lock is held but there is no PID file (starting or stopping)")
        return ServerState("stale" if path.exists() else "none", None, "unreadable PID file" if path.exists() else "")
    if not held:
        return ServerState("stale", info, f"no server holds the index's server lock (pid {info.pid} is gone or is not qmd)")
    ours, why = is_our_server(info)
    # The lock is held, so a server runs; if the PID file names another process, refuse
    # to act on it rather than guess.
    return ServerState("running" if ours else "unverified", info, why)


def clean_stale(index: str) -> ServerState:
    """Remove a stale PID file; returns what was found."""
    state = inspect(index)
    if state.state == "stale":
        pid_path(index).unlink(missing_ok=True)
    return state


@dataclass
class StopReport:
    """What `stop` did: `stopped` (a server was signalled and is gone), the PID file it read, a line for people."""

    stopped: bool
    info: PidInfo | None
    message: str
    killed: bool = False


def stop(index: str, timeout: float = STOP_TIMEOUT_S) -> StopReport:
    """Stop the index's server after verifying it is ours: SIGTERM, then SIGKILL after `timeout`."""
    state = inspect(index)
    if state.state == "none":
        return StopReport(False, None, f"no MCP server is running for index '{index}'")
    if state.state == "stale":
        pid_path(index).unlink(missing_ok=True)
        return StopReport(False, state.info, f"no MCP server is running for index '{index}' (removed a stale PID file: {state.reason})")
    info = state.info
    if state.state == "unverified" and info is not None:
        raise QmdError(
            f"the PID file of index '{index}' names pid {info.pid}, which is not qmd's MCP server ({state.reason}); not signalling it",
            f"find the server with: ps aux | grep 'qmd.*mcp'; stop it yourself, then remove {pid_path(index)}",
        )
    if info is None:
        raise QmdError(f"an MCP server for index '{index}' holds its lock but wrote no PID file", "wait a second and retry; if it persists, stop the process yourself")
    os.kill(info.pid, signal.SIGTERM)
    if _wait_stopped(index, info.pid, timeout):
        remove_pid_file(pid_path(index), info.pid)
        return StopReport(True, info, f"stopped the MCP server for index '{index}' (pid {info.pid}, {info.url})")
    os.kill(info.pid, signal.SIGKILL)
    _wait_stopped(index, info.pid, 5.0)
    remove_pid_file(pid_path(index), info.pid)
    return StopReport(True, info, f"the MCP server for index '{index}' (pid {info.pid}) ignored SIGTERM for {timeout:.0f}s and was killed", killed=True)


def _wait_stopped(index: str, pid: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not process_alive(pid) or not lock_is_held(index):
            return True
        time.sleep(0.05)
    return False


def prune_lock(index: str, pid: int | None = None, timeout: float = GONE_TIMEOUT_S) -> bool:
    """Remove the index's lock file once no server needs it; True if it was removed.

    With `pid` (a server just stopped) this first waits, at most `timeout` seconds, until
    that process is gone and nobody holds the lock: a stopping server can still hold it
    while its threads exit (its main thread already shows as a zombie), and pulling the
    file then leaves it behind for good.
    """
    deadline = time.monotonic() + timeout
    while pid is not None and (lock_is_held(index) or process_alive(pid)) and time.monotonic() < deadline:
        time.sleep(0.02)
    path = lock_path(index)
    if not path.exists() or lock_is_held(index):
        return False
    path.unlink(missing_ok=True)
    return True


# --- ports ----------------------------------------------------------------------------


def bind_socket(host: str, port: int) -> socket.socket:
    """A listening TCP socket on (host, port); QmdError naming the fix if it is taken."""
    bind = host.strip().removeprefix("[").removesuffix("]")
    try:
        family, kind, proto, _, address = socket.getaddrinfo(bind or None, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)[0]
    except socket.gaierror as exc:
        raise QmdError(f"cannot bind to host {host!r}: {exc}", "use --host 127.0.0.1 (or another local address)") from exc
    sock = socket.socket(family, kind, proto)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind(address)
        sock.listen(1024)  # a burst of connections waits in the kernel, not refused
    except OSError as exc:
        sock.close()
        raise QmdError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "pick another port with --port N (or stop what uses it)") from exc
    return sock


def port_free(host: str, port: int) -> bool:
    """Whether (host, port) can be bound right now."""
    try:
        bind_socket(host, port).close()
    except QmdError:
        return False
    return True


def choose_port(index: str, requested: int | None, host: str, is_free: Callable[[str, int], bool] = port_free) -> int:
    """`--port` if given; 8181 for the default index; else the first free port after 8181."""
    if requested is not None:
        return requested
    if index == DEFAULT_INDEX:
        return DEFAULT_PORT
    for port in range(DEFAULT_PORT + 1, DEFAULT_PORT + 1 + PORT_SCAN):
        if is_free(host, port):
            return port
    raise QmdError(f"no free port in {DEFAULT_PORT + 1}-{DEFAULT_PORT + PORT_SCAN}", "pick one with --port N")


# --- the daemon launcher ----------------------------------------------------------------


def health(url: str, timeout: float = 2.0, token: str | None = None) -> dict[str, object] | None:
    """GET {url}/health as JSON, or None when nothing answers (or `token` is refused).

    Without `token` a server that asks for tokens answers liveness only: `{"status": "ok"}`."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        headers = {"Host": parts.netloc, **({"Authorization": f"Bearer {token}"} if token else {})}
        conn.request("GET", "/health", headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status != 200:
            return None
        data = json.loads(body)
        return data if isinstance(data, dict) else None
    except (OSError, ValueError):
        return None
    finally:
        conn.close()


def spawn(argv: list[str], index: str, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], Path]:
    """Start `argv` detached (own session, stdin closed, output appended to the log)."""
    log = log_path(index)
    log.parent.mkdir(parents=True, exist_ok=True)
    if log.exists() and log.stat().st_size > LOG_ROTATE_BYTES:
        replace_file(log, log.with_suffix(".log.1"))
    with open(log, "ab") as out:
        # local time, like the server's own log lines (service.stderr_log) in the same file
        out.write(f"--- {time.strftime('%Y-%m-%dT%H:%M:%S')} starting: {' '.join(argv)}\n".encode())
        out.flush()
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out, stderr=out, start_new_session=True, env=env, close_fds=True)
    return proc, log


def wait_ready(proc: subprocess.Popen[bytes], index: str, log: Path, timeout: float = READY_TIMEOUT_S) -> PidInfo:
    """Wait until the spawned server wrote its PID file and answers /health."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        code = proc.poll()
        if code is not None:
            raise QmdError(f"the MCP server exited at start (code {code}): {_tail(log)}", f"the whole log is in {log}")
        info = load_pid_file(pid_path(index))
        if info is not None and info.pid == proc.pid and health(info.url, timeout=1.0) is not None:
            return info
        time.sleep(0.1)
    raise QmdError(f"the MCP server did not answer within {timeout:.0f}s (pid {proc.pid})", f"see its log: {log}")


def _tail(log: Path, lines: int = 3) -> str:
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return "(no log)"
    return " | ".join(line.strip() for line in text[-lines:])


def daemon_argv(index: str, host: str, port: int | None, no_auth: bool = False) -> list[str]:
    """The command line of the detached server: this interpreter, `-m qmd`, no --daemon."""
    argv = [sys.executable, "-m", "qmd"]
    if index != DEFAULT_INDEX:
        argv += ["--index", index]
    argv += ["mcp", "--http", "--host", host]
    if port is not None:
        argv += ["--port", str(port)]
    if no_auth:
        argv.append("--no-auth")
    return argv


def start_daemon(index: str, host: str, port: int | None, say: Say | None = None, no_auth: bool = False) -> tuple[PidInfo, Path]:
    """Start a detached HTTP server for `index` and wait until it answers; (its PID file, its log).

    Refuses when one already runs; a stale PID file is removed first (reported through `say`).
    """
    state = inspect(index)
    if state.state in ("running", "unverified"):
        raise already_running(index, state.info if state.state == "running" else None)
    if state.state == "stale":
        pid_path(index).unlink(missing_ok=True)
        if say is not None:
            say(f"removed a stale PID file ({state.reason})")
    proc, log = spawn(daemon_argv(index, host, port, no_auth), index)
    return wait_ready(proc, index, log), log


def restart(index: str, host: str = "127.0.0.1", port: int | None = None, no_auth: bool = False) -> PidInfo:
    """Stop the index's server if one runs (or clear its stale PID file), then start a detached
    one of this build on `host`/`port` (`no_auth`: as one started with --no-auth); returns
    the new server's PID file."""
    state = inspect(index)
    if state.state == "running":
        stop(index)
    elif state.state == "stale":
        clean_stale(index)
    proc, log = spawn(daemon_argv(index, host, port, no_auth), index)
    return wait_ready(proc, index, log)
