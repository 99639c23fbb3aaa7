"""The MCP Registry entry (server.json) and the Claude Code / Codex plugin (plugins/qmd, with its
marketplace in .claude-plugin/): valid, in step with qmd, and never registering qmd twice.
The real clients install the plugin in tests/clients/test_plugin_clients.py."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tomllib
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from qmd.core.version import __version__
from tests.support.paths import REPO
from tests.support.run import run_qmd

Cli = Callable[..., tuple[int, str, str]]  # conftest's in-process CLI runner

PLUGIN = REPO / "plugins" / "qmd"
SCHEMA = REPO / "tests" / "fixtures" / "mcp-registry" / "server.schema.json"


def _json(path: Path) -> Any:
    return json.loads(path.read_text(encoding="utf-8"))


# --- server.json -----------------------------------------------------------------------


def test_server_json_is_valid_for_the_registry_schema() -> None:
    import jsonschema

    server = _json(REPO / "server.json")
    schema = _json(SCHEMA)
    validator = jsonschema.Draft202012Validator(schema, format_checker=jsonschema.Draft202012Validator.FORMAT_CHECKER)
    errors = [f"{'/'.join(map(str, e.absolute_path))}: {e.message}" for e in validator.iter_errors(server)]
    assert not errors, errors
    assert server["$schema"] == "https://static.modelcontextprotocol.io/schemas/2025-12-11/server.schema.json"
    # the schema really checks: a broken copy is refused
    broken = {**server, "name": "qmd", "description": "x" * 101}
    assert len(list(validator.iter_errors(broken))) == 2


def test_server_json_plugin_and_marketplace_carry_qmds_version() -> None:
    server = _json(REPO / "server.json")
    assert server["version"] == __version__
    assert {p["version"] for p in server["packages"]} == {__version__}
    assert _json(PLUGIN / ".claude-plugin" / "plugin.json")["version"] == __version__
    [entry] = _json(REPO / ".claude-plugin" / "marketplace.json")["plugins"]
    assert entry["version"] == __version__ and entry["name"] == "qmd" and (REPO / entry["source"]).resolve() == PLUGIN


def test_server_json_describes_the_real_package_commands_and_variables(cli: Cli) -> None:
    server = _json(REPO / "server.json")
    pyproject = tomllib.loads((REPO / "pyproject.toml").read_text())
    stdio, http = server["packages"]
    for package in (stdio, http):
        assert package["registryType"] == "pypi" and package["identifier"] == pyproject["project"]["name"]
        assert "runtimeHint" not in package  # the executable (qmd) is not named after the package: no `uvx qmd-harness`
    assert stdio["transport"] == {"type": "stdio"} and http["transport"]["type"] == "streamable-http"
    # the arguments are the CLI's: qmd [--index NAME] mcp [--http] [--port N]
    top = cli("--help")[1]
    mcp = cli("mcp", "--help")[1]
    for package, want in ((stdio, ["--index", "mcp"]), (http, ["--index", "mcp", "--http", "--port"])):
        words = [a.get("name") or a.get("value") for a in package["packageArguments"]]
        assert words == want
    assert "--index" in top and all(flag in mcp for flag in ("--http", "--port"))
    port = next(a for a in http["packageArguments"] if a.get("name") == "--port")
    assert http["transport"]["url"] == "http://127.0.0.1:{--port}/mcp" and port["default"] == "8181"
    assert "default 8181" in mcp
    # every variable named is one qmd reads
    source = "\n".join(p.read_text(encoding="utf-8") for p in (REPO / "qmd").rglob("*.py"))
    for package in (stdio, http):
        for var in package["environmentVariables"]:
            assert re.search(rf"[\"']{var['name']}[\"']", source), f"{var['name']} is not read anywhere in qmd/"
    assert [h["name"] for h in http["transport"]["headers"]] == ["Authorization"]


def test_readme_names_the_registry_server() -> None:
    """PyPI packages prove their registry name with an `mcp-name:` line in the README."""
    name = _json(REPO / "server.json")["name"]
    assert f"mcp-name: {name}" in (REPO / "README.md").read_text(encoding="utf-8")


# --- the plugin's files ----------------------------------------------------------------


def test_plugin_ships_qmds_skill_server_and_hooks() -> None:
    assert (PLUGIN / "skills" / "qmd" / "SKILL.md").read_bytes() == (REPO / "qmd" / "cli" / "agent-skills" / "qmd" / "SKILL.md").read_bytes()
    assert _json(PLUGIN / ".mcp.json") == {"mcpServers": {"qmd": {"type": "stdio", "command": "qmd", "args": ["mcp"], "alwaysLoad": True}}}
    from guards.install import CLAUDE_MATCHER

    hooks = _json(PLUGIN / "hooks" / "hooks.json")["hooks"]
    assert set(hooks) == {"SessionStart", "PreToolUse"}
    [pre] = hooks["PreToolUse"]
    assert pre["matcher"] == CLAUDE_MATCHER
    assert pre["hooks"][0]["command"] == '"${CLAUDE_PLUGIN_ROOT}/hooks/qmd-hook" guard'
    assert hooks["SessionStart"][0]["hooks"][0]["command"] == '"${CLAUDE_PLUGIN_ROOT}/hooks/qmd-hook" session-start'
    script = (PLUGIN / "hooks" / "qmd-hook").read_text()
    assert 'exec "$qmd" health --session-start' in script and "find_tool qmd-guard" in script  # the documented commands
    assert os.access(PLUGIN / "hooks" / "qmd-hook", os.X_OK)


def _hook(tmp_path: Path, mode: str, path: str, stdin: str = "") -> subprocess.CompletedProcess[str]:
    env = {"PATH": path, "HOME": str(tmp_path)}
    return subprocess.run(["sh", str(PLUGIN / "hooks" / "qmd-hook"), mode], env=env, input=stdin, capture_output=True, text=True, timeout=30)


def _exe(folder: Path, name: str, body: str) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / name
    path.write_text("#!/bin/sh\n" + body + "\n")
    path.chmod(0o755)
    return path


def test_plugin_hook_runs_qmds_commands_and_fails_open(tmp_path: Path) -> None:
    system = "/usr/bin:/bin"
    # without qmd: the tool call runs (exit 0, nothing on stdout), the session hears why
    assert (_hook(tmp_path, "guard", system, "{}").returncode, _hook(tmp_path, "guard", system, "{}").stdout) == (0, "")
    start = _hook(tmp_path, "session-start", system)
    assert start.returncode == 0 and "qmd command is not on PATH" in start.stdout
    # qmd and qmd-guard on PATH (pipx, uv tool)
    both = tmp_path / "both"
    _exe(both, "qmd-guard", 'cat >/dev/null; echo "guard ran"')
    _exe(both, "qmd", 'echo "qmd $*"')
    assert _hook(tmp_path, "guard", f"{both}:{system}", "{}").stdout == "guard ran\n"
    assert _hook(tmp_path, "session-start", f"{both}:{system}").stdout == "qmd health --session-start\n"
    # install.sh: only a launcher on PATH; qmd-guard is found beside the venv's qmd it runs
    venv = tmp_path / "venv" / "bin"
    _exe(venv, "qmd-guard", 'echo "venv guard"')
    _exe(venv, "qmd", 'echo "venv qmd $*"')
    launcher = tmp_path / "local-bin"
    _exe(launcher, "qmd", f'# qmd launcher written by /repo/install.sh\nexec "{venv}/qmd" "$@"')
    assert _hook(tmp_path, "guard", f"{launcher}:{system}", "{}").stdout == "venv guard\n"
    assert _hook(tmp_path, "session-start", f"{launcher}:{system}").stdout == "venv qmd health --session-start\n"


def test_plugin_hook_never_blocks_for_a_broken_guard(tmp_path: Path) -> None:
    """Claude Code blocks a tool call whose PreToolUse hook exits 2; qmd-guard denies only by
    what it prints (exit 0), so a guard that exits 2 (broken) must not block: exit 1. PATH
    with a space in it finds the guard too, and its stdin reaches it."""
    spaced = tmp_path / "a b" / "bin"
    _exe(spaced, "qmd-guard", "cat; exit 2")
    done = _hook(tmp_path, "guard", f"{spaced}:/usr/bin:/bin", '{"tool_name": "Grep"}')
    assert (done.returncode, done.stdout) == (1, '{"tool_name": "Grep"}')
    _exe(spaced, "qmd-guard", "echo denied; exit 0")
    assert (_hook(tmp_path, "guard", f"{spaced}:/usr/bin:/bin", "{}").returncode, _hook(tmp_path, "guard", f"{spaced}:/usr/bin:/bin", "{}").stdout) == (0, "denied\n")


HOSTILE_FILES = {
    "nested too deep": b"[" * 100_000 + b"]" * 100_000,
    "not JSON": b"\xff\xfe{",
    "wrong types": b'{"plugins": ["qmd@qmd"], "enabledPlugins": [true]}',
}


@pytest.mark.parametrize("case", list(HOSTILE_FILES))
def test_hostile_plugin_files_are_no_plugin_and_crash_nothing(case: str, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A hostile installed_plugins.json or settings.json is read as no plugin by mcp install,
    doctor and the guard (never a traceback); a hostile ~/.claude.json is one line."""
    from doctor.hooks import _claude_plugin
    from guards.advice import claude_mcp
    from qmd.agents import plugin

    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    home = Path.home()
    _install_claude_plugin(home)
    for hostile in (home / ".claude" / "plugins" / "installed_plugins.json", home / ".claude" / "settings.json"):
        _install_claude_plugin(home)
        hostile.write_bytes(HOSTILE_FILES[case])
        assert plugin.claude_plugin(tmp_path) is None and claude_mcp(str(tmp_path)) is None and _claude_plugin() == []
    code, out, err = cli("mcp", "install", "--claude")
    assert code == 0 and set(_json(home / ".claude.json")["mcpServers"]) == {"qmd"}, (out, err)
    if case == "nested too deep":
        (home / ".claude.json").write_bytes(HOSTILE_FILES[case])
        code, out, err = cli("mcp", "install", "--claude")
        assert code == 1 and "not valid JSON" in err and "Traceback" not in err, err


def test_a_huge_plugin_list_is_not_read(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qmd.agents import plugin

    _install_claude_plugin(Path.home())
    assert plugin.claude_plugin(tmp_path) == "qmd@qmd"
    monkeypatch.setattr(plugin, "MAX_FILE", 20)
    assert plugin.claude_plugin(tmp_path) is None


# --- never twice -------------------------------------------------------------------------


def _install_claude_plugin(home: Path, enabled: bool = True) -> None:
    """What `claude plugin install qmd@qmd` writes (Claude Code 2.1.197; the real one runs in tests/clients/)."""
    plugins = home / ".claude" / "plugins"
    plugins.mkdir(parents=True, exist_ok=True)
    entry = {"scope": "user", "installPath": str(plugins / "cache" / "qmd" / "qmd" / __version__), "version": __version__}
    (plugins / "installed_plugins.json").write_text(json.dumps({"version": 2, "plugins": {"qmd@qmd": [entry]}}))
    (home / ".claude" / "settings.json").write_text(json.dumps({"enabledPlugins": {"qmd@qmd": enabled}}))


def test_mcp_install_claude_leaves_the_plugins_server_alone(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    home = Path.home()
    _install_claude_plugin(home)
    code, out, _ = cli("mcp", "install", "--claude")
    assert code == 0 and "already has the 'qmd' MCP server from qmd's plugin (qmd@qmd)" in out and "claude plugin uninstall qmd@qmd" in out
    assert not (home / ".claude.json").exists()
    code, out, _ = cli("mcp", "install", "--claude", "--print")
    assert code == 0 and "qmd@qmd" in out and not (home / ".claude.json").exists()
    # another index's server is not the plugin's: registered as before
    code, out, _ = cli("--index", "work", "mcp", "install", "--claude")
    assert code == 0 and set(_json(home / ".claude.json")["mcpServers"]) == {"qmd-work"}
    # a disabled plugin serves nothing: register by hand
    _install_claude_plugin(home, enabled=False)
    code, out, _ = cli("mcp", "install", "--claude")
    assert code == 0 and set(_json(home / ".claude.json")["mcpServers"]) == {"qmd", "qmd-work"}


def test_mcp_and_guard_install_codex_leave_the_plugin_alone(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    config = Path.home() / ".codex" / "config.toml"
    config.parent.mkdir()
    text = '[marketplaces.qmd]\nsource_type = "local"\nsource = "/repo"\n\n[plugins."qmd@qmd"]\nenabled = true\n'  # what `codex plugin add qmd@qmd` writes (0.171.0)
    config.write_text(text)
    code, out, _ = cli("mcp", "install", "--codex")
    assert code == 0 and "Codex already has the 'qmd' MCP server from qmd's plugin (qmd@qmd)" in out and "codex plugin remove qmd@qmd" in out
    code, out, _ = cli("guard", "install", "--codex")
    assert code == 0 and "already has the PreToolUse guard" in out
    assert config.read_text() == text and not (config.parent / "hooks.json").exists()


def test_guard_install_claude_leaves_the_plugins_hooks_alone(cli: Cli) -> None:
    home = Path.home()
    _install_claude_plugin(home)
    before = (home / ".claude" / "settings.json").read_text()
    code, out, _ = cli("guard", "install", "--claude")
    assert code == 0 and "already has the PreToolUse guard and the SessionStart notice from qmd's plugin (qmd@qmd)" in out
    assert (home / ".claude" / "settings.json").read_text() == before


def test_guard_advice_names_the_plugins_tool(tmp_path: Path) -> None:
    from guards.advice import claude_mcp

    assert claude_mcp(str(tmp_path)) is None
    _install_claude_plugin(Path.home())
    assert claude_mcp(str(tmp_path)) == "plugin_qmd_qmd"  # its tools: mcp__plugin_qmd_qmd__query


def test_doctor_warns_when_the_plugin_and_a_registration_by_hand_both_serve_qmd(tmp_path: Path) -> None:
    from doctor.hooks import _claude_plugin

    assert _claude_plugin() == []
    home = Path.home()
    _install_claude_plugin(home)
    [check] = _claude_plugin()
    assert (check.name, check.status.value) == ("claude plugin [qmd@qmd]", "ok")
    (home / ".claude.json").write_text(json.dumps({"mcpServers": {"qmd": {"type": "stdio", "command": "/venv/bin/qmd", "args": ["mcp"]}}}))
    [check] = _claude_plugin()
    assert check.status.value == "warn" and "runs them twice" in check.detail and check.fix == "claude mcp remove --scope user qmd"


def test_skill_install_links_no_second_copy_for_claude_code(cli: Cli) -> None:
    home = Path.home()
    _install_claude_plugin(home)
    code, out, _ = cli("skill", "install", "--global", "--yes")
    assert code == 0 and "from qmd's plugin (qmd@qmd): not linking a second copy" in out
    assert (home / ".agents" / "skills" / "qmd" / "SKILL.md").is_file()  # Codex's copy, as before
    assert not (home / ".claude" / "skills" / "qmd").exists()


def test_teardown_names_the_plugin_it_leaves_and_the_command_that_removes_it(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "empty-bin"))
    home = Path.home()
    code, out, _ = cli("teardown", "--yes")
    assert code == 0 and "plugin" not in out
    _install_claude_plugin(home)
    code, out, _ = cli("teardown", "--yes")
    assert code == 0 and "Kept: qmd's plugin in Claude Code" in out and out.count("claude plugin uninstall qmd@qmd") == 1, out
    assert claude_plugin_installed(home)  # left to Claude Code
    config = home / ".codex" / "config.toml"
    config.parent.mkdir()
    config.write_text('[plugins."qmd@qmd"]\nenabled = true\n')
    code, out, _ = cli("guard", "install", "--claude")  # something to remove: the plugin line comes after the plan
    code, out, _ = cli("teardown", "--yes")
    [line] = [line for line in out.splitlines() if "qmd's plugin" in line]
    assert "Claude Code and Codex" in line and line.endswith("claude plugin uninstall qmd@qmd && codex plugin remove qmd@qmd"), out
    assert code == 0 and claude_plugin_installed(home) and "qmd@qmd" in config.read_text()


def claude_plugin_installed(home: Path) -> bool:
    return "qmd@qmd" in _json(home / ".claude" / "plugins" / "installed_plugins.json")["plugins"]


def test_claude_config_dir_moves_the_plugin_settings_and_guard_together(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`$CLAUDE_CONFIG_DIR` (locations.claude_config_dir) is where the plugin, the user's settings
    and the guard's hooks are read and written, and teardown removes the folder it left empty."""
    from qmd.agents import claude_config_dir, claude_plugin, claude_settings

    moved = Path.home() / "elsewhere"  # teardown prunes only inside HOME
    monkeypatch.setenv("CLAUDE_CONFIG_DIR", str(moved / ".claude"))
    assert claude_config_dir() == moved / ".claude" and claude_settings("user") == moved / ".claude" / "settings.json"
    code, out, _ = cli("guard", "install", "--claude")
    assert code == 0 and (moved / ".claude" / "settings.json").is_file() and not (Path.home() / ".claude").exists()
    code, out, _ = cli("teardown", "--yes")
    assert code == 0 and not (moved / ".claude").exists(), out
    _install_claude_plugin(moved)
    assert claude_plugin(tmp_path) == "qmd@qmd"
    monkeypatch.delenv("CLAUDE_CONFIG_DIR")
    assert claude_plugin(tmp_path) is None
