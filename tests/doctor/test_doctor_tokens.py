"""Doctor's check of an HTTP server that asks for tokens: it sends the one the registration
names (`--token-env`) or `$QMD_TOKEN`, says when it has none, and when it is refused."""

from __future__ import annotations

import pytest

from tests.doctor.test_doctor import _daemon, _in_home, doctor, find, indexed, qmd, qmd_in  # noqa: F401 - fixtures
from tests.support.harness import state  # noqa: F401 - fixture


@pytest.mark.slow
def test_doctor_sends_the_token(indexed, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]  # noqa: F811
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
        assert check["status"] == "ok" and "MCP handshake ok (token from $QMD_TOKEN)" in check["detail"], check
        # the variable a registration names comes first
        assert qmd_in("mcp", "install", "--codex", "--http", "--token-env", "TEAM_TOKEN", env={"PATH": "/nonexistent"}).returncode == 0
        code, report = doctor(env={"TEAM_TOKEN": token, "QMD_TOKEN": "qmd_wrong"})
        check = find(report, "HTTP server")
        assert check["status"] == "ok" and "(token from $TEAM_TOKEN)" in check["detail"], check
    finally:
        qmd("mcp", "stop")
