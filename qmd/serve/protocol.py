"""MCP's JSON-RPC methods, without the MCP SDK: one handler for stdio and Streamable HTTP.

`McpHandler.handle(message, cancel, version)` answers one parsed JSON-RPC message and returns the
response object (None for a notification or a client's response). Served:

    initialize, ping, tools/list, tools/call, prompts/list, prompts/get
    notifications/initialized, notifications/cancelled (stdio: qmd/serve/stdio.py)

Two eras (the spec's "dual-era" server). A request whose `params._meta` names
`io.modelcontextprotocol/protocolVersion` (or any `server/discover`) is modern, 2026-07-28:
stateless, it needs no `initialize` and changes nothing for the next request; it must also
carry `io.modelcontextprotocol/clientCapabilities` (an object), else -32602; a version other
than 2026-07-28 in `_meta` is -32022 UnsupportedProtocolVersion with `data.supported` and
`data.requested`. Modern results carry `resultType: "complete"` and `_meta` with
`io.modelcontextprotocol/serverInfo`; `server/discover`, `tools/list` and `prompts/list` carry
the cache hints `ttlMs`/`cacheScope`. What 2026-07-28 removed (`initialize`, `ping`,
`logging/setLevel`, `resources/subscribe`…) is -32601 there. A request without that `_meta` is
legacy and answered exactly as before. `header_refusal` holds the HTTP header rules.

Everything else is the spec's error: an unknown method -32601 (resources, logging and
completions are not advertised, so they are unknown), an unknown tool or prompt or bad
params -32602, a malformed message -32600, unparsable JSON -32700. Each protocol error is
one log line, never a traceback. Tool failures (bad arguments, a missing document) are
tool results with `isError`, as the spec asks, so the model reads the fix.

A tool call runs inside `cancel_scope(cancel)`: when the transport sets the event (the
client sent notifications/cancelled, or hung up) the pipeline stops at its next checkpoint
and the call has no answer (`handle` returns None).
"""

from __future__ import annotations

import json
import re
import threading
import time
from collections.abc import Callable
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

from qmd.core.version import __version__
from qmd.core.cancel import Cancelled, cancel_scope

if TYPE_CHECKING:
    from typing import Any

    from qmd.serve.service import ToolService

# Legacy (initialize handshake), newest first; a client asking for another version gets the newest (the spec's rule).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# Modern: every request names its version in _meta; no handshake, no session.
MODERN_VERSIONS = ("2026-07-28",)
SUPPORTED_VERSIONS = MODERN_VERSIONS + PROTOCOL_VERSIONS
# Streamable HTTP without an MCP-Protocol-Version header: the spec says assume this one.
HTTP_DEFAULT_VERSION = "2025-03-26"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
HEADER_MISMATCH, MISSING_CLIENT_CAPABILITY, UNSUPPORTED_VERSION = -32020, -32021, -32022  # 2026-07-28
SERVED = ("initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get")
MODERN_SERVED = ("server/discover", "tools/list", "tools/call", "prompts/list", "prompts/get")
# Gone in 2026-07-28 (its changelog): the handshake, ping, logging/setLevel, resource subscriptions.
REMOVED = ("initialize", "ping", "logging/setLevel", "resources/subscribe", "resources/unsubscribe")
META_VERSION = "io.modelcontextprotocol/protocolVersion"
META_CAPABILITIES = "io.modelcontextprotocol/clientCapabilities"
META_SERVER_INFO = "io.modelcontextprotocol/serverInfo"
SERVER_INFO = {"name": "qmd", "title": "qmd: search the user's notes", "version": __version__}
CAPABILITIES = {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}
# Cache hints (2026-07-28 CacheableResult): the instructions count the caller's documents,
# so "private", and a minute, as the original qmd 2.8.3.
CACHE_HINTS = {"ttlMs": 60_000, "cacheScope": "private"}
NAMED = {"tools/call": "name", "prompts/get": "name", "resources/read": "uri"}  # what Mcp-Name mirrors

Log = Callable[[str], None]
ServiceSource = Callable[[], "ToolService"]


class RpcError(Exception):
    def __init__(self, code: int, message: str, data: Any = None) -> None:
        super().__init__(message)
        self.code, self.message, self.data = code, message, data


def error_response(msg_id: Any, code: int, message: str, data: Any = None) -> dict[str, Any]:
    error: dict[str, Any] = {"code": code, "message": message}
    if data is not None:
        error["data"] = data
    return {"jsonrpc": "2.0", "id": msg_id, "error": error}


_LONE = re.compile(rb"\\u[dD][89a-fA-F][0-9a-fA-F]{2}")


def loads(raw: bytes | str) -> Any:
    """JSON text as a value; ValueError for a lone UTF-16 surrogate (`"\\ud800"`): JSON lets one
    through, but it is no text (nothing can encode it: a path, a query, an index cell)."""
    value = json.loads(raw)
    data = raw.encode("utf-8", "surrogatepass") if isinstance(raw, str) else raw
    if _LONE.search(data):  # rare: only then is the decoded value walked
        try:
            json.dumps(value, ensure_ascii=False).encode("utf-8")
        except UnicodeEncodeError:
            raise ValueError("a string holds a lone UTF-16 surrogate (\\ud800-\\udfff not in a pair): not text") from None
    return value


def parse_message(raw: bytes | str) -> tuple[Any, dict[str, Any] | None]:
    """(the decoded JSON, None) or (None, the -32700 response to send)."""
    try:
        return loads(raw), None
    except RecursionError:
        return None, error_response(None, PARSE_ERROR, "Parse error: the message is nested too deeply")
    except (ValueError, UnicodeDecodeError) as exc:  # JSONDecodeError, bad UTF-8, an overlong number
        return None, error_response(None, PARSE_ERROR, f"Parse error: {str(exc)[:120]}")


def encode(message: Any) -> bytes:
    """One message as compact UTF-8 JSON (no NaN: tool answers never hold one); anything
    that cannot be UTF-8 (a lone surrogate) is sent as a \\u escape instead."""
    try:
        return json.dumps(message, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
    except UnicodeEncodeError:
        return json.dumps(message, ensure_ascii=True, separators=(",", ":")).encode("ascii")


def unsupported_version(requested: str) -> RpcError:
    """The spec's UnsupportedProtocolVersionError (-32022) with the versions served."""
    return RpcError(
        UNSUPPORTED_VERSION,
        f"Unsupported protocol version {requested[:40]!r}: per-request _meta speaks {', '.join(MODERN_VERSIONS)}; {', '.join(PROTOCOL_VERSIONS)} open with initialize",
        {"supported": list(SUPPORTED_VERSIONS), "requested": requested[:100]},
    )


def modern_version(method: str, params: dict[str, Any]) -> str | None:
    """The 2026-07-28 version a request speaks (its `_meta` names one; `server/discover` always
    must), None for a legacy request; RpcError for a malformed or unsupported envelope."""
    meta = params.get("_meta")
    if not isinstance(meta, dict) or META_VERSION not in meta:
        if method == "server/discover":
            raise RpcError(INVALID_PARAMS, f"Invalid params: server/discover needs _meta[{META_VERSION!r}] (e.g. {MODERN_VERSIONS[0]!r}) and _meta[{META_CAPABILITIES!r}]")
        return None
    version = meta[META_VERSION]
    if not isinstance(version, str):
        raise RpcError(INVALID_PARAMS, f"Invalid params: _meta[{META_VERSION!r}] must be a string such as {MODERN_VERSIONS[0]!r}")
    if version not in MODERN_VERSIONS:
        raise unsupported_version(version)
    if not isinstance(meta.get(META_CAPABILITIES), dict):
        raise RpcError(INVALID_PARAMS, f"Invalid params: a {version} request needs _meta[{META_CAPABILITIES!r}] (an object; {{}} declares none)")
    return version


def _header_value(raw: str | None) -> str | None:
    """A mirrored header's value, the Base64 sentinel (`=?base64?…?=`) decoded; ValueError for
    characters a header may not hold or a broken encoding."""
    if raw is None:
        return None
    if any(not (" " <= c <= "~" or c == "\t") for c in raw):
        raise ValueError("holds characters a header value may not (use the =?base64?…?= form)")
    if raw.startswith("=?base64?") and raw.endswith("?=") and len(raw) >= 11:
        import base64
        import binascii

        try:
            return base64.b64decode(raw[9:-2], validate=True).decode("utf-8")
        except (binascii.Error, UnicodeDecodeError):
            raise ValueError("is not valid =?base64?…?= UTF-8") from None
    return raw


def header_refusal(message: Any, headers: dict[str, str]) -> RpcError | None:
    """Why a Streamable HTTP POST of 2026-07-28 is refused with 400, None when it may go on.

    `headers` are lower-cased names. The rules (transports/streamable-http, Server Validation):
    a request speaks 2026-07-28 when its MCP-Protocol-Version header or its body `_meta` says
    so; then the body is one request (no batch), its envelope is whole (else -32602 or -32022),
    and MCP-Protocol-Version, Mcp-Method and (tools/call, prompts/get, resources/read) Mcp-Name
    must be present, header-safe and equal to the body's version, `method` and `params.name`
    (`params.uri`), Base64 sentinels decoded first: else -32020 HeaderMismatch."""
    header_version = headers.get("mcp-protocol-version")
    if isinstance(message, list):
        if header_version in MODERN_VERSIONS or any(claims_modern(m) for m in message):
            return RpcError(INVALID_REQUEST, f"Invalid Request: a {MODERN_VERSIONS[0]} POST carries one JSON-RPC message, not a batch")
        return None
    if not is_request(message) or not isinstance(message.get("method"), str) or not isinstance(message.get("params", {}), (dict, type(None))):
        return None  # notifications and malformed messages: the handler answers as before
    method, params = message["method"], message.get("params") or {}
    try:
        body_version = modern_version(method, params)
    except RpcError as exc:
        return exc
    if body_version is None:
        if header_version in MODERN_VERSIONS:
            return RpcError(INVALID_PARAMS, f"Invalid params: a {header_version} request needs _meta[{META_VERSION!r}] and _meta[{META_CAPABILITIES!r}] in its params")
        return None  # legacy: served as before
    expected = {"mcp-protocol-version": ("MCP-Protocol-Version", body_version), "mcp-method": ("Mcp-Method", method)}
    if method in NAMED:
        name = params.get(NAMED[method])
        expected["mcp-name"] = ("Mcp-Name", name if isinstance(name, str) else None)
    for key, (title, body_value) in expected.items():
        try:
            value = _header_value(headers.get(key))
        except ValueError as exc:
            return RpcError(HEADER_MISMATCH, f"Header mismatch: the {title} header {exc}")
        if value is None:
            return RpcError(HEADER_MISMATCH, f"Header mismatch: the {title} header is required (it must equal the body's {'params.' + NAMED[method] if key == 'mcp-name' else key[4:]})")
        if value != body_value:
            return RpcError(HEADER_MISMATCH, f"Header mismatch: {title} header value {value[:80]!r} does not match body value {str(body_value)[:80]!r}")
    return None


def claims_modern(message: Any) -> bool:
    """The message names a protocol version in its `_meta` (2026-07-28 style), or is server/discover."""
    if not isinstance(message, dict):
        return False
    params = message.get("params")
    meta = params.get("_meta") if isinstance(params, dict) else None
    return message.get("method") == "server/discover" or (isinstance(meta, dict) and META_VERSION in meta)


def is_request(message: Any) -> bool:
    """A message that wants an answer (it has an id and a method)."""
    return isinstance(message, dict) and "method" in message and "id" in message


def tool_call_id(message: Any) -> Any:
    """The id of a tools/call request (the work that can be cancelled), else None."""
    if is_request(message) and message.get("method") == "tools/call":
        return message["id"]
    return None


class McpHandler:
    """The MCP methods over one ToolService (obtained lazily: stdio answers the handshake
    while the index opens in the background)."""

    def __init__(self, service: ServiceSource, log: Log, notify: Callable[[dict[str, Any]], None] | None = None, instructions: Callable[[], str] | None = None) -> None:
        self._service = service
        self._instructions = instructions  # the server's instructions, when they come sooner than the service
        self.log = log
        self.notify = notify  # sends a notification to the client (stdio); None where it cannot (stateless HTTP)
        self.client: str = ""  # clientInfo name/version from initialize, for the log
        self.version = PROTOCOL_VERSIONS[0]  # negotiated by initialize (stdio); HTTP passes each request's to handle()

    @property
    def service(self) -> ToolService:
        return self._service()

    def instructions(self) -> str:
        return self._instructions() if self._instructions is not None else self.service.instructions()

    def handle(self, message: Any, cancel: threading.Event | None = None, version: str | None = None) -> dict[str, Any] | None:
        """The response to one message (None: nothing to send); `version`: the protocol version
        this request speaks (stateless HTTP: its header), else the one initialize negotiated."""
        if not isinstance(message, dict):
            return self._refuse(None, INVALID_REQUEST, "Invalid Request: a JSON-RPC message is an object")
        if "method" not in message:
            return None  # a response to a request of ours (we send none) or junk without an id
        msg_id = message.get("id")
        notification = "id" not in message
        method = message.get("method")
        if message.get("jsonrpc") != "2.0" or not isinstance(method, str):
            return None if notification else self._refuse(msg_id, INVALID_REQUEST, 'Invalid Request: needs "jsonrpc": "2.0" and a string "method"')
        if not notification and (isinstance(msg_id, bool) or not isinstance(msg_id, (str, int))):
            return self._refuse(None, INVALID_REQUEST, "Invalid Request: the id must be a string or an integer")
        params = message.get("params", {})
        if params is None:
            params = {}
        if notification:
            return None  # initialized, cancelled (the transport acts on it), progress, roots…
        try:
            if not isinstance(params, dict):
                raise RpcError(INVALID_PARAMS, f"Invalid params: {method} takes an object")
            modern = modern_version(method, params)
            if modern is None and version in MODERN_VERSIONS:
                raise RpcError(INVALID_PARAMS, f"Invalid params: a {version} request needs _meta[{META_VERSION!r}] and _meta[{META_CAPABILITIES!r}] in its params")
            if modern is not None:
                result = self._modern(method, params, cancel, modern)
            else:
                result = self._dispatch(method, params, cancel, version or self.version)
        except RpcError as exc:
            return self._refuse(msg_id, exc.code, exc.message, exc.data, method)
        except Cancelled:
            return None
        except Exception as exc:  # a bug: one answer and the traceback in the log; the server lives on
            import traceback

            from qmd.serve.logsafe import escape_lines

            self.log(escape_lines(f"{method} failed unexpectedly:\n{traceback.format_exc().rstrip()}"))
            return error_response(msg_id, INTERNAL_ERROR, f"internal error in {method}: {type(exc).__name__} (a bug in qmd; the server log has the traceback)")
        if result is None:
            return None
        return {"jsonrpc": "2.0", "id": msg_id, "result": result}

    def _refuse(self, msg_id: Any, code: int, message: str, data: Any = None, method: str = "") -> dict[str, Any]:
        from qmd.serve.logsafe import escape

        self.log(escape(f"rpc error {code} {method or '-'}: {message}"))
        return error_response(msg_id, code, message, data)

    def _dispatch(self, method: str, params: dict[str, Any], cancel: threading.Event | None, version: str) -> dict[str, Any] | None:
        if method == "initialize":
            return self.initialize(params)
        if method == "ping":
            return {}
        if method == "tools/list":
            from qmd.serve.catalog import tools_for

            return {"tools": tools_for(version)}
        if method == "tools/call":
            return self.call_tool(params, cancel)
        if method == "prompts/list":
            from qmd.serve.catalog import PROMPTS

            return {"prompts": PROMPTS}
        if method == "prompts/get":
            return self.get_prompt(params)
        raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:100]} (this server offers {', '.join(SERVED)})")

    def _modern(self, method: str, params: dict[str, Any], cancel: threading.Event | None, version: str) -> dict[str, Any] | None:
        """One stateless 2026-07-28 request: nothing from initialize is read or written."""
        result: dict[str, Any] | None
        if method in REMOVED:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method} was removed in {version} (this server offers {', '.join(MODERN_SERVED)}; {method} only after an initialize of {PROTOCOL_VERSIONS[0]} or older)")
        if method == "server/discover":
            result = {"supportedVersions": list(SUPPORTED_VERSIONS), "capabilities": CAPABILITIES, "instructions": self.instructions(), **CACHE_HINTS}
        elif method in ("tools/list", "prompts/list"):
            from qmd.serve.catalog import PROMPTS, tools_for

            result = {"tools": tools_for(version)} if method == "tools/list" else {"prompts": PROMPTS}
            result.update(CACHE_HINTS)
        elif method == "tools/call":
            result = self.call_tool(params, cancel)
        elif method == "prompts/get":
            result = self.get_prompt(params)
        else:
            raise RpcError(METHOD_NOT_FOUND, f"Method not found: {method[:100]} (this server offers {', '.join(MODERN_SERVED)})")
        if result is None:
            return None
        return {**result, "resultType": "complete", "_meta": {META_SERVER_INFO: SERVER_INFO}}

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = self.version = asked if isinstance(asked, str) and asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        info = params.get("clientInfo")
        if isinstance(info, dict):
            self.client = f"{str(info.get('name', '?'))[:60]} {str(info.get('version', ''))[:30]}".strip()
        from qmd.serve.logsafe import escape

        # which client negotiated what: the first thing to read when an agent sees no tools
        self.log(escape(f"initialize {self.client or 'a client without clientInfo'} asked {str(asked)[:40]}, serving {version}"))
        return {
            "protocolVersion": version,
            "capabilities": CAPABILITIES,
            "serverInfo": SERVER_INFO,
            "instructions": self.instructions(),
        }

    def call_tool(self, params: dict[str, Any], cancel: threading.Event | None) -> dict[str, Any] | None:
        from qmd.serve.arguments import TOOL_PARAMS
        from qmd.serve.logsafe import escape

        name = params.get("name")
        if not isinstance(name, str) or name not in TOOL_PARAMS:
            shown = repr(name)[:80]
            raise RpcError(INVALID_PARAMS, f"Unknown tool: {shown} (tools: {', '.join(TOOL_PARAMS)})", {"tools": list(TOOL_PARAMS)})
        arguments = params.get("arguments", {})
        if arguments is None:
            arguments = {}
        if not isinstance(arguments, dict):
            raise RpcError(INVALID_PARAMS, f"Invalid params: the arguments of {name} must be an object")
        started = time.perf_counter()
        try:
            with cancel_scope(cancel):
                out = self.service.call(name, arguments, self._progress(params))
        except Cancelled:
            self.log(escape(f"tools/call {name} cancelled by the client; stopped after {(time.perf_counter() - started) * 1000:.1f} ms"))
            raise
        self.log(escape(f"tools/call {name} {out.summary} ({(time.perf_counter() - started) * 1000:.1f} ms)"))
        if cancel is not None and cancel.is_set():
            return None  # finished as the cancellation arrived: the client wants no answer
        result: dict[str, Any] = {"content": [{"type": "text", "text": out.text}], "isError": out.is_error}
        if out.structured is not None:
            result["structuredContent"] = out.structured
        return result

    def _progress(self, params: dict[str, Any]) -> Callable[[str], None] | None:
        """A `notifications/progress` sender for a request that asked for progress, else None."""
        meta = params.get("_meta")
        token = meta.get("progressToken") if isinstance(meta, dict) else None
        notify = self.notify
        if notify is None or isinstance(token, bool) or not isinstance(token, (str, int)):
            return None
        step = [0]

        def progress(message: str) -> None:
            step[0] += 1
            notify({"jsonrpc": "2.0", "method": "notifications/progress", "params": {"progressToken": token, "progress": step[0], "message": message}})

        return progress

    def get_prompt(self, params: dict[str, Any]) -> dict[str, Any]:
        from qmd.serve.catalog import PROMPTS, SEARCH_FIRST, search_first_text

        name = params.get("name")
        if name != SEARCH_FIRST:
            raise RpcError(INVALID_PARAMS, f"Unknown prompt: {repr(name)[:80]} (prompts: {', '.join(p['name'] for p in PROMPTS)})")
        args = params.get("arguments") or {}
        if not isinstance(args, dict):
            raise RpcError(INVALID_PARAMS, "Invalid params: the arguments of a prompt must be an object")
        question = args.get("question")
        if question is not None and not isinstance(question, str):
            raise RpcError(INVALID_PARAMS, "Invalid params: question must be a string")
        text = search_first_text(question, self.instructions())
        return {"description": PROMPTS[0]["description"], "messages": [{"role": "user", "content": {"type": "text", "text": text}}]}
