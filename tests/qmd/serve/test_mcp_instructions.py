"""The instructions kept between stdio starts (qmd/serve/instructions.py): used only while
every file they are made from is unchanged, never written from files changed too recently."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

import qmd.core.stamps as stamps
from qmd.core.paths import resolve_index
from qmd.serve import instructions
from qmd.serve.answers import store_instructions
from tests.support.mcp import RawStdio, make_env, setup_index
from tests.support.run import run_qmd


@pytest.fixture
def env(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict[str, str]:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    assert run_qmd("update", env=env).returncode == 0
    for key in [k for k in os.environ if k.startswith(("QMD_", "XDG_"))]:
        monkeypatch.delenv(key)
    for key, value in env.items():
        if key.startswith(("QMD_", "XDG_")) or key == "HOME":
            monkeypatch.setenv(key, value)
    return env


def fresh_text() -> str:
    from qmd.store.store import open_index

    with open_index(None) as store:
        return store_instructions(store, "index")


def test_kept_only_while_every_input_is_unchanged(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "RACY_SECONDS", 0.0)
    paths = resolve_index(None)
    key = instructions.inputs(paths)
    text = fresh_text()
    instructions.keep(paths, key, text)
    assert instructions.read(paths, instructions.inputs(paths)) == text

    # opening the index, answering status and closing it leave every stamp as it was
    assert instructions.inputs(paths) == key

    changes = [
        lambda: run_qmd("context", "add", "qmd://notes/runbooks", "Runbooks for on-call", env=env),  # the config
        lambda: (tmp_path / "notes" / "new.md").write_text("# New\n\nfresh note\n") and run_qmd("update", env=env),  # the index
        lambda: (Path(env["XDG_CONFIG_HOME"]) / "qmd" / "models.yml").write_text("embed: /nowhere/model.gguf\n"),
        lambda: monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "other.gguf")),
    ]
    for change in changes:
        before = instructions.inputs(paths)
        instructions.keep(paths, before, fresh_text())
        assert instructions.read(paths, instructions.inputs(paths)) is not None
        change()
        assert instructions.read(paths, instructions.inputs(paths)) is None, change


def test_never_kept_from_files_changed_too_recently_or_meanwhile(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    paths = resolve_index(None)
    monkeypatch.setattr(stamps, "RACY_SECONDS", 3600.0)  # every file counts as just changed
    instructions.keep(paths, instructions.inputs(paths), "text")
    assert not instructions.cache_path("index").exists()
    monkeypatch.setattr(stamps, "RACY_SECONDS", 0.0)
    stale_key = instructions.inputs(paths)
    assert run_qmd("context", "add", "qmd://notes/", "Changed while computing", env=env).returncode == 0
    instructions.keep(paths, stale_key, "text")  # the files changed after the key was taken
    assert not instructions.cache_path("index").exists()


def test_a_corrupt_or_foreign_copy_is_not_used(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(stamps, "RACY_SECONDS", 0.0)
    paths = resolve_index(None)
    key = instructions.inputs(paths)
    path = instructions.cache_path("index")
    path.parent.mkdir(parents=True, exist_ok=True)
    for content in ("{not json", "[]", json.dumps({"version": 99, "key": key, "text": "x"}), json.dumps({"version": 1, "key": key, "text": 5}),
                    json.dumps({"version": 1, "key": key[:-1], "text": "x"})):
        path.write_text(content)
        assert instructions.read(paths, key) is None, content
    path.parent.chmod(0o500)
    try:
        instructions.keep(paths, key, "text")  # an unwritable cache dir: nothing kept, no error
    finally:
        path.parent.chmod(0o700)


def test_a_stdio_start_answers_initialize_with_the_kept_text(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The real server reads the copy before the index opens (a marked copy proves which text
    answered), then replaces it with what it computed. A start answers with its kept text only
    while its index is still opening (once open, its own text answers): the index is held
    locked, a lock every reader meets, until `initialize` is answered, or the race is the
    test's (lost under two CPU burners: the fresh text answered)."""
    import apsw

    time.sleep(stamps.RACY_SECONDS + 0.1)  # the server (another process) does not trust a stamp this young: under load the index was
    monkeypatch.setattr(stamps, "RACY_SECONDS", 0.0)  # written within it and the kept copy went unused (CI, 2026-12-02)
    paths = resolve_index(None)
    key = instructions.inputs(paths)
    path = instructions.cache_path("index")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"version": 1, "key": key, "text": "KEPT TEXT"}))
    holder = apsw.Connection(str(paths.index_path))
    holder.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
    holder.execute("BEGIN EXCLUSIVE").fetchall()
    holder.execute("COMMIT").fetchall()  # the exclusive lock stays with the connection (locking_mode), nothing written
    s = RawStdio(env, tmp_path / "stderr.log")
    try:
        assert s.initialize()["result"]["instructions"] == "KEPT TEXT"
        holder.close()
        hits = s.request(1, "tools/call", {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}})
        assert hits["result"]["structuredContent"]["results"]
        prompt = s.request(2, "prompts/get", {"name": "search-first"})["result"]["messages"][0]["content"]["text"]
        assert "4 markdown documents" in prompt  # once open, the server's own text
    finally:
        holder.close()  # a second close does nothing
        assert s.close() == 0


def test_a_second_start_keeps_the_first_starts_text(env: dict[str, str], tmp_path: Path) -> None:
    """End to end, with real times: files older than 2 s, a first start keeps its text, and
    the copy's key still matches afterwards (the server's own open changed no stamp)."""
    import time

    old = time.time() - 10
    for p in [Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"]:
        os.utime(p, (old, old))
    time.sleep(2.1)  # ctime cannot be set back: let the files age past the racy window
    s = RawStdio(env, tmp_path / "stderr.log")
    first = s.initialize()["result"]["instructions"]
    assert s.request(1, "ping")["result"] == {}
    s.close()
    path = instructions.cache_path("index")
    code = (
        "import json, sys\n"
        "from qmd.core.paths import resolve_index\n"
        "from qmd.serve import instructions\n"
        "p = resolve_index(None)\n"
        "print(json.dumps(instructions.read(p, instructions.inputs(p))))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert path.exists() and json.loads(proc.stdout) == first, proc.stderr


def test_an_index_outside_the_stamped_file_is_never_kept(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """PostgreSQL changes without touching a local file: no stamp can vouch for its text."""
    from qmd.store.store import Store

    paths = resolve_index(None)
    with Store(paths.index_path, paths.config_path) as store:
        assert instructions.applies(store, paths)

    class Elsewhere:
        location = "postgresql://db/notes (schema qmd_index)"

    assert not instructions.applies(Store(paths.index_path, paths.config_path, backend=Elsewhere()), paths)  # type: ignore[arg-type]
    key = instructions.inputs(paths)
    monkeypatch.setenv("QMD_DATABASE_URL", "postgresql://db/notes")
    assert instructions.inputs(paths) != key  # the variable that moves an index is in the key


def test_a_client_that_leaves_at_once_still_lets_the_start_keep_its_text(env: dict[str, str]) -> None:
    """stdin closing right after `initialize` must not end the process before the opener has
    kept the text it computed (CI once lost the copy this way on a busy machine)."""
    import io
    import threading
    import time

    from qmd.serve.logsafe import stderr_log
    from qmd.serve.stdio import StdioServer
    from qmd.store.store import Store

    paths = resolve_index(None)
    kept: list[str] = []

    def slow_keep(store: Store, text: str) -> None:
        time.sleep(0.5)
        kept.append(text)

    lines = b'{"jsonrpc":"2.0","id":0,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n'
    out = os.open(os.devnull, os.O_WRONLY)
    try:
        server = StdioServer(lambda: Store(paths.index_path, paths.config_path), paths.name, stderr_log, io.BytesIO(lines), out, None, slow_keep)
        assert server.serve() == 0
    finally:
        os.close(out)
    assert kept and "markdown documents" in kept[0]
    assert not [t for t in threading.enumerate() if t.name == "qmd-open-index"]


@pytest.mark.slow
def test_a_home_and_a_local_index_each_keep_their_own_copy(env: dict[str, str], tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A project-local index is named `index` too: its copy is named as its server's PID file
    (`local-<hash>`), so a start of either server never overwrites the other's, and a second
    start of each answers `initialize` with its own kept text."""
    import time

    from qmd.serve.pidfile import server_name

    project = tmp_path / "proj"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "guide.md").write_text("# Guide\n\nHow the project is laid out.\n")
    for argv in (("init",), ("collection", "add", "docs", "--name", "docs"), ("update",)):
        done = run_qmd(*argv, cwd=project, env=env)
        assert done.returncode == 0, done.stderr
    config = project / ".qmd" / "index.yml"
    home_copy, local_copy = instructions.cache_path("index"), instructions.cache_path(str(config))

    old = time.time() - 10
    for p in (Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.yml", config):
        os.utime(p, (old, old))
    time.sleep(2.1)  # ctime cannot be set back: let the files age past the racy window

    def start(cwd: Path, name: str) -> str:
        monkeypatch.chdir(cwd)  # the server finds the project's index from its working directory, as an agent starts it
        s = RawStdio(env, tmp_path / f"{name}.log")
        try:
            text = s.initialize()["result"]["instructions"]
            assert s.request(1, "ping")["result"] == {}
        finally:
            assert s.close() == 0
        return str(text)

    home_text, local_text = start(tmp_path, "home"), start(project, "local")
    assert home_text != local_text and "4 markdown documents" in home_text  # the local index holds 1
    assert json.loads(home_copy.read_text())["text"] == home_text  # the local start left it alone
    assert json.loads(local_copy.read_text())["text"] == local_text
    assert local_copy.name == f"instructions-{server_name(str(config))}.json" and server_name(str(config)).startswith("local-")
    assert sorted(p.name for p in home_copy.parent.iterdir()) == sorted([home_copy.name, local_copy.name])

    # mark each copy (same key): what a second start of each reads as its kept text (as
    # stdio.run does; a start answers with it only while its index is still opening, a race
    # a loaded machine loses: then the fresh text answers, so the start is not asked here)
    from qmd.core.paths import resolve_index

    for copy, mark in ((home_copy, "HOME KEPT"), (local_copy, "LOCAL KEPT")):
        data = json.loads(copy.read_text())
        copy.write_text(json.dumps({**data, "text": mark}))
    for cwd, mark in ((tmp_path, "HOME KEPT"), (project, "LOCAL KEPT")):
        monkeypatch.chdir(cwd)
        paths = resolve_index(None)
        assert instructions.read(paths, instructions.inputs(paths)) == mark
    start(tmp_path, "home2"), start(project, "local2")  # each start checks its copy and mends it, its own only
    assert json.loads(home_copy.read_text())["text"] == home_text and json.loads(local_copy.read_text())["text"] == local_text
    assert start(tmp_path, "home3") == home_text


def _first_start(env: dict[str, str]) -> tuple[str, list[str]]:
    """A stdio start's `server/discover` instructions and which parsers it loaded."""
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    code = (
        "import json, sys\n"
        "from qmd.serve.stdio import run\n"
        "code = run(None)\n"
        "loaded = sorted(m for m in ('yaml', 'tree_sitter', 'llama_cpp', 'numpy') if m in sys.modules)\n"
        "sys.stderr.write('LOADED ' + json.dumps(loaded) + '\\n')\n"
        "sys.exit(code)\n"
    )
    stdin = json.dumps({"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}) + "\n"
    proc = subprocess.run([sys.executable, "-c", code], input=stdin, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    answer = json.loads(proc.stdout.splitlines()[0])
    return answer["result"]["instructions"], json.loads(proc.stderr.rsplit("LOADED ", 1)[1])


def test_a_first_start_after_collection_add_reads_no_yaml_and_stays_current(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: `collection add` keeps the parse of the config it saved, so the first server
    start after it (no kept instructions yet) reads no YAML, as a later start does; the
    instructions still follow every collection added or removed."""
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    monkeypatch.setenv("XDG_CACHE_HOME", env["XDG_CACHE_HOME"])
    assert not instructions.cache_path("index").exists()  # nothing kept: a first start
    text, loaded = _first_start(env)
    assert "- notes (" in text and loaded == []
    more = tmp_path / "more"
    more.mkdir()
    (more / "a.md").write_text("# A\n\nanother folder\n")
    assert run_qmd("collection", "add", str(more), "--name", "more", env=env).returncode == 0
    text, loaded = _first_start(env)
    assert "- more (1 docs)" in text and "- notes (" in text and loaded == []
    assert run_qmd("collection", "remove", "more", env=env).returncode == 0
    text, loaded = _first_start(env)
    assert "- more" not in text and "- notes (" in text and loaded == []


def test_a_failed_check_of_the_kept_text_loses_no_answer(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The kept text's check runs on the tool-call worker; an error in it that is no QmdError
    (the index locked or gone meanwhile: apsw's own) must not end that thread, which would
    leave every later call unanswered (a hang, then lost answers at close)."""
    import threading

    import apsw

    from qmd.serve.logsafe import stderr_log
    from qmd.serve.service import ToolService
    from qmd.serve.stdio import StdioServer
    from qmd.store.store import Store

    def locked(self: ToolService, scope: object = None) -> str:
        raise apsw.BusyError("database is locked")

    monkeypatch.setattr(ToolService, "instructions", locked)
    paths = resolve_index(None)
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    server = StdioServer(lambda: Store(paths.index_path, paths.config_path), paths.name, stderr_log, os.fdopen(read_in, "rb"), write_out, "kept text", lambda s, t: None)
    done: list[int] = []
    thread = threading.Thread(target=lambda: done.append(server.serve()), daemon=True)
    thread.start()
    assert server._service_ready.wait(30)
    for _ in range(100):  # the check, queued once the service is ready, has run (and failed)
        if not server._recheck:
            break
        threading.Event().wait(0.05)
    call = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}}
    os.write(write_in, (json.dumps(call) + "\n").encode())
    os.close(write_in)
    thread.join(40)
    os.close(write_out)
    with os.fdopen(read_out, "rb") as out:
        answers = [json.loads(line) for line in out.read().splitlines() if line.strip()]
    assert [a.get("id") for a in answers] == [1] and "result" in answers[0], answers
    assert done == [0]


def test_an_opener_error_that_is_no_qmd_error_is_answered_not_a_hang(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """The index opens on a thread; an apsw error there (locked, replaced meanwhile) must
    still release `initialize` and the calls waiting on it, answered as a failure to serve."""
    import threading

    import apsw

    import qmd.serve.answers as answers
    from qmd.serve.logsafe import stderr_log
    from qmd.serve.stdio import StdioServer
    from qmd.store.store import Store

    def locked(store: Store, index: str) -> str:
        raise apsw.BusyError("database is locked")

    monkeypatch.setattr(answers, "store_instructions", locked)
    paths = resolve_index(None)
    init = {"jsonrpc": "2.0", "id": 0, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    server = StdioServer(lambda: Store(paths.index_path, paths.config_path), paths.name, stderr_log, os.fdopen(read_in, "rb"), write_out, None, lambda s, t: None)
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    os.write(write_in, (json.dumps(init) + "\n").encode())
    os.close(write_in)
    thread.join(20)
    assert not thread.is_alive()
    os.close(write_out)
    with os.fdopen(read_out, "rb") as out:
        answers_sent = [json.loads(line) for line in out.read().splitlines() if line.strip()]
    assert [a.get("id") for a in answers_sent] == [0] and "database is locked" in json.dumps(answers_sent[0]), answers_sent


def test_initialize_on_an_index_another_process_holds_locked_is_answered_at_once(env: dict[str, str], tmp_path: Path) -> None:
    """`initialize` read the index for its counts and waited the whole busy timeout (5 s) when
    another process held it locked, then said the index was empty. It now answers at once
    with the text that needs no read, saying the index is busy; the calls wait as usual.
    (A plain BEGIN IMMEDIATE does not stop a WAL reader: the lock here is one every reader meets.)"""
    import apsw

    from qmd.serve.answers import BUSY_LINE

    holder = apsw.Connection(str(resolve_index(None).index_path))
    holder.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
    holder.execute("BEGIN EXCLUSIVE; CREATE TABLE held (x)").fetchall()
    s = RawStdio(env, tmp_path / "stderr.log")
    try:
        assert s.request(9, "ping")["result"] == {}  # the server is up (its start is not what is measured)
        started = time.monotonic()
        text = s.initialize()["result"]["instructions"]
        took = time.monotonic() - started
        assert took < 3.0, f"initialize took {took:.1f} s on a locked index"  # generous: the point is not the 5 s busy timeout
        assert BUSY_LINE in text and "index is empty" not in text and "Tools: query" in text, text
        s.send({"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}]}}})
        time.sleep(0.3)  # the call waits on the lock (its busy timeout) ...
        holder.execute("ROLLBACK").fetchall()
        holder.close()  # ... which goes away: the call is answered, not refused
        hits = s.until(lambda m: isinstance(m, dict) and m.get("id") == 1)[0]
        assert hits["result"]["structuredContent"]["results"], hits
    finally:
        holder.close()  # a second close does nothing
        assert s.close() == 0
    assert not instructions.cache_path("index").exists()  # the busy text is never kept for the next start


@pytest.mark.parametrize("kept_text", [None, "KEPT TEXT"])
def test_a_locked_index_is_answered_at_once_after_the_service_opened_and_its_busy_text_never_kept(env: dict[str, str], kept_text: str | None) -> None:
    """The busy text was computed without waiting only by the opener: an `initialize` arriving
    once the service was up (the opener fails fast on a locked index, so within moments) read
    the instructions through the service and waited the whole 5 s busy timeout; and a start with
    a kept text checked it on the worker, waited 5 s, found the busy text differing and kept
    it, so the next start (the index free again) answered that the index was busy. A kept
    text (its files unchanged since) answers rather than the busy one: it has the counts."""
    import threading

    import apsw

    from qmd.serve.answers import BUSY_LINE
    from qmd.serve.logsafe import stderr_log
    from qmd.serve.stdio import StdioServer
    from qmd.store.store import Store

    paths = resolve_index(None)
    holder = apsw.Connection(str(paths.index_path))
    holder.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
    holder.execute("BEGIN EXCLUSIVE; CREATE TABLE held (x)").fetchall()
    kept: list[str] = []
    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    server = StdioServer(lambda: Store(paths.index_path, paths.config_path), paths.name, stderr_log, os.fdopen(read_in, "rb"), write_out, kept_text, lambda s, t: kept.append(t))
    thread = threading.Thread(target=server.serve, daemon=True)
    try:
        thread.start()
        assert server._service_ready.wait(30) and server._service is not None
        started = time.monotonic()
        text = server._wait_instructions()  # what `initialize` answers now
        took = time.monotonic() - started
        assert took < 3.0 and text == (kept_text or text) and (kept_text or BUSY_LINE) in text, (took, text)
        for _ in range(200):  # the kept text's check, queued once the service is ready, has run
            if not server._recheck:
                break
            time.sleep(0.05)
        time.sleep(0.2)
        assert not any(BUSY_LINE in t for t in kept), kept
    finally:
        holder.close()
        os.close(write_in)
        thread.join(40)
        os.close(write_out)
        os.close(read_out)
    assert not thread.is_alive()


def test_a_locked_index_gives_the_busy_text_at_once_to_every_initialize_scoped_too(env: dict[str, str]) -> None:
    """The tools' own instructions (HTTP's `initialize`, and stdio's once its service is up):
    unscoped they waited the 5 s busy timeout before the busy text; a scoped token's waited
    twice as long and then said the index was empty (`qmd collection add`), as the stdio text
    did before it knew a locked index."""
    import apsw

    from qmd.serve.answers import BUSY_LINE
    from qmd.serve.service import ToolService
    from qmd.store.store import Store

    paths = resolve_index(None)
    holder = apsw.Connection(str(paths.index_path))
    holder.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
    holder.execute("BEGIN EXCLUSIVE; CREATE TABLE held (x)").fetchall()
    service = ToolService(Store(paths.index_path, paths.config_path), "index", idle_s=0)
    try:
        for scope in (None, frozenset({"notes"})):
            started = time.monotonic()
            text = service.instructions(scope)
            took = time.monotonic() - started
            assert took < 3.0 and BUSY_LINE in text and "index is empty" not in text, (scope, took, text)
    finally:
        holder.close()
    try:
        assert "markdown documents" in service.instructions(frozenset({"notes"}))  # the lock gone: the counts again
    finally:
        service.close()


def _held_write(path: Path) -> Any:
    """Another process's write lock, as `qmd update` or `embed` holds it between two statements
    of a transaction (a real second connection)."""
    import apsw

    holder = apsw.Connection(str(path))
    holder.set_busy_timeout(10_000)  # a write of the server's own (the kept text's check) may be finishing
    holder.execute("BEGIN IMMEDIATE; CREATE TABLE held (x)").fetchall()
    return holder


def _status_meets_the_lock(monkeypatch: pytest.MonkeyPatch) -> None:
    """The status behind the instructions runs a statement the held lock stops. A WAL reader's
    reads never wait on a writer, so a write stands for it (SQLite's busy handler and error are
    the same for any statement that meets a lock)."""
    from qmd.store.maintenance import Maintenance

    real = Maintenance.status

    def status(self: Maintenance, grammars: bool = True) -> Any:
        self.state.backend.set_meta("windows-probe", "1")
        return real(self, grammars)

    monkeypatch.setattr(Maintenance, "status", status)


def _server(open_store: Any, kept_text: str | None, kept: list[str]) -> tuple[Any, Any, int, int, int]:
    import threading

    from qmd.serve.logsafe import stderr_log
    from qmd.serve.stdio import StdioServer

    read_in, write_in = os.pipe()
    read_out, write_out = os.pipe()
    server = StdioServer(open_store, resolve_index(None).name, stderr_log, os.fdopen(read_in, "rb"), write_out, kept_text, lambda s, t: kept.append(t))
    thread = threading.Thread(target=server.serve, daemon=True)
    thread.start()
    return server, thread, write_in, write_out, read_out


def _end(thread: Any, write_in: int, write_out: int, read_out: int) -> None:
    """Close the server's stdin (it stops), wait for it, then close the other pipe ends."""
    os.close(write_in)
    thread.join(40)
    os.close(write_out)
    os.close(read_out)


def test_a_lock_taken_after_the_store_opened_gives_the_busy_text_at_once(env: dict[str, str], monkeypatch: pytest.MonkeyPatch) -> None:
    """Another process's write lock taken between the Store opening (its connection open) and
    the status behind `initialize`'s instructions: the status waited the connection's busy
    timeout (5 s) and the server answered SQLite's own "database is locked" as a failure to
    serve. It answers at once with the busy text, as for a lock held from the start, and never
    keeps that text."""
    from qmd.serve.answers import BUSY_LINE
    from qmd.store.store import Store

    paths = resolve_index(None)
    holders: list[Any] = []

    def open_store() -> Store:
        store = Store(paths.index_path, paths.config_path)
        store.document_count()  # its connection open
        holders.append(_held_write(paths.index_path))  # ... and now the lock
        return store

    _status_meets_the_lock(monkeypatch)
    kept: list[str] = []
    server, thread, write_in, write_out, read_out = _server(open_store, None, kept)
    try:
        started = time.monotonic()
        text = server._wait_instructions()  # what `initialize` answers
        took = time.monotonic() - started
        assert took < 3.0 and BUSY_LINE in text and "database is locked" not in text and "Tools: query" in text, (took, text)
        assert server._failure is None
    finally:
        for holder in holders:
            holder.close()
        _end(thread, write_in, write_out, read_out)
    assert not thread.is_alive() and not any(BUSY_LINE in t for t in kept), kept


@pytest.mark.parametrize("kept_text", [None, "KEPT TEXT"])
def test_a_lock_arriving_once_the_index_is_open_gives_the_busy_text_at_once(env: dict[str, str], monkeypatch: pytest.MonkeyPatch, kept_text: str | None) -> None:
    """The index open and served, then another process takes its write lock: `initialize`'s
    instructions waited the connection's busy timeout (5 s), as only a connection opened
    inside `without_waiting` did not. They answer at once: the busy text, or the kept text
    (it has the counts), as when the lock was held from the start."""
    from qmd.serve.answers import BUSY_LINE
    from qmd.store.store import Store

    paths = resolve_index(None)
    kept: list[str] = []
    server, thread, write_in, write_out, read_out = _server(lambda: Store(paths.index_path, paths.config_path), kept_text, kept)
    holder = None
    try:
        assert server._service_ready.wait(30) and server._service is not None
        server._service.warm()  # its connection open (what the worker does once a request is answered)
        for _ in range(200):  # the kept text's check, queued once the service is ready, has run
            if not server._recheck:
                break
            time.sleep(0.05)
        with server._service._lock:  # ... and ended (it holds the service's lock)
            pass
        assert server._service.store.backend._conn is not None  # type: ignore[attr-defined]
        _status_meets_the_lock(monkeypatch)
        holder = _held_write(paths.index_path)
        started = time.monotonic()
        text = server._wait_instructions()
        took = time.monotonic() - started
        assert took < 3.0 and text == (kept_text or text) and (kept_text or BUSY_LINE) in text, (took, text)
    finally:
        if holder is not None:
            holder.close()
        _end(thread, write_in, write_out, read_out)
    assert not thread.is_alive() and not any(BUSY_LINE in t for t in kept), kept
