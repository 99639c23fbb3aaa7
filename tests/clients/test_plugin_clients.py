"""qmd's plugin installed by the real Claude Code and Codex, with their own commands.

The pinned clients from npm (tests/support/npm_clients.py; skipped with the reason where npm
is missing), each in an isolated HOME, install the plugin from a local marketplace: a copy of
this repository's `.claude-plugin/marketplace.json` and `plugins/qmd/`. Asserted through the
clients' own commands: the plugin is installed and enabled, with qmd's MCP server (which
connects, `qmd` on PATH), the skill and the two hooks; then `qmd mcp install` and `qmd guard
install` see it and add no second copy. Then one real `claude -p` session against the fake
model API (tests/clients/fakeapi.py), qmd set up only through the plugin: its server, skill and
both hooks at work.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

from qmd.core.version import __version__
from tests.support.npm_clients import npm_bin
from tests.support.paths import REPO
from tests.support.run import qmd_on_path, run_qmd

pytestmark = pytest.mark.slow

_DROP = ("QMD_", "ANTHROPIC_", "OPENAI_", "CLAUDE_", "CODEX_", "MCP_")


def _world(tmp_path: Path, client: str) -> tuple[dict[str, str], Path, Path]:
    """(the environment, a working folder, the marketplace folder) for `client`."""
    exe = npm_bin(client)
    env = {k: v for k, v in os.environ.items() if not k.startswith(_DROP)}
    env.update(HOME=str(Path.home()), QMD_THREADS="1", DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    env["PATH"] = os.pathsep.join([str(exe.parent), str(qmd_on_path(tmp_path / "bin")), env.get("PATH", "/usr/bin:/bin")])
    market = tmp_path / "market"
    shutil.copytree(REPO / ".claude-plugin", market / ".claude-plugin")
    shutil.copytree(REPO / "plugins", market / "plugins")
    work = tmp_path / "work"
    work.mkdir()
    return env, work, market


def _run(env: dict[str, str], cwd: Path, *argv: str) -> subprocess.CompletedProcess[str]:
    exe = shutil.which(argv[0], path=env["PATH"])
    assert exe is not None
    proc = subprocess.run([exe, *argv[1:]], env=env, cwd=cwd, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    assert proc.returncode == 0, f"{' '.join(argv)}: {proc.stdout}{proc.stderr}"
    return proc


def test_claude_code_installs_the_plugin_from_a_local_marketplace(tmp_path: Path) -> None:
    env, work, market = _world(tmp_path, "claude")
    assert "Validation passed" in _run(env, work, "claude", "plugin", "validate", str(market)).stdout
    assert "Validation passed" in _run(env, work, "claude", "plugin", "validate", str(market / "plugins" / "qmd")).stdout
    assert "Successfully added marketplace: qmd" in _run(env, work, "claude", "plugin", "marketplace", "add", str(market)).stdout
    assert "Successfully installed plugin: qmd@qmd" in _run(env, work, "claude", "plugin", "install", "qmd@qmd").stdout

    listed = json.loads(_run(env, work, "claude", "plugin", "list", "--json").stdout)
    [plugin] = [p for p in listed if p["id"].startswith("qmd@")]  # newer versions list their built-in plugins too
    assert (plugin["id"], plugin["version"], plugin["enabled"]) == ("qmd@qmd", __version__, True)
    assert plugin["mcpServers"] == {"qmd": {"type": "stdio", "command": "qmd", "args": ["mcp"], "alwaysLoad": True}}
    details = " ".join(_run(env, work, "claude", "plugin", "details", "qmd@qmd").stdout.split())
    for part in ("Skills (1) qmd", "Hooks (2) SessionStart, PreToolUse", "MCP servers (1) qmd"):
        assert part in details, details
    installed = Path(plugin["installPath"])
    assert (installed / "skills" / "qmd" / "SKILL.md").read_bytes() == (REPO / "plugins" / "qmd" / "skills" / "qmd" / "SKILL.md").read_bytes()
    assert os.access(installed / "hooks" / "qmd-hook", os.X_OK)
    listing = _run(env, work, "claude", "mcp", "list").stdout
    assert "plugin:qmd:qmd: qmd mcp - ✔ Connected" in listing, listing

    # the manual ways see the plugin and add nothing: one qmd server, hooks only from the plugin
    proc = run_qmd("mcp", "install", "--claude", env=env, cwd=work)
    assert proc.returncode == 0 and "from qmd's plugin (qmd@qmd)" in proc.stdout, proc.stdout + proc.stderr
    proc = run_qmd("guard", "install", "--claude", env=env, cwd=work)
    assert proc.returncode == 0 and "from qmd's plugin (qmd@qmd)" in proc.stdout, proc.stdout + proc.stderr
    listing = _run(env, work, "claude", "mcp", "list").stdout
    assert [line for line in listing.splitlines() if "qmd" in line] == ["plugin:qmd:qmd: qmd mcp - ✔ Connected"], listing
    settings = json.loads((Path.home() / ".claude" / "settings.json").read_text())
    assert settings["enabledPlugins"] == {"qmd@qmd": True} and "hooks" not in settings


def test_codex_installs_the_same_plugin_from_the_same_marketplace(tmp_path: Path) -> None:
    env, work, market = _world(tmp_path, "codex")
    out = _run(env, work, "codex", "plugin", "marketplace", "add", str(market)).stdout
    assert "Added marketplace `qmd`" in out
    assert "Added plugin `qmd` from marketplace `qmd`" in _run(env, work, "codex", "plugin", "add", "qmd@qmd").stdout
    listing = _run(env, work, "codex", "plugin", "list").stdout
    assert any(line.split()[:4] == ["qmd@qmd", "installed,", "enabled", __version__] for line in listing.splitlines()), listing
    servers = _run(env, work, "codex", "mcp", "list").stdout
    assert any(line.split()[:3] == ["qmd", "qmd", "mcp"] for line in servers.splitlines()), servers
    installed = Path.home() / ".codex" / "plugins" / "cache" / "qmd" / "qmd" / __version__
    assert (installed / "skills" / "qmd" / "SKILL.md").is_file() and (installed / "hooks" / "hooks.json").is_file()

    proc = run_qmd("mcp", "install", "--codex", env=env, cwd=work)
    assert proc.returncode == 0 and "from qmd's plugin (qmd@qmd)" in proc.stdout, proc.stdout + proc.stderr
    proc = run_qmd("guard", "install", "--codex", env=env, cwd=work)
    assert proc.returncode == 0 and "from qmd's plugin (qmd@qmd)" in proc.stdout, proc.stdout + proc.stderr
    servers = _run(env, work, "codex", "mcp", "list").stdout
    assert [line.split()[0] for line in servers.splitlines()[1:] if line.strip()] == ["qmd"], servers
    assert not (Path.home() / ".codex" / "hooks.json").exists()


def test_claude_code_runs_the_plugins_server_skill_and_hooks(tmp_path: Path) -> None:
    """One `claude -p` run against the fake model API, qmd set up only through the plugin: the
    first request offers the plugin's query tool and the skill, the SessionStart notice of a
    raised health flag reaches the model, the query answers and the grep sweep is denied."""
    from tests.clients.fakeapi import FakeAnthropic, Step
    from tests.clients.test_real_clients import GUARD_REASON, NOTICE, QUESTION, make_box, raise_health_flag, run_client

    box = make_box(tmp_path / "box", "claude")
    market = tmp_path / "market"
    shutil.copytree(REPO / ".claude-plugin", market / ".claude-plugin")
    shutil.copytree(REPO / "plugins", market / "plugins")
    box.env.update(DISABLE_AUTOUPDATER="1", CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC="1")
    _run(box.env, box.work, "claude", "plugin", "marketplace", "add", str(market))
    _run(box.env, box.work, "claude", "plugin", "install", "qmd@qmd")
    box.qmd("collection", "add", str(box.notes), "--name", "notes")
    box.qmd("update")
    box.qmd("hooks", "install", str(box.notes))
    raise_health_flag(box)
    query = Step("mcp__plugin_qmd_qmd__query", {"query": QUESTION})
    grep = Step("Bash", {"command": f"grep -rn rollback {box.notes}"})
    fake = FakeAnthropic([query, grep]).start()
    try:
        run = run_client(box, fake, skip_permissions=True)
    finally:
        fake.stop()
    assert run.returncode == 0, run.stderr[-2000:]
    assert query.tool in run.first_tools("claude"), sorted(run.first_tools("claude"))
    assert run.mentions("qmd:qmd") and run.mentions("Search the user's local markdown notes")  # the plugin's skill, listed for the model
    assert "deploy.md" in (run.result_of("claude", query) or ""), run.result_of("claude", query)
    denied = run.result_of("claude", grep) or ""
    assert all(part in denied for part in GUARD_REASON) and "mcp__plugin_qmd_qmd__query" in denied, denied
    assert run.mentions(NOTICE)
