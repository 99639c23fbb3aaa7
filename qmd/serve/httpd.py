"""The HTTP server's life for one index: lock, stale PID file, port, PID file, serve, clean up.

`qmd mcp --http` calls `run_http`; the CLI only parses options and prints. uvicorn and
the ASGI app (qmd/serve/server.py) are imported only here, when a server actually starts.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable

from qmd.core.buildinfo import build_id
from qmd.core.clock import now_iso
from qmd.core.errors import QmdError
from qmd.serve.daemon import bind_socket, choose_port
from qmd.serve.origin import Guard, is_loopback
from qmd.serve.pidfile import InstanceLock, PidInfo, load_pid_file, pid_path, remove_pid_file, write_pid_file
from qmd.serve.logsafe import stderr_log
from qmd.serve.service import ToolService

Say = Callable[[str], None]


def exposure_warnings(host: str, port: int) -> list[str]:
    """What to tell the user when `host` is not loopback (the endpoints are unauthenticated)."""
    if is_loopback(host):
        return []
    return [
        f"warning: listening on {host}:{port}: /mcp, /query, /search and /health are unauthenticated; "
        "anyone who can reach this port can read every indexed note.",
        "warning: requests must still name a loopback Host or one listed in QMD_ALLOWED_HOSTS (e.g. QMD_ALLOWED_HOSTS=myhost.lan).",
    ]


def run_http(index: str, host: str, port: int | None, make_service: Callable[[], ToolService], say: Say) -> None:
    """Serve `index` over HTTP in this process until SIGINT/SIGTERM.

    1. take the index's single-instance lock (a second server is refused);
    2. remove a PID file left by a dead server (we hold the lock, so its writer is gone);
    3. choose and bind the port, then open the service (`make_service`);
    4. write the PID file, serve, and on the way out remove the PID file and release the lock.

    `say` receives the lines meant for the user (stderr in the CLI).
    """
    lock = InstanceLock(index).acquire()
    pid_file = pid_path(index)
    try:
        stale = load_pid_file(pid_file)
        if stale is not None or pid_file.exists():
            pid_file.unlink(missing_ok=True)
            say(f"removed a stale PID file ({pid_file}" + (f", pid {stale.pid})" if stale else ")"))
        chosen = choose_port(index, port, host)
        sock = bind_socket(host, chosen)
        for line in exposure_warnings(host, chosen):
            say(line)
        service = make_service()
        info = PidInfo(
            pid=os.getpid(), started_at=now_iso(), host=host, port=chosen,
            index=index, argv=list(getattr(sys, "orig_argv", sys.argv)), build_id=build_id(),
        )
        guard = Guard.for_bind(host)
        done: list[bool] = []

        def shutdown() -> None:
            if done:
                return
            done.append(True)
            remove_pid_file(pid_file, os.getpid())
            service.close()
            stderr_log(f"qmd MCP server for index '{index}' stopped")

        try:
            from qmd.serve.server import serve_http

            write_pid_file(pid_file, info)
            say(f"qmd MCP server for index '{index}': {info.url}/mcp (also /query, /search, /health), pid {info.pid}")
            started = serve_http(service, sock, guard, stderr_log, shutdown)
        finally:
            shutdown()
            sock.close()
        if not started:
            raise QmdError("the HTTP server failed to start (see the messages above)", "check the port and host, then retry")
    finally:
        remove_pid_file(pid_file, os.getpid())
        lock.release()
