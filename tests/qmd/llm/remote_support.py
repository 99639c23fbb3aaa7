"""Servers for the remote-model tests: llama-cpp-python's own OpenAI-compatible server and a
small scripted fake, both on free loopback ports, both stopped by their tests.

The real server answers /v1/embeddings, /v1/completions, /v1/chat/completions, /v1/models
and its /extras/tokenize routes; it has no /v1/rerank, so the rerank client is tested
against the fake speaking the documented shape.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

READY_S = 90.0


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_available() -> None:
    """Skip when llama-cpp-python's server extra is not installed."""
    try:
        import fastapi  # noqa: F401
        import llama_cpp.server.app  # noqa: F401
    except ImportError as exc:
        pytest.skip(f"llama-cpp-python[server] is not installed ({exc}): pip install 'llama-cpp-python[server]'")


class LlamaServer:
    """`python -m llama_cpp.server` serving one GGUF file on 127.0.0.1 (its own process group)."""

    def __init__(self, model: Path, log: Path, *args: str, embedding: bool = True, port: int | None = None) -> None:
        server_available()
        self.port = port or free_port()
        self.base = f"http://127.0.0.1:{self.port}/v1"
        argv = [sys.executable, "-m", "llama_cpp.server", "--model", str(model), "--host", "127.0.0.1", "--port", str(self.port),
                "--n_threads", "1", "--n_threads_batch", "1", "--embedding", "true" if embedding else "false", *args]
        self.log = log
        self._log = open(log, "wb")
        self.proc = subprocess.Popen(argv, stdout=self._log, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL, start_new_session=True)
        self._wait_ready()

    def _wait_ready(self) -> None:
        deadline = time.monotonic() + READY_S
        while time.monotonic() < deadline:
            if self.proc.poll() is not None:
                self.stop()
                raise AssertionError(f"llama_cpp.server exited {self.proc.returncode}: {self.log.read_text(errors='replace')[-2000:]}")
            try:
                with urllib.request.urlopen(f"{self.base}/models", timeout=2) as r:
                    if r.status == 200:
                        return
            except urllib.error.HTTPError:  # a 401 (an API key wanted) still means it is up
                return
            except OSError:
                pass
            time.sleep(0.2)
        self.stop()
        raise AssertionError(f"llama_cpp.server not ready in {READY_S} s: {self.log.read_text(errors='replace')[-2000:]}")

    def uri(self, model: str = "tiny") -> str:
        return f"openai:{self.base}#{model}"

    def stop(self) -> None:
        """Stop the server by its pid (its process group), then reap it."""
        if self.proc.poll() is None:
            try:
                os.killpg(self.proc.pid, signal.SIGTERM)
            except ProcessLookupError:
                pass
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                os.killpg(self.proc.pid, signal.SIGKILL)
                self.proc.wait(10)
        self._log.close()


@contextmanager
def llama_server(model: Path, log: Path, *args: str, embedding: bool = True, port: int | None = None) -> Iterator[LlamaServer]:
    server = LlamaServer(model, log, *args, embedding=embedding, port=port)
    try:
        yield server
    finally:
        server.stop()


Reply = tuple[int, dict[str, str], Any]  # status, headers, JSON body (bytes: sent as they are)
Route = Callable[[dict[str, Any]], Reply]


class FakeServer:
    """A scripted OpenAI-shaped server: `routes[(method, path)](json_body) -> (status, headers, body)`.

    Every request is recorded (method, path, headers, body); `delay` holds a route's answer back.
    """

    def __init__(self, routes: dict[tuple[str, str], Route]) -> None:
        self.routes = routes
        self.requests: list[tuple[str, str, dict[str, str], Any]] = []
        self.delay: dict[str, float] = {}
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: object) -> None:
                pass

            def _handle(self, method: str) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                raw = self.rfile.read(length) if length else b""
                body = json.loads(raw) if raw else {}
                fake.requests.append((method, self.path, {k.lower(): v for k, v in self.headers.items()}, body))
                time.sleep(fake.delay.get(self.path, 0.0))
                route = fake.routes.get((method, self.path))
                status, headers, reply = route(body) if route else (404, {}, {"error": {"message": f"no route {self.path}"}})
                data = reply if isinstance(reply, bytes) else json.dumps(reply).encode()
                try:
                    self.send_response(status)
                    for k, v in {"Content-Type": "application/json", **headers}.items():
                        self.send_header(k, v)
                    self.send_header("Content-Length", str(len(data)))
                    self.end_headers()
                    self.wfile.write(data)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def do_GET(self) -> None:  # noqa: N802
                self._handle("GET")

            def do_POST(self) -> None:  # noqa: N802
                self._handle("POST")

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = int(self.httpd.server_address[1])
        self.base = f"http://127.0.0.1:{self.port}/v1"
        self._thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self._thread.start()

    def uri(self, model: str = "fake") -> str:
        return f"openai:{self.base}#{model}"

    def paths(self) -> list[str]:
        return [p for _, p, _, _ in self.requests]

    def stop(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@contextmanager
def fake_server(routes: dict[tuple[str, str], Route]) -> Iterator[FakeServer]:
    server = FakeServer(routes)
    try:
        yield server
    finally:
        server.stop()
