"""The MCP server over stdio and HTTP. Every import of the MCP SDK (and of starlette and
uvicorn, but for the protocol class in qmd/serve/connections.py) lives in this module,
which only `qmd mcp` imports. Doctor's handshake
(qmd/serve/probe.py) speaks plain JSON-RPC and imports no SDK.

HTTP routes (one Origin/Host check, size limit and log line for all of them):

    POST /mcp      Streamable HTTP, stateless, JSON responses (the SDK's app, mounted last)
    POST /query    {searches | query, collections?, limit?, minScore?, candidateLimit?,
    POST /search    intent?, rerank?} → {results: [{docid, file, title, score, context,
                    line, snippet}], freshness}   (the original's REST body; same route twice)
    GET  /health   {status, uptime_s, version, build_id, index, documents}

The tools themselves are in qmd/serve/service.py; this module declares their schemas and
adapts their answers (text + structured content; errors as error results).
"""

from __future__ import annotations

import contextvars
import json
import socket
import time
import traceback
from collections.abc import Callable
from contextlib import asynccontextmanager
from typing import Annotated, Any, Literal

import anyio
import anyio.to_thread
from mcp.server.mcpserver import MCPServer
from mcp.server.transport_security import TransportSecuritySettings
from mcp_types import CallToolResult, TextContent, ToolAnnotations
from pydantic import BaseModel, Field

from qmd import __version__
from qmd.serve.connections import http_timeout
from qmd.serve.logsafe import escape, escape_lines
from qmd.serve.origin import Guard
from qmd.serve.arguments import GET_PARAMS, MULTI_GET_PARAMS, QUERY_PARAMS, TOOL_DESCRIPTIONS, TOOL_PARAMS
from qmd.serve.service import ToolOutput, ToolService

MAX_BODY_BYTES = 1024 * 1024  # every route; tool arguments and REST bodies are small
JSON_TYPE = "application/json"
REST_EXAMPLE = '{"searches": [{"type": "lex", "query": "rollback"}]}'
READ_ONLY = ToolAnnotations(read_only_hint=True, destructive_hint=False, idempotent_hint=True, open_world_hint=False)

Log = Callable[[str], None]
_request_note: contextvars.ContextVar[list[str] | None] = contextvars.ContextVar("qmd_request_note", default=None)


def _result(out: ToolOutput) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=out.text)], structured_content=out.structured, is_error=out.is_error)


class SubQuery(BaseModel):
    """One typed sub-query."""

    type: Annotated[Literal["lex", "vec", "hyde"], Field(description="lex = BM25 keywords (prefix match, \"phrase\", -exclude); vec = a natural-language question; hyde = a short passage that looks like the answer")]
    query: Annotated[str, Field(description="The sub-query text (one line).")]


class QmdMCP(MCPServer):
    """MCPServer whose tool calls go through ToolService.call.

    The SDK validates arguments against the function signature and silently drops names
    it does not know; qmd validates the raw arguments itself so that an unknown name (a
    singular `collection`, say) is refused with the list of valid ones, and the same
    checks serve POST /query.
    """

    def __init__(self, service: ToolService, log: Log | None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.service = service
        self.call_log = log

    async def list_tools(self) -> Any:
        """The tools, each schema closed (`additionalProperties: false`): clients that check
        arguments before sending learn at once that unknown names are refused."""
        tools = await super().list_tools()
        for tool in tools:
            if tool.name in TOOL_PARAMS:
                tool.input_schema["additionalProperties"] = False
        return tools

    async def call_tool(self, name: str, arguments: dict[str, Any], context: Any = None) -> Any:
        if name not in TOOL_PARAMS:
            return await super().call_tool(name, arguments, context)
        started = time.perf_counter()
        out = await anyio.to_thread.run_sync(self.service.call, name, arguments)
        note = _request_note.get()
        if note is not None:
            note.append(f"{name} {out.summary}")
        if self.call_log is not None:
            self.call_log(escape(f"tools/call {name} {out.summary} ({(time.perf_counter() - started) * 1000:.1f} ms)"))
        return _result(out)


def make_mcp(service: ToolService, log: Log | None = None) -> QmdMCP:
    """The MCP server object with the four tools; `log` gets one line per tool call."""
    mcp = QmdMCP(service, log, name="qmd", version=__version__, instructions=service.instructions(), log_level="WARNING")

    def run(tool: str, given: dict[str, Any]) -> CallToolResult:
        return _result(service.call(tool, {k: v for k, v in given.items() if v is not None}))

    def query(
        query: Annotated[str | None, Field(description=QUERY_PARAMS["query"])] = None,
        searches: Annotated[list[SubQuery] | None, Field(description=QUERY_PARAMS["searches"], min_length=1, max_length=10)] = None,
        limit: Annotated[int, Field(description=QUERY_PARAMS["limit"], ge=1, le=100)] = 10,
        minScore: Annotated[float, Field(description=QUERY_PARAMS["minScore"], ge=0, le=1)] = 0.0,  # noqa: N803 - the original's names
        candidateLimit: Annotated[int, Field(description=QUERY_PARAMS["candidateLimit"], ge=1, le=200)] = 40,  # noqa: N803
        collections: Annotated[list[str] | None, Field(description=QUERY_PARAMS["collections"])] = None,
        intent: Annotated[str | None, Field(description=QUERY_PARAMS["intent"])] = None,
        rerank: Annotated[bool, Field(description=QUERY_PARAMS["rerank"])] = True,
    ) -> CallToolResult:
        given = dict(locals())
        if searches is not None:
            given["searches"] = [s.model_dump() for s in searches]
        return run("query", given)

    def get(
        file: Annotated[str, Field(description=GET_PARAMS["file"])],
        fromLine: Annotated[int | None, Field(description=GET_PARAMS["fromLine"], ge=1)] = None,  # noqa: N803
        maxLines: Annotated[int | None, Field(description=GET_PARAMS["maxLines"], ge=0)] = None,  # noqa: N803
        lineNumbers: Annotated[bool, Field(description=GET_PARAMS["lineNumbers"])] = False,  # noqa: N803
    ) -> CallToolResult:
        return run("get", dict(locals()))

    def multi_get(
        pattern: Annotated[str, Field(description=MULTI_GET_PARAMS["pattern"])],
        maxLines: Annotated[int | None, Field(description=MULTI_GET_PARAMS["maxLines"], ge=0)] = None,  # noqa: N803
        maxBytes: Annotated[int, Field(description=MULTI_GET_PARAMS["maxBytes"], ge=1)] = 65536,  # noqa: N803
        lineNumbers: Annotated[bool, Field(description=MULTI_GET_PARAMS["lineNumbers"])] = False,  # noqa: N803
    ) -> CallToolResult:
        return run("multi_get", dict(locals()))

    def status() -> CallToolResult:
        return run("status", {})

    titles = {"query": "Search notes", "get": "Get a document", "multi_get": "Get several documents", "status": "Index status"}
    for fn in (query, get, multi_get, status):
        mcp.add_tool(fn, title=titles[fn.__name__], description=TOOL_DESCRIPTIONS[fn.__name__], annotations=READ_ONLY)
    return mcp


def serve_stdio(service: ToolService, log: Log) -> None:
    """Serve MCP on stdin/stdout until the client closes stdin."""
    make_mcp(service, log).run()


# --- HTTP ---------------------------------------------------------------------------------


Rest = Callable[[bytes, list[str]], Any]  # async (body, log notes) -> (status, JSON payload)


class FrontDoor:
    """ASGI middleware in front of every route: Origin/Host check, body limit and read
    timeout, one log line (its client-sent parts escaped: qmd/serve/logsafe.py).

    It answers `POST /query` and `/search` itself (`rest`; JSON bodies only, else 415): the
    agent's commonest request skips Starlette's routing, Request and Response objects
    (~0.3 ms). `GET /mcp` (an SSE stream for server-initiated messages, which a stateless
    server never sends) is a 405, as the Streamable HTTP spec allows, so no idle stream
    holds a connection open.
    """

    def __init__(self, app: Any, guard: Guard, log: Log, max_body: int = MAX_BODY_BYTES, rest: Rest | None = None, body_timeout: float | None = None) -> None:
        self.app, self.guard, self.log, self.max_body, self.rest = app, guard, log, max_body, rest
        self.body_timeout = http_timeout() if body_timeout is None else body_timeout

    async def __call__(self, scope: Any, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        headers = {k.decode("latin-1").lower(): v.decode("latin-1") for k, v in scope["headers"]}
        status = [0]

        async def send_wrapper(message: Any) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
            await send(message)

        note: list[str] = []
        try:
            verdict = self.guard.check(headers.get("origin"), headers.get("host"))
            if not verdict.ok:
                note.append(verdict.reason)
                await _json(send_wrapper, verdict.status, {"error": verdict.reason, "hint": verdict.hint})
                return
            path, method = scope["path"], scope["method"]
            rest = self.rest is not None and method == "POST" and path in ("/query", "/search")
            if rest and not _is_json(headers.get("content-type")):
                given = headers.get("content-type")
                note.append(f"Content-Type {given!r}")
                await _json(send_wrapper, 415, {
                    "error": f"{path} takes a JSON body (Content-Type: {JSON_TYPE}); got " + (f"Content-Type: {given[:100]}" if given else "no Content-Type"),
                    "hint": f"set the header Content-Type: {JSON_TYPE} (curl: -H 'Content-Type: {JSON_TYPE}')",
                })
                return
            if method == "GET" and path in ("/mcp", "/mcp/"):
                note.append("no SSE stream (stateless)")
                await _json(send_wrapper, 405, {
                    "error": "GET /mcp (a server-sent event stream) is not offered: this server is stateless and sends nothing unprompted",
                    "hint": "POST JSON-RPC requests to /mcp",
                }, [(b"allow", b"POST")])
                return
            try:
                with anyio.fail_after(self.body_timeout):
                    body = await self._read_body(headers, receive)
            except TimeoutError:
                note.append(f"body not received within {self.body_timeout:g} s")
                await _json(send_wrapper, 408, {"error": f"the request body was not received within {self.body_timeout:g} s", "hint": "send the whole body at once"}, [(b"connection", b"close")])
                return
            if body is None:
                note.append(f"body over {self.max_body} bytes")
                await _json(send_wrapper, 413, {"error": f"request body over {self.max_body} bytes", "hint": "send smaller requests"})
                return
            if rest:
                assert self.rest is not None
                code, payload = await self.rest(body, note)
                await _json(send_wrapper, code, payload)
                return
            if scope["path"] == "/mcp" and body:
                note.append(_describe_rpc(body))
            replayed = False

            async def replay() -> Any:
                nonlocal replayed
                if not replayed:
                    replayed = True
                    return {"type": "http.request", "body": body, "more_body": False}
                return await receive()

            token = _request_note.set(note)
            try:
                await self.app(scope, replay, send_wrapper)
            finally:
                _request_note.reset(token)
        finally:
            client = scope.get("client") or ("-", 0)
            ms = (time.perf_counter() - started) * 1000
            detail = " ".join(n for n in note if n)
            self.log(escape(f"{client[0]} {scope['method']} {scope['path']} {status[0]} {ms:.1f}ms{(' ' + detail) if detail else ''}"))

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


def _is_json(content_type: str | None) -> bool:
    """`application/json`, with or without parameters (`; charset=utf-8`), any case."""
    return content_type is not None and content_type.split(";", 1)[0].strip().lower() == JSON_TYPE


async def _json(send: Any, status: int, payload: dict[str, Any], extra: list[tuple[bytes, bytes]] | None = None) -> None:
    body = json.dumps(payload, ensure_ascii=False, allow_nan=False, separators=(",", ":")).encode("utf-8")  # as Starlette's JSONResponse
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()), *(extra or [])]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": body})


def parse_json_body(raw: bytes) -> tuple[Any, str | None]:
    """(value, None), or (None, the error for a 400): malformed, too deep, or an overlong number."""
    try:
        return json.loads(raw or b"null"), None
    except RecursionError:
        return None, "the body is nested too deeply to be a query (JSON arrays or objects inside each other, about 1000 levels or more)"
    except json.JSONDecodeError as exc:
        return None, f"the body is not valid JSON: {exc.msg} (line {exc.lineno}, column {exc.colno})"
    except UnicodeDecodeError:
        return None, "the body is not valid JSON: it is not UTF-8 text"
    except ValueError as exc:  # int() refusing an overlong number
        return None, f"the body is not valid JSON that qmd reads: a number is too long ({str(exc)[:80]})"


def _describe_rpc(body: bytes) -> str:
    msg, error = parse_json_body(body)
    if error is not None:
        return "(not JSON)"
    if isinstance(msg, list):
        return f"batch of {len(msg)}"
    if not isinstance(msg, dict):
        return ""
    method = str(msg.get("method", "response"))
    return "" if method == "tools/call" else method  # a tool call adds its own note


def build_http_app(service: ToolService, guard: Guard, log: Log, on_shutdown: Callable[[], None] | None = None, timeout: float | None = None) -> FrontDoor:
    """The ASGI app: our routes first, the SDK's Streamable HTTP app mounted after them.

    `timeout` bounds the reading of each request body (default: `QMD_HTTP_TIMEOUT_S`)."""
    from starlette.applications import Starlette
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Mount, Route

    mcp = make_mcp(service)
    # The SDK's own DNS-rebinding check guards only /mcp and with its own lists; FrontDoor
    # applies one check (with QMD_ALLOWED_*) to every route, /mcp included.
    inner = mcp.streamable_http_app(
        json_response=True, stateless_http=True, max_request_body_size=MAX_BODY_BYTES,
        transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
    )

    async def health(request: Request) -> JSONResponse:
        return JSONResponse(service.health())

    async def rest(raw: bytes, note: list[str]) -> tuple[int, dict[str, Any]]:
        """POST /query and /search: keyword-only queries run in the event loop, the rest on a thread."""
        body, error = parse_json_body(raw)
        if error is not None:
            note.append(f"400 {error[:60]}")
            return 400, {"error": error, "hint": REST_EXAMPLE}
        try:
            answer = service.rest_query(body, fast_only=True)
            if answer is None:
                answer = await anyio.to_thread.run_sync(service.rest_query, body)
        except Exception as exc:  # a bug: a JSON 500 and the traceback in the log, the server lives on
            log(escape_lines(f"POST /query failed unexpectedly:\n{traceback.format_exc().rstrip()}"))
            note.append("internal error")
            return 500, {"error": f"internal error: {type(exc).__name__}", "hint": "this is a bug in qmd; the server log has the traceback"}
        assert answer is not None
        status, payload, summary = answer
        note.append(summary)
        return status, payload

    async def rest_query(request: Request) -> JSONResponse:  # reached only when FrontDoor does not answer
        status, payload = await rest(await request.body(), _request_note.get() or [])
        return JSONResponse(payload, status)

    @asynccontextmanager
    async def lifespan(app: Any) -> Any:
        async with mcp.session_manager.run():
            try:
                yield
            finally:
                if on_shutdown is not None:
                    on_shutdown()

    routes: list[Any] = [
        Route("/health", health, methods=["GET"]),
        Route("/query", rest_query, methods=["POST"]),
        Route("/search", rest_query, methods=["POST"]),
    ]
    # The SDK's app after ours. Its routes join our router (so GET /query is a 405, not a
    # 404 from a catch-all mount) unless it brings middleware, which a Mount keeps.
    if inner.user_middleware:
        routes.append(Mount("/", app=inner))
    else:
        routes.extend(inner.routes)
    return FrontDoor(Starlette(routes=routes, lifespan=lifespan), guard, log, rest=rest, body_timeout=timeout)


def serve_http(service: ToolService, sock: socket.socket, guard: Guard, log: Log, on_shutdown: Callable[[], None] | None = None) -> bool:
    """Serve on the bound socket until SIGINT/SIGTERM; False if the server failed to start."""
    import uvicorn

    from qmd.serve.connections import ConnectionPolicy, guarded_protocol

    policy = ConnectionPolicy.from_env()
    app = build_http_app(service, guard, log, on_shutdown, policy.timeout_s)
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
