"""`qmd mcp install`: the entries it writes for Claude Code and Codex (the real clients run in tests/clients/)."""

from __future__ import annotations

import json
import os
import shlex
import tomllib
from collections.abc import Callable
from pathlib import Path

import pytest

from qmd.agents.registration import pinned_env

Cli = Callable[..., tuple[int, str, str]]  # conftest's in-process CLI runner


def _fake_client(bin_dir: Path, name: str, calls: Path, exit_code: int = 0, message: str = "") -> None:
    bin_dir.mkdir(exist_ok=True)
    script = bin_dir / name
    script.write_text(f'#!/bin/sh\nprintf "%s\\n" "{name} $*" >> "{calls}"\n' + (f'echo "{message}" >&2\n' if message else "") + f"exit {exit_code}\n")
    script.chmod(0o755)


def test_install_claude_by_file_is_idempotent_with_a_backup(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    config = Path.home() / ".claude.json"
    config.write_text(json.dumps({"numStartups": 3, "mcpServers": {"other": {"type": "stdio", "command": "x"}}}))
    code, out, _ = cli("mcp", "install", "--claude", "--print")
    assert code == 0 and '"alwaysLoad": true' in out and json.loads(config.read_text())["mcpServers"].keys() == {"other"}
    code, out, _ = cli("mcp", "install", "--claude")
    assert code == 0 and "registered 'qmd' for Claude Code in ~/.claude.json (backup:" in out
    data = json.loads(config.read_text())
    assert data["numStartups"] == 3 and data["mcpServers"]["other"] == {"type": "stdio", "command": "x"}
    entry = data["mcpServers"]["qmd"]
    assert entry["type"] == "stdio" and entry["args"][-1] == "mcp" and os.path.isabs(entry["command"])
    assert entry["alwaysLoad"] is True and entry["env"] == {}  # conftest's XDG dirs are the defaults under HOME
    backups = list(config.parent.glob(".claude.json.qmd-backup-*"))
    assert len(backups) == 1
    code, out, _ = cli("mcp", "install", "--claude")
    assert code == 0 and "already registered" in out and len(list(config.parent.glob(".claude.json.qmd-backup-*"))) == 1
    # project scope, HTTP, another index
    monkeypatch.chdir(tmp_path)
    code, out, _ = cli("--index", "work", "mcp", "install", "--claude", "--scope", "project", "--http")
    assert code == 0
    project = json.loads((tmp_path / ".mcp.json").read_text())
    assert project == {"mcpServers": {"qmd-work": {"type": "http", "url": "http://127.0.0.1:8182/mcp", "alwaysLoad": True}}}


def test_install_codex_by_file_merges_the_toml(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"\n\n[mcp_servers.qmd]\ncommand = "old"\n\n[mcp_servers.qmd.env]\nA = "1"\n\n[mcp_servers.other]\ncommand = "keep"\n')
    code, out, _ = cli("mcp", "install", "--codex")
    assert code == 0 and "registered 'qmd' for Codex" in out
    data = tomllib.loads(config.read_text())
    assert data["model"] == "o3" and data["mcp_servers"]["other"] == {"command": "keep"}
    entry = data["mcp_servers"]["qmd"]
    assert entry["args"][-1] == "mcp" and entry["required"] is True and "env" not in entry  # nothing differs from the defaults
    text = config.read_text()
    assert cli("mcp", "install", "--codex")[1].startswith("already registered")
    assert config.read_text() == text
    code, out, _ = cli("mcp", "install", "--codex", "--http", "--port", "9999")
    assert tomllib.loads(config.read_text())["mcp_servers"]["qmd"] == {"url": "http://127.0.0.1:9999/mcp", "required": True}
    assert len(list(config.parent.glob("config.toml.qmd-backup-*"))) >= 1


def test_install_pins_the_settings_that_chose_the_index(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "cfg"))
    monkeypatch.setenv("XDG_CACHE_HOME", "rel-cache")  # relative: made absolute, the client starts the server elsewhere
    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "state"))
    monkeypatch.setenv("QMD_EMBED_MODEL", "hf:user/repo/model.gguf")
    monkeypatch.setenv("QMD_RERANK_MODEL", "models/rerank.gguf")
    monkeypatch.setenv("QMD_THREADS", "2")  # tunes, does not choose: not pinned
    monkeypatch.setenv("QMD_PROGRESS_S", "5")
    expected = {
        "XDG_CONFIG_HOME": str(tmp_path / "cfg"),
        "XDG_CACHE_HOME": str(tmp_path / "rel-cache"),
        "QMD_STATE_DIR": str(tmp_path / "state"),
        "QMD_EMBED_MODEL": "hf:user/repo/model.gguf",
        "QMD_RERANK_MODEL": str(tmp_path / "models" / "rerank.gguf"),
    }
    code, out, _ = cli("--index", "work", "mcp", "install", "--claude", "--codex", "--print")
    assert code == 0 and "QMD_STATE_DIR" in out and "required = true" in out and not (Path.home() / ".claude.json").exists()
    code, out, err = cli("--index", "work", "mcp", "install", "--claude", "--codex")
    assert code == 0, err
    claude = json.loads((Path.home() / ".claude.json").read_text())["mcpServers"]["qmd-work"]
    assert claude["env"] == expected and claude["alwaysLoad"] is True and claude["args"][-3:] == ["--index", "work", "mcp"]
    codex = tomllib.loads((Path.home() / ".codex" / "config.toml").read_text())["mcp_servers"]["qmd-work"]
    assert codex["env"] == expected and codex["required"] is True and codex["args"][-3:] == ["--index", "work", "mcp"]
    text = (Path.home() / ".codex" / "config.toml").read_text()
    assert "already registered" in cli("--index", "work", "mcp", "install", "--codex")[1]
    assert (Path.home() / ".codex" / "config.toml").read_text() == text


def test_pinned_env_leaves_out_what_is_the_default() -> None:
    home = "/h"
    assert pinned_env("index", {"HOME": home}) == {}
    defaults = {
        "HOME": home, "XDG_CONFIG_HOME": "/h/.config", "XDG_CACHE_HOME": "/h/.cache/", "XDG_STATE_HOME": "/h/.local/state", "XDG_DATA_HOME": "/h/.local/share",
        "QMD_CONFIG_DIR": "/h/.config/qmd", "QMD_STATE_DIR": "/h/.local/state/qmd", "QMD_MODELS_DIR": "/h/.cache/qmd/models", "INDEX_PATH": "/h/.cache/qmd/work.sqlite",
    }
    assert pinned_env("work", defaults) == {}
    assert pinned_env("index", defaults) == {"INDEX_PATH": "/h/.cache/qmd/work.sqlite"}  # another index's file
    moved = {"HOME": home, "XDG_CACHE_HOME": "/c", "INDEX_PATH": "/c/qmd/index.sqlite", "QMD_MODELS_DIR": "/h/.cache/qmd/models", "XDG_DATA_HOME": "/d", "QMD_SQLITE_VEC_PATH": "/v.so"}
    assert pinned_env("index", moved) == {"XDG_CACHE_HOME": "/c", "QMD_MODELS_DIR": "/h/.cache/qmd/models", "XDG_DATA_HOME": "/d", "QMD_SQLITE_VEC_PATH": "/v.so"}
    assert pinned_env("index", {"HOME": home, "XDG_CONFIG_HOME": "", "QMD_CONFIG_DIR": "~/notes-config"}) == {"QMD_CONFIG_DIR": "/h/notes-config"}


def test_install_uses_the_client_command_when_present(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    bin_dir = tmp_path / "bin"
    calls = tmp_path / "calls.txt"
    for name in ("claude", "codex"):
        _fake_client(bin_dir, name, calls)
    monkeypatch.setenv("PATH", str(bin_dir))
    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "state"))
    code, out, _ = cli("mcp", "install", "--claude", "--codex", "--print")
    assert code == 0 and "mcp add-json --scope user qmd " in out and "required = true" in out and not calls.exists()
    code, out, _ = cli("mcp", "install", "--claude", "--codex")
    assert code == 0, out
    lines = calls.read_text().splitlines()
    assert lines[0] == "claude mcp remove --scope user qmd"
    assert lines[1].startswith("claude mcp add-json --scope user qmd {")
    entry = json.loads(lines[1].split(" qmd ", 1)[1])
    assert entry["alwaysLoad"] is True and entry["env"] == {"QMD_STATE_DIR": str(tmp_path / "state")} and entry["args"] == ["mcp"]
    assert lines[2:] == ["codex mcp get qmd --json"]  # Codex's file is written by qmd (`codex mcp add` cannot set required), then checked
    table = tomllib.loads((Path.home() / ".codex" / "config.toml").read_text())["mcp_servers"]["qmd"]
    assert table["required"] is True and table["env"] == {"QMD_STATE_DIR": str(tmp_path / "state")}
    assert not (Path.home() / ".claude.json").exists()
    shlex.split(out)  # the printed lines are shell words


def test_a_codex_that_refuses_the_entry_gets_its_file_back(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    calls = tmp_path / "calls.txt"
    _fake_client(tmp_path / "bin", "codex", calls, exit_code=1, message="Error: unknown field required in mcp_servers.qmd")
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('model = "o3"\n')
    code, _, err = cli("mcp", "install", "--codex")
    assert code != 0 and "does not accept the new entry" in err and "unknown field required" in err
    assert config.read_text() == 'model = "o3"\n' and not list(config.parent.glob("config.toml.qmd-backup-*"))


def test_install_needs_a_client(cli: Cli) -> None:
    code, _, err = cli("mcp", "install")
    assert code == 2 and "--claude" in err


def test_a_codex_config_that_is_not_utf8_is_one_clear_error_and_stays_as_it_was(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A Latin-1 comment in ~/.codex/config.toml was a UnicodeDecodeError: exit 3 from mcp install and guard install."""
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_bytes(b'# caf\xe9\nmodel = "x"\n')
    for args in (("mcp", "install", "--codex"), ("guard", "install", "--codex")):
        code, _, err = cli(*args)
        assert code == 1 and err.startswith("Error: ") and "not UTF-8" in err and str(config) in err, (args, code, err)
        assert config.read_bytes() == b'# caf\xe9\nmodel = "x"\n'
