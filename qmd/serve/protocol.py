"""MCP's JSON-RPC methods, without the MCP SDK: one handler for stdio and Streamable HTTP.

`McpHandler.handle(message, cancel, version)` answers one parsed JSON-RPC message and returns the
response object (None for a notification or a client's response). Served:

    initialize, ping, tools/list, tools/call, prompts/list, prompts/get
    notifications/initialized, notifications/cancelled (stdio: qmd/serve/stdio.py)

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

# Newest first; a client asking for another version gets the newest (the spec's rule).
PROTOCOL_VERSIONS = ("2025-11-25", "2025-06-18", "2025-03-26", "2024-11-05")
# Streamable HTTP without an MCP-Protocol-Version header: the spec says assume this one.
HTTP_DEFAULT_VERSION = "2025-03-26"
PARSE_ERROR, INVALID_REQUEST, METHOD_NOT_FOUND, INVALID_PARAMS, INTERNAL_ERROR = -32700, -32600, -32601, -32602, -32603
SERVED = ("initialize", "ping", "tools/list", "tools/call", "prompts/list", "prompts/get")

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

    def initialize(self, params: dict[str, Any]) -> dict[str, Any]:
        asked = params.get("protocolVersion")
        version = self.version = asked if isinstance(asked, str) and asked in PROTOCOL_VERSIONS else PROTOCOL_VERSIONS[0]
        info = params.get("clientInfo")
        if isinstance(info, dict):
            self.client = f"{str(info.get('name', '?'))[:60]} {str(info.get('version', ''))[:30]}".strip()
        return {
            "protocolVersion": version,
            "capabilities": {"tools": {"listChanged": False}, "prompts": {"listChanged": False}},
            "serverInfo": {"name": "qmd", "title": "qmd: search the user's notes", "version": __version__},
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
