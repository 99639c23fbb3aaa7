"""Cancellation of a running request: a scope set by the server, checkpoints in the work.

The MCP server runs each tool call inside `cancel_scope(event)`; when the client cancels
(`notifications/cancelled`) or hangs up, it sets the event. Long work calls `checkpoint()`
between its stages and inside its loops (the hybrid pipeline before expansion, embedding,
each search list and rerank; the reranker between batches; generation between tokens),
which raises `Cancelled` once the event is set, so nothing keeps running for nobody.
Outside a scope `checkpoint()` costs one context-variable read and never raises.

The scope is a context variable: each thread has its own, so one request's cancellation
never stops another's work. A stopping server cancels them all (`cancel_all`).

Ctrl-C in `qmd embed` (minutes of model calls): `interrupts_checked()` records SIGINT
too, and `checkpoint()` then raises KeyboardInterrupt. Python's own KeyboardInterrupt is
lost when the signal lands while a C library calls back into Python (llama.cpp's log hook:
"Exception ignored on calling ctypes callback function"), and the command used to run on to
the end; the next checkpoint stops it all the same.

`without_waiting()`: work that must not wait on another process's lock (the stdio warm-up)
opens an index inside it, and a locked one fails at once instead of after its busy timeout.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_current: ContextVar[threading.Event | None] = ContextVar("qmd_cancel", default=None)
_interrupted = threading.Event()  # SIGINT arrived inside `interrupts_checked()`
_stopping = threading.Event()  # the server is stopping: every request is cancelled


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
    return event is not None and (event.is_set() or _stopping.is_set())


def cancel_all() -> None:
    """The server is stopping (SIGTERM): every request's next checkpoint raises `Cancelled`,
    so that no query runs on for minutes after the server was told to stop."""
    _stopping.set()


@contextmanager
def interrupts_checked() -> Iterator[None]:
    """Run the body (in the main thread) so that a Ctrl-C is also seen by `checkpoint()`."""
    import signal

    previous = signal.getsignal(signal.SIGINT)
    if threading.current_thread() is not threading.main_thread() or previous is signal.SIG_IGN:
        yield  # signals go to the main thread; an ignored SIGINT stays ignored
        return

    def on_sigint(signum: int, frame: object) -> None:
        _interrupted.set()
        raise KeyboardInterrupt

    signal.signal(signal.SIGINT, on_sigint)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)
        _interrupted.clear()


@contextmanager
def interrupts_deferred() -> Iterator[None]:
    """Run the body (in the main thread) with Ctrl-C, SIGTERM and SIGHUP held back until it
    ends: for steps that must happen together (an import's config save and its commit, a
    rename's rows and config). Then a held SIGTERM or SIGHUP is delivered as it would have
    been (by default it ends the process) and a held Ctrl-C raises KeyboardInterrupt. SIGTERM
    is what `timeout`, `kill` and agent harnesses send: it ended a rename between its index
    and its config, leaving the two naming the collection differently."""
    import os
    import signal

    if threading.current_thread() is not threading.main_thread():
        yield
        return
    previous = {}
    for number in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        handler = signal.getsignal(number)
        if handler is not None and handler is not signal.SIG_IGN:  # None: set outside Python, left alone
            previous[number] = handler
    held: list[int] = []
    for number in previous:
        signal.signal(number, lambda signum, frame: held.append(signum))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
    for signum in dict.fromkeys(held):
        if signum != signal.SIGINT:
            os.kill(os.getpid(), signum)  # delivered now, to the handler it would have met
    if signal.SIGINT in held:
        raise KeyboardInterrupt


def checkpoint() -> None:
    """Raise `Cancelled` if the current request has been cancelled (KeyboardInterrupt after a
    Ctrl-C inside `interrupts_checked()`)."""
    if _interrupted.is_set():
        raise KeyboardInterrupt
    event = _current.get()
    if event is not None and (event.is_set() or _stopping.is_set()):
        raise Cancelled()


_waiting: ContextVar[bool] = ContextVar("qmd_waiting", default=True)


@contextmanager
def without_waiting() -> Iterator[None]:
    """An index opened inside gives up at once when another process holds it locked instead
    of waiting its busy timeout: the stdio warm-up runs on the worker that answers calls, and a
    call arriving meanwhile waited for the warm-up's 5 s, then its own."""
    token = _waiting.set(False)
    try:
        yield
    finally:
        _waiting.reset(token)


def waiting() -> bool:
    """False inside `without_waiting()`."""
    return _waiting.get()
