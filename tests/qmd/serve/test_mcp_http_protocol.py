"""POST /mcp as the Streamable HTTP spec has it (stateless, JSON responses), and a client
that hangs up cancelling its query. A real server process on a free loopback port."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.qmd.serve.test_mcp_protocol import cpu_seconds
from tests.support.mcp import http_server, request, served_index, slow_rerank_env

ACCEPT = {"Accept": "application/json, text/event-stream"}


def rpc(msg_id: Any, method: str, params: Any = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": msg_id, "method": method}
    if params is not None:
        message["params"] = params
    return message


@pytest.fixture(scope="module")
def port(tmp_path_factory: pytest.TempPathFactory) -> Iterator[int]:
    with served_index(tmp_path_factory.mktemp("mcp-http-protocol")) as server:
        yield server.port


def test_requests_notifications_and_batches(port: int) -> None:
    status, body = request(port, "POST", "/mcp", rpc(1, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}}), ACCEPT)
    assert status == 200 and body["result"]["protocolVersion"] == "2025-06-18"
    status, body = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "method": "notifications/initialized"}, ACCEPT)
    assert (status, body) == (202, "")
    status, body = request(port, "POST", "/mcp", [rpc("a", "ping"), {"jsonrpc": "2.0", "method": "notifications/initialized"}, rpc("b", "tools/list")], ACCEPT)
    assert status == 200 and [m["id"] for m in body] == ["a", "b"]
    status, body = request(port, "POST", "/mcp", rpc(2, "tools/call", {"name": "rm", "arguments": {}}), ACCEPT)
    assert status == 200 and body["error"]["code"] == -32602 and "Unknown tool" in body["error"]["message"]
    status, body = request(port, "POST", "/mcp", rpc(3, "resources/list"), ACCEPT)
    assert status == 200 and body["error"]["code"] == -32601
    status, body = request(port, "POST", "/mcp", rpc(4, "tools/call", {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}}), ACCEPT)
    assert status == 200 and body["result"]["structuredContent"]["results"][0]["file"].startswith("qmd://notes/")


def test_what_http_refuses(port: int) -> None:
    status, body = request(port, "POST", "/mcp", raw=b"{nope", headers=ACCEPT)
    assert status == 400 and body["error"]["code"] == -32700
    status, body = request(port, "POST", "/mcp", rpc(1, "ping"), {"Accept": "text/html"})
    assert status == 406 and "Accept" in body["hint"]
    status, body = request(port, "POST", "/mcp", rpc(1, "ping"), {**ACCEPT, "MCP-Protocol-Version": "1999-01-01"})
    assert status == 400 and "MCP-Protocol-Version" in body["error"]["message"]
    status, body = request(port, "POST", "/mcp", rpc(1, "ping"), {**ACCEPT, "MCP-Protocol-Version": "2025-06-18"})
    assert (status, body["result"]) == (200, {})
    for method in ("GET", "DELETE"):
        status, body = request(port, method, "/mcp", headers=ACCEPT)
        assert status == 405 and "stateless" in body["error"]
    status, body = request(port, "GET", "/nowhere")
    assert status == 404 and "POST /mcp" in body["hint"]
    status, body = request(port, "POST", "/mcp", rpc(1, "ping"), {**ACCEPT, "Content-Type": "text/plain"})
    assert status == 415


def _post_and_hang_up(port: int, path: str, payload: Any, server_pid: int, baseline: float) -> None:
    """Send the request, wait until the server is busy with it (its CPU time climbs), close."""
    body = json.dumps(payload).encode()
    sock = socket.create_connection(("127.0.0.1", port), timeout=30)
    sock.sendall(
        f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
        f"Accept: application/json, text/event-stream\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
    )
    deadline = time.monotonic() + 120
    while cpu_seconds(server_pid) - baseline < 1.5:  # one rerank pair is ~1 s of CPU here
        assert time.monotonic() < deadline, "the server never started working on the query"
        time.sleep(0.05)
    sock.close()


@pytest.mark.parametrize("route", ["/mcp", "/query"])
@pytest.mark.slow
def test_a_client_that_hangs_up_cancels_its_query(tmp_path: Path, route: str) -> None:
    env = slow_rerank_env(tmp_path)
    log = tmp_path / "server.log"
    with http_server(env, log) as server:
        port, proc = server.port, server.proc
        arguments = {"query": "rollback procedure", "candidateLimit": 200}
        payload: Any = rpc(1, "tools/call", {"name": "query", "arguments": arguments}) if route == "/mcp" else {"query": "rollback procedure", "candidateLimit": 200}
        _post_and_hang_up(port, route, payload, proc.pid, cpu_seconds(proc.pid))
        status, body = request(port, "POST", "/query", {"searches": [{"type": "lex", "query": "rollback"}], "rerank": False, "limit": 3}, timeout=60)
        assert status == 200 and len(body["results"]) == 3
        idle_from = cpu_seconds(proc.pid)
        time.sleep(1.0)  # measuring, not synchronising: is any work left running?
        burned = cpu_seconds(proc.pid) - idle_from
        assert burned < 0.2, f"the server used {burned:.2f} s of CPU in 1 s after the hung-up query's successor was answered"
    text = log.read_text()
    assert ("cancelled by the client" in text) if route == "/mcp" else ("client hung up; query cancelled" in text), text
    assert "Traceback" not in text


@pytest.mark.slow
def test_sigterm_stops_a_server_in_the_middle_of_a_long_query(tmp_path: Path) -> None:
    """SIGTERM during a minutes-long rerank: the server waited for the query to finish (112 s
    measured) before it exited; now the query is cancelled at its next checkpoint."""
    import signal
    import subprocess

    from tests.support.mcp import free_port, spawn_http, stop_process, wait_health

    env = slow_rerank_env(tmp_path)
    log = tmp_path / "server.log"
    port = free_port()
    proc = spawn_http(env, port, log)
    try:
        wait_health(port, proc, 120)
        conn = socket.create_connection(("127.0.0.1", port), timeout=30)
        body = json.dumps({"query": "rollback procedure", "candidateLimit": 200}).encode()
        conn.sendall(
            f"POST /query HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode() + body
        )
        baseline, deadline = cpu_seconds(proc.pid), time.monotonic() + 120
        while cpu_seconds(proc.pid) - baseline < 1.5:  # reranking
            assert time.monotonic() < deadline, "the server never started working on the query"
            time.sleep(0.05)
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)  # uvicorn's 5 s grace, then the query stops at its checkpoint
        except subprocess.TimeoutExpired:
            raise AssertionError("the server was still running 60 s after SIGTERM") from None
        conn.close()
    finally:
        stop_process(proc)
    text = log.read_text()
    assert "stopped" in text and "Traceback" not in text, text
