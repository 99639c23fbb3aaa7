"""Doctor's check of an HTTP server that asks for tokens: it sends the one the registration
names (`--token-env`) or `$QMD_TOKEN`, says when it has none, and when it is refused."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.doctor.test_doctor import _daemon, doctor, find, qmd_in
from tests.support.run import run_qmd

pytestmark = pytest.mark.usefixtures("in_home")


@pytest.mark.slow
def test_doctor_sends_the_token(indexed: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("QMD_TOKEN", raising=False)
    token = qmd_in("token", "add", "doctor").stdout.strip()
    _daemon()
    try:
        code, report = doctor("--quick")
        check = find(report, "HTTP server")
        assert check["status"] == "warn" and "asks for a token" in check["detail"] and "QMD_TOKEN" in check["fix"]
        code, report = doctor(env={"QMD_TOKEN": "qmd_" + "x" * 43})
        check = find(report, "HTTP server")
        assert check["status"] == "fail" and "refuses the token from $QMD_TOKEN" in check["detail"] and "token list" in check["fix"]
        code, report = doctor(env={"QMD_TOKEN": token})
        check = find(report, "HTTP server")
        assert check["status"] == "ok" and "MCP handshake ok (token from $QMD_TOKEN); speaks 2026-07-28, 2025-11-25" in check["detail"], check
        # the variable a registration names comes first
        assert qmd_in("mcp", "install", "--codex", "--http", "--token-env", "TEAM_TOKEN", env={"PATH": "/nonexistent"}).returncode == 0
        code, report = doctor(env={"TEAM_TOKEN": token, "QMD_TOKEN": "qmd_wrong"})
        check = find(report, "HTTP server")
        assert check["status"] == "ok" and "(token from $TEAM_TOKEN)" in check["detail"], check
    finally:
        run_qmd("mcp", "stop")


def test_doctor_sends_no_token_to_whatever_holds_a_stale_pid_file_s_port(indexed: Path, state: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The PID file names a live process that looks like a server and its lock is held, but
    the recorded port belongs to another listener: doctor asks it to prove it holds the
    PID file's key before anything else, and sends it no token."""
    import json
    import subprocess
    import sys

    from qmd import harness
    from qmd.core.locks import try_lock
    from qmd.serve.pidfile import lock_path, pid_path
    from qmd.serve.proof import new_key
    from tests.qmd.cli.test_warm_server import Impostor

    argv = [sys.executable, "-c", "import time; time.sleep(120)", "qmd", "mcp", "--http"]
    sleeper = subprocess.Popen(argv)
    impostor = Impostor()
    lock = try_lock(lock_path("index"))
    assert lock is not None
    try:
        pid_path("index").write_text(json.dumps({
            "pid": sleeper.pid, "started_at": "2026-01-01T00:00:00Z", "host": "127.0.0.1", "port": impostor.port,
            "index": "index", "argv": argv, "build_id": harness.build_id(), "key": new_key(),
        }))
        secret = "qmd_" + "d" * 43
        code, report = doctor(env={"QMD_TOKEN": secret})
        check = find(report, "HTTP server")
        assert check["status"] == "fail" and "not the server that wrote the PID file" in check["detail"] and "no token was sent" in check["detail"], check
        assert secret.encode() not in impostor.received and b"Authorization" not in impostor.received
    finally:
        lock.release()
        impostor.close()
        sleeper.kill()
        sleeper.wait()
