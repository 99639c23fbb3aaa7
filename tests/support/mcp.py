"""Helpers for the MCP tests: an isolated environment, notes, tokens, spawned servers, SDK clients."""

from __future__ import annotations

import http.client
import json
import os
import socket
import subprocess
import time
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tests.support.run import QMD, command, run_qmd

NOTES = {
    "runbooks/deploy.md": "# Deploy Runbook\n\nHow to ship the api service.\n\n## Rollback\n\nFlip the load balancer back to blue.\n",
    "runbooks/postgres.md": "# Postgres Backups\n\nNightly pg_dump to object storage.\n\n## Restore\n\nRun pg_restore against a fresh database.\n",
    "meetings/2024-03-01.md": "# Planning March\n\nDiscussed the rollback of the kubernetes migration.\n",
    "ideas.md": "Some ideas without a heading about caching layers and the load balancer.\n",
}
SECRET = "TOP-SECRET-OUTSIDE-THE-COLLECTIONS"


def make_env(root: Path, extra: dict[str, str] | None = None) -> dict[str, str]:
    """An environment whose HOME, XDG dirs and QMD_STATE_DIR all live under `root`."""
    home = root / "home"
    env = {k: v for k, v in os.environ.items() if not k.startswith(("QMD_", "XDG_")) and k != "INDEX_PATH"}
    if os.environ.get("QMD_DATABASE_URL"):  # the PostgreSQL half of the index_backend fixture
        env["QMD_DATABASE_URL"] = os.environ["QMD_DATABASE_URL"]
    env["HOME"] = str(home)
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share")):
        (home / sub).mkdir(parents=True, exist_ok=True)
        env[var] = str(home / sub)
    env["QMD_STATE_DIR"] = str(root / "state")
    env["QMD_THREADS"] = "1"
    # No model is local: vector search, expansion and rerank are skipped (unless a test sets them).
    for role in ("EMBED", "RERANK", "GENERATE"):
        env[f"QMD_{role}_MODEL"] = str(root / f"no-{role.lower()}.gguf")
    env.update(extra or {})
    return env


def write_notes(root: Path) -> Path:
    """The notes folder, plus a secret file beside it (outside every collection)."""
    notes = root / "notes"
    for rel, text in NOTES.items():
        (notes / rel).parent.mkdir(parents=True, exist_ok=True)
        (notes / rel).write_text(text)
    (root / "secret.md").write_text(f"# Secret\n\n{SECRET}\n")
    (notes / ".hidden").mkdir(exist_ok=True)
    (notes / ".hidden" / "private.md").write_text(f"# Private\n\n{SECRET}\n")
    return notes


def slow_rerank_env(tmp_path: Path) -> dict[str, str]:
    """An isolated env whose query "rollback procedure" (candidateLimit 200) reranks for
    minutes: 200 long notes and a deliberately slow yes/no reranker (a wide tiny llama),
    for tests that cancel or abandon a query mid-rerank."""
    from tests.support.tinyllama import write_tiny_llama

    slow = write_tiny_llama(tmp_path / "slow-reranker.gguf", hidden=384, layers=6, ctx=2048)
    env = make_env(tmp_path, {"QMD_RERANK_MODEL": str(slow)})
    notes = tmp_path / "many"
    notes.mkdir()
    filler = " ".join(f"step{i} of the rollback procedure restores service" for i in range(40))
    for i in range(200):
        (notes / f"n{i:03}.md").write_text(f"# Rollback note {i}\n\n{filler}\n")
    assert run_qmd("collection", "add", str(notes), "--name", "many", env=env).returncode == 0
    return env


def setup_index(root: Path, env: dict[str, str]) -> Path:
    notes = write_notes(root)
    proc = run_qmd("collection", "add", str(notes), "--name", "notes", env=env)
    assert proc.returncode == 0, proc.stderr
    proc = run_qmd("context", "add", "qmd://notes/", "Team engineering notes", env=env)
    assert proc.returncode == 0, proc.stderr
    return notes


def add_token(env: dict[str, str], name: str, *collections: str) -> str:
    """`qmd token add NAME [--collection C]...`: the new token (once a token exists, every route wants one)."""
    args = [a for c in collections for a in ("--collection", c)]
    proc = run_qmd("token", "add", name, *args, env=env)
    assert proc.returncode == 0, proc.stderr
    token = proc.stdout.strip()
    assert token.startswith("qmd_") and len(token) == 47 and "\n" not in token
    return token


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def request(port: int, method: str, path: str, body: Any = None, headers: dict[str, str | None] | None = None, raw: bytes | None = None, timeout: float = 30) -> tuple[int, Any]:
    """One HTTP request to 127.0.0.1:port with exactly the given headers (Host defaults to
    127.0.0.1:port; Content-Type to application/json when there is a body; None: not sent)."""
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    hdrs: dict[str, str | None] = {"Host": f"127.0.0.1:{port}", **(headers or {})}
    data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
    if data is not None:
        hdrs.setdefault("Content-Type", "application/json")
    try:
        conn.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for k, v in hdrs.items():
            if v is not None:
                conn.putheader(k, v)
        if data is not None:
            conn.putheader("Content-Length", str(len(data)))
        conn.endheaders(data)
        resp = conn.getresponse()
        payload = resp.read()
    finally:
        conn.close()
    try:
        return resp.status, json.loads(payload)
    except ValueError:
        return resp.status, payload.decode("utf-8", "replace")


def wait_health(port: int, proc: subprocess.Popen[Any] | None = None, timeout: float = 60) -> dict[str, Any]:
    """Poll GET /health until it answers 200 (readiness), failing early if the server died."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc is not None and proc.poll() is not None:
            raise AssertionError(f"the server exited with {proc.returncode}")
        try:
            status, body = request(port, "GET", "/health", timeout=2)
            if status == 200 and isinstance(body, dict):
                return body
        except OSError:
            pass
        time.sleep(0.1)
    raise AssertionError("the server did not answer /health in time")


def spawn_http(env: dict[str, str], port: int, log: Path, *extra: str) -> subprocess.Popen[bytes]:
    out = open(log, "ab")  # noqa: SIM115 - closed with the process
    proc = subprocess.Popen(command("mcp", "--http", "--port", str(port), *extra), env=env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
    out.close()
    return proc


def stop_process(proc: subprocess.Popen[Any], timeout: float = 15) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait(timeout=5)


@dataclass
class HttpServer:
    """A running `qmd mcp --http` on 127.0.0.1: its environment, port, process, log, first
    /health answer and, from `served_index`, its folder and token."""

    env: dict[str, str]
    port: int
    proc: subprocess.Popen[bytes]
    log: Path
    health: dict[str, Any]
    root: Path | None = None
    token: str | None = None


@contextmanager
def http_server(env: dict[str, str], log: Path, *args: str, timeout: float = 60) -> Iterator[HttpServer]:
    """`qmd mcp --http *args` on a free loopback port, ready (/health answered) when the body runs,
    and stopped however it ends (a failed readiness check included)."""
    port = free_port()
    proc = spawn_http(env, port, log, *args)
    try:
        yield HttpServer(env, port, proc, log, wait_health(port, proc, timeout))
    finally:
        stop_process(proc)


@contextmanager
def served_index(root: Path, extra: dict[str, str] | None = None, *args: str, token: str | None = None) -> Iterator[HttpServer]:
    """The MCP tests' usual world: an environment under `root` (`make_env`), the notes indexed
    (`setup_index`), a token named `token` when given, and `http_server` on it (log `root/server.log`)."""
    env = make_env(root, extra)
    setup_index(root, env)
    secret = add_token(env, token) if token else None
    with http_server(env, root / "server.log", *args) as server:
        server.root, server.token = root, secret
        yield server


def run_session(connect: Callable[[], Any], body: Callable[[Any], Awaitable[Any]]) -> Any:
    """Open an MCP client session (initialize included) and run `body(session)`."""
    import anyio
    from mcp.client import ClientSession

    async def main() -> Any:
        async with connect() as streams:
            read, write = streams[0], streams[1]
            async with ClientSession(read, write) as session:
                session.init_result = await session.initialize()
                return await body(session)

    return anyio.run(main)


def run_client(connect: Callable[[], Any], body: Callable[[Any], Awaitable[Any]], mode: str = "auto") -> Any:
    """Run `body(client)` with the SDK's high-level `mcp.Client` on the transport `connect()`
    opens: `mode` "legacy" (initialize, 2025-11-25), "auto" (server/discover, falling back to
    initialize) or a stateless revision it adopts without asking ("2026-07-28")."""
    import anyio
    from mcp import Client

    async def main() -> Any:
        async with Client(connect(), mode=mode) as client:
            return await body(client)

    return anyio.run(main)


def stdio_connect(env: dict[str, str], errlog: Any, *args: str) -> Callable[[], Any]:
    from mcp.client.stdio import StdioServerParameters, stdio_client

    params = StdioServerParameters(command=QMD[0], args=[*QMD[1:], *args, "mcp"], env=env)
    return lambda: stdio_client(params, errlog=errlog)


def http_connect(port: int, token: str | None = None) -> Callable[[], Any]:
    """The SDK's Streamable HTTP transport to 127.0.0.1:port/mcp, sending `token` as a bearer
    token on every request when given."""
    from contextlib import asynccontextmanager

    import httpx2  # the SDK's HTTP client; its transport takes a configured one for headers
    from mcp.client.streamable_http import streamable_http_client

    url = f"http://127.0.0.1:{port}/mcp"
    if token is None:
        return lambda: streamable_http_client(url)

    @asynccontextmanager
    async def with_token() -> Any:
        async with httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=httpx2.Timeout(30, read=300)) as client:
            async with streamable_http_client(url, http_client=client) as streams:
                yield streams

    return with_token


class RawStdio:
    """`qmd mcp` over stdio driven message by message (no SDK): every line it writes is
    collected by a reader thread, so a test waits for exactly the message it expects."""

    def __init__(self, env: dict[str, str], errlog: Path, *args: str) -> None:
        import queue
        import threading

        self.err = open(errlog, "ab")  # noqa: SIM115 - closed in close()
        self.proc = subprocess.Popen(
            command(*args, "mcp"), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=self.err,
        )
        self.lines: queue.Queue[bytes] = queue.Queue()
        self.raw: list[bytes] = []

        def read() -> None:
            assert self.proc.stdout is not None
            for line in self.proc.stdout:
                self.raw.append(line)
                self.lines.put(line)
            self.lines.put(b"")

        threading.Thread(target=read, daemon=True).start()

    def send(self, message: Any) -> None:
        self.write((json.dumps(message) if not isinstance(message, (bytes, str)) else message))

    def write(self, data: bytes | str) -> None:
        assert self.proc.stdin is not None
        raw = data.encode() if isinstance(data, str) else data
        self.proc.stdin.write(raw if raw.endswith(b"\n") else raw + b"\n")
        self.proc.stdin.flush()

    def next(self, timeout: float = 60) -> Any:
        import queue

        try:
            line = self.lines.get(timeout=timeout)
        except queue.Empty:
            raise AssertionError(f"no message from the server within {timeout} s") from None
        if not line:
            raise AssertionError(f"the server closed stdout (exit {self.proc.poll()})")
        return json.loads(line)

    def until(self, pred: Callable[[Any], bool], timeout: float = 60) -> tuple[Any, list[Any]]:
        """The first message matching `pred`, and the ones before it."""
        deadline = time.monotonic() + timeout
        seen: list[Any] = []
        while True:
            msg = self.next(max(0.1, deadline - time.monotonic()))
            if pred(msg):
                return msg, seen
            seen.append(msg)

    def request(self, msg_id: Any, method: str, params: Any = None, timeout: float = 60) -> Any:
        message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
        if params is not None:
            message["params"] = params
        self.send(message)
        return self.until(lambda m: isinstance(m, dict) and m.get("id") == msg_id and "method" not in m, timeout)[0]

    def initialize(self, version: str = "2025-06-18") -> Any:
        reply = self.request(0, "initialize", {"protocolVersion": version, "capabilities": {}, "clientInfo": {"name": "test", "version": "1"}})
        self.send({"jsonrpc": "2.0", "method": "notifications/initialized"})
        return reply

    def close(self, timeout: float = 30) -> int:
        if self.proc.stdin is not None and not self.proc.stdin.closed:
            self.proc.stdin.close()
        try:
            code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            code = self.proc.wait(timeout=5)
        self.err.close()
        return code
