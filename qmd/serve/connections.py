"""How long and how many: the HTTP server's connection policy.

A connection costs the server a socket and a little memory; what locked it out before was
uvicorn's `limit_concurrency`, which counts *connections*: 64 sockets that sent `GET /he`
and nothing more made every request (before any Origin/Host check) a 503, for as long as
they stayed open, and nothing ever closed them. The policy instead:

1. every connection must deliver a request's headers within `timeout_s` of connecting, or
   of the end of its previous response (keep-alive idle): a total deadline, so dripping
   one byte at a time does not extend it. A connection that sent part of a request gets a
   408; an idle one is closed;
2. a body must arrive within `timeout_s` once its headers have (HttpApp in server.py: 408);
3. a response the client stops reading (the socket's send buffer full for `timeout_s`) is
   aborted;
4. at most `max_connections` are open: a new one beyond that evicts the oldest connection
   that has no request in progress, so idle sockets can never crowd out a new request;
   only when every connection is mid-request is the newcomer answered 503.

`GET /mcp` streams are refused in HttpApp (405), so no stream is held open idle.
`QMD_HTTP_TIMEOUT_S` sets `timeout_s` (default 10).
"""

from __future__ import annotations

import asyncio
import os
from dataclasses import dataclass
from typing import Any

DEFAULT_TIMEOUT_S = 10.0
MAX_CONNECTIONS = 512


def http_timeout() -> float:
    """`QMD_HTTP_TIMEOUT_S` (seconds, > 0), else the default 10."""
    raw = os.environ.get("QMD_HTTP_TIMEOUT_S", "").strip()
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        return DEFAULT_TIMEOUT_S
    return value if 0 < value < 86400 else DEFAULT_TIMEOUT_S


@dataclass(frozen=True)
class ConnectionPolicy:
    """The limits one server applies to its connections (see the module docstring)."""

    timeout_s: float = DEFAULT_TIMEOUT_S
    max_connections: int = MAX_CONNECTIONS

    @classmethod
    def from_env(cls) -> ConnectionPolicy:
        """The policy with `timeout_s` from `QMD_HTTP_TIMEOUT_S`."""
        return cls(timeout_s=http_timeout())


def _canned(status: str, message: str) -> bytes:
    body = ('{"error":"%s"}' % message).encode()
    head = f"HTTP/1.1 {status}\r\ncontent-type: application/json\r\ncontent-length: {len(body)}\r\nconnection: close\r\n\r\n"
    return head.encode() + body


def guarded_protocol(policy: ConnectionPolicy) -> type[asyncio.Protocol]:
    """uvicorn's HTTP protocol (httptools if installed, else h11) with `policy` applied.

    Both of uvicorn's protocols keep the request in progress in `self.cycle` (created once
    the headers are complete, `response_complete` at the end) and call
    `on_response_complete`, `pause_writing` and `resume_writing`; the policy needs no more.
    """
    base: Any
    try:
        import httptools  # noqa: F401
        from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol as base
    except ImportError:  # pragma: no cover - uvicorn without its [standard] extra
        from uvicorn.protocols.http.h11_impl import H11Protocol as base

    timeout = policy.timeout_s
    late_headers = _canned("408 Request Timeout", f"the request headers were not received within {timeout:g} s")
    full = _canned("503 Service Unavailable", "too many requests in progress; retry shortly")

    class GuardedProtocol(base):
        """One connection under the policy."""

        def connection_made(self, transport: Any) -> None:
            super().connection_made(transport)
            self._qmd_wait: asyncio.TimerHandle | None = None
            self._qmd_write: asyncio.TimerHandle | None = None
            self._qmd_since = 0.0
            self._qmd_partial = False
            self._qmd_armed_for: Any = None
            self._qmd_arm()
            if len(self.connections) > policy.max_connections:
                self._qmd_make_room()

        # 1. headers within the deadline

        def _qmd_idle(self) -> bool:
            cycle = self.cycle
            return cycle is None or bool(cycle.response_complete)

        def _qmd_arm(self) -> None:
            if self._qmd_wait is not None:
                self._qmd_wait.cancel()
            self._qmd_wait = None
            if not self._qmd_idle():
                return  # a pipelined request is already being answered
            self._qmd_since = self.loop.time()
            self._qmd_partial = False
            self._qmd_armed_for = self.cycle
            self._qmd_wait = self.loop.call_later(timeout, self._qmd_deadline)

        def _qmd_deadline(self) -> None:
            self._qmd_wait = None
            if self.cycle is not self._qmd_armed_for or self.transport.is_closing():
                return  # headers came in time; the body has its own timeout
            if self._qmd_partial:
                self.transport.write(late_headers)
            self.transport.close()

        def data_received(self, data: bytes) -> None:
            self._qmd_partial = True
            super().data_received(data)

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._qmd_arm()

        # 3. a reader that stopped reading

        def pause_writing(self) -> None:
            super().pause_writing()
            if self._qmd_write is None:
                self._qmd_write = self.loop.call_later(timeout, self.transport.abort)

        def resume_writing(self) -> None:
            super().resume_writing()
            if self._qmd_write is not None:
                self._qmd_write.cancel()
                self._qmd_write = None

        # 4. room for a newcomer

        def _qmd_make_room(self) -> None:
            others = [c for c in self.connections if c is not self and isinstance(c, GuardedProtocol) and not c.transport.is_closing()]
            if len(others) < policy.max_connections:
                return  # the excess is already closing
            idle = [c for c in others if c._qmd_idle()]
            if idle:
                oldest = min(idle, key=lambda c: c._qmd_since)
                oldest.transport.close()
                return
            self.transport.write(full)
            self.transport.close()

        def connection_lost(self, exc: Exception | None) -> None:
            for timer in (self._qmd_wait, self._qmd_write):
                if timer is not None:
                    timer.cancel()
            self._qmd_wait = self._qmd_write = None
            super().connection_lost(exc)

    return GuardedProtocol
