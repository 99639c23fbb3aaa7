"""Cancellation of a running request: a scope set by the server, checkpoints in the work.

The MCP server runs each tool call inside `cancel_scope(event)`; when the client cancels
(`notifications/cancelled`) or hangs up, it sets the event. Long work calls `checkpoint()`
between its stages and inside its loops (the hybrid pipeline before expansion, embedding,
each search list and rerank; the reranker between batches; generation between tokens),
which raises `Cancelled` once the event is set, so nothing keeps running for nobody.
Outside a scope `checkpoint()` costs one context-variable read and never raises.

The scope is a context variable: each thread has its own, so one request's cancellation
never stops another's work.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[threading.Event | None] = ContextVar("qmd_cancel", default=None)


class Cancelled(Exception):
    """The request this work was for has been cancelled; stop and answer nothing."""


@contextmanager
def cancel_scope(event: threading.Event | None) -> Iterator[None]:
    """Run the body so that `checkpoint()` raises `Cancelled` once `event` is set."""
    token = _current.set(event)
    try:
        yield
    finally:
        _current.reset(token)


def cancelled() -> bool:
    """Whether the current request has been cancelled (False outside a scope)."""
    event = _current.get()
    return event is not None and event.is_set()


def checkpoint() -> None:
    """Raise `Cancelled` if the current request has been cancelled."""
    event = _current.get()
    if event is not None and event.is_set():
        raise Cancelled()
