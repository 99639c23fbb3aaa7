"""MCP 2026-07-28 beside the legacy revisions (issue 30): server/discover, requests that carry
their version in `_meta` without initialize, `resultType`, cache hints, removed methods, and on
HTTP the MCP-Protocol-Version / Mcp-Method / Mcp-Name headers checked against the body, behind
the same token and Origin checks. Real `qmd mcp` processes, raw JSON-RPC (no SDK)."""

from __future__ import annotations

import base64
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import RawStdio, make_env, request, served_index, setup_index

V = "2026-07-28"
META = {"io.modelcontextprotocol/protocolVersion": V, "io.modelcontextprotocol/clientCapabilities": {}, "io.modelcontextprotocol/clientInfo": {"name": "t", "version": "1"}}
SUPPORTED = ["2026-07-28", "2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05"]
QUERY = {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}}


def modern(msg_id: Any, method: str, params: dict[str, Any] | None = None, meta: dict[str, Any] | None = None) -> dict[str, Any]:
    return {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": {**(params or {}), "_meta": META if meta is None else meta}}


def _is_complete(result: dict[str, Any]) -> None:
    assert result["resultType"] == "complete"
    assert result["_meta"]["io.modelcontextprotocol/serverInfo"]["name"] == "qmd"


# --- stdio ---------------------------------------------------------------------------------------

@pytest.fixture
def stdio(tmp_path: Path) -> Iterator[RawStdio]:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    s = RawStdio(env, tmp_path / "stderr.log")
    yield s
    s.close()


def _send(s: RawStdio, message: dict[str, Any]) -> Any:
    s.send(message)
    return s.until(lambda m: isinstance(m, dict) and m.get("id") == message["id"] and "method" not in m)[0]


def test_stdio_discover_and_calls_without_initialize(stdio: RawStdio) -> None:
    found = _send(stdio, modern(1, "server/discover"))["result"]
    _is_complete(found)
    assert found["supportedVersions"] == SUPPORTED
    assert found["capabilities"] == {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}
    assert "4 markdown documents" in found["instructions"]
    assert (found["ttlMs"], found["cacheScope"]) == (60_000, "private")
    listed = _send(stdio, modern(2, "tools/list"))["result"]
    _is_complete(listed)
    assert [t["name"] for t in listed["tools"]] == ["query", "get", "multi_get", "status"] and "outputSchema" in listed["tools"][0]
    assert listed["ttlMs"] == 60_000 and listed["cacheScope"] == "private"
    called = _send(stdio, modern(3, "tools/call", QUERY))["result"]
    _is_complete(called)
    assert called["isError"] is False and called["structuredContent"]["results"][0]["file"].startswith("qmd://notes/")
    prompts = _send(stdio, modern(4, "prompts/list"))["result"]
    _is_complete(prompts)
    assert prompts["prompts"][0]["name"] == "search-first" and "ttlMs" in prompts
    _is_complete(_send(stdio, modern(5, "prompts/get", {"name": "search-first"}))["result"])


def test_stdio_envelope_errors_and_removed_methods(stdio: RawStdio) -> None:
    err = _send(stdio, modern(1, "tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}))["error"]
    assert err["code"] == -32022 and err["data"] == {"supported": SUPPORTED, "requested": "2099-01-01"}
    err = _send(stdio, modern(2, "tools/call", QUERY, meta={"io.modelcontextprotocol/protocolVersion": V}))["error"]
    assert err["code"] == -32602 and "clientCapabilities" in err["message"]
    err = _send(stdio, {"jsonrpc": "2.0", "id": 3, "method": "server/discover"})["error"]
    assert err["code"] == -32602 and "protocolVersion" in err["message"]  # a legacy client's probe fails: it falls back
    for n, method in enumerate(("ping", "logging/setLevel", "initialize", "resources/subscribe")):
        err = _send(stdio, modern(10 + n, method))["error"]
        assert err["code"] == -32601 and f"{method} was removed in {V}" in err["message"]
    err = _send(stdio, modern(20, "resources/list"))["error"]
    assert err["code"] == -32601 and "server/discover" in err["message"]


def test_stdio_legacy_is_unchanged_beside_modern(stdio: RawStdio) -> None:
    _is_complete(_send(stdio, modern(1, "server/discover"))["result"])
    init = stdio.initialize("2025-11-25")["result"]
    assert init["protocolVersion"] == "2025-11-25" and "resultType" not in init and "_meta" not in init
    assert stdio.request(2, "ping") == {"jsonrpc": "2.0", "id": 2, "result": {}}
    listed = stdio.request(3, "tools/list")["result"]
    assert set(listed) == {"tools"}
    called = stdio.request(4, "tools/call", QUERY)["result"]
    assert "resultType" not in called and "_meta" not in called
    # a modern request after initialize is still stateless and modern
    _is_complete(_send(stdio, modern(5, "tools/call", QUERY))["result"])
    # initialize asking for 2026-07-28 (no handshake version) negotiates the newest legacy one, as before
    assert stdio.request(6, "initialize", {"protocolVersion": V, "capabilities": {}})["result"]["protocolVersion"] == "2025-11-25"


# --- HTTP ----------------------------------------------------------------------------------------

class Http:
    def __init__(self, port: int, token: str, log: Path) -> None:
        self.port, self.token, self.log = port, token, log

    def post(self, body: Any, headers: dict[str, str | None] | None = None, auto: bool = True) -> tuple[int, Any]:
        """POST /mcp with the token; `auto`: the three 2026-07-28 headers mirrored from the body."""
        hdrs: dict[str, str | None] = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {self.token}"}
        if auto and isinstance(body, dict):
            hdrs["MCP-Protocol-Version"] = V
            hdrs["Mcp-Method"] = body["method"]
            name = (body.get("params") or {}).get("name")
            if name is not None:
                hdrs["Mcp-Name"] = name
        return request(self.port, "POST", "/mcp", body, {**hdrs, **(headers or {})})


@pytest.fixture(scope="module")
def http(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Http]:
    with served_index(tmp_path_factory.mktemp("mcp-2026"), token="agent") as server:
        assert server.token is not None
        yield Http(server.port, server.token, server.log)


def test_http_discover_and_a_call_with_headers(http: Http) -> None:
    status, body = http.post(modern(1, "server/discover"))
    assert status == 200
    _is_complete(body["result"])
    assert body["result"]["supportedVersions"] == SUPPORTED and "instructions" in body["result"]
    status, body = http.post(modern(2, "tools/call", QUERY))
    assert status == 200
    _is_complete(body["result"])
    assert body["result"]["structuredContent"]["results"][0]["file"].startswith("qmd://notes/")
    status, body = http.post(modern(3, "tools/list"))
    assert status == 200 and body["result"]["ttlMs"] == 60_000 and len(body["result"]["tools"]) == 4
    # a name outside the header-safe set travels Base64-encoded; the server decodes before comparing
    status, body = http.post(modern(4, "tools/call", QUERY), {"Mcp-Name": "=?base64?" + base64.b64encode(b"query").decode() + "?="})
    assert status == 200 and body["result"]["resultType"] == "complete"
    status, body = http.post(modern(5, "tools/call", {"name": "rm", "arguments": {}}))
    assert status == 200 and body["error"]["code"] == -32602  # an unknown tool: a JSON-RPC error, as before


@pytest.mark.parametrize(("headers", "why"), [
    ({"Mcp-Name": "get"}, "Mcp-Name header value 'get' does not match body value 'query'"),
    ({"Mcp-Method": "tools/list"}, "Mcp-Method header value 'tools/list' does not match"),
    ({"MCP-Protocol-Version": "2025-11-25"}, "MCP-Protocol-Version header value '2025-11-25' does not match"),
    ({"Mcp-Name": None}, "the Mcp-Name header is required"),
    ({"Mcp-Method": None}, "the Mcp-Method header is required"),
    ({"MCP-Protocol-Version": None}, "the MCP-Protocol-Version header is required"),
    ({"Mcp-Name": "=?base64?cm0=?="}, "Mcp-Name header value 'rm' does not match"),
    ({"Mcp-Name": "=?base64?!!?="}, "is not valid =?base64?"),
    ({"Mcp-Name": "qu\xe9ry"}, "holds characters a header value may not"),
])
def test_http_header_body_mismatch_is_400_header_mismatch(http: Http, headers: dict[str, str | None], why: str) -> None:
    status, body = http.post(modern(9, "tools/call", QUERY), headers)
    assert status == 400 and body["id"] == 9 and body["error"]["code"] == -32020, body
    assert why in body["error"]["message"]


def test_http_envelope_versions_and_removed_methods(http: Http) -> None:
    status, body = http.post(modern(1, "tools/list", meta={**META, "io.modelcontextprotocol/protocolVersion": "2099-01-01"}), {"MCP-Protocol-Version": "2099-01-01"})
    assert status == 400 and body["error"]["code"] == -32022 and body["error"]["data"]["supported"] == SUPPORTED
    status, body = http.post(modern(2, "tools/list", meta={"io.modelcontextprotocol/protocolVersion": V}))
    assert status == 400 and body["error"]["code"] == -32602 and "clientCapabilities" in body["error"]["message"]
    status, body = http.post({"jsonrpc": "2.0", "id": 3, "method": "tools/list"}, {"MCP-Protocol-Version": V, "Mcp-Method": "tools/list"}, auto=False)
    assert status == 400 and body["error"]["code"] == -32602 and "_meta" in body["error"]["message"]
    status, body = http.post([modern(4, "tools/list")], {"MCP-Protocol-Version": V}, auto=False)
    assert status == 400 and body["error"]["code"] == -32600 and "batch" in body["error"]["message"]
    for method in ("ping", "logging/setLevel", "initialize"):
        status, body = http.post(modern(5, method))
        assert status == 404 and body["error"]["code"] == -32601 and "removed" in body["error"]["message"]
    status, body = http.post(modern(6, "resources/list"))
    assert status == 404 and body["error"]["code"] == -32601
    status, body = request(http.port, "GET", "/mcp", headers={"Authorization": f"Bearer {http.token}", "MCP-Protocol-Version": V})
    assert status == 405  # no GET stream
    status, body = http.post(modern(7, "tools/list"), {"Mcp-Session-Id": "abc"})
    assert status == 200 and "resultType" in body["result"]  # a session id is ignored, none is minted


def test_http_tokens_and_origin_guard_the_new_path(http: Http) -> None:
    status, body = http.post(modern(1, "server/discover"), {"Authorization": None})
    assert status == 401
    status, body = http.post(modern(1, "server/discover"), {"Authorization": "Bearer qmd_" + "0" * 43})
    assert status == 401
    status, body = http.post(modern(1, "tools/call", QUERY), {"Origin": "https://evil.example"})
    assert status == 403 and "results" not in str(body)
    status, body = http.post(modern(1, "tools/call", QUERY), {"Host": "evil.example"})
    assert status in (400, 403, 421) and "results" not in str(body)


def test_http_legacy_is_unchanged(http: Http) -> None:
    status, body = http.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}}}, auto=False)
    assert status == 200 and body["result"]["protocolVersion"] == "2025-11-25" and "resultType" not in body["result"]
    status, body = http.post({"jsonrpc": "2.0", "id": 2, "method": "ping"}, {"MCP-Protocol-Version": "2025-11-25"}, auto=False)
    assert (status, body["result"]) == (200, {})
    status, body = http.post({"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": QUERY}, {"MCP-Protocol-Version": "2025-06-18", "Mcp-Name": "whatever"}, auto=False)
    assert status == 200 and "resultType" not in body["result"]  # legacy requests: Mcp-* headers are not checked
    status, body = http.post({"jsonrpc": "2.0", "id": 4, "method": "resources/list"}, auto=False)
    assert status == 200 and body["error"]["code"] == -32601
    status, body = http.post({"jsonrpc": "2.0", "id": 5, "method": "ping"}, {"MCP-Protocol-Version": "1999-01-01"}, auto=False)
    assert status == 400 and "MCP-Protocol-Version" in body["error"]["message"] and body["error"]["code"] == -32022


@pytest.mark.parametrize("header", [None, "2025-11-25"])
def test_http_a_batch_holding_a_2026_request_is_refused_without_the_header_too(http: Http, header: str | None) -> None:
    """The body's _meta makes a request 2026-07-28 as much as the header does: in a batch it
    would skip the Mcp-Method/Mcp-Name checks a gateway relies on, so the batch is refused."""
    legacy = {"jsonrpc": "2.0", "id": 2, "method": "tools/list"}
    status, body = http.post([legacy, modern(3, "tools/call", QUERY)], {"MCP-Protocol-Version": header}, auto=False)
    assert status == 400 and body["error"]["code"] == -32600 and "batch" in body["error"]["message"], body
    assert "results" not in str(body)
    status, body = http.post([legacy], {"MCP-Protocol-Version": header}, auto=False)
    assert status == 200 and body[0]["result"]["tools"]  # a legacy batch is served as before


def _post_raw_headers(http: Http, body: dict[str, Any], headers: list[tuple[str, str]]) -> tuple[int, Any]:
    """POST /mcp sending `headers` as given, repeats included (http.client keeps each putheader)."""
    import json
    from http.client import HTTPConnection

    conn = HTTPConnection("127.0.0.1", http.port, timeout=30)
    try:
        data = json.dumps(body).encode()
        conn.putrequest("POST", "/mcp")
        for name, value in [("Content-Type", "application/json"), ("Accept", "application/json"), ("Content-Length", str(len(data))), ("Authorization", f"Bearer {http.token}"), *headers]:
            conn.putheader(name, value)
        conn.endheaders(data)
        answer = conn.getresponse()
        return answer.status, json.loads(answer.read() or b"null")
    finally:
        conn.close()


@pytest.mark.parametrize("twice", [("Mcp-Name", "get", "query"), ("Mcp-Method", "tools/list", "tools/call"), ("MCP-Protocol-Version", "2025-11-25", V)])
def test_http_a_mirrored_header_sent_twice_is_a_mismatch(http: Http, twice: tuple[str, str, str]) -> None:
    """Two values for one header (a gateway reads the first, a server the last) are not the
    body's value: refused, never served by whichever copy happens to match."""
    name, first, last = twice
    base = {"MCP-Protocol-Version": V, "Mcp-Method": "tools/call", "Mcp-Name": "query"}
    headers = [(k, v) for k, v in base.items() if k != name] + [(name, first), (name, last)]
    status, body = _post_raw_headers(http, modern(9, "tools/call", QUERY), headers)
    assert status == 400 and "results" not in str(body) and body["error"]["code"] in (-32020, -32022), body
    status, body = _post_raw_headers(http, modern(9, "tools/call", QUERY), list(base.items()))
    assert status == 200 and body["result"]["structuredContent"]["results"]


# --- which client negotiated what (the log) and doctor's probe of both paths ----------------------


def test_the_log_says_which_client_negotiated_which_version(stdio: RawStdio, http: Http, tmp_path: Path) -> None:
    stdio.initialize("2099-01-01")
    stdio.close()
    assert "initialize test 1 asked 2099-01-01, serving 2025-11-25" in (tmp_path / "stderr.log").read_text()
    http.post({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "agent\x1b[31m", "version": "9"}}}, auto=False)
    http.post(modern(2, "tools/list"))
    _wait_for(http.log, "tools/list protocol 2026-07-28")
    lines = http.log.read_text().splitlines()
    assert any("POST /mcp 200" in line and "initialize agent\\x1b[31m 9 asked 2025-06-18, serving 2025-06-18" in line for line in lines), lines[-5:]
    assert any("POST /mcp 200" in line and line.endswith("tools/list protocol 2026-07-28") for line in lines), lines[-5:]


def _wait_for(log: Path, text: str) -> None:
    deadline = time.monotonic() + 10
    while text not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)


def test_doctor_probe_takes_both_paths_over_stdio(tmp_path: Path) -> None:
    from qmd.serve.probe import stdio

    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    shake = stdio(env=env, timeout=60)
    assert shake.ok, shake.error
    assert (shake.protocol, shake.supported, shake.tools) == ("2025-11-25", SUPPORTED, ["get", "multi_get", "query", "status"])


def test_doctor_probe_takes_both_paths_over_http(http: Http) -> None:
    from qmd.serve.probe import http as probe_http

    shake = probe_http(f"http://127.0.0.1:{http.port}/mcp", token=http.token)
    assert shake.ok, shake.error
    assert (shake.protocol, shake.supported) == ("2025-11-25", SUPPORTED)
    _wait_for(http.log, "server/discover protocol 2026-07-28")
    log = http.log.read_text()
    assert "initialize qmd-doctor" in log and "server/discover protocol 2026-07-28" in log


def test_doctor_probe_fails_a_server_that_only_speaks_the_handshake(tmp_path: Path) -> None:
    """A server that answers initialize and tools/list but not server/discover (an MCP server
    of before 2026-07-28, where a 2026-07-28 client finds nothing) fails the probe, naming the step."""
    import threading
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from qmd.serve.probe import http as probe_http

    class Legacy(BaseHTTPRequestHandler):
        def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
            pass

        def do_POST(self) -> None:
            message = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if "id" not in message:
                self.send_response(202)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            results = {
                "initialize": {"protocolVersion": "2025-11-25", "capabilities": {"tools": {}}, "serverInfo": {"name": "old", "version": "1"}},
                "tools/list": {"tools": [{"name": n, "inputSchema": {"type": "object"}} for n in ("query", "get", "multi_get", "status")]},
            }
            answer: dict[str, Any] = {"jsonrpc": "2.0", "id": message["id"]}
            if message["method"] in results and "_meta" not in (message.get("params") or {}):
                answer["result"] = results[message["method"]]
            else:
                answer["error"] = {"code": -32601, "message": f"Method not found: {message['method']}"}
            data = json.dumps(answer).encode()
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    server = ThreadingHTTPServer(("127.0.0.1", 0), Legacy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        shake = probe_http(f"http://127.0.0.1:{server.server_address[1]}/mcp")
    finally:
        server.shutdown()
        server.server_close()
    assert not shake.ok and shake.error == "2026-07-28 server/discover: the server answered with error -32601: Method not found: server/discover", shake.error
