"""`qmd mcp` over stdio: newline-delimited JSON-RPC on stdin/stdout, no MCP SDK.

Ready before the client's first turn: the reader starts at once and the index opens on a
thread beside it, so `initialize` waits only for what its instructions need. Agents start
the first model turn without waiting for slow servers; the handshake is the whole budget.

- The protocol owns file descriptor 1: at start it is duplicated for the protocol and fd 1
  is pointed at stderr, so a stray print or a native library writing to stdout (llama.cpp)
  cannot corrupt the stream.
- The reader answers `initialize`, `ping`, the lists and prompts itself; tool calls go to
  one worker thread in order (the Store runs one call at a time anyway), at most
  `MAX_QUEUED` waiting; past that the reader stops reading for up to `QUEUE_WAIT_S` (the
  pipe pushes back) before a call is refused as busy. `notifications/cancelled` for a
  waiting or running call stops it at the pipeline's next checkpoint (qmd/core/cancel.py)
  and frees the worker; a cancelled call gets no answer, as the spec asks.
- A line over `MAX_MESSAGE_BYTES` is refused with a parse error and skipped to its end.
- End of stdin: the calls already received are answered (a script's `printf '…' | qmd mcp`
  reads them after it stopped writing) unless the reader of stdout is gone too (an agent
  that quit: its calls are cancelled at once) or `DRAIN_WAIT_S` passes; then the index is
  closed, exit 0. A client that closes its end of stdout but leaves stdin open stops the
  server the same way (watched every `WATCH_S`). A service that cannot start (a broken
  config) answers the request with the error and the fix, says it on stderr, and exits 1.
"""

from __future__ import annotations

import os
import queue
import sys
import threading
import time
from collections.abc import Callable
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time

from qmd.core.errors import QmdError
from qmd.serve.protocol import (
    INTERNAL_ERROR,
    INVALID_REQUEST,
    McpHandler,
    RpcError,
    encode,
    error_response,
    parse_message,
    tool_call_id,
)

if TYPE_CHECKING:
    from typing import Any, BinaryIO

    from qmd.store.store import Store

    from qmd.serve.service import ToolService

MAX_MESSAGE_BYTES = 4 * 1024 * 1024
MAX_QUEUED = 64
QUEUE_WAIT_S = 30.0  # a call finding MAX_QUEUED waiting holds the reader this long for a free place, then is refused busy
STOP_WAIT_S = 2.0
DRAIN_WAIT_S = 30.0  # after stdin closes, the calls already received are answered for this long at most
WATCH_S = 0.5  # how often the reader of stdout is looked for (a client that quit but left stdin open)

Log = Callable[[str], None]
_STOP = object()
_RECHECK = object()  # a work item: check the kept instructions (StdioServer._check_kept)
_WARM = object()  # a work item: prepare the first keyword query's path (StdioServer._want_warm)


class StdioServer:
    def __init__(self, open_store: Callable[[], Store], index: str, log: Log, stdin: BinaryIO, out_fd: int, kept: str | None = None, keep: Callable[[Store, str], None] | None = None) -> None:
        self.log = log
        self._kept = kept  # the instructions kept from the last start, when still current (qmd/serve/instructions.py)
        self._keep = keep  # keeps freshly computed instructions for the next start
        self.stdin = stdin
        self.out_fd = out_fd
        self.index = index
        self.handler = McpHandler(self._wait_service, log, self.send, self._wait_instructions)
        self._open_store = open_store
        self._service: ToolService | None = None
        self._instructions = ""
        self._failure: QmdError | None = None
        self._ready = threading.Event()  # the instructions (or the failure) are known
        self._service_ready = threading.Event()
        self._write_lock = threading.Lock()
        self._closed = False
        self._work: queue.Queue[Any] = queue.Queue(MAX_QUEUED)
        self._pending: dict[Any, threading.Event] = {}  # tools/call id -> its cancel event
        self._pending_lock = threading.Lock()
        self._opener: threading.Thread | None = None
        self._recheck = False  # the kept instructions are still to be checked (_check_kept)
        self._recheck_lock = threading.Lock()
        self._stopping = False  # one of _shut_down (stdin closed) and _watch_stdout (stdout closed) stops the server
        self._warm_lock = threading.Lock()
        self._warm_when: set[str] = set()  # of "answered" (a request other than a call) and "open" (the service); both: warm
        self._stop_lock = threading.Lock()
        self.failed = False
        self._starting = True  # the collector is held off until the first call or warm-up is done (run)

    # the index, opened beside the reader: first what `initialize` needs, then the tools

    def _open(self) -> None:
        try:
            self._open_index()
        except Exception as exc:  # not a QmdError (apsw's "database is locked"): never a thread that dies leaving
            if self._service is None:  # `initialize` and every call waiting on it
                self._failure = self._failure or QmdError(f"the index could not be opened: {exc}", "run qmd status to see what is wrong with it")
        finally:
            self._ready.set()
            self._service_ready.set()
            if self._service is None:
                self._started()  # nothing to warm: the calls are answered with the failure

    def _started(self) -> None:
        """The first call (or the warm-up) is done: the objects made so far, nearly all of them
        for good (modules, classes, the index's caches), move out of the collector's sight
        (`gc.freeze`), and the collector runs again, over what later calls make only."""
        if self._starting:
            self._starting = False
            import gc

            gc.freeze()
            gc.enable()

    def _open_index(self) -> None:
        busy = False  # the index was locked: its text is not kept
        try:
            store = self._open_store()
            if self._kept is None:  # `initialize` waits for these
                from qmd.core.cancel import without_waiting
                from qmd.serve.answers import BUSY_LINE, store_instructions

                with without_waiting():  # an index another process holds locked: answered at once, saying so (the calls wait as usual)
                    self._instructions = store_instructions(store, self.index)
                busy = BUSY_LINE in self._instructions
            else:  # the kept text answers; it is checked once the calls already received are answered (_check_kept)
                self._instructions = self._kept
        except QmdError as exc:
            self._failure = exc
            self._ready.set()
            self._service_ready.set()
            return
        self._ready.set()
        if self._keep is not None and self._kept is None and not busy:
            self._keep(store, self._instructions)
        try:
            from qmd.serve.service import ToolService

            self._service = ToolService(store, self.index, log=self.log).start(count=False)  # stdio serves no /health
        except QmdError as exc:
            self._failure = exc
        finally:
            self._service_ready.set()
        if self._service is not None:
            self._want_warm("open")
        if self._service is not None and self._kept is not None:
            with self._recheck_lock:
                self._recheck = True  # the worker runs it behind the calls received so far, else _close_down does
            try:
                self._work.put_nowait(_RECHECK)
            except queue.Full:
                pass

    def _want_warm(self, why: str) -> None:
        """Once the service is open and a request of the client's has been answered (never
        before: `initialize` waits for nothing of this), the worker prepares the path of a first
        keyword query (the pipeline's imports, the connection: `ToolService.warm`) in the idle
        time while the client composes its first call. A call already waiting runs first and
        builds what it uses itself (the warm-up then does nothing: it runs only while no call waits)."""
        with self._warm_lock:
            if len(self._warm_when) == 2:
                return
            self._warm_when.add(why)
            if len(self._warm_when) < 2:
                return
        try:
            self._work.put_nowait(_WARM)
        except queue.Full:
            pass

    def _check_kept(self) -> None:
        """Compute the instructions the kept text stands for and keep them when they differ
        (a copy that no longer matches is mended), once, off the first call's path: the
        status they need is 2-3 times a keyword query's work on a small index."""
        with self._recheck_lock:
            due, self._recheck = self._recheck, False
        if not due or self._service is None or self._keep is None:
            return
        try:
            from qmd.serve.answers import BUSY_LINE

            text = self._service.instructions()
            if text != self._kept and BUSY_LINE not in text:  # a locked index's text is never kept (see _open_index)
                self._keep(self._service.store, text)
        except QmdError:
            return
        except Exception as exc:  # best effort, on the worker: any error (apsw's "database is locked") must not end it
            self.log(f"the kept instructions were not checked: {exc}")

    def _refuse(self) -> RpcError:
        exc = self._failure or QmdError("the index could not be opened")
        self.failed = True
        return RpcError(INTERNAL_ERROR, f"qmd cannot serve: {exc.message}", {"hint": exc.cli_hint} if exc.cli_hint else None)

    def _wait_instructions(self) -> str:
        if self._kept is not None and not self._ready.is_set():
            return self._kept  # the index is still opening: what it said last time, unchanged since
        self._ready.wait()
        if self._failure is not None:
            raise self._refuse()
        if self._service_ready.is_set() and self._service is not None:
            from qmd.serve.answers import BUSY_LINE

            text = self._service.instructions()  # fresh, under the service's lock; a locked index's at once (busy)
            return self._kept if self._kept is not None and BUSY_LINE in text else text  # the kept text has the counts
        return self._instructions

    def _wait_service(self) -> ToolService:
        self._service_ready.wait()
        if self._service is None:
            raise self._refuse()
        return self._service

    # output

    def _reader_gone(self) -> bool:
        """Has whoever reads our stdout closed it (a pipe's write end then polls POLLERR)?"""
        import select

        poller = select.poll()
        poller.register(self.out_fd, select.POLLOUT)
        try:
            return any(events & (select.POLLERR | select.POLLHUP | select.POLLNVAL) for _, events in poller.poll(0))
        except OSError:
            return True

    def send(self, message: Any) -> None:
        data = encode(message) + b"\n"
        with self._write_lock:
            if self._closed:
                return
            try:
                view = memoryview(data)
                while view:
                    written = os.write(self.out_fd, view)
                    view = view[written:]
            except OSError:  # the client went away
                self._closed = True

    def _cancel_all(self) -> None:
        """Cancel every call waiting or running (each stops at its next checkpoint, unanswered)."""
        with self._pending_lock:
            for event in self._pending.values():
                event.set()

    def _claim_stop(self) -> bool:
        """True for the first caller only: it stops the server."""
        with self._stop_lock:
            first, self._stopping = not self._stopping, True
            return first

    def _watch_stdout(self, worker: threading.Thread) -> None:
        """A client that quit without closing our stdin (its end of our stdout is gone): the
        reader would wait on stdin forever, so stop here: cancel the calls, let the worker
        stop, close the index, exit."""
        while not self._closed and not self._reader_gone():
            time.sleep(WATCH_S)
        if not self._claim_stop():
            return  # stdin closed too: _shut_down is doing this already
        self.log("the client closed its end of stdout; stopping")
        self._close_down(worker, "stdout closing")
        sys.stderr.flush()
        os._exit(1 if self.failed else 0)

    def _close_down(self, worker: threading.Thread, why: str) -> None:
        """Cancel what still runs, give the worker STOP_WAIT_S, then close the index once the
        opener is done; a call stuck inside a model call makes the process exit at once
        instead (the index is not closed under it)."""
        if worker.is_alive():
            self._cancel_all()
            worker.join(STOP_WAIT_S)
        if worker.is_alive():
            self.log(f"a tool call did not stop within 2 s of {why}; exiting without waiting for it")
            sys.stderr.flush()
            os._exit(1 if self.failed else 0)
        if self._opener is not None:
            self._opener.join(STOP_WAIT_S)  # a client that leaves at once still lets this start keep its text
        if self._service_ready.is_set() and self._service is not None:
            self._check_kept()  # when the worker stopped before it came to it
            self._service.close()

    # the loop

    def serve(self) -> int:
        self._opener = threading.Thread(target=self._open, name="qmd-open-index", daemon=True)
        self._opener.start()
        worker = threading.Thread(target=self._run_calls, name="qmd-tool-calls", daemon=True)
        worker.start()
        threading.Thread(target=self._watch_stdout, args=(worker,), name="qmd-watch-stdout", daemon=True).start()
        try:
            while not self._closed and not self.failed:
                line = self.stdin.readline(MAX_MESSAGE_BYTES + 1)
                if not line:
                    break
                if len(line) > MAX_MESSAGE_BYTES and not line.endswith(b"\n"):
                    self._skip_rest_of_line()
                    self.log(f"rpc error -32700 -: a message over {MAX_MESSAGE_BYTES} bytes was skipped")
                    self.send(error_response(None, -32700, f"Parse error: message over {MAX_MESSAGE_BYTES} bytes"))
                    continue
                if line.strip():
                    self._receive(line)
        finally:
            self._shut_down(worker)
        return 1 if self.failed else 0

    def _skip_rest_of_line(self) -> None:
        while True:
            more = self.stdin.readline(MAX_MESSAGE_BYTES)
            if not more or more.endswith(b"\n"):
                return

    def _receive(self, line: bytes) -> None:
        message, error = parse_message(line)
        if error is not None:
            self.log(f"rpc error -32700 -: {error['error']['message']}")
            self.send(error)
            return
        if isinstance(message, list):
            if not message:
                self.send(self.handler.handle(None))
                return
            self._enqueue(message, None, None)
            return
        if isinstance(message, dict) and message.get("method") == "notifications/cancelled" and "id" not in message:
            params = message.get("params")
            request_id = params.get("requestId") if isinstance(params, dict) else None
            with self._pending_lock:
                event = self._pending.get(request_id) if isinstance(request_id, (str, int)) else None
            if event is not None:
                event.set()
            return
        call_id = tool_call_id(message)
        if call_id is None:
            response = self.handler.handle(message)
            if response is not None:
                self.send(response)
                self._want_warm("answered")
            return
        event = threading.Event()
        with self._pending_lock:
            self._pending[call_id] = event
        self._enqueue(message, call_id, event)

    def _enqueue(self, message: Any, call_id: Any, event: threading.Event | None) -> None:
        try:  # full: stop reading stdin for a while (a script piping 100 calls gets 100 answers)
            self._work.put((message, call_id, event), timeout=QUEUE_WAIT_S)
        except queue.Full:
            self._forget(call_id)
            if isinstance(message, dict):
                self.log(f"rpc error {INTERNAL_ERROR} tools/call: {MAX_QUEUED} calls already waiting")
                self.send(error_response(call_id, INTERNAL_ERROR, f"server busy: {MAX_QUEUED} tool calls are already waiting; retry when they are answered"))
            else:
                self.send(error_response(None, INVALID_REQUEST, f"server busy: {MAX_QUEUED} requests are already waiting"))

    def _forget(self, call_id: Any) -> None:
        if call_id is not None:
            with self._pending_lock:
                self._pending.pop(call_id, None)

    def _run_calls(self) -> None:
        while True:
            item = self._work.get()
            if item is _STOP:
                return
            if item is _RECHECK:
                self._check_kept()
                continue
            if item is _WARM:
                with self._pending_lock:
                    waiting = bool(self._pending)
                if not waiting and self._service is not None:
                    self._service.warm()
                    self._started()
                continue
            message, call_id, event = item
            try:
                if isinstance(message, list):
                    answers = [a for a in (self.handler.handle(m) for m in message) if a is not None]
                    if answers:
                        self.send(answers)
                elif event is None or not event.is_set():
                    response = self.handler.handle(message, event)
                    if response is not None and (event is None or not event.is_set()):
                        self.send(response)
            finally:
                self._forget(call_id)
                self._started()

    def _shut_down(self, worker: threading.Thread) -> None:
        """stdin closed: answer what was asked before it closed (`printf '…' | qmd mcp | jq`
        reads the answers after the writer is done), unless whoever reads stdout is gone too
        (an agent that quit: its calls are cancelled) or DRAIN_WAIT_S passes."""
        if not self._claim_stop():
            time.sleep(STOP_WAIT_S * 2)  # _watch_stdout is stopping the process
            os._exit(1 if self.failed else 0)
        try:
            self._work.put(_STOP, timeout=STOP_WAIT_S)  # behind the calls already received
        except queue.Full:
            pass
        deadline = time.monotonic() + DRAIN_WAIT_S
        while worker.is_alive() and time.monotonic() < deadline and not self._reader_gone():
            worker.join(0.1)
        self._close_down(worker, "stdin closing")


def run(index_name: str | None) -> int:
    """`qmd [--index NAME] mcp`: serve the index over stdio; the exit code.

    Imports only what the handshake needs before reading stdin (the console script routes
    here before the CLI framework loads); the Store opens on a thread beside the reader.
    The cyclic garbage collector is off until the first call is answered (or the path warmed):
    a start makes tens of thousands of objects (modules, classes, functions), nearly none of
    them garbage, and each collection on the way walked them all, about a tenth of the time to
    a first answer (StdioServer._started turns it on again)."""
    import gc

    gc.disable()
    from qmd.core.paths import resolve_index
    from qmd.serve.logsafe import stderr_log

    try:
        paths = resolve_index(index_name)
    except QmdError as exc:
        sys.stderr.write(f"Error: {exc.message}\n" + (f"hint: {exc.cli_hint}\n" if exc.cli_hint else ""))
        return 1

    def open_store() -> Store:
        from qmd.store.store import Store

        return Store(paths.index_path, paths.config_path)

    from qmd.serve import instructions

    key = instructions.inputs(paths)
    kept = instructions.read(paths, key)

    out_fd = os.dup(1)
    os.dup2(2, 1)  # fd 1 is the protocol's alone: stray writes go to stderr
    sys.stdout = sys.stderr
    def keep(store: Store, text: str) -> None:
        if instructions.applies(store, paths):
            instructions.keep(paths, key, text)

    server = StdioServer(open_store, paths.name, stderr_log, sys.stdin.buffer, out_fd, kept, keep)
    code = server.serve()
    failure = server._failure
    if server.failed and failure is not None:
        sys.stderr.write(f"Error: {failure.message}\n" + (f"hint: {failure.cli_hint}\n" if failure.cli_hint else ""))
    return code
