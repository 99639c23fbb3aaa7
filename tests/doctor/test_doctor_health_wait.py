"""Doctor asks a slow HTTP server's /health again with a longer wait before calling it dead:
on a machine whose cores are busy a sound server can take over 2 s to answer, and a false
failure sends the user to restart a healthy server (seen as a flaky doctor test under load)."""

from __future__ import annotations

import json
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from doctor.mcp import _health


class Slow(BaseHTTPRequestHandler):
    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        time.sleep(2.5)
        body = json.dumps({"status": "ok"}).encode()
        try:
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)
        except OSError:
            pass  # the first ask gave up already

    def log_message(self, format: str, *args: object) -> None:  # noqa: A002 - the base's signature
        pass


@pytest.mark.slow  # waits out the first ask, then the 2.5 s answer: about 5 s by design
def test_a_server_answering_after_2_5_s_is_alive_and_a_closed_port_is_not() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), Slow)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        assert _health(f"http://127.0.0.1:{server.server_address[1]}", None) == {"status": "ok"}
    finally:
        server.shutdown()
        server.server_close()
    started = time.monotonic()
    assert _health(f"http://127.0.0.1:{server.server_address[1]}", None) is None  # refused: no long wait
    assert time.monotonic() - started < 2.0
