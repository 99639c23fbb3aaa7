"""Fake model APIs for the real-client tests: Anthropic Messages and OpenAI Responses.

Each server listens on 127.0.0.1 (a free port), records every request body, and answers
the agent's loop from the request it receives, never from timing: the model's next move is
the first step of its script whose tool the request offers and that the conversation has
not made yet; when none is left it answers with text. So a run is deterministic, and a
tool missing from a request (qmd's tools before its MCP server is ready) only drops that
step.

- `FakeAnthropic`: `POST /v1/messages` (streamed SSE, or one JSON message when the request
  does not stream), `POST /v1/messages/count_tokens`, and a harmless `{}` for anything else.
- `FakeOpenAI`: `POST /v1/responses` (SSE); MCP tools arrive as a `namespace` tool
  (`mcp__qmd`) holding function tools, and a call to one names the namespace.
"""

from __future__ import annotations

import json
import threading
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass(frozen=True)
class Step:
    """One scripted tool call: the tool's name (as the request offers it) and its input."""

    tool: str
    input: dict[str, Any]

    @property
    def key(self) -> str:
        return self.tool + " " + json.dumps(self.input, sort_keys=True)


@dataclass
class Recorded:
    path: str
    body: dict[str, Any]


@dataclass
class FakeAPI:
    """The shared part: an HTTP server in a thread, the request log, the script."""

    steps: list[Step]
    final: str = "Done: the rollback runbook says to flip the load balancer back to blue."
    requests: list[Recorded] = field(default_factory=list)
    _server: ThreadingHTTPServer | None = None
    _thread: threading.Thread | None = None
    _lock: threading.Lock = field(default_factory=threading.Lock)

    # --- what subclasses define ---

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:  # pragma: no cover - abstract
        """(status, content type, body) for one request."""
        raise NotImplementedError

    def agent_turns(self) -> list[dict[str, Any]]:  # pragma: no cover - abstract
        """The bodies of the agent loop's model requests, in order."""
        raise NotImplementedError

    # --- the script ---

    def next_step(self, offered: set[str], made: set[str]) -> Step | None:
        """The first step whose tool is offered and that was not made yet."""
        for step in self.steps:
            if step.tool in offered and step.key not in made:
                return step
        return None

    # --- the server ---

    @property
    def port(self) -> int:
        assert self._server is not None
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def start(self) -> FakeAPI:
        api = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - the stdlib's name
                pass

            def _answer(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                try:
                    body = json.loads(raw) if raw else {}
                except ValueError:
                    body = {"_raw": raw.decode("utf-8", "replace")}
                if not isinstance(body, dict):
                    body = {"_value": body}
                path = self.path.split("?", 1)[0]
                with api._lock:
                    api.requests.append(Recorded(f"{method} {path}", body))
                try:
                    status, ctype, payload = api.handle(f"{method} {path}", body)
                except Exception as exc:  # a script bug must show, not hang the client
                    status, ctype, payload = 500, "application/json", json.dumps({"error": {"type": "fake_api_error", "message": repr(exc)}}).encode()
                self.send_response(status)
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload)
                self.wfile.flush()
                self.close_connection = True

            def do_POST(self) -> None:
                self._answer("POST")

            def do_GET(self) -> None:
                self._answer("GET")

            def do_HEAD(self) -> None:
                self.send_response(200)
                self.send_header("Content-Length", "0")
                self.end_headers()

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(target=self._server.serve_forever, name=type(self).__name__, daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()
            self._server = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> FakeAPI:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def clear(self) -> None:
        with self._lock:
            self.requests.clear()

    def recorded(self) -> list[Recorded]:
        with self._lock:
            return list(self.requests)


def sse(events: list[tuple[str, dict[str, Any]]]) -> bytes:
    return "".join(f"event: {name}\ndata: {json.dumps(data)}\n\n" for name, data in events).encode()


def _json(data: Any, status: int = 200) -> tuple[int, str, bytes]:
    return status, "application/json", json.dumps(data).encode()


# --- Anthropic Messages ---------------------------------------------------------------------


@dataclass
class FakeAnthropic(FakeAPI):
    """`POST /v1/messages` as Claude Code calls it."""

    _ids: int = 0

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_{self._ids:04d}"

    @staticmethod
    def tool_names(body: dict[str, Any]) -> set[str]:
        return {str(t.get("name")) for t in body.get("tools") or [] if isinstance(t, dict)}

    @staticmethod
    def is_agent_turn(body: dict[str, Any]) -> bool:
        """A request of the agent's loop (it offers Bash), not a side call (titles, quota)."""
        return "Bash" in FakeAnthropic.tool_names(body)

    @staticmethod
    def made(body: dict[str, Any]) -> set[str]:
        keys = set()
        for message in body.get("messages") or []:
            if message.get("role") != "assistant" or not isinstance(message.get("content"), list):
                continue
            for block in message["content"]:
                if isinstance(block, dict) and block.get("type") == "tool_use":
                    keys.add(Step(str(block.get("name")), dict(block.get("input") or {})).key)
        return keys

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if path.endswith("/count_tokens"):
            return _json({"input_tokens": 100})
        if not path.endswith("/v1/messages"):
            return _json({})
        step = self.next_step(self.tool_names(body), self.made(body)) if self.is_agent_turn(body) else None
        if step is not None:
            block: dict[str, Any] = {"type": "tool_use", "id": self._id("toolu"), "name": step.tool, "input": step.input}
            stop = "tool_use"
        else:
            block = {"type": "text", "text": self.final if self.is_agent_turn(body) else "ok"}
            stop = "end_turn"
        model = str(body.get("model") or "claude-sonnet-4-5")
        usage = {"input_tokens": 100, "output_tokens": 10, "cache_creation_input_tokens": 0, "cache_read_input_tokens": 0}
        message: dict[str, Any] = {"id": self._id("msg"), "type": "message", "role": "assistant", "model": model, "content": [], "stop_reason": None, "stop_sequence": None, "usage": usage}
        if not body.get("stream"):
            return _json({**message, "content": [block], "stop_reason": stop})
        if block["type"] == "tool_use":
            start = {**block, "input": {}}
            delta = {"type": "input_json_delta", "partial_json": json.dumps(step.input if step else {})}
        else:
            start = {"type": "text", "text": ""}
            delta = {"type": "text_delta", "text": block["text"]}
        events: list[tuple[str, dict[str, Any]]] = [
            ("message_start", {"type": "message_start", "message": message}),
            ("content_block_start", {"type": "content_block_start", "index": 0, "content_block": start}),
            ("content_block_delta", {"type": "content_block_delta", "index": 0, "delta": delta}),
            ("content_block_stop", {"type": "content_block_stop", "index": 0}),
            ("message_delta", {"type": "message_delta", "delta": {"stop_reason": stop, "stop_sequence": None}, "usage": {"output_tokens": 10}}),
            ("message_stop", {"type": "message_stop"}),
        ]
        return 200, "text/event-stream", sse(events)

    def agent_turns(self) -> list[dict[str, Any]]:
        return [r.body for r in self.recorded() if r.path.endswith("/v1/messages") and self.is_agent_turn(r.body)]


# --- OpenAI Responses -----------------------------------------------------------------------


@dataclass
class FakeOpenAI(FakeAPI):
    """`POST /v1/responses` as Codex calls it (SSE)."""

    _ids: int = 0

    def _id(self, prefix: str) -> str:
        with self._lock:
            self._ids += 1
            return f"{prefix}_{self._ids:04d}"

    @staticmethod
    def tools(body: dict[str, Any]) -> dict[str, str | None]:
        """Offered tool names → their namespace (None for a top-level tool). A namespaced
        tool is offered as `NAMESPACE.NAME` as well as by its own name."""
        found: dict[str, str | None] = {}
        for tool in body.get("tools") or []:
            if not isinstance(tool, dict):
                continue
            if tool.get("type") == "namespace":
                ns = str(tool.get("name"))
                for inner in tool.get("tools") or []:
                    if isinstance(inner, dict) and inner.get("name"):
                        found[f"{ns}.{inner['name']}"] = ns
            elif tool.get("name"):
                found[str(tool["name"])] = None
        return found

    @staticmethod
    def made(body: dict[str, Any]) -> set[str]:
        keys = set()
        for item in body.get("input") or []:
            if isinstance(item, dict) and item.get("type") == "function_call":
                try:
                    args = json.loads(item.get("arguments") or "{}")
                except ValueError:
                    args = {}
                name = str(item.get("name"))
                if item.get("namespace"):
                    name = f"{item['namespace']}.{name}"
                keys.add(Step(name, args if isinstance(args, dict) else {}).key)
        return keys

    def handle(self, path: str, body: dict[str, Any]) -> tuple[int, str, bytes]:
        if not path.endswith("/responses"):
            return _json({"object": "list", "data": []} if path.endswith("/models") else {})
        offered = self.tools(body)
        step = self.next_step(set(offered), self.made(body))
        rid = self._id("resp")
        if step is not None:
            ns = offered[step.tool]
            name = step.tool.split(".", 1)[1] if ns else step.tool
            item: dict[str, Any] = {"type": "function_call", "id": self._id("fc"), "call_id": self._id("call"), "name": name, "arguments": json.dumps(step.input), "status": "completed"}
            if ns:
                item["namespace"] = ns
        else:
            item = {"type": "message", "id": self._id("msg"), "role": "assistant", "status": "completed", "content": [{"type": "output_text", "text": self.final, "annotations": []}]}
        usage = {"input_tokens": 100, "input_tokens_details": {"cached_tokens": 0}, "output_tokens": 10, "output_tokens_details": {"reasoning_tokens": 0}, "total_tokens": 110}
        base = {"id": rid, "object": "response", "created_at": 0, "model": str(body.get("model") or "gpt-5"), "output": []}
        events: list[tuple[str, dict[str, Any]]] = [
            ("response.created", {"type": "response.created", "response": {**base, "status": "in_progress"}}),
            ("response.output_item.added", {"type": "response.output_item.added", "output_index": 0, "item": item}),
            ("response.output_item.done", {"type": "response.output_item.done", "output_index": 0, "item": item}),
            ("response.completed", {"type": "response.completed", "response": {**base, "status": "completed", "output": [item], "usage": usage}}),
        ]
        return 200, "text/event-stream", sse(events)

    def agent_turns(self) -> list[dict[str, Any]]:
        return [r.body for r in self.recorded() if r.path.endswith("/responses")]
