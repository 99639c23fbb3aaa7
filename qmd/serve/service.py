"""What the MCP server does, without the MCP SDK: the four tools, /query, /health.

`ToolService.call(tool, arguments)` validates raw JSON arguments (unknown names are
refused with the list of valid ones; numbers given as strings are accepted, as agents
send them), runs the tool over one `Store` and returns a `ToolOutput`: text for the
model, structured content for programs, or an error with a message naming the fix.
It never raises for bad input or a failing search. qmd/serve/protocol.py serves it as MCP
(stdio: qmd/serve/stdio.py; HTTP: qmd/serve/server.py, which also serves the REST routes).

Every answer to `query` and `status` carries the index's freshness: when it was last
updated and whether the updater's health flag (`<state>/health.json`) is raised.

Models are loaded once and kept across calls; after `QMD_MODEL_IDLE_S` seconds (default
300; 0 = never) without a search they are released, and the next search loads them again.

A `scope` (the collections a scoped token may read; qmd/serve/auth.py) confines a call to
those collections: the tools read through a view of the Store that sees no other
collection (qmd/store/view.py), a `collections` argument or `qmd://` path naming another
one is refused (`OutOfScope`, a 403 on the REST routes), and `status`, `/health` and the
server instructions count and list the visible collections only. The stdio server and
an unscoped token have no scope (None): the whole index.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from qmd.core.records import record
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from typing import Any

from qmd.core.version import __version__
from qmd.core.cancel import Cancelled
from qmd.core.errors import QmdError
from qmd.core.text import numbered
from qmd.serve.arguments import (
    GET_PARAMS,
    MULTI_GET_PARAMS,
    TOOL_PARAMS,
    ArgError,
    QueryArgs,
    bool_arg,
    check_names,
    int_arg,
    parse_query_args,
    str_arg,
)
from qmd.serve.logsafe import escape_lines, stderr_log
from qmd.serve.scope import check_ref_scope, check_scope, own_references
from qmd.serve.answers import HealthFlag, build_instructions, documents_answer, freshness, hit_row, judged, query_text, status_answer, store_instructions
from qmd.core.results import QueryResult, StatusInfo, VectorStatus
from qmd.core.requests import JSON_SNIPPET_CHARS
from qmd.store.store import MULTI_GET_MAX_BYTES, Store

DEFAULT_IDLE_S = 300.0

Log = Callable[[str], None]


class Busy(Exception):
    """The Store stayed busy with another call for the time the caller would wait."""

    def __init__(self, waited: float) -> None:
        super().__init__(f"busy for {waited:g} s")
        self.waited = waited


@record
class ToolOutput:
    """A tool's answer: `text` for the model, `structured` for programs."""

    text: str
    structured: dict[str, Any] | None = None
    is_error: bool = False
    summary: str = ""  # for the request log line


def error_output(exc: QmdError) -> ToolOutput:
    text = f"Error: {exc.message}" + (f"\nhint: {exc.cli_hint}" if exc.cli_hint else "")
    return ToolOutput(text, None, True, f"error: {exc.message[:80]}")


def idle_seconds() -> float:
    raw = os.environ.get("QMD_MODEL_IDLE_S", "").strip()
    if not raw:
        return DEFAULT_IDLE_S
    try:
        value = float(raw)
    except ValueError:
        return DEFAULT_IDLE_S
    return max(value, 0.0)




class ToolService:
    """The tools over one Store; thread-safe (one call at a time touches the Store)."""

    def __init__(self, store: Store, index: str, *, idle_s: float | None = None, log: Log | None = None, build_id: str = "") -> None:
        self.store = store
        self.index = index
        self.idle_s = idle_seconds() if idle_s is None else idle_s
        self.log = log or stderr_log
        self._build = build_id
        self.started = time.monotonic()
        self._lock = threading.RLock()
        self._last_model_use = time.monotonic()
        self._stop = threading.Event()
        self._idler: threading.Thread | None = None
        self._doc_count: tuple[str | None, int] | None = None  # (last update, documents)
        self._flag = HealthFlag()
        self._said: set[str] = set()  # notices already in a text answer (each is said once)
        self._views: dict[frozenset[str], Store] = {}  # one read view per token scope
        self._identity: str | None = None  # see identity()
        self._moved: QmdError | None = None  # the index cannot be opened where its config now says (see _refresh)
        self._health_error: str | None = None  # why the last /health count failed (a database gone)
        store.storage_moved()  # the baseline of where the index lives (see _refresh)

    # lifecycle

    def start(self, count: bool = True) -> ToolService:
        """Count the documents for /health (`count`: a server that answers it), start the idle
        watcher (if models are ever released)."""
        if count:
            self.health()
        if self.idle_s > 0 and self._idler is None:
            self._idler = threading.Thread(target=self._watch_idle, name="qmd-model-idle", daemon=True)
            self._idler.start()
        return self

    def close(self, grace: float | None = None) -> bool:
        """Close the Store once no call holds it; False when a call still held it after
        `grace` seconds (None: wait as long as it takes), the Store left open."""
        self._stop.set()
        if not self._lock.acquire(timeout=-1 if grace is None else grace):
            return False
        try:
            self.store.close()
        finally:
            self._lock.release()
        return True

    def warm(self) -> None:
        """Make what a first keyword query makes before it searches (`Store.warm_reader`), when
        no call holds the Store; never raises (the call that follows says what is wrong)."""
        if not self._lock.acquire(blocking=False):
            return
        try:
            self.store.warm_reader()
        except QmdError:
            pass
        except Exception as exc:  # apsw's "database is locked": the call that follows says it
            self.log(f"the query path was not prepared: {exc}")
        finally:
            self._lock.release()

    def _watch_idle(self) -> None:
        interval = max(0.2, min(self.idle_s / 4, 30.0))
        while not self._stop.wait(interval):
            self.release_if_idle()

    def release_if_idle(self) -> list[str]:
        """Release loaded models when none was used for `idle_s` seconds (never mid-call)."""
        if not self._lock.acquire(blocking=False):
            return []
        try:
            idle = time.monotonic() - self._last_model_use
            if self.idle_s <= 0 or idle < self.idle_s or not self.store.loaded_models():
                return []
            released = self.store.release_models()
        finally:
            self._lock.release()
        self.log(f"released idle models ({', '.join(released)}) after {idle:.0f}s without a search")
        return released

    # the one door to the Store

    @contextmanager
    def using(self, scope: frozenset[str] | None = None, *, wait: float | None = None, models: bool = False) -> Iterator[Store]:
        """The Store, as `scope` sees it, for one call: one call at a time holds it (`wait`
        None: as long as it takes; 0: not at all; else seconds; then `Busy`), each begins
        with the config as it is now and the index where it now says (`_refresh`), and a
        call that may run models (`models`) keeps them loaded for another `idle_s`."""
        if not (self._lock.acquire() if wait is None else self._lock.acquire(timeout=wait) if wait > 0 else self._lock.acquire(blocking=False)):
            raise Busy(wait or 0.0)
        try:
            self._refresh()
            yield self._view(scope)
        finally:
            if models:
                self._last_model_use = time.monotonic()
            self._lock.release()

    # the tools

    def call(self, tool: str, arguments: dict[str, Any] | None, progress: Callable[[str], None] | None = None, scope: frozenset[str] | None = None) -> ToolOutput:
        """Run a tool on raw JSON arguments; errors come back as error outputs, never raised
        (but `Cancelled`, which the transport asked for). `progress` hears each stage of a query;
        `scope` confines the call to those collections (see the module docstring)."""
        args = arguments or {}
        try:
            if not isinstance(args, dict):
                raise ArgError("arguments must be a JSON object")
            if tool == "query":
                return self.query(parse_query_args(args), progress, scope)
            if tool == "get":
                check_names(tool, args, GET_PARAMS)
                return self.get(args, scope)
            if tool == "multi_get":
                check_names(tool, args, MULTI_GET_PARAMS)
                return self.multi_get(args, scope)
            if tool == "status":
                check_names(tool, args, {})
                return self.status(scope)
            raise ArgError(f"unknown tool {tool!r}", f"tools: {', '.join(TOOL_PARAMS)}")
        except QmdError as exc:
            return error_output(exc)
        except Cancelled:
            raise
        except Exception as exc:  # a bug must not take the server down
            import traceback

            self.log(escape_lines(f"{tool} failed unexpectedly:\n{traceback.format_exc().rstrip()}"))
            return ToolOutput(f"Error: internal error in {tool}: {type(exc).__name__}: {exc}\nhint: this is a bug in qmd; the server log has the traceback", None, True, "internal error")

    def _refresh(self) -> None:
        """Before each request: the config as it is now, and the index where it now says
        (a `database:` edited or a project's approval revoked reopens the Store: no request
        reaches storage the config no longer names)."""
        if self._moved is not None or self.store.storage_moved():
            self._reopen()
        self.store.refresh_config()

    def _reopen(self) -> None:
        from qmd.store.store import Store

        old = self.store
        try:
            fresh = Store(old.index_path, old.config_path)
        except QmdError as exc:
            self._moved = exc  # every request says why, until it can be opened
            raise
        old.close()
        self.store, self._moved = fresh, None
        fresh.storage_moved()  # its baseline
        self._views.clear()
        self._doc_count = None
        self.log(f"the index's storage changed (its config's database: or approval): reading {fresh.backend.location} now")

    def _view(self, scope: frozenset[str] | None) -> Store:
        """The Store as a reader of `scope` sees it (the Store itself without a scope)."""
        if scope is None:
            return self.store
        view = self._views.get(scope)
        if view is None:
            from qmd.store.view import scoped_view

            view = self._views[scope] = scoped_view(self.store, scope)
        return view

    def run_query(self, q: QueryArgs, wait: bool = True, progress: Callable[[str], None] | None = None, scope: frozenset[str] | None = None) -> tuple[QueryResult, dict[str, Any]] | None:
        """The hybrid query and the index's freshness; None if `wait` is False and the Store is busy."""
        check_scope(q.collections, scope)
        try:
            with self.using(scope, wait=None if wait else 0, models=True) as store:
                result = store.query(q.request(JSON_SNIPPET_CHARS), progress=progress)
                fresh = freshness(self._last_updated(scope), self._flag.get())
        except Busy:
            return None
        return result, fresh

    def _last_updated(self, scope: frozenset[str] | None) -> str | None:
        """When the index (or, with a scope, one of its visible collections) was last updated."""
        if scope is None:
            return self.store.last_updated()
        times = [c.updated_at for c in self._view(scope).collections() if c.updated_at]
        return max(times) if times else None

    def query(self, q: QueryArgs, progress: Callable[[str], None] | None = None, scope: frozenset[str] | None = None) -> ToolOutput:
        ran = self.run_query(q, progress=progress, scope=scope)
        assert ran is not None  # waited for the lock
        result, fresh = ran
        rows = [hit_row(h, result.threshold) for h in result.hits]
        structured: dict[str, Any] = {"results": rows, "freshness": fresh, **judged(result)}
        structured |= {k: v for k, v in (("pending", result.pending), ("why", result.why)) if v}  # pending: documents whose current content has no vectors yet
        fresh_notices = [n for n in result.notices if n not in self._said]
        self._said.update(fresh_notices)
        if fresh_notices:  # said once per server, in the text and the structured answer alike
            structured["notices"] = fresh_notices
        text = query_text(q.shown, result, fresh, fresh_notices)
        return ToolOutput(text, structured, False, f"{q.shown[:60]!r} → {len(rows)} results")

    def get(self, args: dict[str, Any], scope: frozenset[str] | None = None) -> ToolOutput:
        ref = own_references(str_arg("file", args.get("file")), self.index, self.display_name(scope))
        check_ref_scope(ref, scope)
        from_line = int_arg("fromLine", args["fromLine"], 1, 10**9) if args.get("fromLine") is not None else None
        max_lines = int_arg("maxLines", args["maxLines"], 0, 10**9) if args.get("maxLines") is not None else None
        line_numbers = bool_arg("lineNumbers", args.get("lineNumbers", False))
        with self.using(scope) as store:
            doc = store.get(ref, from_line, max_lines)
        body = numbered(doc.text, doc.from_line) if line_numbers and doc.lines_shown else doc.text
        structured = {
            "docid": f"#{doc.docid}", "file": doc.uri, "title": doc.title, "context": doc.context,
            "fromLine": doc.from_line, "lines": doc.lines_shown, "totalLines": doc.total_lines, "text": body,
        }
        header = f"{doc.uri} #{doc.docid} — {doc.title} (lines {doc.line_span})"
        text = header + (f"\nContext: {doc.context}" if doc.context else "") + "\n\n" + body
        return ToolOutput(text, structured, False, f"{doc.uri} {doc.lines_shown} lines")

    def multi_get(self, args: dict[str, Any], scope: frozenset[str] | None = None) -> ToolOutput:
        pattern = own_references(str_arg("pattern", args.get("pattern")), self.index, self.display_name(scope))
        check_ref_scope(pattern, scope)
        max_lines = int_arg("maxLines", args["maxLines"], 0, 10**9) if args.get("maxLines") is not None else None
        max_bytes = int_arg("maxBytes", args.get("maxBytes", MULTI_GET_MAX_BYTES), 1, 100 * 1024 * 1024)
        line_numbers = bool_arg("lineNumbers", args.get("lineNumbers", False))
        with self.using(scope) as store:
            items = store.multi_get(pattern, max_lines, max_bytes)
        text, docs = documents_answer(items, line_numbers)
        return ToolOutput(text, {"documents": docs}, False, f"{pattern[:60]!r} → {len(docs)} documents")

    def status(self, scope: frozenset[str] | None = None) -> ToolOutput:
        with self.using(scope):
            info = self._status_info(scope)
            try:
                vec = self._vector_status(scope)
                vectors: dict[str, Any] | None = {"model": vec.model, "embedded_documents": vec.embedded_documents, "pending_documents": vec.pending_documents}
            except QmdError as exc:
                vectors = {"model": None, "embedded_documents": 0, "pending_documents": info.documents, "note": exc.message}
            loaded = self.store.loaded_models()
        fresh = freshness(info.updated_at, self._flag.get())
        server = {"version": __version__, "build_id": self.build_id, "models_loaded": loaded, "model_idle_s": self.idle_s}
        text, structured = status_answer(info, vectors, fresh, self.display_name(scope), server, paths=scope is None)
        return ToolOutput(text, structured, False, f"{info.documents} documents")

    def _status_info(self, scope: frozenset[str] | None, grammars: bool = True) -> StatusInfo:
        """`Store.status()`, with a scope: of the visible collections only (their documents,
        last update and file issues; the index's own totals and path are not shown)."""
        info = self._view(scope).status(grammars)
        if scope is None:
            return info
        names = {c.name for c in info.collections}
        times = [c.updated_at for c in info.collections if c.updated_at]
        return StatusInfo(
            index_path="", size_bytes=0, documents=sum(c.documents for c in info.collections), inactive=0, content_rows=0,
            updated_at=max(times) if times else None, collections=info.collections,
            issues=[i for i in info.issues if i[0] in names], global_context=info.global_context, running=None,
            grammars=info.grammars,
        )

    def _vector_status(self, scope: frozenset[str] | None) -> VectorStatus:
        """Vectors of the whole index, or (with a scope) of its visible collections."""
        if scope is None:
            return self.store.vector_status()
        visible = [c.name for c in self._view(scope).collections()]
        if not visible:  # an empty list would mean "every collection"
            return VectorStatus(None, None, 0, 0, 0)
        return self.store.vector_status(visible)

    @property
    def build_id(self) -> str:
        """The build id given at start (the HTTP daemon's), else computed once when asked."""
        if not self._build:
            from qmd.core.buildinfo import build_id

            self._build = build_id()
        return self._build

    # HTTP helpers

    def rest_query(self, body: Any, *, fast_only: bool = False, scope: frozenset[str] | None = None) -> tuple[int, dict[str, Any], str] | None:
        """POST /query and /search: (status, JSON body, log summary).

        `fast_only` is the HTTP server's event-loop path: it answers only what takes a few
        milliseconds and cannot block (argument errors; keyword-only queries when the Store
        is free and no model would load) and returns None for the rest, which the server
        then runs on a worker thread. That saves the thread hand-off (~0.5 ms under load)
        on the agent's commonest request.
        """
        try:
            if not isinstance(body, dict):
                raise ArgError("the body must be a JSON object", '{"searches": [{"type": "lex", "query": "rollback"}]}')
            q = parse_query_args(body, tool="/query")
            if fast_only and not self._can_run_inline(q):
                return None
            ran = self.run_query(q, wait=not fast_only, scope=scope)
            if ran is None:
                return None
            result, fresh = ran
        except QmdError as exc:
            code = getattr(exc, "status", 400)
            return code, {"error": exc.message, "hint": exc.cli_hint}, f"{code} {exc.message[:80]}"
        answer: dict[str, Any] = {"results": [hit_row(h, result.threshold) for h in result.hits], "freshness": fresh, **judged(result)}
        answer |= {k: v for k, v in (("pending", result.pending), ("why", result.why)) if v}
        return 200, answer, f"{q.searches or 'plain'} searches → {len(result.hits)} results"

    def cli_query(self, body: Any, scope: frozenset[str] | None = None) -> tuple[int, dict[str, Any], str]:
        """POST /cli: (status, JSON body, log summary) of the hits `qmd search|vsearch|query`
        print (qmd/serve/cliroute.py), for a caller of this build and this index only."""
        from qmd.core.requests import command_of
        from qmd.serve.cliroute import BUSY_WAIT_S, RouteError, parse, run

        try:
            request, build, identity = parse(body)
            if scope is not None:
                raise RouteError(403, "a token scoped to collections cannot use /cli (it reads the whole index, as the CLI does)", "use /query, or an unscoped token")
            if build != self.build_id:
                raise RouteError(409, f"this server runs build {self.build_id}, the client {build[:80]}", "restart the server: qmd mcp stop, then start it again")
            if identity != self.identity():
                raise RouteError(409, "the client reads another index than this server (index path, database, config or models differ)")
            try:
                with self.using(wait=BUSY_WAIT_S, models=True) as store:
                    payload = run(store, request)
            except Busy as exc:
                raise RouteError(503, f"busy with another search for {exc.waited:g} s", "run it in-process (the CLI does)") from exc
            except QmdError as exc:
                raise RouteError(400, exc.message, exc.cli_hint or "") from exc
        except RouteError as exc:
            return exc.status, {"error": exc.error, "hint": exc.hint}, f"{exc.status} {exc.error[:80]}"
        return 200, payload, f"{command_of(request)} → {len(payload['hits'])} hits"

    def identity(self) -> str:
        """The digest of the index this server reads, as its environment resolves it
        (qmd/serve/identity.py); computed once."""
        if self._identity is None:
            from qmd.serve.identity import index_identity

            self._identity = index_identity(self.index)
        return self._identity

    def _can_run_inline(self, q: QueryArgs) -> bool:
        if not q.keyword_only:
            return False
        # Store.query resolves the embed model even for lex lists: never load one inline.
        return "embed" in self.store.loaded_models() or not self.store.model("embed").available

    def health(self, scope: frozenset[str] | None = None) -> dict[str, Any]:
        """GET /health (design §7): never waits behind a running search.

        The document count (a table scan: ~10 ms on 38k documents) is recounted only
        after the index was updated; with a scope it counts the visible collections.
        """
        if scope is not None:
            whole = self.health()
            if "error" in whole:
                whole["error"] = "the index cannot be read now"  # the server's paths and database stay its own
            return {**whole, "index": self.display_name(scope), "documents": self._scoped_count(scope)}
        if self._lock.acquire(blocking=False):
            try:
                updated = self.store.last_updated()
                if self._doc_count is None or self._doc_count[0] != updated:
                    self._doc_count = (updated, self.store.document_count())
                self._health_error = None
            except QmdError as exc:
                self._doc_count = (None, 0)
                self._health_error = exc.message
            finally:
                self._lock.release()
        body: dict[str, Any] = {
            "status": "ok", "uptime_s": round(time.monotonic() - self.started, 1), "version": __version__,
            "build_id": self._build, "index": self.index, "documents": self._doc_count[1] if self._doc_count else 0,
        }
        if self._health_error is not None:  # the server lives, its index cannot be read (a database gone)
            body.update(status="degraded", error=self._health_error)
        return body

    def display_name(self, scope: frozenset[str] | None) -> str:
        """The index as a client may see it: its key, or for a scoped token its name (a
        project-local index's key is a path on the server)."""
        if scope is None:
            return self.index
        from qmd.core.paths import index_name  # not pidfile's imports (dataclasses, locks) on a tool call's path

        return index_name(self.index)

    def _scoped_count(self, scope: frozenset[str]) -> int:
        if not self._lock.acquire(blocking=False):
            return 0
        try:
            return sum(c.documents for c in self._view(scope).collections())
        except QmdError:
            return 0
        finally:
            self._lock.release()

    def instructions(self, scope: frozenset[str] | None = None) -> str:
        """The server instructions as `scope` sees the index. Never waits on another process's
        lock: a locked index answers at once without counts (`busy`), never as an empty one."""
        from qmd.core.cancel import without_waiting
        from qmd.core.errors import IndexBusyError

        if scope is None:
            with self._lock, without_waiting():
                return store_instructions(self.store, self.index)
        with self.using(scope), without_waiting():
            try:
                info: StatusInfo | None = self._status_info(scope, grammars=False)
            except IndexBusyError:
                return build_instructions(None, self.display_name(scope), None, busy=True)
            except QmdError:
                info = None
            try:
                vectors: bool | None = self._vector_status(scope).embedded_documents > 0
            except QmdError:
                vectors = False
            return build_instructions(info, self.display_name(scope), vectors)


class ScopedTools:
    """The tools as one scoped token sees them: what McpHandler calls (`call`,
    `instructions`) with the token's scope added. One per HTTP request."""

    def __init__(self, service: ToolService, scope: frozenset[str]) -> None:
        self.service, self.scope = service, scope

    def call(self, tool: str, arguments: dict[str, Any] | None, progress: Callable[[str], None] | None = None) -> ToolOutput:
        return self.service.call(tool, arguments, progress, self.scope)

    def instructions(self) -> str:
        return self.service.instructions(self.scope)
