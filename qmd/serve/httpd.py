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
from qmd.core.paths import DEFAULT_INDEX, index_name
from qmd.serve.auth import Authenticator, load, tokens_path
from qmd.serve.daemon import bind_socket, choose_port
from qmd.serve.origin import Guard, is_loopback
from qmd.serve.pidfile import InstanceLock, PidInfo, load_pid_file, pid_path, remove_pid_file, write_pid_file
from qmd.serve.logsafe import stderr_log
from qmd.serve.service import ToolService

SHUTDOWN_GRACE_S = 10.0  # after uvicorn's own 5 s: how long a stopping server waits for a running call

Say = Callable[[str], None]


def exposure_warnings(host: str, port: int, auth: bool = False, guard: Guard | None = None) -> list[str]:
    """What to tell the user when the server is reachable beyond loopback (`host` is not
    loopback, or QMD_ALLOWED_HOSTS names another host, as behind a reverse proxy): plain
    HTTP with tokens, or no tokens at all."""
    names = guard.names_beyond_loopback() if guard is not None else []
    if is_loopback(host) and not names:
        return []
    where = f"listening on {host}:{port}" if not is_loopback(host) else f"QMD_ALLOWED_HOSTS names {', '.join(names)[:200]} (a reverse proxy)"
    if auth:
        return [
            f"note: {where}: every route needs a bearer token; this is plain HTTP, "
            "so serve it behind TLS (a reverse proxy) or tokens and notes cross the network readable.",
            "note: requests must name a loopback Host or one listed in QMD_ALLOWED_HOSTS (e.g. QMD_ALLOWED_HOSTS=notes.example.com).",
        ]
    return [
        f"warning: {where} and --no-auth: /mcp, /query, /search and /health are unauthenticated; "
        "anyone who can reach this port can read every indexed note.",
        "warning: requests must still name a loopback Host or one listed in QMD_ALLOWED_HOSTS (e.g. QMD_ALLOWED_HOSTS=myhost.lan).",
    ]


def authenticator(index: str, host: str, no_auth: bool, say: Say, guard: Guard | None = None) -> Authenticator | None:
    """The token check of a server on `host` (None with `no_auth`); refuses to serve beyond
    loopback without a token to check, and with a token file it cannot read. A server bound
    to loopback whose `guard` admits other host names (QMD_ALLOWED_HOSTS: a reverse proxy
    forwards the network to it) is beyond loopback too."""
    tokens = index_name(index)  # a project-local index checks the tokens `qmd token` gives it
    path = tokens_path(tokens)
    entries = load(path)  # a QmdError for a malformed file: refuse to start rather than guess
    if no_auth:
        if entries:
            say(f"warning: --no-auth: the {len(entries)} token(s) in {path} are not checked; anyone who can connect reads every collection")
        return None
    names = guard.names_beyond_loopback() if guard is not None else []
    exposed = not is_loopback(host) or bool(names)
    if exposed and not entries:
        where = f"on {host}" if not is_loopback(host) else f"behind QMD_ALLOWED_HOSTS={','.join(names)[:200]} (whatever forwards those names reaches it)"
        raise QmdError(
            f"refusing to serve index '{index}' {where} without tokens: anyone who can reach it would read every note",
            f"make one (qmd{'' if tokens == DEFAULT_INDEX else ' --index ' + tokens} token add NAME) and give it to the clients, or pass --no-auth to serve unauthenticated",
        )
    if entries is not None:
        say(f"tokens: every request needs one ({len(entries)} in {path})")
    return Authenticator(path, required=exposed, log=stderr_log)


def run_http(index: str, host: str, port: int | None, make_service: Callable[[], ToolService], say: Say, no_auth: bool = False) -> None:
    """Serve `index` over HTTP in this process until SIGINT/SIGTERM.

    0. check the tokens (qmd/serve/auth.py): beyond loopback a server needs one, unless `no_auth`;
    1. take the index's single-instance lock (a second server is refused);
    2. remove a PID file left by a dead server (we hold the lock, so its writer is gone);
    3. choose and bind the port, then open the service (`make_service`);
    4. write the PID file, serve, and on the way out remove the PID file and release the lock.

    `say` receives the lines meant for the user (stderr in the CLI).
    """
    guard = Guard.for_bind(host)
    auth = authenticator(index, host, no_auth, say, guard)
    lock = InstanceLock(index).acquire()
    pid_file = pid_path(index)
    try:
        stale = load_pid_file(pid_file)
        if stale is not None or pid_file.exists():
            pid_file.unlink(missing_ok=True)
            say(f"removed a stale PID file ({pid_file}" + (f", pid {stale.pid})" if stale else ")"))
        chosen = choose_port(index, port, host)
        sock = bind_socket(host, chosen)
        for line in exposure_warnings(host, chosen, auth is not None, guard):
            say(line)
        service = make_service()
        from qmd.serve.proof import new_key

        info = PidInfo(
            pid=os.getpid(), started_at=now_iso(), host=host, port=chosen,
            index=index, argv=list(getattr(sys, "orig_argv", sys.argv)), build_id=build_id(), key=new_key(),
        )
        done: list[bool] = []

        def shutdown() -> None:
            if done:
                return
            done.append(True)
            remove_pid_file(pid_file, os.getpid())
            from qmd.core.cancel import cancel_all

            cancel_all()  # a running query stops at its next checkpoint (it ran on for minutes)
            if not service.close(SHUTDOWN_GRACE_S):
                # work without a checkpoint (one long C call): stop anyway, as SIGTERM asked;
                # SQLite and PostgreSQL recover a connection that goes mid-read
                stderr_log(f"qmd MCP server for index '{index}' stopped without waiting for a call still running after {SHUTDOWN_GRACE_S:.0f}s")
                lock.release()
                sys.stderr.flush()
                os._exit(1)
            stderr_log(f"qmd MCP server for index '{index}' stopped")

        try:
            from qmd.serve.server import serve_http

            write_pid_file(pid_file, info)
            say(f"qmd MCP server for index '{index}': {info.url}/mcp (also /query, /search, /health), pid {info.pid}")
            started = serve_http(service, sock, guard, stderr_log, shutdown, auth, proof_key=info.key)
        finally:
            shutdown()
            sock.close()
        if not started:
            raise QmdError("the HTTP server failed to start (see the messages above)", "check the port and host, then retry")
    finally:
        remove_pid_file(pid_file, os.getpid())
        lock.release()
