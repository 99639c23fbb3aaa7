"""`qmd mcp --http --daemon` and `qmd mcp stop`: PID file, one server per index, verified stop,
stale PID files."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from qmd.serve import daemon as mcp_daemon
from qmd.serve import process_alive, prune_lock, wait_gone
from qmd.serve.process import looks_like_server
from tests.support.mcp import free_port, make_env, request, setup_index
from tests.support.run import run_qmd

pytest.importorskip("mcp")


def _pid_file(root: Path, index: str = "index") -> Path:
    return root / "state" / f"mcp-{index}.json"


def _gone(pid: int, timeout: float = 15) -> bool:
    return wait_gone(pid, timeout)


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    return env


def test_daemon_start_refuse_second_stop(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    started = run_qmd("mcp", "--http", "--daemon", "--port", str(port), timeout=90, env=env)
    assert started.returncode == 0, started.stderr
    assert f"http://127.0.0.1:{port}/mcp" in started.stdout and "qmd mcp stop" in started.stdout
    info = json.loads(_pid_file(tmp_path).read_text())
    assert set(info) == {"pid", "started_at", "host", "port", "index", "argv", "build_id", "key"}
    pid = info["pid"]
    try:
        assert process_alive(pid) and info["port"] == port
        status, health = request(port, "GET", "/health")
        assert status == 200 and health["build_id"] == info["build_id"] and health["index"] == "index"
        log = tmp_path / "state" / "logs" / "mcp-index.log"
        assert "GET /health 200" in log.read_text()  # the daemon's stderr goes to its log

        # a second daemon, or a foreground server, for the same index is refused
        second = run_qmd("mcp", "--http", "--daemon", "--port", str(free_port()), timeout=60, env=env)
        assert second.returncode == 1 and "already running" in second.stderr and str(port) in second.stderr
        fore = run_qmd("mcp", "--http", "--port", str(free_port()), timeout=60, env=env)
        assert fore.returncode == 1 and "already running" in fore.stderr
        assert json.loads(_pid_file(tmp_path).read_text())["pid"] == pid

        stopped = run_qmd("mcp", "stop", timeout=60, env=env)
        assert stopped.returncode == 0 and f"stopped the MCP server for index 'index' (pid {pid}" in stopped.stdout
        assert _gone(pid) and not _pid_file(tmp_path).exists()
        again = run_qmd("mcp", "stop", env=env)
        assert again.returncode == 0 and "no MCP server is running" in again.stdout
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_other_index_gets_its_own_daemon(env: dict[str, str], tmp_path: Path) -> None:
    notes = tmp_path / "work"
    notes.mkdir()
    (notes / "w.md").write_text("# W\n\nwombat\n")
    assert run_qmd("--index", "work", "collection", "add", str(notes), "--name", "work", env=env).returncode == 0
    p1, p2 = free_port(), free_port()
    a = run_qmd("mcp", "--http", "--daemon", "--port", str(p1), timeout=90, env=env)
    b = run_qmd("--index", "work", "mcp", "--http", "--daemon", "--port", str(p2), timeout=90, env=env)
    pids = [json.loads(_pid_file(tmp_path, i).read_text())["pid"] for i in ("index", "work") if _pid_file(tmp_path, i).exists()]
    try:
        assert a.returncode == 0 and b.returncode == 0, (a.stderr, b.stderr)
        assert "--index work" in b.stdout
        assert request(p2, "GET", "/health")[1]["index"] == "work"
        assert request(p2, "POST", "/query", {"searches": [{"type": "lex", "query": "wombat"}]})[1]["results"][0]["file"] == "qmd://work/w.md"
        # stop --index stops only that one
        assert run_qmd("mcp", "stop", "--index", "work", env=env).returncode == 0
        assert _gone(pids[1]) and process_alive(pids[0])
        assert run_qmd("mcp", "stop", env=env).returncode == 0
        assert _gone(pids[0])
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


@pytest.mark.slow
def test_stale_pid_files_are_cleaned_and_never_signalled(env: dict[str, str], tmp_path: Path) -> None:
    pid_file = _pid_file(tmp_path)
    pid_file.parent.mkdir(parents=True, exist_ok=True)
    dead = subprocess.Popen([sys.executable, "-c", "pass"])
    dead.wait()
    record = {"pid": dead.pid, "started_at": "2024-01-01T00:00:00Z", "host": "127.0.0.1", "port": 1, "index": "index", "argv": ["qmd", "mcp", "--http"], "build_id": "x"}

    # a dead pid
    pid_file.write_text(json.dumps(record))
    out = run_qmd("mcp", "stop", env=env)
    assert out.returncode == 0 and "removed a stale PID file" in out.stdout and not pid_file.exists()

    # a live pid that is not our server (a reused PID): cleaned, never signalled
    bystander = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(60)"])
    try:
        pid_file.write_text(json.dumps({**record, "pid": bystander.pid}))
        out = run_qmd("mcp", "stop", env=env)
        assert out.returncode == 0 and "stale" in out.stdout and not pid_file.exists()
        time.sleep(0.2)
        assert bystander.poll() is None

        # garbage in the PID file
        pid_file.write_text("not json")
        out = run_qmd("mcp", "stop", env=env)
        assert out.returncode == 0 and "stale" in out.stdout and not pid_file.exists()

        # a daemon start over a stale PID file says so and starts
        pid_file.write_text(json.dumps({**record, "pid": bystander.pid}))
        port = free_port()
        started = run_qmd("mcp", "--http", "--daemon", "--port", str(port), timeout=90, env=env)
        assert started.returncode == 0, started.stderr
        assert "removed a stale PID file" in started.stderr
        info = json.loads(pid_file.read_text())
        assert info["pid"] != bystander.pid and bystander.poll() is None

        # the server holds the lock but the PID file names another process: refuse to signal
        pid_file.write_text(json.dumps({**info, "pid": bystander.pid}))
        out = run_qmd("mcp", "stop", env=env)
        assert out.returncode == 1 and "not signalling" in out.stderr and bystander.poll() is None
        pid_file.write_text(json.dumps(info))
        assert run_qmd("mcp", "stop", env=env).returncode == 0 and _gone(info["pid"])
    finally:
        bystander.kill()
        bystander.wait()


def test_killed_daemon_leaves_a_stale_file_that_the_next_start_replaces(env: dict[str, str], tmp_path: Path) -> None:
    port = free_port()
    assert run_qmd("mcp", "--http", "--daemon", "--port", str(port), timeout=90, env=env).returncode == 0
    pid = json.loads(_pid_file(tmp_path).read_text())["pid"]
    os.kill(pid, signal.SIGKILL)
    assert _gone(pid)
    assert _pid_file(tmp_path).exists()  # kill -9: no cleanup
    port2 = free_port()
    restarted = run_qmd("mcp", "--http", "--daemon", "--port", str(port2), timeout=90, env=env)
    new_pid = json.loads(_pid_file(tmp_path).read_text())["pid"]
    try:
        assert restarted.returncode == 0 and "removed a stale PID file" in restarted.stderr
        assert new_pid != pid and request(port2, "GET", "/health")[0] == 200
    finally:
        run_qmd("mcp", "stop", env=env)
        _gone(new_pid)


def test_port_in_use_is_a_clear_error(env: dict[str, str], tmp_path: Path) -> None:
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        s.listen(1)
        port = s.getsockname()[1]
        out = run_qmd("mcp", "--http", "--port", str(port), timeout=60, env=env)
    assert out.returncode == 1 and f"cannot listen on 127.0.0.1:{port}" in out.stderr and "--port" in out.stderr
    assert not _pid_file(tmp_path).exists()


def test_choose_port() -> None:
    taken = {8182, 8183}
    assert mcp_daemon.choose_port("index", None, "127.0.0.1", lambda h, p: p not in taken) == 8181
    assert mcp_daemon.choose_port("work", None, "127.0.0.1", lambda h, p: p not in taken) == 8184
    assert mcp_daemon.choose_port("work", 9000, "127.0.0.1", lambda h, p: False) == 9000


def test_looks_like_server() -> None:
    assert looks_like_server(["/v/bin/python", "-m", "qmd", "mcp", "--http", "--port", "1"])
    assert looks_like_server(["/v/bin/python", "/v/bin/qmd", "--index", "w", "mcp", "--http"])
    assert not looks_like_server(["/v/bin/python", "-m", "qmd", "mcp"])  # stdio servers have no PID file
    assert not looks_like_server(["sleep", "60"])


_HOLDER = """
import sys
from pathlib import Path
from qmd.harness import try_lock
handle = try_lock(Path(sys.argv[1]))
print("held" if handle else "busy", flush=True)
sys.stdin.readline()  # hold the lock until the test closes our stdin
"""


def test_prune_lock_waits_until_the_stopping_server_is_gone(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Teardown's race: a server that still holds its lock while it exits must not leave the lock file behind."""
    import threading

    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "state"))
    lock = tmp_path / "state" / "mcp-index.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert prune_lock("index") is False and lock.exists()  # held, no pid to wait for: left alone at once
        result: list[bool] = []
        pruning = threading.Thread(target=lambda: result.append(prune_lock("index", holder.pid, timeout=60)))
        pruning.start()
        assert lock.exists() and not result  # still waiting for the holder
        assert holder.stdin is not None
        holder.stdin.close()  # the "server" exits, releasing its lock
        holder.wait(timeout=30)
        pruning.join(timeout=60)
        assert result == [True] and not lock.exists()
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()


def test_prune_lock_gives_up_after_its_timeout(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "state"))
    lock = tmp_path / "state" / "mcp-index.lock"
    holder = subprocess.Popen([sys.executable, "-c", _HOLDER, str(lock)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        started = time.monotonic()
        assert prune_lock("index", holder.pid, timeout=0.3) is False and lock.exists()
        assert time.monotonic() - started < 10
    finally:
        holder.kill()
        holder.wait()
    assert prune_lock("index") is True and not lock.exists()  # the holder is gone: pruned
