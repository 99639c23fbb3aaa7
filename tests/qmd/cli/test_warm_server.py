"""The CLI uses the warm server (qmd/cli/remote.py, POST /cli): a real `qmd mcp --http`
process on a free loopback port answers `qmd search|vsearch|query` with the same bytes as
an in-process run; a stale build, a dead pid, another index, a missing token, `--local`,
`QMD_SERVER=off|require`, a server that never answers: each decided as documented."""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp import free_port, make_env, qmd, setup_index, spawn_http, wait_health

pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, minilm_gguf: Path) -> Iterator[dict[str, object]]:
    """An embedded index (MiniLM) and one running server for it, shared by the module."""
    root = tmp_path_factory.mktemp("warm")
    env = make_env(root, {"QMD_EMBED_MODEL": str(minilm_gguf)})
    setup_index(root, env)
    embedded = qmd(env, "embed", timeout=300)
    assert embedded.returncode == 0, embedded.stderr
    port = free_port()
    proc = spawn_http(env, port, root / "server.log")
    try:
        wait_health(port, proc)
        yield {"root": root, "env": env, "port": port, "proc": proc, "log": root / "server.log"}
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


def _cli_requests(world: dict[str, object]) -> int:
    log = world["log"]
    assert isinstance(log, Path)
    return log.read_text().count("POST /cli 200")


def _run(world: dict[str, object], *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(world["env"])  # type: ignore[call-overload]
    env.update(extra or {})
    return qmd(env, *args, cwd=world["root"])  # type: ignore[arg-type]


SAME = [
    ["search", "rollback"],
    ["search", "rollback", "--json"],
    ["search", "load balancer", "--files", "--full-path"],
    ["search", "restore", "--md", "--line-numbers"],
    ["search", "rollback", "--match", "all", "--xml"],
    ["vsearch", "how do I undo a bad deploy"],
    ["vsearch", "how do I undo a bad deploy", "--json"],
    ["vsearch", "database backups", "--csv", "-n", "2"],
    ["vsearch", "database backups", "--full", "--line-numbers", "--md"],
    ["vsearch", "database backups", "--full-path", "--files"],
    ["query", "how do I undo a bad deploy"],
    ["query", "how do I undo a bad deploy", "--json"],
    ["query", "lex: rollback\nvec: undo a release", "--xml"],
    ["query", "restore the database", "--full", "--line-numbers", "--csv"],
    ["query", "restore", "--full-path", "--files", "-c", "notes"],
    ["--index", "index", "query", "restore", "--json", "--all"],
]


@pytest.mark.parametrize("argv", SAME, ids=repr)
def test_the_server_prints_what_an_in_process_run_prints(world: dict[str, object], argv: list[str]) -> None:
    before = _cli_requests(world)
    served = _run(world, *argv, extra={"QMD_SERVER": "require"})
    assert served.returncode == 0, served.stderr
    assert _cli_requests(world) == before + 1  # the server answered it
    local = _run(world, *argv, "--local")
    assert local.returncode == 0, local.stderr
    assert _cli_requests(world) == before + 1  # --local: in-process
    assert served.stdout == local.stdout and served.stdout
    assert served.stderr == local.stderr


def test_errors_are_the_in_process_ones(world: dict[str, object]) -> None:
    """A search the server refuses (an unknown collection) runs in-process and fails there, the same way."""
    served = _run(world, "vsearch", "x", "-c", "nope")
    local = _run(world, "vsearch", "x", "-c", "nope", "--local")
    assert served.returncode == local.returncode == 1
    assert served.stderr == local.stderr and "nope" in served.stderr


def test_off_and_require(world: dict[str, object], tmp_path: Path) -> None:
    before = _cli_requests(world)
    assert _run(world, "search", "rollback", extra={"QMD_SERVER": "off"}).returncode == 0
    assert _cli_requests(world) == before
    other = make_env(tmp_path)  # another state dir: no server
    (tmp_path / "notes").mkdir()
    proc = qmd({**other, "QMD_SERVER": "require"}, "search", "rollback")
    assert proc.returncode == 1 and "QMD_SERVER=require: no HTTP server runs for index 'index'" in proc.stderr


def _with_pid_file(world: dict[str, object], tmp_path: Path, change: dict[str, object]) -> dict[str, str]:
    """A copy of the world's environment whose state dir holds the server's PID file, changed."""
    root = world["root"]
    assert isinstance(root, Path)
    info = json.loads((root / "state" / "mcp-index.json").read_text())
    state = tmp_path / "state"
    state.mkdir()
    (state / "mcp-index.json").write_text(json.dumps({**info, **change}))
    return {**world["env"], "QMD_STATE_DIR": str(state)}  # type: ignore[dict-item]


def test_a_stale_build_or_a_dead_pid_runs_in_process(world: dict[str, object], tmp_path: Path) -> None:
    dead = subprocess.Popen(["true"])
    dead.wait()
    cases: list[tuple[dict[str, object], str]] = [({"build_id": "0.0.0+000000000000"}, "runs build 0.0.0+000000000000"), ({"pid": dead.pid}, "is gone")]
    for change, why in cases:
        shutil.rmtree(tmp_path / "state", ignore_errors=True)
        env = _with_pid_file(world, tmp_path, change)
        before = _cli_requests(world)
        proc = qmd(env, "vsearch", "undo a deploy", "--json")
        assert proc.returncode == 0 and json.loads(proc.stdout), proc.stderr
        assert _cli_requests(world) == before
        required = qmd({**env, "QMD_SERVER": "require"}, "vsearch", "undo a deploy")
        assert required.returncode == 1 and why in required.stderr


def test_a_server_of_another_index_is_not_used(world: dict[str, object], tmp_path: Path) -> None:
    """The same index name over other data (another INDEX_PATH) must not be answered by this server."""
    env = _with_pid_file(world, tmp_path, {})
    env["INDEX_PATH"] = str(tmp_path / "other.sqlite")
    before = _cli_requests(world)
    proc = qmd(env, "search", "rollback", "--json")
    assert proc.returncode == 1 and "has not been built" in proc.stderr, proc.stderr  # the other (unbuilt) index, in-process
    assert _cli_requests(world) == before
    required = qmd({**env, "QMD_SERVER": "require"}, "search", "rollback")
    assert required.returncode == 1 and "409: the client reads another index" in required.stderr
    # another model setting is another identity too
    (tmp_path / "b").mkdir()
    env2 = _with_pid_file(world, tmp_path / "b", {})
    env2["QMD_EMBED_MODEL"] = str(tmp_path / "another.gguf")
    required = qmd({**env2, "QMD_SERVER": "require"}, "search", "rollback")
    assert required.returncode == 1 and "another index" in required.stderr


def test_a_server_that_never_answers_times_out_to_in_process(world: dict[str, object], tmp_path: Path) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the kernel; nothing ever answers
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
    try:
        env = _with_pid_file(world, tmp_path, {"port": silent.getsockname()[1], "pid": os.getpid()})
        proc = qmd({**env, "QMD_SERVER_TIMEOUT_S": "1"}, "search", "rollback", "--json")
        assert proc.returncode == 0 and "qmd://notes/runbooks/deploy.md" in [h["file"] for h in json.loads(proc.stdout)]
        required = qmd({**env, "QMD_SERVER_TIMEOUT_S": "1", "QMD_SERVER": "require"}, "search", "rollback")
        assert required.returncode == 1 and "no answer in time" in required.stderr
    finally:
        for s in accepted:
            s.close()
        silent.close()


def test_a_token_protected_server(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    made = qmd(env, "token", "add", "me")
    scoped = qmd(env, "token", "add", "ci", "--collection", "notes")
    assert made.returncode == 0 and scoped.returncode == 0
    token = next(w for w in made.stdout.split() if w.startswith("qmd_"))
    scoped_token = next(w for w in scoped.stdout.split() if w.startswith("qmd_"))
    port = free_port()
    log = tmp_path / "server.log"
    proc = spawn_http(env, port, log)
    try:
        wait_health(port, proc)
        local = qmd(env, "search", "rollback", "--json", "--local")
        without = qmd(env, "search", "rollback", "--json")
        assert without.returncode == 0 and without.stdout == local.stdout
        assert "POST /cli 401" in log.read_text() and "POST /cli 200" not in log.read_text()
        refused = qmd({**env, "QMD_SERVER": "require"}, "search", "rollback")
        assert refused.returncode == 1 and "HTTP 401" in refused.stderr
        wrong = qmd({**env, "QMD_TOKEN": "qmd_" + "x" * 43}, "search", "rollback", "--json")
        assert wrong.returncode == 0 and wrong.stdout == local.stdout
        served = qmd({**env, "QMD_TOKEN": token, "QMD_SERVER": "require"}, "search", "rollback", "--json")
        assert served.returncode == 0 and served.stdout == local.stdout
        assert "POST /cli 200" in log.read_text() and "token me" in log.read_text()
        # a token scoped to collections is refused: the CLI reads the whole index
        narrow = qmd({**env, "QMD_TOKEN": scoped_token, "QMD_SERVER": "require"}, "search", "rollback")
        assert narrow.returncode == 1 and "HTTP 403" in narrow.stderr
        assert qmd({**env, "QMD_TOKEN": scoped_token}, "search", "rollback", "--json").stdout == local.stdout
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(15)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
