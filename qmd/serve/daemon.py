"""The HTTP server's process bookkeeping: PID file, single-instance lock, port, stop.

One server per index. The server holds `<state>/mcp-{index}.lock` (flock: the kernel
releases it when the process dies, however it dies) for its whole life, and writes
`<state>/mcp-{index}.json` = {pid, started_at, host, port, index, argv, build_id} once its
socket is bound. So:

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
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from qmd.core.errors import QmdError
from qmd.core.paths import DEFAULT_INDEX, state_dir

DEFAULT_PORT = 8181
PORT_SCAN = 100  # how far past 8181 a non-default index looks for a free port
STOP_TIMEOUT_S = 10.0
READY_TIMEOUT_S = 60.0


def pid_path(index: str) -> Path:
    return state_dir() / f"mcp-{index}.json"


def lock_path(index: str) -> Path:
    return state_dir() / f"mcp-{index}.lock"


def log_path(index: str) -> Path:
    return state_dir() / "logs" / f"mcp-{index}.log"


@dataclass
class PidInfo:
    """The PID file (design §7): who serves this index, where, and which build."""

    pid: int
    started_at: str
    host: str
    port: int
    index: str
    argv: list[str]
    build_id: str

    @property
    def url(self) -> str:
        return f"http://{connect_host(self.host)}:{self.port}"


def connect_host(bind_host: str) -> str:
    """The address a local client uses to reach a server bound to `bind_host`."""
    host = bind_host.strip()
    if host in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def read_pid_file(path: Path) -> PidInfo | None:
    """The PID file, or None if absent or malformed (a malformed file is treated as stale)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = PidInfo(
            pid=int(data["pid"]), started_at=str(data["started_at"]), host=str(data["host"]), port=int(data["port"]),
            index=str(data["index"]), argv=[str(a) for a in data["argv"]], build_id=str(data["build_id"]),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if info.pid > 0 and 0 < info.port < 65536 else None


def write_pid_file(path: Path, info: PidInfo) -> None:
    """Atomically (temp file + rename): a reader never sees half a file."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    tmp.write_text(json.dumps(asdict(info), indent=2) + "\n", encoding="utf-8")
    os.replace(tmp, path)


def remove_pid_file(path: Path, pid: int | None = None) -> bool:
    """Remove the PID file (only if it records `pid`, when given); True if removed."""
    if pid is not None:
        info = read_pid_file(path)
        if info is not None and info.pid != pid:
            return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


# --- the single-instance lock ---------------------------------------------------------


class InstanceLock:
    """Held by a running server for its whole life: `acquire()` refuses a second one."""

    def __init__(self, index: str) -> None:
        from filelock import FileLock

        self.index = index
        self.path = lock_path(index)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = FileLock(str(self.path))

    def acquire(self) -> InstanceLock:
        from filelock import Timeout

        try:
            self._lock.acquire(timeout=0)
        except Timeout:
            raise already_running(self.index, read_pid_file(pid_path(self.index))) from None
        return self

    def release(self) -> None:
        self._lock.release(force=True)


def lock_is_held(index: str) -> bool:
    """Whether some process (a running server) holds the index's server lock."""
    from filelock import FileLock, Timeout

    path = lock_path(index)
    if not path.exists():
        return False
    probe = FileLock(str(path))
    try:
        probe.acquire(timeout=0)
    except Timeout:
        return True
    probe.release(force=True)
    return False


def already_running(index: str, info: PidInfo | None) -> QmdError:
    where = f" at {info.url}/mcp (pid {info.pid})" if info is not None else ""
    flag = "" if index == DEFAULT_INDEX else f" --index {index}"
    return QmdError(f"an MCP server for index '{index}' is already running{where}", f"use it, or stop it first: qmd mcp stop{flag}")


# --- processes ------------------------------------------------------------------------


def process_alive(pid: int) -> bool:
    """True if `pid` exists and is not a zombie."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True  # exists, owned by someone else
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
        return stat[stat.rindex(")") + 2] != "Z"
    except (OSError, ValueError, IndexError):
        return True


def process_argv(pid: int) -> list[str] | None:
    """The command line of `pid` (/proc, else `ps`), or None if it cannot be read."""
    try:
        raw = Path(f"/proc/{pid}/cmdline").read_bytes()
        if raw:
            return [part.decode("utf-8", "replace") for part in raw.rstrip(b"\0").split(b"\0")]
    except OSError:
        pass
    try:
        out = subprocess.run(["ps", "-p", str(pid), "-o", "args="], capture_output=True, text=True, timeout=5, env={**os.environ, "LC_ALL": "C"})
    except (OSError, subprocess.SubprocessError):
        return None
    text = out.stdout.strip()
    return text.split() if out.returncode == 0 and text else None


def looks_like_server(argv: list[str]) -> bool:
    """`… qmd … mcp … --http` (python -m qmd, the qmd launcher, or qmd/__main__.py)."""
    names = [os.path.basename(a) for a in argv]
    is_qmd = "qmd" in names or any(a.endswith(("qmd/__main__.py", "qmd\\__main__.py")) for a in argv)
    return is_qmd and "mcp" in argv and "--http" in argv


def is_our_server(info: PidInfo) -> tuple[bool, str]:
    """(verdict, why): is `info.pid` the server this PID file describes?"""
    if not process_alive(info.pid):
        return False, f"pid {info.pid} is not running"
    argv = process_argv(info.pid)
    if argv is None:
        return False, f"cannot read the command line of pid {info.pid}"
    same = argv == info.argv or " ".join(argv) == " ".join(info.argv)
    if not same or not looks_like_server(argv):
        return False, f"pid {info.pid} is now another program ({' '.join(argv)[:120]})"
    return True, "verified by its command line"


@dataclass
class ServerState:
    """What runs for an index: `running`, `stale` (a PID file nobody backs), `none`, or
    `unverified` (a server holds the lock but the PID file names a process that is not it)."""

    state: str
    info: PidInfo | None
    reason: str = ""


def inspect(index: str) -> ServerState:
    """The server state of `index`, from its lock, PID file and process table (no changes)."""
    info = read_pid_file(pid_path(index))
    held = lock_is_held(index)
    if info is None:
        if held:
            return ServerState("running", None, "the lock is held but there is no PID file (starting or stopping)")
        return ServerState("stale" if pid_path(index).exists() else "none", None, "unreadable PID file" if pid_path(index).exists() else "")
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
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise QmdError(f"cannot listen on {host}:{port}: {exc.strerror or exc}", "pick another port with --port N (or stop what uses it)") from exc
    return sock


def port_free(host: str, port: int) -> bool:
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


def health(url: str, timeout: float = 2.0) -> dict[str, Any] | None:
    """GET {url}/health as JSON, or None when nothing answers."""
    import http.client
    from urllib.parse import urlsplit

    parts = urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        conn.request("GET", "/health", headers={"Host": parts.netloc})
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
    if log.exists() and log.stat().st_size > 10 * 1024 * 1024:
        os.replace(log, log.with_suffix(".log.1"))
    with open(log, "ab") as out:
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
        info = read_pid_file(pid_path(index))
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


def daemon_argv(index: str, host: str, port: int | None) -> list[str]:
    """The command line of the detached server: this interpreter, `-m qmd`, no --daemon."""
    argv = [sys.executable, "-m", "qmd"]
    if index != DEFAULT_INDEX:
        argv += ["--index", index]
    argv += ["mcp", "--http", "--host", host]
    if port is not None:
        argv += ["--port", str(port)]
    return argv
