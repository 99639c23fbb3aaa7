"""qmd.serve: the MCP server (stdio and HTTP) and the lifecycle of its HTTP daemon.

The documented surface for doctor, teardown and other callers outside `qmd/` (names are
imported on first use, so `import qmd.serve` loads neither the MCP SDK nor uvicorn):

PID files and state (`<state>/mcp-{index}.json`, `mcp-{index}.lock`):
    `PidInfo`, `read_pid_file(index)`, `served_indexes()`, `ServerState`, `inspect(index)`,
    `clean_stale(index)`, `lock_is_held(index)`, `prune_lock(index, pid)`.
Running servers:
    `health(url)` (GET /health), `StopReport`, `stop(index)`, `start_daemon(...)`,
    `restart(index, host, port)`, `spawn(argv, index)`, `wait_ready(proc, index, log)`,
    `daemon_argv(...)`, `DEFAULT_PORT`.
Processes:
    `process_alive(pid)`, `process_argv(pid)`, `wait_gone(pid, timeout)`.
Handshakes (plain JSON-RPC, no SDK):
    `Handshake`, `stdio_handshake(index)`, `http_handshake(url)`.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING

_EXPORTS: dict[str, tuple[str, str]] = {
    "PidInfo": ("pidfile", "PidInfo"),
    "read_pid_file": ("pidfile", "read_pid_file"),
    "served_indexes": ("pidfile", "served_indexes"),
    "lock_is_held": ("pidfile", "lock_is_held"),
    "ServerState": ("daemon", "ServerState"),
    "StopReport": ("daemon", "StopReport"),
    "DEFAULT_PORT": ("daemon", "DEFAULT_PORT"),
    "inspect": ("daemon", "inspect"),
    "clean_stale": ("daemon", "clean_stale"),
    "prune_lock": ("daemon", "prune_lock"),
    "health": ("daemon", "health"),
    "stop": ("daemon", "stop"),
    "start_daemon": ("daemon", "start_daemon"),
    "restart": ("daemon", "restart"),
    "spawn": ("daemon", "spawn"),
    "wait_ready": ("daemon", "wait_ready"),
    "daemon_argv": ("daemon", "daemon_argv"),
    "process_alive": ("process", "process_alive"),
    "process_argv": ("process", "process_argv"),
    "wait_gone": ("process", "wait_gone"),
    "Handshake": ("probe", "Handshake"),
    "stdio_handshake": ("probe", "stdio"),
    "http_handshake": ("probe", "http"),
}

__all__ = sorted(_EXPORTS)


def __getattr__(name: str) -> object:
    where = _EXPORTS.get(name)
    if where is None:
        raise AttributeError(f"module 'qmd.serve' has no attribute {name!r}")
    value = getattr(importlib.import_module(f"qmd.serve.{where[0]}"), where[1])
    globals()[name] = value
    return value


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
    from qmd.serve.probe import Handshake
    from qmd.serve.probe import http as http_handshake
    from qmd.serve.probe import stdio as stdio_handshake
    from qmd.serve.process import process_alive, process_argv, wait_gone
