"""The real Claude Code and Codex reach a token-protected `qmd mcp --http` through
`qmd mcp install --http --token-env VAR`: the registration holds the variable's name, the
client sends `Authorization: Bearer <$VAR>`, and the server's log names the token and the
protocol version the client negotiated over HTTP (`HTTP_PROTOCOL`)."""

from __future__ import annotations

import re
import subprocess
import time
from pathlib import Path

import pytest

from tests.clients.test_real_clients import QMD, RUNBOOK, _describe, fake_for, make_box, run_client, steps
from tests.support.mcp import free_port, stop_process, wait_health

pytestmark = pytest.mark.slow

# What each client negotiates over Streamable HTTP (measured 2026-12-02): the version its
# initialize asked for and the one served, or 2026-07-28 (server/discover, no initialize).
HTTP_PROTOCOL: dict[str, tuple[str, str] | str] = {"claude": ("2025-11-25", "2025-11-25"), "claude-newest": "2026-07-28", "codex": ("2025-06-18", "2025-06-18")}


def negotiated(log: str) -> tuple[str, str] | str | None:
    """From the server's log: (asked, served) of the first initialize, else the version of
    the first 2026-07-28 request, else None."""
    found = re.search(r"POST /mcp 200 .*initialize .* asked (\S+), serving ([0-9-]+)", log, re.M)
    if found:
        return found.group(1), found.group(2)
    return "2026-07-28" if re.search(r"POST /mcp 200 .*server/discover protocol 2026-07-28$", log, re.M) else None


@pytest.mark.parametrize("client", ["claude", "codex", "claude-newest"])
def test_the_client_sends_the_token_from_the_variable(client: str, tmp_path: Path) -> None:
    box = make_box(tmp_path / "box", client)
    label, client = client, box.client
    fake = fake_for(box)
    server = None
    try:
        if client == "codex":
            codex = box.home / ".codex"
            codex.mkdir(exist_ok=True)
            (codex / "config.toml").write_text(
                f'model = "gpt-5"\nmodel_provider = "fake"\n\n[model_providers.fake]\nname = "fake"\n'
                f'base_url = "{fake.url}/v1"\nenv_key = "FAKE_API_KEY"\nwire_api = "responses"\n'
            )
        box.qmd("collection", "add", str(box.notes), "--name", "notes")
        box.qmd("update")
        token = box.qmd("token", "add", f"{client}-agent", "--collection", "notes").stdout.strip()
        port = free_port()
        log = tmp_path / "server.log"
        with open(log, "ab") as out:
            server = subprocess.Popen([str(QMD), "mcp", "--http", "--port", str(port)], env=box.env, stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        wait_health(port, server)
        box.qmd("mcp", "install", f"--{client}", "--http", "--port", str(port), "--token-env", "QMD_TEAM_TOKEN")
        registered = (box.home / ".claude.json").read_text() if client == "claude" else (box.home / ".codex" / "config.toml").read_text()
        assert "QMD_TEAM_TOKEN" in registered and token not in registered
        box.env["QMD_TEAM_TOKEN"] = token
        run = run_client(box, fake)
    finally:
        fake.stop()
        if server is not None:
            stop_process(server)
    assert run.returncode == 0, _describe(run)
    result = run.result_of(client, steps(box)[0])
    assert result is not None and RUNBOOK in result, _describe(run)
    deadline = time.monotonic() + 5
    while f"token {client}-agent" not in log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    text = log.read_text()
    assert any("POST /mcp 200" in line and f"token {client}-agent query" in line for line in text.splitlines()), text[-2000:]
    assert token not in text
    assert negotiated(text) == HTTP_PROTOCOL[label], text[-3000:]
    mcp = [line for line in text.splitlines() if "POST /mcp" in line]
    assert mcp and all(" POST /mcp 200 " in line or " POST /mcp 202 " in line for line in mcp), mcp
    if HTTP_PROTOCOL[label] == "2026-07-28":  # every request on the stateless path, with its headers
        assert all(line.endswith("protocol 2026-07-28") or "protocol 2026-07-28 " in line for line in mcp), mcp
