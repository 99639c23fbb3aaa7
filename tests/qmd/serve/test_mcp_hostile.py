"""Hostile input to `qmd mcp --http` over real sockets: bad bodies and arguments get one clear
400/415 (never a 500 or an MCP "internal error"), idle and slow clients cannot lock the
server out, and nothing a client sends reaches the log raw."""

from __future__ import annotations

import json
import socket
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from qmd.serve.logsafe import escape, escape_lines
from tests.support.mcp import http_connect, request, run_session, served_index

pytest.importorskip("mcp")

LEX = [{"type": "lex", "query": "rollback"}]
TIMEOUT_S = 2.0  # QMD_HTTP_TIMEOUT_S of the test server: headers, body, keep-alive idle


class Server:
    def __init__(self, root: Path, port: int, log: Path, proc: Any) -> None:
        self.root, self.port, self.log, self.proc = root, port, log, proc

    def alive(self) -> bool:
        return self.proc.poll() is None and request(self.port, "GET", "/health", timeout=10)[0] == 200


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    root = tmp_path_factory.mktemp("mcp-hostile")
    with served_index(root, {"QMD_HTTP_TIMEOUT_S": str(TIMEOUT_S)}) as server:
        yield Server(root, server.port, server.log, server.proc)


def _nested(depth: int, opener: bytes, closer: bytes, inner: bytes = b"1") -> bytes:
    return opener * depth + inner + closer * depth


# (body bytes, content type, expected status, a phrase the error must contain)
BAD_BODIES: list[tuple[str, bytes, str | None, int, str]] = [
    ("nul-plain", json.dumps({"query": "roll\x00back"}).encode(), "application/json", 400, "NUL"),
    ("nul-lex", json.dumps({"searches": [{"type": "lex", "query": "a\x00b"}]}).encode(), "application/json", 400, "NUL"),
    ("nul-intent", json.dumps({"searches": LEX, "intent": "x\x00"}).encode(), "application/json", 400, "NUL"),
    ("nul-collection", json.dumps({"searches": LEX, "collections": ["no\x00tes"]}).encode(), "application/json", 400, "NUL"),
    ("deep-array", _nested(100_000, b"[", b"]"), "application/json", 400, "nested"),
    ("deep-object", _nested(100_000, b'{"a":', b"}"), "application/json", 400, "nested"),
    ("deep-in-field", b'{"searches":' + _nested(100_000, b"[", b"]") + b"}", "application/json", 400, "nested"),
    ("limit-huge", json.dumps({"searches": LEX, "limit": 10**30}).encode(), "application/json", 400, "limit must be between 1 and 100"),
    ("limit-inf", b'{"searches":[{"type":"lex","query":"x"}],"limit":1e400}', "application/json", 400, "limit must be a whole number"),
    ("limit-5000-digits", b'{"searches":[{"type":"lex","query":"x"}],"limit":' + b"9" * 5000 + b"}", "application/json", 400, "too long"),
    ("limit-5000-digit-string", b'{"searches":[{"type":"lex","query":"x"}],"limit":"' + b"9" * 5000 + b'"}', "application/json", 400, "limit must be"),
    ("candidates-huge", json.dumps({"searches": LEX, "candidateLimit": 10**400}).encode(), "application/json", 400, "candidateLimit must be between 1 and 200"),
    ("minscore-huge-int", json.dumps({"searches": LEX, "minScore": 10**400}).encode(), "application/json", 400, "minScore must be between 0 and 1"),
    ("minscore-nan-string", json.dumps({"searches": LEX, "minScore": "nan"}).encode(), "application/json", 400, "minScore must be a number"),
    ("limit-float", json.dumps({"searches": LEX, "limit": 2.5}).encode(), "application/json", 400, "limit must be a whole number"),
    ("limit-list", json.dumps({"searches": LEX, "limit": [1]}).encode(), "application/json", 400, "limit must be a whole number"),
    ("rerank-int", json.dumps({"searches": LEX, "rerank": 1}).encode(), "application/json", 400, "rerank must be true or false"),
    ("query-number", json.dumps({"query": 5}).encode(), "application/json", 400, "query must be a string"),
    ("query-object", json.dumps({"query": {"a": 1}}).encode(), "application/json", 400, "query must be a string"),
    ("searches-string", json.dumps({"searches": "lex"}).encode(), "application/json", 400, "searches must be"),
    ("searches-item-list", json.dumps({"searches": [["lex", "x"]]}).encode(), "application/json", 400, "searches[1] must be an object"),
    ("body-array", b"[]", "application/json", 400, "JSON object"),
    ("body-empty", b"", "application/json", 400, "JSON"),
    ("body-not-utf8", b'{"query": "\xff\xfe"}', "application/json", 400, "JSON"),
    ("text-plain", json.dumps({"searches": LEX}).encode(), "text/plain", 415, "application/json"),
    ("form", b"query=rollback", "application/x-www-form-urlencoded", 415, "application/json"),
    ("multipart", b"--x\r\n\r\n--x--", "multipart/form-data; boundary=x", 415, "application/json"),
    ("no-content-type", json.dumps({"searches": LEX}).encode(), None, 415, "application/json"),
]


@pytest.mark.parametrize("path", ["/query", "/search"])
def test_bad_bodies_get_one_clear_error(server: Server, path: str) -> None:
    got, want = [], []
    for name, raw, ctype, status, phrase in BAD_BODIES:
        headers: dict[str, str | None] = {"Content-Type": ctype}
        code, body = request(server.port, "POST", path, raw=raw, headers=headers, timeout=30)
        error = body.get("error", "") if isinstance(body, dict) else f"(not JSON: {str(body)[:80]})"
        got.append((name, code, True if phrase.lower() in str(error).lower() else error))  # the message, when it fails
        want.append((name, status, True))
    assert got == want
    assert server.alive()


def test_json_content_type_with_parameters_is_accepted(server: Server) -> None:
    for ctype in ("application/json", "application/json; charset=utf-8", "Application/JSON;charset=UTF-8"):
        code, body = request(server.port, "POST", "/query", raw=json.dumps({"searches": LEX}).encode(), headers={"Content-Type": ctype})
        assert code == 200 and body["results"], (ctype, body)


def test_deep_json_on_mcp_is_a_client_error(server: Server) -> None:
    accept = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    for raw in (_nested(100_000, b"[", b"]"), _nested(100_000, b'{"a":', b"}")):
        code, _ = request(server.port, "POST", "/mcp", raw=raw, headers=accept)
        assert 400 <= code < 500, code
    assert server.alive()


BAD_TOOL_CALLS: list[tuple[str, str, dict[str, Any], str]] = [
    ("nul-query", "query", {"query": "roll\x00back"}, "NUL"),
    ("nul-lex", "query", {"searches": [{"type": "lex", "query": "a\x00b"}]}, "NUL"),
    ("nul-vec", "query", {"searches": [{"type": "vec", "query": "a\x00b"}]}, "NUL"),
    ("nul-intent", "query", {"query": "rollback", "intent": "a\x00"}, "NUL"),
    ("nul-collections", "query", {"query": "rollback", "collections": ["no\x00tes"]}, "NUL"),
    ("nul-get", "get", {"file": "notes/runbooks/deploy.md\x00"}, "NUL"),
    ("nul-multi-get", "multi_get", {"pattern": "notes/*\x00.md"}, "NUL"),
    ("limit-huge", "query", {"query": "rollback", "limit": 10**30}, "limit must be between 1 and 100"),
    ("limit-digits", "query", {"query": "rollback", "limit": "9" * 5000}, "limit must be"),
    ("candidates-huge", "query", {"query": "rollback", "candidateLimit": 10**40}, "candidateLimit must be between 1 and 200"),
    ("minscore-huge", "query", {"query": "rollback", "minScore": 10**400}, "minScore must be between 0 and 1"),
    ("fromline-huge", "get", {"file": "notes/runbooks/deploy.md", "fromLine": 10**30}, "fromLine must be between"),
    ("maxbytes-digits", "multi_get", {"pattern": "notes/*.md", "maxBytes": "9" * 5000}, "maxBytes must be"),
    ("searches-number", "query", {"searches": 7}, "searches must be"),
]


def test_bad_tool_arguments_are_tool_errors_not_internal_errors(server: Server) -> None:
    async def body(session: Any) -> list[Any]:
        return [await session.call_tool(tool, args) for _, tool, args, _ in BAD_TOOL_CALLS]

    results = run_session(http_connect(server.port), body)
    got = [(name, r.is_error, phrase.lower() in r.content[0].text.lower(), "internal error" in r.content[0].text) for (name, _, _, phrase), r in zip(BAD_TOOL_CALLS, results, strict=True)]
    assert got == [(name, True, True, False) for name, *_ in BAD_TOOL_CALLS], [r.content[0].text[:200] for r in results]
    assert server.alive()


# --- the log ------------------------------------------------------------------------------


@pytest.mark.parametrize(("raw", "logged"), [
    ("GET /health 200", "GET /health 200"),
    ("café → 2 results", "café → 2 results"),
    ("/a\x1b[31mred", "/a\\x1b[31mred"),
    ("line\r\nFORGED", "line\\r\\nFORGED"),
    ("nul\x00", "nul\\x00"),
    ("tab\t", "tab\\t"),
    ("csi\x9b[2J", "csi\\x9b[2J"),
    ("del\x7f", "del\\x7f"),
    ("ls\u2028ps\u2029", "ls\\u2028ps\\u2029"),
    ("bidi\u202e", "bidi\\u202e"),
    ("a\\x1b", "a\\x1b"),  # a literal backslash stays as it is
])
def test_escape_for_the_log(raw: str, logged: str) -> None:
    assert escape(raw) == logged
    if "\n" not in raw:
        assert escape_lines(f"{raw}\n{raw}") == f"{logged}\n{logged}"



def test_control_characters_never_reach_the_log_raw(server: Server) -> None:
    marker = f"m{time.monotonic_ns()}"
    with socket.create_connection(("127.0.0.1", server.port), timeout=10) as sock:
        sock.sendall(
            f"GET /{marker}%1b[31mred%0d%0aFORGED%20127.0.0.1%20GET%20/health%20200%00 HTTP/1.1\r\n"
            f"Host: 127.0.0.1:{server.port}\r\nOrigin: http://evil\x9b[2J.example\r\nConnection: close\r\n\r\n".encode("latin-1")
        )
        while sock.recv(65536):
            pass
    code, _ = request(server.port, "POST", "/query", {"searches": LEX, "collections": [f"{marker}\x1b[31mx\u2028y"]})
    assert code == 400  # the error names the unknown collection, and the log line the error
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline and server.log.read_text(errors="replace").count(marker) < 2:
        time.sleep(0.05)
    text = server.log.read_text(errors="replace")
    lines = [line for line in text.splitlines() if marker in line]
    assert len(lines) == 2, lines
    assert not {"\x1b", "\x9b", "\x00", "\r"} & set(text)
    assert not any(line.startswith("FORGED") for line in text.splitlines())
    assert "\\x1b[31mred\\r\\nFORGED" in lines[0] and "\\x00" in lines[0]
    assert "evil\\x9b[2J.example" in lines[0]  # U+009B (CSI) from the latin-1 header byte
    assert "\\x1b[31mx\\u2028y" in lines[1]


# --- connections --------------------------------------------------------------------------


def _poll(check: Callable[[], bool], seconds: float, step: float = 0.1) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(step)
    return check()


def _closed_by_server(sock: socket.socket) -> bool:
    """True once the server has closed `sock` (EOF or reset); never blocks."""
    sock.setblocking(False)
    try:
        while True:
            data = sock.recv(65536)
            if not data:
                return True
    except BlockingIOError:
        return False
    except OSError:
        return True


def _open(port: int, first: bytes = b"") -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if first:
        sock.sendall(first)
    return sock


def test_idle_and_half_open_connections_do_not_lock_the_server_out(server: Server) -> None:
    socks: list[socket.socket] = []
    try:
        for i in range(200):
            socks.append(_open(server.port, b"GET /he" if i % 2 else b""))
        # every route still answers, and promptly (generous bound: a shared, busy machine)
        for _ in range(3):
            started = time.monotonic()
            assert request(server.port, "GET", "/health", timeout=10)[0] == 200
            code, body = request(server.port, "POST", "/query", {"searches": LEX, "rerank": False}, timeout=10)
            assert code == 200 and body["results"]
            assert request(server.port, "GET", "/health", headers={"Origin": "http://evil.example"}, timeout=10)[0] == 403
            assert time.monotonic() - started < 8
        # and the idle ones are dropped after a bounded time
        assert _poll(lambda: all(_closed_by_server(s) for s in socks), TIMEOUT_S + 30)
    finally:
        for s in socks:
            s.close()
    assert server.alive()


def test_slow_clients_are_dropped(server: Server) -> None:
    started = time.monotonic()
    drip = _open(server.port, b"G")
    body = _open(server.port, f"POST /query HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{\"sea".encode())
    idle_after = _open(server.port, f"GET /health HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\n\r\n".encode())
    try:
        # one byte of headers every 0.2 s never completes a request: dropped on a total deadline
        request_line = b"ET /health HTTP/1.1\r\nX-Slow: " + b"a" * 10_000
        dropped = False
        for byte in request_line[:300]:
            try:
                drip.sendall(bytes([byte]))
            except OSError:
                dropped = True
                break
            if _closed_by_server(drip):
                dropped = True
                break
            drip.setblocking(True)
            time.sleep(0.2)
        assert dropped or _poll(lambda: _closed_by_server(drip), 30)
        # a body that stops coming: 408, then closed
        assert _poll(lambda: _closed_by_server(body), TIMEOUT_S + 30)
        # a keep-alive connection left idle after its answer: closed
        assert _poll(lambda: _closed_by_server(idle_after), TIMEOUT_S + 30)
        assert time.monotonic() - started < 120
    finally:
        for s in (drip, body, idle_after):
            s.close()
    assert server.alive()


def test_slow_body_gets_408(server: Server) -> None:
    with _open(server.port, f"POST /query HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{{".encode()) as sock:
        sock.settimeout(TIMEOUT_S + 30)
        answer = b""
        try:
            while chunk := sock.recv(65536):
                answer += chunk
        except OSError:
            pass
    assert answer.startswith(b"HTTP/1.1 408"), answer[:200]
    assert b"body" in answer and b"application/json" in answer


def test_get_mcp_stream_does_not_hold_a_slot(server: Server) -> None:
    """Stateless Streamable HTTP sends nothing on a GET stream: 405 (the spec's way to say none)."""
    headers = {"Accept": "text/event-stream"}
    code, body = request(server.port, "GET", "/mcp", headers=headers, timeout=TIMEOUT_S + 30)
    assert code == 405, (code, body)
    assert "POST" in json.dumps(body)
    held = [_open(server.port, f"GET /mcp HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nAccept: text/event-stream\r\n\r\n".encode()) for _ in range(80)]
    try:
        assert request(server.port, "GET", "/health", timeout=10)[0] == 200
        assert _poll(lambda: all(_closed_by_server(s) for s in held), TIMEOUT_S + 30)
    finally:
        for s in held:
            s.close()


def test_many_connections_evict_the_idle_not_the_new(server: Server) -> None:
    """More idle connections than the server keeps: the oldest idle ones go, new requests are served."""
    socks: list[socket.socket] = []
    try:
        for _ in range(700):
            socks.append(_open(server.port, b"GET /"))
        assert request(server.port, "GET", "/health", timeout=10)[0] == 200
        code, _ = request(server.port, "POST", "/query", {"searches": LEX, "rerank": False}, timeout=10)
        assert code == 200
    finally:
        for s in socks:
            s.close()
    assert server.alive()


def test_lone_surrogates_are_a_bad_request_never_a_500(tmp_path: Path) -> None:
    """`"\\ud800"` is valid JSON and no text: every route answers 400 (or a JSON-RPC parse
    error), never an internal error, and the server lives on."""
    from tests.support.mcp import wait_health

    lone = '"\\ud800"'
    accept = {"Accept": "application/json, text/event-stream"}
    with served_index(tmp_path) as server:
        port, proc = server.port, server.proc
        bodies = [
            ("/query", '{"searches": [{"type": "lex", "query": "x"}], "collections": [%s]}' % lone),
            ("/query", '{"searches": [{"type": "lex", "query": %s}]}' % lone),
            ("/mcp", '{"jsonrpc": "2.0", "id": 1, "method": %s}' % lone),
            ("/mcp", '{"jsonrpc": "2.0", "id": %s, "method": "tools/list"}' % lone),
            ("/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get", "arguments": {"file": %s}}}' % lone),
            ("/mcp", '{"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "query", "arguments": {"query": "x", "collections": [%s]}}}' % lone),
        ]
        for path, body in bodies:
            status, answer = request(port, "POST", path, raw=body.encode(), headers=accept)
            assert status in (400, 200) and status != 500, (path, body, status, answer)
            assert "internal" not in json.dumps(answer) and "surrogate" in json.dumps(answer), (path, body, answer)
        # a pair is an ordinary character
        status, answer = request(port, "POST", "/query", raw='{"searches": [{"type": "lex", "query": "\\ud83d\\ude00 rollback"}]}'.encode(), headers=accept)
        assert status == 200, answer
        assert wait_health(port, proc)["status"] == "ok"
    assert "Traceback" not in (tmp_path / "server.log").read_text()
