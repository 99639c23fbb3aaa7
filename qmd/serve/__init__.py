"""qmd.serve: the MCP server (stdio and HTTP) and the lifecycle of its HTTP daemon.

The documented surface for doctor, teardown and other callers outside `qmd/` (names are
imported on first use, so `import qmd.serve` loads no HTTP server):

PID files and state (`<state>/mcp-{index}.json`, `mcp-{index}.lock`; `index` is a name, or
the path of a project-local `.qmd/index.yml`, whose files are `mcp-local-<hash>.*`):
    `PidInfo`, `read_pid_file(index)`, `served_indexes()`, `ServerState`, `inspect(index)`,
    `clean_stale(index)`, `lock_is_held(index)`, `prune_lock(index, pid)`.
Running servers:
    `health(url)` (GET /health), `StopReport`, `stop(index)`, `start_daemon(...)`,
    `restart(index, host, port)`, `spawn(argv, index)`, `wait_ready(proc, index, log)`,
    `daemon_argv(...)`, `DEFAULT_PORT`.
Processes:
    `process_alive(pid)`, `process_argv(pid)`, `wait_gone(pid, timeout)`.
Handshakes (plain JSON-RPC, no SDK):
    `Handshake`, `stdio_handshake(index)`, `http_handshake(url, token=…)`, `probe_token(index)`,
    `prove(url, key)` (is it the server that wrote the PID file? ask before sending a token).
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

from qmd.core.lazy import lazy_exports

_EXPORTS: dict[str, str] = {
    "PidInfo": "pidfile",
    "read_pid_file": "pidfile",
    "served_indexes": "pidfile",
    "lock_is_held": "pidfile",
    "ServerState": "daemon",
    "StopReport": "daemon",
    "DEFAULT_PORT": "daemon",
    "inspect": "daemon",
    "clean_stale": "daemon",
    "prune_lock": "daemon",
    "health": "daemon",
    "stop": "daemon",
    "start_daemon": "daemon",
    "restart": "daemon",
    "spawn": "daemon",
    "wait_ready": "daemon",
    "daemon_argv": "daemon",
    "process_alive": "process",
    "process_argv": "process",
    "wait_gone": "process",
    "Handshake": "probe",
    "stdio_handshake": "probe:stdio",
    "http_handshake": "probe:http",
    "probe_token": "probe",
    "prove": "probe",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from qmd.serve.daemon import (
        DEFAULT_PORT,
        ServerState,
        StopReport,
        clean_stale,
        daemon_argv,
        health,
        inspect,
        prune_lock,
        restart,
        spawn,
        start_daemon,
        stop,
        wait_ready,
    )
    from qmd.serve.pidfile import PidInfo, lock_is_held, read_pid_file, served_indexes
    from qmd.serve.probe import Handshake, probe_token, prove
    from qmd.serve.probe import http as http_handshake
    from qmd.serve.probe import stdio as stdio_handshake
    from qmd.serve.process import process_alive, process_argv, wait_gone
