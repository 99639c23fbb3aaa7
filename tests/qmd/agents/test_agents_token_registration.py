"""`qmd mcp install --http --token-env VAR` (and `--url`): the token is read from $VAR by the
client, never written (Claude Code `headers`, Codex `bearer_token_env_var`); doctor's probe
finds the variable through the registration."""

from __future__ import annotations

import json
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from qmd.agents.registration import claude_entry, codex_block, registered_token_env, token_env_of
from qmd.serve.probe import probe_token

Cli = Callable[..., tuple[int, str, str]]


def test_entries_carry_the_variable_not_the_token() -> None:
    entry = claude_entry("index", True, 8181, {}, "QMD_TEAM_TOKEN")
    assert entry == {"type": "http", "url": "http://127.0.0.1:8181/mcp", "alwaysLoad": True, "headers": {"Authorization": "Bearer ${QMD_TEAM_TOKEN}"}}
    remote = claude_entry("index", True, 8181, {}, "T", "https://notes.example.com/mcp")
    assert remote["url"] == "https://notes.example.com/mcp" and remote["headers"] == {"Authorization": "Bearer ${T}"}
    assert "headers" not in claude_entry("index", True, 8181, {})
    table = tomllib.loads(codex_block("work", True, 8182, {}, "QMD_TEAM_TOKEN", "https://notes.example.com/mcp"))
    assert table == {"mcp_servers": {"qmd-work": {"url": "https://notes.example.com/mcp", "bearer_token_env_var": "QMD_TEAM_TOKEN", "required": True}}}
    assert token_env_of(entry) == "QMD_TEAM_TOKEN" and token_env_of(table["mcp_servers"]["qmd-work"]) == "QMD_TEAM_TOKEN"
    assert token_env_of({"headers": {"Authorization": "Bearer literal"}}) is None and token_env_of(None) is None


def test_install_by_file_with_a_token_variable(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    (Path.home() / ".codex").mkdir()
    monkeypatch.delenv("QMD_TEAM_TOKEN", raising=False)
    code, out, err = cli("mcp", "install", "--claude", "--codex", "--http", "--token-env", "QMD_TEAM_TOKEN", "--port", "8181")
    assert code == 0, err
    assert "$QMD_TEAM_TOKEN is not set in this shell" in err
    claude = json.loads((Path.home() / ".claude.json").read_text())["mcpServers"]["qmd"]
    assert claude["headers"] == {"Authorization": "Bearer ${QMD_TEAM_TOKEN}"}
    codex = tomllib.loads((Path.home() / ".codex" / "config.toml").read_text())["mcp_servers"]["qmd"]
    assert codex == {"url": "http://127.0.0.1:8181/mcp", "bearer_token_env_var": "QMD_TEAM_TOKEN", "required": True}
    assert registered_token_env("index") == "QMD_TEAM_TOKEN"
    assert probe_token("index", {"QMD_TEAM_TOKEN": "qmd_x", "QMD_TOKEN": "qmd_y"}) == ("qmd_x", "$QMD_TEAM_TOKEN")
    assert probe_token("index", {"QMD_TOKEN": "qmd_y"}) == ("qmd_y", "$QMD_TOKEN")
    assert probe_token("other", {}) == (None, "")
    # a team server elsewhere: --url implies --http
    code, out, err = cli("mcp", "install", "--codex", "--url", "https://notes.example.com/mcp", "--token-env", "T", "--print")
    assert code == 0 and 'url = "https://notes.example.com/mcp"' in out and 'bearer_token_env_var = "T"' in out


@pytest.mark.parametrize(("args", "message"), [
    (["--claude", "--token-env", "T"], "a stdio server needs no token"),
    (["--claude", "--http", "--token-env", "NOT-A-NAME"], "is not an environment variable name"),
    (["--claude", "--url", "notes.example.com"], "must start with http:// or https://"),
])
def test_install_refuses_bad_token_options(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, args: list[str], message: str) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    code, out, err = cli("mcp", "install", *args)
    assert code in (1, 2) and message in out + err
