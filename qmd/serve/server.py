"""The HTTP server: Streamable HTTP MCP at /mcp plus the REST routes, as one ASGI app.

No MCP SDK and no web framework: the JSON-RPC methods are qmd/serve/protocol.py's (the
same handler as stdio); this module is the HTTP face in front of them. uvicorn runs it
(`serve_http`). Routes (one Origin/Host check, size limit, body timeout and log line for
all of them):

    POST /mcp      Streamable HTTP, stateless, JSON responses (202 for notifications); a
                   2026-07-28 request must agree with its MCP-Protocol-Version, Mcp-Method and
                   Mcp-Name headers (400 -32020 otherwise; protocol.header_refusal)
    GET|DELETE /mcp  405: a stateless server offers no SSE stream and no session to end
    POST /query    {searches | query, collections?, limit?, minScore?, candidateLimit?,
    POST /search    intent?, rerank?} → {results: [{docid, file, title, score, context,
                    line, snippet}], freshness}   (the original's REST body; same route twice)
    POST /cli      what `qmd search|vsearch|query` print, for the CLI (qmd/serve/cliroute.py)
    POST /hello    {nonce} → {proof, nonce}: the server proves it wrote its PID file (qmd/serve/proof.py)
    GET  /health   {status, uptime_s, version, build_id, index, documents}

With tokens (qmd/serve/auth.py: the token file exists, or the server listens beyond
loopback) every route needs `Authorization: Bearer <token>`: 401 without one or with a
wrong one, 503 while the token file is unreadable. `/health` without an Authorization
header stays a liveness check that reveals nothing: `{"status": "ok"}`; with a valid token
it is the whole body, counting the token's collections. `/hello` needs no token (it proves the server's identity and tells nothing
else); `/cli` takes, instead of a token, the proof that the caller read the server's PID
file (`X-Qmd-Proof`: the local CLI of the same user). A scoped token reads only its
collections through every route (qmd/serve/service.py `ScopedTools`); naming another one
is a 403 on /query and /search and an error result over MCP.

A client that hangs up while its query runs cancels it: the pipeline stops at its next
checkpoint (qmd/core/cancel.py) and the worker is free for the next request.
"""

from __future__ import annotations

import json
import socket
import threading
import time
import traceback
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.to_thread

from qmd.serve.auth import OPEN, REALM, Authenticator, Verdict
from qmd.serve.connections import http_timeout
from qmd.serve.logsafe import escape, escape_lines
from qmd.serve.origin import Guard
from qmd.serve.proof import HEADER as PROOF_HEADER
from qmd.serve.proof import Nonces, valid_nonce
from qmd.serve.protocol import HTTP_DEFAULT_VERSION, METHOD_NOT_FOUND, MODERN_VERSIONS, SUPPORTED_VERSIONS, McpHandler, claims_modern, error_response, header_refusal, is_request, loads, parse_message, unsupported_version
from qmd.serve.service import ScopedTools, ToolService

MAX_BODY_BYTES = 1024 * 1024  # every route; tool arguments and REST bodies are small
JSON_TYPE = "application/json"
REST_EXAMPLE = '{"searches": [{"type": "lex", "query": "rollback"}]}'
ROUTES = "POST /mcp, POST /query, POST /search, POST /cli, GET /health"
LOCAL_CLI = Verdict(True, name="local CLI", reason="proof of the PID file's key")

Log = Callable[[str], None]


# --- HTTP ---------------------------------------------------------------------------------


class HttpApp:
    """The ASGI app: Origin/Host check, body limit and read timeout, the routes, one log
    line per request (its client-sent parts escaped: qmd/serve/logsafe.py)."""

    def __init__(self, service: ToolService, guard: Guard, log: Log, on_shutdown: Callable[[], None] | None = None, max_body: int = MAX_BODY_BYTES, body_timeout: float | None = None, auth: Authenticator | None = None, proof_key: str | None = None) -> None:
        self.service, self.guard, self.log, self.max_body = service, guard, log, max_body
        self.auth = auth  # None: no tokens are checked (--no-auth, or an in-process test app)
        self.nonces = Nonces(proof_key) if proof_key else None  # /hello and X-Qmd-Proof (qmd/serve/proof.py)
        self.on_shutdown = on_shutdown
        self.body_timeout = http_timeout() if body_timeout is None else body_timeout
        self.mcp = McpHandler(lambda: service, self._log_rpc)
        self._notes = threading.local()

    def _log_rpc(self, line: str) -> None:
        """The handler's lines join the request's own log line (one line per request)."""
        notes = getattr(self._notes, "current", None)
        if notes is not None:
            notes.append(line.removeprefix("tools/call ").removeprefix("rpc error ").removeprefix("initialize "))
        else:
            self.log(line)

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] == "lifespan":
            await self._lifespan(receive, send)
            return
        if scope["type"] != "http":
            return
        started = time.perf_counter()
        headers = _header_map(scope["headers"])
        status = [0]

        async def reply(code: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
            status[0] = code
            await _json(send, code, payload, extra)

        note: list[str] = []
        try:
            await self._route(scope, headers, receive, send, reply, status, note)
        finally:
            client = scope.get("client") or ("-", 0)
            ms = (time.perf_counter() - started) * 1000
            detail = " ".join(n for n in note if n)
            self.log(escape(f"{client[0]} {scope['method']} {scope['path']} {status[0]} {ms:.1f}ms{(' ' + detail) if detail else ''}"))

    async def _lifespan(self, receive: Any, send: Any) -> None:
        while True:
            message = await receive()
            if message["type"] == "lifespan.startup":
                await send({"type": "lifespan.startup.complete"})
            elif message["type"] == "lifespan.shutdown":
                if self.on_shutdown is not None:
                    self.on_shutdown()
                await send({"type": "lifespan.shutdown.complete"})
                return

    async def _route(self, scope: Any, headers: dict[str, str], receive: Any, send: Any, reply: Callable[..., Awaitable[None]], status: list[int], note: list[str]) -> None:
        verdict = self.guard.check(headers.get("origin"), headers.get("host"))
        if not verdict.ok:
            note.append(verdict.reason)
            await reply(verdict.status, {"error": verdict.reason, "hint": verdict.hint})
            return
        path, method = scope["path"].rstrip("/") or "/", scope["method"]
        if path == "/cli" and self.nonces is not None and self.nonces.accepts(headers.get(PROOF_HEADER)):
            who = LOCAL_CLI  # the caller read this server's PID file: its own user's CLI
        elif path == "/hello" or self.auth is None:
            who = OPEN  # /hello proves who the server is to anyone; it reveals nothing else
        else:
            who = self.auth.check(headers.get("authorization"))
        if not who.ok and path == "/health" and not who.presented and method in ("GET", "HEAD"):
            note.append("liveness only (no token)")
            await reply(200, {"status": "ok"})
            return
        if not who.ok:
            note.append(who.reason)
            challenge = [(b"www-authenticate", (REALM + (', error="invalid_token"' if who.presented else "")).encode())] if who.status == 401 else None
            await reply(who.status, {"error": who.error, "hint": who.hint}, challenge)
            return
        if who.name:
            note.append(who.reason)
        allowed = {"/mcp": "POST", "/query": "POST", "/search": "POST", "/cli": "POST", "/health": "GET"}.get(path)
        if path == "/hello" and self.nonces is not None:
            allowed = "POST"
        if allowed is None:
            note.append("no such route")
            await reply(404, {"error": f"no route {path[:100]}", "hint": f"routes: {ROUTES}"})
            return
        if method == "HEAD" and allowed == "GET":
            method = "GET"
        if method != allowed:
            why = " (a stateless server sends nothing unprompted and keeps no session)" if path == "/mcp" else ""
            note.append(f"{method} not allowed")
            await reply(405, {"error": f"{method} {path} is not offered{why}", "hint": f"use {allowed} {path}"}, [(b"allow", allowed.encode())])
            return
        if path == "/health":
            await reply(200, self.service.health(who.scope))
            return
        if not _is_json(headers.get("content-type")):
            given = headers.get("content-type")
            note.append(f"Content-Type {given!r}")
            await reply(415, {
                "error": f"{path} takes a JSON body (Content-Type: {JSON_TYPE}); got " + (f"Content-Type: {given[:100]}" if given else "no Content-Type"),
                "hint": f"set the header Content-Type: {JSON_TYPE} (curl: -H 'Content-Type: {JSON_TYPE}')",
            })
            return
        try:
            with anyio.fail_after(self.body_timeout):
                body = await self._read_body(headers, receive)
        except TimeoutError:
            note.append(f"body not received within {self.body_timeout:g} s")
            await reply(408, {"error": f"the request body was not received within {self.body_timeout:g} s", "hint": "send the whole body at once"}, [(b"connection", b"close")])
            return
        if body is None:
            note.append(f"body over {self.max_body} bytes")
            await reply(413, {"error": f"request body over {self.max_body} bytes", "hint": "send smaller requests"})
            return
        if path == "/mcp":
            await self._mcp(headers, body, receive, send, status, note, who)
        elif path == "/cli":
            code, payload = await self._cli(body, receive, note, who.scope)
            await reply(code, payload)
        elif path == "/hello":
            code, payload = self._hello(body)
            await reply(code, payload)
        else:
            code, payload = await self._rest(body, receive, note, who.scope)
            await reply(code, payload)

    def _hello(self, raw: bytes) -> tuple[int, dict[str, Any]]:
        """POST /hello {nonce}: this server's proof that it holds the key of its PID file."""
        body, error = parse_json_body(raw)
        nonce = body.get("nonce") if isinstance(body, dict) else None
        if error is not None or self.nonces is None or not valid_nonce(nonce):
            return 400, {"error": error or "the body must be {\"nonce\": \"<16 to 128 hex digits>\"}"}
        assert isinstance(nonce, str)
        return 200, self.nonces.hello(nonce)

    def _handler(self, who: Verdict) -> McpHandler:
        """The MCP handler for a request: the shared one, or one over a scoped token's view."""
        if who.scope is None:
            return self.mcp
        tools = ScopedTools(self.service, who.scope)
        return McpHandler(lambda: tools, self._log_rpc)  # type: ignore[arg-type,return-value]  # duck-typed: call + instructions

    async def _mcp(self, headers: dict[str, str], body: bytes, receive: Any, send: Any, status: list[int], note: list[str], who: Verdict = OPEN) -> None:
        """POST /mcp (Streamable HTTP, stateless): a request gets its JSON response, a
        notification or response 202 Accepted."""
        handler = self._handler(who)
        accept = headers.get("accept", "").lower()
        if accept and not any(t in accept for t in ("application/json", "*/*", "application/*")):
            note.append(f"Accept {accept[:60]!r}")
            status[0] = 406
            await _json(send, 406, {"error": f"this server answers in {JSON_TYPE}; the request accepts only {accept[:100]}", "hint": f"send Accept: {JSON_TYPE}, text/event-stream"})
            return
        version = headers.get("mcp-protocol-version")
        if version is not None and version not in SUPPORTED_VERSIONS:
            note.append(f"protocol {version[:30]!r}")
            status[0] = 400
            refused = unsupported_version(version)
            await _json(send, 400, error_response(None, refused.code, f"Bad Request: unsupported MCP-Protocol-Version {version[:40]!r} (supported: {', '.join(SUPPORTED_VERSIONS)})", refused.data))
            return
        message, error = parse_message(body)
        if error is not None:
            note.append("parse error")
            status[0] = 400
            await _json(send, 400, error)
            return
        refusal = header_refusal(message, headers)
        if refusal is not None:  # 2026-07-28: headers and body must agree, the envelope be whole
            note.append(f"rpc error {refusal.code}")
            self.log(escape(f"rpc error {refusal.code} {str(message.get('method') if isinstance(message, dict) else '-')[:60]}: {refusal.message}"))
            status[0] = 400
            await _json(send, 400, error_response(message.get("id") if isinstance(message, dict) else None, refusal.code, refusal.message, refusal.data))
            return
        modern = isinstance(message, dict) and is_request(message) and (version in MODERN_VERSIONS or claims_modern(message))
        if isinstance(message, dict) and isinstance(message.get("method"), str) and message["method"] != "tools/call":
            note.append(message["method"][:60])
        elif isinstance(message, list):
            note.append(f"batch of {len(message)}")
        if isinstance(message, list) and message:
            answer: Any = await self._watched(lambda event: [a for a in (self._handle(m, event, note, handler, version) for m in message) if a is not None], receive)
        elif isinstance(message, dict) and not is_request(message):
            self._handle(message, None, note, handler, version)
            answer = None
        else:
            answer = await self._watched(lambda event: self._handle(message, event, note, handler, version), receive)
        if version is not None:  # what the client speaks after initialize (2026-07-28: on every request)
            note.append(f"protocol {version}")
        if answer is None or answer == []:
            status[0] = 202
            await send({"type": "http.response.start", "status": 202, "headers": [(b"content-length", b"0")]})
            await send({"type": "http.response.body", "body": b""})
            return
        # 2026-07-28: an unknown (or removed) method is a 404 with its -32601 body
        code = 404 if modern and isinstance(answer, dict) and answer.get("error", {}).get("code") == METHOD_NOT_FOUND else 200
        status[0] = code
        await _json(send, code, answer)

    def _handle(self, message: Any, event: threading.Event | None, note: list[str], handler: McpHandler | None = None, version: str | None = None) -> dict[str, Any] | None:
        self._notes.current = note
        try:
            return (handler or self.mcp).handle(message, event, version or HTTP_DEFAULT_VERSION)
        finally:
            self._notes.current = None

    async def _watched(self, work: Callable[[threading.Event], Any], receive: Any) -> Any:
        """Run `work(event)` on a worker thread; the event is set if the client hangs up
        first, so the query stops at its next checkpoint instead of running for nobody."""
        event = threading.Event()
        result: list[Any] = [None]

        async def watch() -> None:
            while True:
                message = await receive()
                if message["type"] == "http.disconnect":
                    event.set()
                    return

        async def run(scope: anyio.CancelScope) -> None:
            result[0] = await anyio.to_thread.run_sync(work, event)
            scope.cancel()

        async with anyio.create_task_group() as tg:
            tg.start_soon(watch)
            tg.start_soon(run, tg.cancel_scope)
        return None if event.is_set() else result[0]

    async def _rest(self, raw: bytes, receive: Any, note: list[str], scope: frozenset[str] | None = None) -> tuple[int, dict[str, Any]]:
        """POST /query and /search: keyword-only queries answered in the event loop when
        the Store is free (no thread hand-off), the rest on a worker thread."""
        body, error = parse_json_body(raw)
        if error is not None:
            note.append(f"400 {error[:60]}")
            return 400, {"error": error, "hint": REST_EXAMPLE}
        try:
            answer = self.service.rest_query(body, fast_only=True, scope=scope)
            if answer is None:
                answer = await self._watched(lambda event: self._rest_query(body, event, scope), receive)
                if answer is None:
                    note.append("client hung up; query cancelled")
                    return 499, {"error": "cancelled: the client closed the connection"}
        except Exception as exc:  # a bug: a JSON 500 and the traceback in the log, the server lives on
            self.log(escape_lines(f"POST /query failed unexpectedly:\n{traceback.format_exc().rstrip()}"))
            note.append("internal error")
            return 500, {"error": f"internal error: {type(exc).__name__}", "hint": "this is a bug in qmd; the server log has the traceback"}
        code, payload, summary = answer
        note.append(summary)
        return code, payload

    async def _cli(self, raw: bytes, receive: Any, note: list[str], scope: frozenset[str] | None = None) -> tuple[int, dict[str, Any]]:
        """POST /cli (qmd/serve/cliroute.py) on a worker thread; a client that hangs up cancels it."""
        from qmd.core.cancel import Cancelled, cancel_scope

        body, error = parse_json_body(raw)
        if error is not None:
            note.append(f"400 {error[:60]}")
            return 400, {"error": error}

        def work(event: threading.Event) -> tuple[int, dict[str, Any], str] | None:
            try:
                with cancel_scope(event):
                    answer = self.service.cli_query(body, scope)
                json.dumps(answer[1], ensure_ascii=False, allow_nan=False).encode("utf-8")  # what _json sends must be sendable
                return answer
            except Cancelled:
                return None
            except Exception as exc:  # a bug: a JSON 500 and the traceback in the log; the CLI runs locally
                self.log(escape_lines(f"POST /cli failed unexpectedly:\n{traceback.format_exc().rstrip()}"))
                return 500, {"error": f"internal error: {type(exc).__name__}"}, "internal error"

        answer = await self._watched(work, receive)
        if answer is None:
            note.append("client hung up; query cancelled")
            return 499, {"error": "cancelled: the client closed the connection"}
        code, payload, summary = answer
        note.append(summary)
        return code, payload

    def _rest_query(self, body: Any, event: threading.Event, scope: frozenset[str] | None = None) -> tuple[int, dict[str, Any], str] | None:
        from qmd.core.cancel import Cancelled, cancel_scope

        try:
            with cancel_scope(event):
                return self.service.rest_query(body, scope=scope)
        except Cancelled:
            return None

    async def _read_body(self, headers: dict[str, str], receive: Any) -> bytes | None:
        declared = headers.get("content-length")
        if declared is not None and declared.isdigit() and int(declared) > self.max_body:
            return None
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                break
            chunk = message.get("body", b"")
            size += len(chunk)
            if size > self.max_body:
                return None
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        return b"".join(chunks)


def _header_map(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """Lower-cased names to values; a header sent twice keeps both values joined by ", "
    (RFC 9110 5.3), so a repeated Mcp-Name/Origin/Authorization matches no single value
    instead of the last copy winning where a gateway read the first."""
    headers: dict[str, str] = {}
    for k, v in raw:
        name, value = k.decode("latin-1").lower(), v.decode("latin-1")
        headers[name] = f"{headers[name]}, {value}" if name in headers else value
    return headers


def _is_json(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (`; charset=utf-8`), any case."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == JSON_TYPE


async def _json(send: Any, status: int, payload: Any, extra: list[tuple[bytes, bytes]] | None = None) -> None:
    try:
        body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:  # an answer echoing what cannot be UTF-8: its \u escape instead
        body = json.dumps(payload, ensure_ascii=True, allow_nan=False, separators=(",", ":")).encode("ascii")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def parse_json_body(raw: bytes) -> tuple[Any, str | None]:
    """(value, None), or (None, the error for a 400): malformed, too deep, or an overlong number."""
    try:
        return loads(raw or b"null"), None
    except RecursionError:
        return None, "the body is nested too deeply to be a query (JSON arrays or objects inside each other, about 1000 levels or more)"
    except json.JSONDecodeError as exc:
        return None, f"the body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except UnicodeDecodeError:
        return None, "the body is not valid JSON: it is not UTF-8 text"
    except ValueError as exc:  # int() refusing an overlong number, a lone surrogate
        why = str(exc)[:120] if "surrogate" in str(exc) else f"a number is too long ({str(exc)[:80]})"
        return None, f"the body is not valid JSON that qmd reads: {why}"


def build_http_app(service: ToolService, guard: Guard, log: Log, on_shutdown: Callable[[], None] | None = None, timeout: float | None = None, auth: Authenticator | None = None, proof_key: str | None = None) -> HttpApp:
    """The ASGI app; `timeout` bounds the reading of each request body (default: `QMD_HTTP_TIMEOUT_S`);
    `auth` checks bearer tokens (None: none are asked for); `proof_key` (the PID file's
    secret) enables /hello and the CLI's proof on /cli (qmd/serve/proof.py)."""
    return HttpApp(service, guard, log, on_shutdown, body_timeout=timeout, auth=auth, proof_key=proof_key)


def serve_http(service: ToolService, sock: socket.socket, guard: Guard, log: Log, on_shutdown: Callable[[], None] | None = None, auth: Authenticator | None = None, proof_key: str | None = None) -> bool:
    """Serve on the bound socket until SIGINT/SIGTERM; False if the server failed to start."""
    import uvicorn

    from qmd.serve.connections import ConnectionPolicy, guarded_protocol

    policy = ConnectionPolicy.from_env()
    app = build_http_app(service, guard, log, on_shutdown, policy.timeout_s, auth, proof_key)
    # No limit_concurrency: uvicorn counts idle connections against it, so 64 half-open
    # sockets answered every request with 503. The guarded protocol bounds each
    # connection's time instead and evicts the oldest idle one when too many are open.
    config = uvicorn.Config(
        app, log_level="warning", access_log=False, lifespan="on", server_header=False,
        timeout_graceful_shutdown=5, timeout_keep_alive=max(1, round(policy.timeout_s)),
        http=guarded_protocol(policy), ws="none",
    )
    server = uvicorn.Server(config)
    server.run(sockets=[sock])
    return bool(server.started)
