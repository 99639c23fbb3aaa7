"""`qmd guard install|uninstall` round trips on settings files that already hold other hooks.

All through the real CLI entry point (`qmd guard …`, loaded from the `qmd.commands`
entry point). HOME is a temp dir (autouse fixture), so ~/.claude and ~/.codex are too.
"""

from __future__ import annotations

import json
import shlex
import sys
import tomllib
from pathlib import Path

import pytest

HOOK = shlex.quote(str(Path(sys.executable).parent / "qmd-guard"))

CLAUDE_SETTINGS = """{
  "permissions": {
    "allow": ["Bash(npm test:*)"]
  },
  "hooks": {
    "PreToolUse": [
      {
        "matcher": "Bash",
        "hooks": [
          {
            "type": "command",
            "command": "/usr/local/bin/audit-bash",
            "timeout": 10
          }
        ]
      }
    ],
    "PostToolUse": [
      {
        "matcher": "Edit|Write",
        "hooks": [
          {
            "type": "command",
            "command": "prettier --write \\"$CLAUDE_FILE\\""
          }
        ]
      }
    ]
  },
  "model": "opus"
}
"""

CODEX_HOOKS = """{
    "hooks": {
        "PreToolUse": [
            {"matcher": "^apply_patch$", "hooks": [{"type": "command", "command": "python3 ~/.codex/check_patch.py"}]}
        ],
        "Stop": [
            {"hooks": [{"type": "command", "command": "notify-send done", "timeout": 30}]}
        ]
    }
}
"""

CODEX_CONFIG = """# my codex config
model = "gpt-5-codex"   # keep this comment
approval_policy = "on-request"

[mcp_servers.docs]
command = "docs-mcp"
args = ["--stdio"]

[profiles.fast]
model = "o4-mini"
"""


@pytest.fixture
def home(isolated_home: Path) -> Path:
    return isolated_home


def test_hook_command_is_the_absolute_quoted_script_path(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("guard", "install", "--claude")
    assert code == 0, err
    settings = json.loads((home / ".claude" / "settings.json").read_text())
    [group] = settings["hooks"]["PreToolUse"]
    assert group == {"matcher": "Bash|Grep|Glob", "hooks": [{"type": "command", "command": HOOK, "timeout": 5}]}
    assert Path(shlex.split(HOOK)[0]).is_absolute()


def test_claude_round_trip_keeps_other_hooks_and_restores_bytes(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(CLAUDE_SETTINGS)
    code, out, err = cli("guard", "install", "--claude")
    assert code == 0, err
    assert "backup" in out
    backups = list(path.parent.glob("settings.json.qmd-backup-*"))
    assert len(backups) == 1 and backups[0].read_text() == CLAUDE_SETTINGS
    after = json.loads(path.read_text())
    before = json.loads(CLAUDE_SETTINGS)
    assert after["permissions"] == before["permissions"] and after["model"] == "opus"
    assert after["hooks"]["PostToolUse"] == before["hooks"]["PostToolUse"]
    assert after["hooks"]["PreToolUse"][0] == before["hooks"]["PreToolUse"][0]
    assert after["hooks"]["PreToolUse"][1] == {"matcher": "Bash|Grep|Glob", "hooks": [{"type": "command", "command": HOOK, "timeout": 5}]}

    written = path.read_bytes()
    code, out, _err = cli("guard", "install", "--claude")
    assert code == 0 and "already installed" in out
    assert path.read_bytes() == written
    assert len(list(path.parent.glob("settings.json.qmd-backup-*"))) == 1

    code, out, err = cli("guard", "uninstall", "--claude")
    assert code == 0, err
    assert path.read_text() == CLAUDE_SETTINGS


def test_symlinked_settings_from_a_dotfiles_repo_are_written_through(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    """~/.claude/settings.json and ~/.codex/config.toml as links into a dotfiles repository (stow,
    chezmoi, yadm): install replaced each link with a regular file, so the dotfiles copy silently
    stopped being the one in use. The link stays; its target gets the hook and gets it back out."""
    dotfiles = home / "dotfiles"
    dotfiles.mkdir()
    (dotfiles / "settings.json").write_text(CLAUDE_SETTINGS)
    (dotfiles / "config.toml").write_text('model = "o3"\n')
    links = {home / ".claude" / "settings.json": dotfiles / "settings.json", home / ".codex" / "config.toml": dotfiles / "config.toml"}
    for link, target in links.items():
        link.parent.mkdir()
        link.symlink_to(target)
    code, _out, err = cli("guard", "install", "--claude", "--codex")
    assert code == 0, err
    assert all(link.is_symlink() for link in links)
    assert "qmd-guard" in (dotfiles / "settings.json").read_text()
    assert "hooks = true" in (dotfiles / "config.toml").read_text()
    code, _out, err = cli("guard", "uninstall", "--claude", "--codex")
    assert code == 0, err
    assert all(link.is_symlink() for link in links)
    assert (dotfiles / "settings.json").read_text() == CLAUDE_SETTINGS
    assert (dotfiles / "config.toml").read_text() == 'model = "o3"\n'


def test_claude_uninstall_after_user_edits_removes_only_our_hook(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text(CLAUDE_SETTINGS)
    assert cli("guard", "install", "--claude")[0] == 0
    edited = json.loads(path.read_text())
    edited["env"] = {"FOO": "1"}
    edited["hooks"]["PreToolUse"].append({"matcher": "Grep", "hooks": [{"type": "command", "command": "log-grep"}]})
    path.write_text(json.dumps(edited, indent=2) + "\n")
    code, out, err = cli("guard", "uninstall", "--claude")
    assert code == 0, err
    result = json.loads(path.read_text())
    expected = json.loads(CLAUDE_SETTINGS)
    expected["env"] = {"FOO": "1"}
    expected["hooks"]["PreToolUse"].append({"matcher": "Grep", "hooks": [{"type": "command", "command": "log-grep"}]})
    assert result == expected
    assert cli("guard", "uninstall", "--claude")[1].count("nothing to remove") == 1


def test_claude_install_replaces_a_hook_from_an_older_venv(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    old = {"hooks": {"PreToolUse": [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}, {"type": "command", "command": "'/old venv/bin/qmd-guard'", "timeout": 5}]},
    ]}}
    path.write_text(json.dumps(old, indent=2) + "\n")
    assert cli("guard", "install", "--claude")[0] == 0
    groups = json.loads(path.read_text())["hooks"]["PreToolUse"]
    assert groups == [
        {"matcher": "Bash", "hooks": [{"type": "command", "command": "audit"}]},
        {"matcher": "Bash|Grep|Glob", "hooks": [{"type": "command", "command": HOOK, "timeout": 5}]},
    ]


def test_claude_project_scope_creates_and_removes_the_file(cli, home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)
    code, out, err = cli("guard", "install", "--claude", "--scope", "project")
    assert code == 0, err
    path = project / ".claude" / "settings.json"
    assert json.loads(path.read_text())["hooks"]["PreToolUse"][0]["matcher"] == "Bash|Grep|Glob"
    assert not (home / ".claude" / "settings.json").exists()
    code, out, err = cli("guard", "uninstall", "--claude", "--scope", "project")
    assert code == 0, err
    assert list(path.parent.iterdir()) == []


def test_claude_settings_that_are_not_json_are_left_alone(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    path = home / ".claude" / "settings.json"
    path.parent.mkdir()
    path.write_text("{ this is not json")
    code, out, err = cli("guard", "install", "--claude")
    assert code == 1
    assert "not valid JSON" in err and "hint:" in err
    assert path.read_text() == "{ this is not json"


def test_install_needs_an_agent(cli) -> None:  # type: ignore[no-untyped-def]
    code, _out, err = cli("guard", "install")
    assert code == 2 and "--claude" in err


def test_codex_round_trip_restores_hooks_json_and_config_toml(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    codex = home / ".codex"
    codex.mkdir()
    (codex / "hooks.json").write_text(CODEX_HOOKS)
    (codex / "config.toml").write_text(CODEX_CONFIG)
    code, out, err = cli("guard", "install", "--codex")
    assert code == 0, err
    assert "/hooks" in out and "trust" in out
    hooks = json.loads((codex / "hooks.json").read_text())
    assert hooks["hooks"]["Stop"] == json.loads(CODEX_HOOKS)["hooks"]["Stop"]
    assert hooks["hooks"]["PreToolUse"] == json.loads(CODEX_HOOKS)["hooks"]["PreToolUse"] + [
        {"matcher": "^Bash$", "hooks": [{"type": "command", "command": HOOK, "timeout": 5}]}
    ]
    config = (codex / "config.toml").read_text()
    assert config.startswith(CODEX_CONFIG)
    assert config[len(CODEX_CONFIG):] == "\n[features]\nhooks = true\n"
    parsed = tomllib.loads(config)
    assert parsed["features"] == {"hooks": True} and parsed["mcp_servers"]["docs"]["command"] == "docs-mcp"

    again = cli("guard", "install", "--codex")[1]
    assert "already installed" in again and "trust" not in again
    assert (codex / "config.toml").read_text() == config

    code, out, err = cli("guard", "uninstall", "--codex")
    assert code == 0, err
    assert (codex / "hooks.json").read_text() == CODEX_HOOKS
    assert (codex / "config.toml").read_text() == CODEX_CONFIG


def test_codex_flag_goes_into_an_existing_features_table(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    codex = home / ".codex"
    codex.mkdir()
    original = 'model = "o3"\n\n[features]\nweb_search_request = true\n\n[tui]\nnotifications = true\n'
    (codex / "config.toml").write_text(original)
    assert cli("guard", "install", "--codex")[0] == 0
    text = (codex / "config.toml").read_text()
    assert text == 'model = "o3"\n\n[features]\nhooks = true\nweb_search_request = true\n\n[tui]\nnotifications = true\n'
    assert cli("guard", "uninstall", "--codex")[0] == 0
    assert (codex / "config.toml").read_text() == original
    assert not (codex / "hooks.json").exists()


@pytest.mark.parametrize("flag", ["hooks = true", "codex_hooks = true", "hooks = false"])
def test_codex_flag_already_set_is_not_touched(cli, home: Path, flag: str) -> None:  # type: ignore[no-untyped-def]
    codex = home / ".codex"
    codex.mkdir()
    original = f"[features]\n{flag}\n"
    (codex / "config.toml").write_text(original)
    code, out, _err = cli("guard", "install", "--codex")
    assert code == 0
    assert (codex / "config.toml").read_text() == original
    assert ("hooks = false" in out) == flag.endswith("false")
    assert cli("guard", "uninstall", "--codex")[0] == 0
    assert (codex / "config.toml").read_text() == original


def test_codex_without_any_config_creates_then_removes_files(cli, home: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("guard", "install", "--codex")[0] == 0
    assert (home / ".codex" / "config.toml").read_text() == "[features]\nhooks = true\n"
    assert json.loads((home / ".codex" / "hooks.json").read_text())["hooks"]["PreToolUse"][0]["matcher"] == "^Bash$"
    assert cli("guard", "uninstall", "--codex")[0] == 0
    assert sorted(p.name for p in (home / ".codex").iterdir()) == []  # nothing of ours left, not even a backup


def test_install_refreshes_the_folder_cache(cli, home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    from qmd import harness

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "a.md").write_text("# A\n")
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    harness.StateLayout.current().guard_folders.unlink()
    code, out, _err = cli("guard", "install", "--claude", "--codex")
    assert code == 0
    assert "1 knowledge folder," in out
    assert harness.StateLayout.current().guard_folders.exists()
