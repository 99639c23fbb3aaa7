"""A real MCP handshake with qmd's server, for `doctor`: `initialize`, `notifications/initialized`,
`tools/list` (2025-11-25, what Claude Code 2.1.197 and Codex speak), then the stateless
2026-07-28 path (`server/discover` and `tools/list` with the `_meta` envelope and, over HTTP,
the MCP-Protocol-Version / Mcp-Method headers: what Claude Code 2.1.332 speaks), over stdio
(a spawned `qmd mcp`) or Streamable HTTP (a running server). Both paths must list the same
tools; `supported` is what `server/discover` says the server speaks.

Plain JSON-RPC on the wire, no SDK client: importing the SDK's client costs ~1 s of CPU,
which doctor's budget (5 s for everything) cannot pay; what is checked is the server's
real answers (protocol version, server info, the four tools). A server that asks for
tokens is sent one (`token`: doctor reads it from the variable the registration names, or
`QMD_TOKEN`; see `probe_token`).
"""

from __future__ import annotations

import http.client as httplib
import json
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from qmd.core.version import __version__
from qmd.core.paths import DEFAULT_INDEX

PROTOCOL_VERSION = "2025-11-25"
MODERN_VERSION = "2026-07-28"
EXPECTED_TOOLS = ("query", "get", "multi_get", "status")


class ProbeError(Exception):
    pass


@dataclass
class Handshake:
    """What a handshake found: the server's name, version and protocol, its tools, or the error."""

    ok: bool
    seconds: float
    server: str = ""
    version: str = ""
    protocol: str = ""
    tools: list[str] = field(default_factory=list)
    error: str = ""
    supported: list[str] = field(default_factory=list)  # server/discover's supportedVersions

    @property
    def missing_tools(self) -> list[str]:
        return [t for t in EXPECTED_TOOLS if t not in self.tools]


def _request(id_: int, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
    message: dict[str, Any] = {"jsonrpc": "2.0", "id": id_, "method": method}
    if params is not None:
        message["params"] = params
    return message


INITIALIZE = _request(1, "initialize", {"protocolVersion": PROTOCOL_VERSION, "capabilities": {}, "clientInfo": {"name": "qmd-doctor", "version": __version__}})
INITIALIZED = {"jsonrpc": "2.0", "method": "notifications/initialized"}
TOOLS_LIST = _request(2, "tools/list", {})
MODERN_META = {
    "io.modelcontextprotocol/protocolVersion": MODERN_VERSION,
    "io.modelcontextprotocol/clientCapabilities": {},
    "io.modelcontextprotocol/clientInfo": {"name": "qmd-doctor", "version": __version__},
}
DISCOVER = _request(3, "server/discover", {"_meta": MODERN_META})
MODERN_TOOLS_LIST = _request(4, "tools/list", {"_meta": MODERN_META})


def _result(message: object, id_: int) -> dict[str, Any]:
    if not isinstance(message, dict) or message.get("id") != id_:
        raise ProbeError(f"unexpected message: {str(message)[:200]}")
    if "error" in message:
        err = message["error"] if isinstance(message["error"], dict) else {}
        raise ProbeError(f"the server answered with error {err.get('code')}: {err.get('message')}")
    result = message.get("result")
    if not isinstance(result, dict):
        raise ProbeError(f"no result in {str(message)[:200]}")
    return result


def _names(tools: dict[str, Any]) -> list[str]:
    return sorted(str(t.get("name")) for t in tools.get("tools") or [] if isinstance(t, dict))


def _finish(started: float, init: dict[str, Any], tools: dict[str, Any], discover: dict[str, Any], modern_tools: dict[str, Any]) -> Handshake:
    raw_info = init.get("serverInfo")
    info: dict[str, Any] = raw_info if isinstance(raw_info, dict) else {}
    protocol = str(init.get("protocolVersion", ""))
    if not protocol:
        raise ProbeError("initialize returned no protocolVersion")
    names = _names(tools)
    supported = discover.get("supportedVersions")
    if not isinstance(supported, list) or MODERN_VERSION not in supported:
        raise ProbeError(f"{MODERN_VERSION} server/discover returned supportedVersions {str(supported)[:120]}, without {MODERN_VERSION}")
    for method, result in (("server/discover", discover), ("tools/list", modern_tools)):
        if result.get("resultType") != "complete":
            raise ProbeError(f"{MODERN_VERSION} {method} returned resultType {str(result.get('resultType'))[:40]!r}, not 'complete'")
    if _names(modern_tools) != names:
        raise ProbeError(f"{MODERN_VERSION} tools/list lists {', '.join(_names(modern_tools)) or 'no tools'}, but after initialize {', '.join(names) or 'none'}")
    return Handshake(True, time.perf_counter() - started, str(info.get("name", "")), str(info.get("version", "")), protocol, names, supported=[str(v) for v in supported])


def _step(what: str, run: Any) -> dict[str, Any]:
    """`run()`'s result, its ProbeError prefixed with the step that failed."""
    try:
        result: dict[str, Any] = run()
        return result
    except ProbeError as exc:
        raise ProbeError(f"{what}: {exc}") from None


def stdio(index: str = DEFAULT_INDEX, timeout: float = 30.0, env: dict[str, str] | None = None) -> Handshake:
    """Spawn `python -m qmd [--index NAME] mcp` (this interpreter) and shake hands over stdio.

    The server's stderr goes to a temp file whose last line is added to the error when it fails.
    """
    started = time.perf_counter()
    argv = [sys.executable, "-m", "qmd", *(["--index", index] if index != DEFAULT_INDEX else []), "mcp"]
    with tempfile.TemporaryFile("w+", encoding="utf-8") as errlog:
        try:
            proc = subprocess.Popen(argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=errlog, env=env if env is not None else dict(os.environ), text=True, bufsize=1)
        except OSError as exc:
            return Handshake(False, time.perf_counter() - started, error=f"cannot start {argv[0]}: {exc}")
        lines: queue.Queue[str | None] = queue.Queue()

        def pump() -> None:
            assert proc.stdout is not None
            for line in proc.stdout:
                lines.put(line)
            lines.put(None)

        threading.Thread(target=pump, daemon=True).start()
        deadline = started + timeout

        def send(message: dict[str, Any]) -> None:
            assert proc.stdin is not None
            proc.stdin.write(json.dumps(message) + "\n")
            proc.stdin.flush()

        def answer(id_: int) -> dict[str, Any]:
            while True:
                try:
                    line = lines.get(timeout=max(0.01, deadline - time.perf_counter()))
                except queue.Empty:
                    raise ProbeError(f"no answer within {timeout:.0f}s") from None
                if line is None:
                    raise ProbeError(f"the server exited (code {proc.wait()}) before answering")
                if not line.strip():
                    continue
                try:
                    message = json.loads(line)
                except ValueError:
                    raise ProbeError(f"the server wrote a line that is not JSON-RPC: {line.strip()[:200]}") from None
                if isinstance(message, dict) and "id" not in message:
                    continue  # a notification (log message) from the server
                return _result(message, id_)

        try:
            send(INITIALIZE)
            init = answer(1)
            send(INITIALIZED)
            send(TOOLS_LIST)
            tools = answer(2)
            send(DISCOVER)  # the same process serves the stateless era beside the handshake
            discover = _step(f"{MODERN_VERSION} server/discover", lambda: answer(3))
            send(MODERN_TOOLS_LIST)
            result = _finish(started, init, tools, discover, _step(f"{MODERN_VERSION} tools/list", lambda: answer(4)))
        except (ProbeError, OSError) as exc:
            result = Handshake(False, time.perf_counter() - started, error=str(exc))
        finally:
            try:
                if proc.stdin:
                    proc.stdin.close()  # end of input: the stdio server exits
                proc.wait(timeout=5)
            except (OSError, subprocess.TimeoutExpired):
                proc.kill()
                proc.wait()
        if not result.ok:
            errlog.seek(0)
            said = [line.strip() for line in errlog.read().splitlines() if line.strip()]
            if said:
                result.error += f" (server said: {said[-1][:300]})"
    return result


def probe_token(index: str, environ: dict[str, str] | None = None) -> tuple[str | None, str]:
    """(the token to send to `index`'s HTTP server, where it came from): the environment
    variable its Claude Code or Codex registration names (`--token-env`), else `QMD_TOKEN`;
    (None, "") when neither is set."""
    env = os.environ if environ is None else environ
    try:
        from qmd.agents import registered_token_env

        var = registered_token_env(index)
    except Exception:  # an unreadable client file: fall back to QMD_TOKEN
        var = None
    for name in (var, "QMD_TOKEN"):
        if name and env.get(name):
            return env[name], f"${name}"
    return None, ""


def _post(url: str, message: dict[str, Any], timeout: float, token: str | None = None) -> object:
    """POST one message; a 2026-07-28 one (its params' `_meta` names the version) with the
    routing headers that revision asks for."""
    parts = urlsplit(url)
    conn = httplib.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        meta = (message.get("params") or {}).get("_meta") or {}
        headers = {
            "Host": parts.netloc, "Content-Type": "application/json", "Accept": "application/json, text/event-stream",
            "MCP-Protocol-Version": str(meta.get("io.modelcontextprotocol/protocolVersion", PROTOCOL_VERSION)),
        }
        if meta:
            headers["Mcp-Method"] = str(message["method"])
        if token:
            headers["Authorization"] = f"Bearer {token}"
        conn.request("POST", parts.path or "/mcp", body=json.dumps(message).encode(), headers=headers)
        resp = conn.getresponse()
        body = resp.read()
        if resp.status == 202 and "id" not in message:
            return None
        if resp.status == 401:
            why = "the token was refused" if token else "the server asks for a token and none was sent"
            raise ProbeError(f"HTTP 401 from {url}: {why} (set QMD_TOKEN, or the variable named by qmd mcp install --token-env)")
        if resp.status != 200:
            raise ProbeError(f"HTTP {resp.status} from {url}: {body[:200].decode('utf-8', 'replace')}")
        text = body.decode("utf-8", "replace")
        if resp.getheader("Content-Type", "").startswith("text/event-stream"):
            data = [line[5:].strip() for line in text.splitlines() if line.startswith("data:")]
            text = data[-1] if data else ""
        try:
            answer: object = json.loads(text)
        except ValueError:
            raise ProbeError(f"not JSON-RPC from {url}: {text[:200]}") from None
        return answer
    finally:
        conn.close()


def prove(url: str, key: str, timeout: float = 5.0) -> str | None:
    """Whether the server at `url` holds `key` (its PID file's secret; qmd/serve/proof.py):
    None when it proved it, else why not. Ask before sending it a token: a PID file outlives
    its server, and another process may listen on the recorded port."""
    from qmd.serve.proof import hello_body, new_nonce, proven

    if not key:
        return "its PID file holds no key to check it with (a server of an older qmd: restart it)"
    parts = urlsplit(url)
    nonce = new_nonce()
    conn = httplib.HTTPConnection(parts.hostname or "127.0.0.1", parts.port or 80, timeout=timeout)
    try:
        conn.request("POST", "/hello", body=hello_body(nonce), headers={"Host": parts.netloc, "Content-Type": "application/json"})
        resp = conn.getresponse()
        status, body = resp.status, resp.read(65536)
    except (OSError, ValueError, httplib.HTTPException) as exc:
        return f"it did not answer the identity check ({type(exc).__name__})"
    finally:
        conn.close()
    if proven(key, nonce, status, body) is not None:
        return None
    return f"whatever listens at {url} is not the server that wrote the PID file (no proof of its key)"


def http(url: str, timeout: float = 10.0, token: str | None = None) -> Handshake:
    """Shake hands with a running HTTP server at `url` (its /mcp endpoint), sending `token`
    as `Authorization: Bearer` when given."""
    started = time.perf_counter()
    endpoint = url.rstrip("/") + ("" if url.rstrip("/").endswith("/mcp") else "/mcp")
    try:
        init = _result(_post(endpoint, INITIALIZE, timeout, token), 1)
        _post(endpoint, INITIALIZED, timeout, token)
        tools = _result(_post(endpoint, TOOLS_LIST, timeout, token), 2)
        discover = _step(f"{MODERN_VERSION} server/discover", lambda: _result(_post(endpoint, DISCOVER, timeout, token), 3))
        modern_tools = _step(f"{MODERN_VERSION} tools/list", lambda: _result(_post(endpoint, MODERN_TOOLS_LIST, timeout, token), 4))
        return _finish(started, init, tools, discover, modern_tools)
    except (ProbeError, OSError) as exc:
        return Handshake(False, time.perf_counter() - started, error=str(exc) or type(exc).__name__)
