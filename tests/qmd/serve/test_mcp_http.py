"""`qmd mcp --http` on a free loopback port: MCP over Streamable HTTP, /query, /search, /health,
the Origin/Host checks on every route, size limits and the request log."""

from __future__ import annotations

import json
import re
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import free_port, http_connect, request, run_session, served_index, stop_process
from tests.support.run import run_qmd

pytest.importorskip("mcp")

ACCEPT = {"Accept": "application/json, text/event-stream"}
INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
QUERY = {"searches": [{"type": "lex", "query": "rollback"}]}


class Server:
    def __init__(self, root: Path, env: dict[str, str], port: int, log: Path, proc: Any) -> None:
        self.root, self.env, self.port, self.log, self.proc = root, env, port, log, proc

    def log_lines(self) -> list[str]:
        return [line for line in self.log.read_text().splitlines() if re.match(r"^\d{4}-\d\d-\d\dT\S+ 127\.0\.0\.1 ", line)]


@contextmanager
def _start(root: Path, extra: dict[str, str] | None = None, *args: str) -> Iterator[Server]:
    with served_index(root, extra, *args) as srv:
        yield Server(root, srv.env, srv.port, srv.log, srv.proc)


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    with _start(tmp_path_factory.mktemp("mcp-http")) as srv:
        yield srv


@pytest.fixture(scope="module")
def widened(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    # allowed hosts beyond loopback need tokens or --no-auth (tests/qmd/serve/test_mcp_auth.py):
    # this table is about the Origin and Host checks alone
    with _start(tmp_path_factory.mktemp("mcp-http-env"), {"QMD_ALLOWED_ORIGINS": "https://app.example:8443", "QMD_ALLOWED_HOSTS": "notes.lan"}, "--no-auth") as srv:
        yield srv


def test_health_schema_and_pid_file(server: Server) -> None:
    status, body = request(server.port, "GET", "/health")
    assert status == 200
    assert set(body) == {"status", "uptime_s", "version", "build_id", "index", "documents"}
    assert body["status"] == "ok" and body["index"] == "index" and body["documents"] == 4
    assert re.fullmatch(r"0\.1\.0\+[0-9a-f]{12}", body["build_id"])
    pid = json.loads((server.root / "state" / "mcp-index.json").read_text())
    assert set(pid) == {"pid", "started_at", "host", "port", "index", "argv", "build_id", "key"}
    assert re.fullmatch(r"[0-9a-f]{64}", pid["key"]) and (server.root / "state" / "mcp-index.json").stat().st_mode & 0o777 == 0o600
    assert (pid["pid"], pid["port"], pid["host"], pid["index"], pid["build_id"]) == (server.proc.pid, server.port, "127.0.0.1", "index", body["build_id"])
    assert pid["argv"][-4:] == ["mcp", "--http", "--port", str(server.port)]


def test_mcp_over_http_handshake_and_tools(server: Server) -> None:
    async def body(s: Any) -> dict[str, Any]:
        return {
            "init": s.init_result,
            "tools": [t.name for t in (await s.list_tools()).tools],
            "query": await s.call_tool("query", {"searches": [{"type": "lex", "query": "rollback"}, {"type": "vec", "query": "undo a release"}], "limit": 5}),
            "get": await s.call_tool("get", {"file": "#" + "0" * 6}),
            "multi": await s.call_tool("multi_get", {"pattern": "notes/runbooks/deploy.md, notes/ideas.md", "maxLines": 1}),
            "status": await s.call_tool("status", {}),
            "unknown": await s.call_tool("status", {"verbose": True}),
        }

    r = run_session(http_connect(server.port), body)
    assert r["init"].protocol_version == "2025-11-25" and "markdown documents" in r["init"].instructions
    assert r["tools"] == ["query", "get", "multi_get", "status"]
    rows = r["query"].structured_content["results"]
    cli = json.loads(run_qmd("query", "lex: rollback\nvec: undo a release", "-n", "5", "--json", env=server.env).stdout)
    assert [(x["docid"], x["file"], x["score"], x["snippet"]) for x in rows] == [(c["docid"], c["file"], c["score"], c["snippet"]) for c in cli]
    assert r["get"].is_error and "no document with docid" in r["get"].content[0].text
    docs = r["multi"].structured_content["documents"]
    assert [(d["file"], d["text"], d["truncatedLines"]) for d in docs] == [
        ("qmd://notes/runbooks/deploy.md", "# Deploy Runbook", 7), ("qmd://notes/ideas.md", "Some ideas without a heading about caching layers and the load balancer.", 1),
    ]
    assert r["status"].structured_content["documents"] == 4
    assert r["unknown"].is_error and "unknown parameter 'verbose' for status" in r["unknown"].content[0].text


def test_rest_query_and_search_are_the_same(server: Server) -> None:
    s1, a = request(server.port, "POST", "/query", {**QUERY, "limit": 3})
    s2, b = request(server.port, "POST", "/search", {**QUERY, "limit": 3})
    def timeless(answer: dict) -> dict:  # a second may pass between the two: ages differ
        fresh = {k: v for k, v in answer["freshness"].items() if k not in ("age_s", "summary")}
        return {**answer, "freshness": fresh}

    assert s1 == s2 == 200 and timeless(a) == timeless(b)
    # the original's keys, then ours (issue 28): each hit's confidence and whether it is below the threshold
    assert [list(r) for r in a["results"]] == [["docid", "file", "title", "score", "context", "line", "snippet", "confidence", "below_threshold"]] * len(a["results"])
    assert all(0.0 <= r["confidence"] <= 1.0 and r["below_threshold"] == (r["confidence"] < a["threshold"]) for r in a["results"])
    assert isinstance(a["unmatched"], list)
    assert {r["file"] for r in a["results"]} == {"qmd://notes/runbooks/deploy.md", "qmd://notes/meetings/2024-03-01.md"}
    assert a["freshness"]["updated_at"] and a["freshness"]["health"] == "unknown"
    # the same validation as the MCP tool
    status, err = request(server.port, "POST", "/query", {**QUERY, "collection": "notes"})
    assert status == 400 and "'collection'" in err["error"] and "collections" in err["hint"]
    status, err = request(server.port, "POST", "/query", {"searches": [{"type": "grep", "query": "x"}]})
    assert status == 400 and "lex, vec or hyde" in err["error"]
    status, err = request(server.port, "POST", "/query", {"searches": [{"type": "lex", "query": "x"}] * 11})
    assert status == 400 and "at most 10" in err["error"]
    status, err = request(server.port, "POST", "/query", {"query": " "})  # as `qmd search ""`: a clear error, not a 500
    assert status == 400 and err["error"] == "query is empty"
    status, err = request(server.port, "POST", "/query", raw=b"{not json")
    assert status == 400 and "not valid JSON" in err["error"]
    status, err = request(server.port, "POST", "/query", {**QUERY, "collections": ["nope"]})
    assert status == 400 and "unknown collection 'nope'" in err["error"]
    status, _ = request(server.port, "GET", "/query")
    assert status == 405


ROUTES = [
    ("GET", "/health", None, {}),
    ("POST", "/query", QUERY, {}),
    ("POST", "/search", QUERY, {}),
    ("POST", "/mcp", INIT, ACCEPT),
]


@pytest.mark.parametrize(("method", "path", "body", "headers"), ROUTES, ids=[r[1] for r in ROUTES])
def test_security_table_on_every_route(server: Server, widened: Server, method: str, path: str, body: Any, headers: dict[str, str]) -> None:
    def call(srv: Server, **hdrs: str) -> int:
        extra = {k.replace("_", "-").title(): v for k, v in hdrs.items()}
        return request(srv.port, method, path, body, {**headers, **extra})[0]

    p, w = server.port, widened.port
    cases = [
        # (server, headers, expected status)
        (server, {}, 200),  # no Origin: curl, SDK clients, agents
        (server, {"origin": f"http://127.0.0.1:{p}"}, 200),
        (server, {"origin": "http://localhost:3000"}, 200),
        (server, {"origin": "http://[::1]:5173"}, 200),
        (server, {"host": f"localhost:{p}"}, 200),
        (server, {"origin": "http://evil.example"}, 403),
        (server, {"origin": "https://evil.example:443", "host": f"127.0.0.1:{p}"}, 403),
        (server, {"origin": "null"}, 403),
        (server, {"origin": "http://127.0.0.1.evil.example"}, 403),
        (server, {"origin": "https://app.example:8443"}, 403),  # only allowed where the env says so
        (server, {"host": f"evil.example:{p}"}, 421),
        (server, {"host": "notes.lan"}, 421),
        (server, {"host": f"0.0.0.0:{p}"}, 421),
        (widened, {"origin": "https://app.example:8443"}, 200),
        (widened, {"origin": "https://app.example"}, 403),
        (widened, {"host": f"notes.lan:{w}"}, 200),
        (widened, {"host": "notes.lan"}, 200),
        (widened, {"host": f"evil.example:{w}"}, 421),
        (widened, {"origin": "http://evil.example", "host": "notes.lan"}, 403),
    ]
    got = [(srv is widened, hdrs, call(srv, **hdrs)) for srv, hdrs, _ in cases]
    expected = [(srv is widened, hdrs, status) for srv, hdrs, status in cases]
    assert got == expected


def test_size_limits(server: Server) -> None:
    big = {"query": "x" * (2 * 1024 * 1024)}
    for path in ("/query", "/search", "/mcp"):
        status, body = request(server.port, "POST", path, big, ACCEPT)
        assert status == 413, path
        assert "over 1048576 bytes" in body["error"]
    # no Content-Length: the body is counted as it streams in
    import socket

    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(f"POST /query HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n".encode())
        chunk = b"x" * 65536
        try:
            for _ in range(20):  # 1.3 MB: over the limit, within the socket buffers
                sock.sendall(b"%x\r\n%s\r\n" % (len(chunk), chunk))
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may answer and close before the rest is sent
        answer = sock.recv(4096)
    assert answer.startswith(b"HTTP/1.1 413"), answer[:100]
    status, body = request(server.port, "POST", "/query", {"query": "x" * 5000})
    assert status == 400 and "longer than 4000" in body["error"]
    status, body = request(server.port, "POST", "/query", {**QUERY, "limit": 100000})
    assert status == 400 and "limit must be between 1 and 100" in body["error"]


def test_one_log_line_per_request(server: Server) -> None:
    before, quiet_since = len(server.log_lines()), time.monotonic()
    while time.monotonic() - quiet_since < 0.5:  # let earlier tests' lines land first
        time.sleep(0.05)
        if len(server.log_lines()) != before:
            before, quiet_since = len(server.log_lines()), time.monotonic()
    request(server.port, "GET", "/health")
    request(server.port, "POST", "/query", QUERY)
    request(server.port, "GET", "/health", headers={"Origin": "http://evil.example"})
    request(server.port, "GET", "/nowhere")
    deadline = time.monotonic() + 10
    while len(server.log_lines()) < before + 4 and time.monotonic() < deadline:
        time.sleep(0.05)  # a line is written once its response has been sent
    lines = server.log_lines()[before:]
    assert len(lines) == 4, lines
    assert re.search(r" GET /health 200 [\d.]+ms$", lines[0])
    assert re.search(r" POST /query 200 [\d.]+ms 1 searches → 2 results$", lines[1])
    assert re.search(r" GET /health 403 [\d.]+ms Origin not allowed: http://evil.example$", lines[2])
    assert " GET /nowhere 404 " in lines[3]


def test_second_server_for_the_index_is_refused(server: Server) -> None:
    proc = run_qmd("mcp", "--http", "--port", str(free_port()), timeout=60, env=server.env)
    assert proc.returncode == 1
    assert "already running" in proc.stderr and f"127.0.0.1:{server.port}" in proc.stderr and "qmd mcp stop" in proc.stderr


def test_sigterm_removes_the_pid_file(tmp_path: Path) -> None:
    with _start(tmp_path) as srv:
        pid_file = tmp_path / "state" / "mcp-index.json"
        assert pid_file.exists()
        stop_process(srv.proc)  # SIGTERM, as the context's own stop
        assert not pid_file.exists()
    assert "stopped" in srv.log.read_text()


def test_wildcard_host_warns(tmp_path: Path) -> None:
    with served_index(tmp_path, None, "--host", "0.0.0.0", "--no-auth") as srv:  # without a token: refused (test_mcp_auth.py)
        text = srv.log.read_text()
        assert "unauthenticated" in text and "QMD_ALLOWED_HOSTS" in text
        assert request(srv.port, "GET", "/health", headers={"Host": f"192.0.2.1:{srv.port}"})[0] == 421
