"""`qmd mcp --http --daemon` inside a project with a project-local index (`.qmd/index.yml`):
its own PID, lock and log files (`mcp-local-<hash>`), so it runs beside the home index's
server, `qmd mcp stop` in the project stops that one, and the CLI outside never takes it
for the home index's."""

from __future__ import annotations

import hashlib
import json
import os
import signal
from pathlib import Path

import pytest

from qmd.serve import process_alive, wait_gone
from tests.support.mcp import free_port, make_env, request, setup_index
from tests.support.run import run_qmd

pytest.importorskip("mcp")


@pytest.fixture
def project(tmp_path: Path) -> tuple[dict[str, str], Path]:
    """(env, project): the home index holds the shared notes; the project's local index its own."""
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    assert run_qmd("update", cwd=tmp_path, env=env).returncode == 0
    root = tmp_path / "proj"
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "pager.md").write_text("# Pager\n\nThe quokka rota for the pager week.\n")
    for argv in (("init",), ("collection", "add", "docs", "--name", "docs"), ("update",)):
        done = run_qmd(*argv, cwd=root, env=env)
        assert done.returncode == 0, done.stderr
    return env, root


def _name(config: Path) -> str:
    return "local-" + hashlib.sha256(os.path.realpath(config).encode()).hexdigest()[:12]


def _serve_project(env: dict[str, str], root: Path, state: Path) -> tuple[int, int]:
    """(port, pid) of `qmd mcp --http --daemon` started inside the project."""
    port = free_port()
    started = run_qmd("mcp", "--http", "--daemon", "--port", str(port), cwd=root, timeout=90, env=env)
    assert started.returncode == 0, started.stderr
    return port, json.loads(next(state.glob("mcp-local-*.json")).read_text())["pid"]


def _files(state: Path) -> list[str]:
    return sorted(p.name for p in state.glob("mcp-*.json"))


def _lex(port: int, text: str) -> list[str]:
    status, body = request(port, "POST", "/query", {"searches": [{"type": "lex", "query": text}]})
    assert status == 200, body
    return [hit["file"] for hit in body["results"]]


@pytest.mark.slow
def test_a_local_index_gets_its_own_daemon_beside_the_home_one(project: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    env, root = project
    state = tmp_path / "state"
    config = root / ".qmd" / "index.yml"
    local_name = _name(config)
    home_port, local_port = free_port(), free_port()
    pids: list[int] = []
    try:
        home = run_qmd("mcp", "--http", "--daemon", "--port", str(home_port), cwd=tmp_path, timeout=90, env=env)
        assert home.returncode == 0, home.stderr
        pids.append(json.loads((state / "mcp-index.json").read_text())["pid"])
        local = run_qmd("mcp", "--http", "--daemon", "--port", str(local_port), cwd=root / "docs", timeout=90, env=env)
        assert local.returncode == 0, local.stderr
        assert _files(state) == sorted(["mcp-index.json", f"mcp-{local_name}.json"])
        info = json.loads((state / f"mcp-{local_name}.json").read_text())
        pids.append(info["pid"])
        assert info["index"] == str(config) and info["port"] == local_port
        assert (state / "logs" / f"mcp-{local_name}.log").exists() and (state / f"mcp-{local_name}.lock").exists()
        assert f"stop: qmd mcp stop (inside {root}" in local.stdout

        # each answers for its own index
        assert request(local_port, "GET", "/health")[1]["index"] == str(config)
        assert request(home_port, "GET", "/health")[1]["index"] == "index"
        assert _lex(local_port, "quokka") == ["qmd://docs/pager.md"] and _lex(home_port, "quokka") == []
        assert _lex(home_port, "kubernetes") and not _lex(local_port, "kubernetes")

        # a second server for the project is refused, naming the way to stop the first
        again = run_qmd("mcp", "--http", "--daemon", "--port", str(free_port()), cwd=root, timeout=60, env=env)
        assert again.returncode == 1 and "already running" in again.stderr and str(local_port) in again.stderr
        assert f"qmd mcp stop --index {config}" in again.stderr

        # `qmd mcp stop` in the project stops the project's server only
        stopped = run_qmd("mcp", "stop", cwd=root / "docs", timeout=60, env=env)
        assert stopped.returncode == 0 and f"pid {pids[1]}" in stopped.stdout, stopped.stdout + stopped.stderr
        assert wait_gone(pids[1], 15) and process_alive(pids[0])
        assert _files(state) == ["mcp-index.json"]
        assert request(home_port, "GET", "/health")[0] == 200
        stopped = run_qmd("mcp", "stop", cwd=tmp_path, timeout=60, env=env)
        assert stopped.returncode == 0 and f"pid {pids[0]}" in stopped.stdout
        assert wait_gone(pids[0], 15) and _files(state) == []
    finally:
        for pid in pids:
            if process_alive(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_home_index_never_takes_the_local_server_for_its_own(project: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """Only the project's server runs: outside the project, `qmd mcp stop` finds none and the
    CLI (QMD_SERVER=require) reports no server rather than answering from the project's notes."""
    env, root = project
    port, pid = _serve_project(env, root, tmp_path / "state")
    try:
        outside = run_qmd("mcp", "stop", cwd=tmp_path, timeout=60, env=env)
        assert outside.returncode == 0 and "no MCP server is running for index 'index'" in outside.stdout
        assert process_alive(pid)
        required = run_qmd("search", "quokka", cwd=tmp_path, timeout=60, env={**env, "QMD_SERVER": "require"})
        assert required.returncode == 1 and "no HTTP server runs for index 'index'" in required.stderr, required.stdout + required.stderr
        # from anywhere, by the config's path
        stopped = run_qmd("mcp", "stop", "--index", str(root / ".qmd" / "index.yml"), cwd=tmp_path, timeout=60, env=env)
        assert stopped.returncode == 0 and f"pid {pid}" in stopped.stdout
        assert wait_gone(pid, 15)
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_server_names() -> None:
    from qmd.core.paths import index_name, server_name

    assert server_name("index") == "index" and server_name("work") == "work"
    local = "/srv/proj/.qmd/index.yml"
    assert server_name(local) == _name(Path(local)) and index_name(local) == "index"
    assert server_name("/srv/other/.qmd/index.yml") != server_name(local)


def test_the_cli_in_the_project_uses_the_projects_warm_server(project: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """`qmd search` inside the project asks the project's server (QMD_SERVER=require proves
    it: before, a project-local index always ran in-process, and require did not even say so)."""
    env, root = project
    _, pid = _serve_project(env, root, tmp_path / "state")
    log = tmp_path / "state" / "logs" / f"mcp-{_name(root / '.qmd' / 'index.yml')}.log"
    try:
        plain = run_qmd("search", "quokka", cwd=root / "docs", timeout=60, env={**env, "QMD_SERVER": "off"})
        warm = run_qmd("search", "quokka", cwd=root / "docs", timeout=60, env={**env, "QMD_SERVER": "require"})
        assert warm.returncode == 0, warm.stdout + warm.stderr
        assert warm.stdout == plain.stdout and "pager.md" in warm.stdout
        assert "POST /cli 200" in log.read_text()
        stopped = run_qmd("mcp", "stop", cwd=root, timeout=60, env=env)
        assert stopped.returncode == 0
        assert wait_gone(pid, 15)
        gone = run_qmd("search", "quokka", cwd=root, timeout=60, env={**env, "QMD_SERVER": "require"})
        assert gone.returncode == 1 and f"no HTTP server runs for index '{root / '.qmd' / 'index.yml'}'" in gone.stderr, gone.stderr
        assert "qmd mcp --http --daemon in the project" in gone.stderr
    finally:
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_project_index_made_again_under_a_running_server_is_the_one_answered(project: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """`rm -rf .qmd` and `qmd init` again while the project's server runs: the CLI (through
    the server) and /query answer from the new index. Before, the server kept the deleted
    file open and answered with notes that no longer existed."""
    import shutil

    env, root = project
    port, pid = _serve_project(env, root, tmp_path / "state")
    try:
        assert _lex(port, "quokka") == ["qmd://docs/pager.md"]
        shutil.rmtree(root / ".qmd")
        (root / "docs" / "pager.md").unlink()
        (root / "docs" / "wombat.md").write_text("# Wombat\n\nThe wombat checklist.\n")
        off = {**env, "QMD_SERVER": "off"}
        for argv in (("init",), ("collection", "add", "docs", "--name", "docs"), ("update",)):
            done = run_qmd(*argv, cwd=root, env=off)
            assert done.returncode == 0, done.stderr
        warm = run_qmd("search", "wombat", "--files", cwd=root, timeout=60, env={**env, "QMD_SERVER": "require"})
        assert warm.returncode == 0 and "wombat.md" in warm.stdout, warm.stdout + warm.stderr
        stale = run_qmd("search", "quokka", "--files", cwd=root, timeout=60, env={**env, "QMD_SERVER": "require"})
        assert "pager.md" not in stale.stdout, stale.stdout
        assert _lex(port, "wombat") == ["qmd://docs/wombat.md"] and _lex(port, "quokka") == []
    finally:
        run_qmd("mcp", "stop", cwd=root, timeout=60, env=env)
        if process_alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_scoped_token_is_not_told_the_project_s_path(project: tuple[dict[str, str], Path], tmp_path: Path) -> None:
    """A project-local index is keyed by its config's path on the server: a token scoped to a
    collection sees the index's name in /health, the instructions and status, never that path."""
    env, root = project
    made = run_qmd("token", "add", "ci", "--collection", "docs", cwd=root, env=env)
    assert made.returncode == 0, made.stderr
    token = made.stdout.strip()
    port, pid = _serve_project(env, root, tmp_path / "state")
    try:
        auth = {"Authorization": f"Bearer {token}", "Accept": "application/json, text/event-stream"}
        answers = [request(port, "GET", "/health", None, auth)[1]]
        for method, params in (("initialize", {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}),
                               ("tools/call", {"name": "status", "arguments": {}})):
            status, body = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": method, "params": params}, auth)
            assert status == 200 and "result" in body, body
            answers.append(body)
        text = json.dumps(answers)
        assert str(root) not in text and str(tmp_path) not in text, text[:800]
        assert answers[0]["index"] == "index" and answers[0]["documents"] == 1
    finally:
        os.kill(pid, signal.SIGTERM)
        wait_gone(pid, 15)
