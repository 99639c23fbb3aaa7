"""The CLI uses the warm server (qmd/cli/remote.py, POST /cli): a real `qmd mcp --http`
process on a free loopback port answers `qmd search|vsearch|query` with the same bytes as
an in-process run; a stale build, a dead pid, another index, a missing token, `--local`,
`QMD_SERVER=off|require`, a server that never answers: each decided as documented."""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import subprocess
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp import http_server, make_env, served_index, setup_index
from tests.support.run import run_qmd

pytest.importorskip("uvicorn")


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, minilm_gguf: Path) -> Iterator[dict[str, object]]:
    """An embedded index (MiniLM) and one running server for it, shared by the module."""
    root = tmp_path_factory.mktemp("warm")
    env = make_env(root, {"QMD_EMBED_MODEL": str(minilm_gguf)})
    setup_index(root, env)
    embedded = run_qmd("embed", timeout=300, env=env)
    assert embedded.returncode == 0, embedded.stderr
    with http_server(env, root / "server.log") as server:
        yield {"root": root, "env": env, "port": server.port, "proc": server.proc, "log": server.log}


def _cli_requests(world: dict[str, object]) -> int:
    log = world["log"]
    assert isinstance(log, Path)
    return log.read_text().count("POST /cli 200")


def _run(world: dict[str, object], *args: str, extra: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    env = dict(world["env"])  # type: ignore[call-overload]
    env.update(extra or {})
    return run_qmd(*args, cwd=world["root"], env=env)  # type: ignore[arg-type]


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
@pytest.mark.slow
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
    # QMD_SERVER=require: the server's answer is the search's own error (message and hint), not "start the server"
    for argv in (["vsearch", "x", "-c", "nope"], ["search", "x", "--filter", "{bad"]):
        required = _run(world, *argv, extra={"QMD_SERVER": "require"})
        local = _run(world, *argv, "--local")
        assert required.returncode == local.returncode == 1
        assert required.stderr == local.stderr and "QMD_SERVER" not in required.stderr, required.stderr


def test_off_and_require(world: dict[str, object], tmp_path: Path) -> None:
    before = _cli_requests(world)
    assert _run(world, "search", "rollback", extra={"QMD_SERVER": "off"}).returncode == 0
    assert _cli_requests(world) == before
    other = make_env(tmp_path)  # another state dir: no server
    (tmp_path / "notes").mkdir()
    proc = run_qmd("search", "rollback", env={**other, "QMD_SERVER": "require"})
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
        proc = run_qmd("vsearch", "undo a deploy", "--json", env=env)
        assert proc.returncode == 0 and json.loads(proc.stdout), proc.stderr
        assert _cli_requests(world) == before
        required = run_qmd("vsearch", "undo a deploy", env={**env, "QMD_SERVER": "require"})
        assert required.returncode == 1 and why in required.stderr


def test_a_server_of_another_index_is_not_used(world: dict[str, object], tmp_path: Path) -> None:
    """The same index name over other data (another INDEX_PATH) must not be answered by this server."""
    env = _with_pid_file(world, tmp_path, {})
    env["INDEX_PATH"] = str(tmp_path / "other.sqlite")
    before = _cli_requests(world)
    proc = run_qmd("search", "rollback", "--json", env=env)
    assert proc.returncode == 1 and "has not been built" in proc.stderr, proc.stderr  # the other (unbuilt) index, in-process
    assert _cli_requests(world) == before
    required = run_qmd("search", "rollback", env={**env, "QMD_SERVER": "require"})
    assert required.returncode == 1 and "409: the client reads another index" in required.stderr
    # another model setting is another identity too
    (tmp_path / "b").mkdir()
    env2 = _with_pid_file(world, tmp_path / "b", {})
    env2["QMD_EMBED_MODEL"] = str(tmp_path / "another.gguf")
    required = run_qmd("search", "rollback", env={**env2, "QMD_SERVER": "require"})
    assert required.returncode == 1 and "another index" in required.stderr


def test_a_server_that_never_answers_times_out_to_in_process(world: dict[str, object], tmp_path: Path) -> None:
    silent = socket.socket()
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)  # connections complete in the kernel; nothing ever answers
    accepted: list[socket.socket] = []
    threading.Thread(target=lambda: accepted.append(silent.accept()[0]), daemon=True).start()
    try:
        env = _with_pid_file(world, tmp_path, {"port": silent.getsockname()[1], "pid": os.getpid()})
        proc = run_qmd("search", "rollback", "--json", env={**env, "QMD_SERVER_TIMEOUT_S": "1"})
        assert proc.returncode == 0 and "qmd://notes/runbooks/deploy.md" in [h["file"] for h in json.loads(proc.stdout)]
        required = run_qmd("search", "rollback", env={**env, "QMD_SERVER_TIMEOUT_S": "1", "QMD_SERVER": "require"})
        assert required.returncode == 1 and "no answer in time" in required.stderr
    finally:
        for s in accepted:
            s.close()
        silent.close()


@pytest.mark.slow
def test_a_token_protected_server_serves_its_own_user_s_cli_without_a_token(tmp_path: Path) -> None:
    """The CLI proves it read the server's 0600 PID file (qmd/serve/proof.py) instead of
    sending $QMD_TOKEN: a token never leaves the CLI, scoped or not, and the server needs none."""
    with served_index(tmp_path, token="me") as server:
        env, port, log, token = server.env, server.port, server.log, server.token
        assert token is not None
        assert oct((tmp_path / "state" / "mcp-index.json").stat().st_mode & 0o777) == "0o600"
        local = run_qmd("search", "rollback", "--json", "--local", env=env)
        served = run_qmd("search", "rollback", "--json", env={**env, "QMD_SERVER": "require"})
        assert served.returncode == 0 and served.stdout == local.stdout, served.stderr
        with_token = run_qmd("search", "rollback", "--json", env={**env, "QMD_TOKEN": token, "QMD_SERVER": "require"})
        assert with_token.returncode == 0 and with_token.stdout == local.stdout
        text = log.read_text()
        assert text.count("POST /hello 200") == 2 and text.count("POST /cli 200") == 2 and "proof of the PID file's key" in text
        # a status column, not any "401" (the port in the log's first line can hold one: 127.0.0.1:40111)
        assert not re.search(r" 40[13] ", text) and "token me" not in text
        # the proof is good once, on the connection that asked for it
        import http.client

        conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
        conn.request("POST", "/cli", body=b"{}", headers={"Content-Type": "application/json", "X-Qmd-Proof": "0" * 32 + "." + "0" * 64})
        assert conn.getresponse().status == 401
        conn.close()


class Impostor:
    """Whatever listens on a stale PID file's port: records every byte it is sent and
    answers every request with forged hits (and a forged proof)."""

    FORGED = {"hits": [], "roots": {}, "notices": [], "stages": {}, "searches": [], "timings_ms": {}, "model": "", "pending": 0, "proof": "0" * 64, "nonce": "1" * 32}

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.port = self.sock.getsockname()[1]
        self.received = b""
        self.FORGED["hits"] = [{"docid": "abcdef", "file": "qmd://forged/evil.md", "title": "FORGED", "score": 1.0}]
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        body = json.dumps(self.FORGED).encode()
        answer = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            conn.settimeout(5)
            try:
                while True:
                    chunk = conn.recv(65536)
                    if not chunk:
                        break
                    self.received += chunk
                    if b"\r\n\r\n" in chunk:
                        conn.sendall(answer)
            except OSError:
                pass
            finally:
                conn.close()

    def close(self) -> None:
        self.sock.close()


def test_a_stale_pid_file_s_port_held_by_another_process_gets_neither_the_query_nor_the_token(world: dict[str, object], tmp_path: Path) -> None:
    """After a crash the pid is reused (here: this test's own, alive) and another local
    process holds the recorded port: the CLI must send it no query text and no token, and
    print none of its answer."""
    impostor = Impostor()
    try:
        env = _with_pid_file(world, tmp_path, {"port": impostor.port, "pid": os.getpid()})
        secret = "qmd_" + "s" * 43
        proc = run_qmd("search", "rollback", "--json", env={**env, "QMD_TOKEN": secret})
        assert proc.returncode == 0, proc.stderr
        assert "FORGED" not in proc.stdout and "qmd://notes/runbooks/deploy.md" in [h["file"] for h in json.loads(proc.stdout)]
        required = run_qmd("vsearch", "rollback", env={**env, "QMD_TOKEN": secret, "QMD_SERVER": "require"})
        assert required.returncode == 1 and "no proof from whatever listens" in required.stderr, required.stderr
        assert b"rollback" not in impostor.received and secret.encode() not in impostor.received
        assert b"Authorization" not in impostor.received and b"POST /cli" not in impostor.received
        assert b"POST /hello" in impostor.received
    finally:
        impostor.close()
