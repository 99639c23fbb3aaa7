"""`qmd guard install --print`: every file install would write, with its whole new content; nothing changes.

Through the real CLI entry point, in this process; HOME is a temp dir (autouse fixture).
"""

from __future__ import annotations

import json
import re
import tomllib
from collections.abc import Callable
from pathlib import Path

CLAUDE_SETTINGS = '{\n  "permissions": {"allow": ["Bash(npm test:*)"]},\n  "model": "opus"\n}\n'
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
CODEX_CONFIG = '# my codex config\nmodel = "gpt-5-codex"   # keep this comment\n\n[mcp_servers.docs]\ncommand = "docs-mcp"\n'

HEADER = re.compile(r"^# (/.+) would be (created|replaced \(the current file backed up first\)):$", re.MULTILINE)


def _snapshot(root: Path) -> dict[str, bytes | None]:
    return {str(p.relative_to(root)): (p.read_bytes() if p.is_file() else None) for p in sorted(root.rglob("*"))}


def _sections(out: str) -> dict[str, tuple[str, str]]:
    """path → (created|replaced…, the content shown) from --print's output."""
    marks = list(HEADER.finditer(out))
    found = {}
    for n, m in enumerate(marks):
        end = marks[n + 1].start() if n + 1 < len(marks) else len(out)
        body = out[m.end() + 1:end].split("\n\nnote: ")[0]  # the trust note after the last file
        found[m.group(1)] = (m.group(2), body)
    return found


def test_print_shows_each_file_and_changes_nothing(cli: Callable[..., tuple[int, str, str]], isolated_home: Path) -> None:
    home = isolated_home
    (home / ".claude").mkdir()
    (home / ".claude" / "settings.json").write_text(CLAUDE_SETTINGS)
    (home / ".codex").mkdir()
    (home / ".codex" / "config.toml").write_text(CODEX_CONFIG)
    before = _snapshot(home)

    code, out, err = cli("guard", "install", "--claude", "--codex", "--print")
    assert code == 0, err
    assert _snapshot(home) == before  # no file, no backup, no manifest, no folders.json
    shown = _sections(out)
    claude, hooks_json, config = (str(home / p) for p in (".claude/settings.json", ".codex/hooks.json", ".codex/config.toml"))
    assert set(shown) == {claude, hooks_json, config}
    assert shown[claude][0].startswith("replaced") and shown[hooks_json][0] == "created" and shown[config][0].startswith("replaced")
    assert "qmd guard trust --codex" in out

    # what --print showed is byte for byte what install then writes (less the final newline)
    code, _out, err = cli("guard", "install", "--claude", "--codex")
    assert code == 0, err
    for path, (_how, body) in shown.items():
        assert Path(path).read_text().rstrip("\n") == body.rstrip("\n"), path
    assert json.loads(shown[hooks_json][1])["hooks"]["PreToolUse"][0]["matcher"] == "^Bash$"
    assert tomllib.loads(shown[config][1])["features"] == {"hooks": True}

    after = _snapshot(home)
    code, out, err = cli("guard", "install", "--claude", "--codex", "--print")
    assert code == 0, err
    assert _snapshot(home) == after
    assert not _sections(out) and out.count("already installed") == 2


def test_print_on_a_file_with_other_hooks_shows_them_kept(cli: Callable[..., tuple[int, str, str]], isolated_home: Path) -> None:
    codex = isolated_home / ".codex"
    codex.mkdir()
    (codex / "hooks.json").write_text(CODEX_HOOKS)
    code, out, err = cli("guard", "install", "--codex", "--print")
    assert code == 0, err
    assert (codex / "hooks.json").read_text() == CODEX_HOOKS and not list(codex.glob("*.qmd-backup-*"))
    how, body = _sections(out)[str(codex / "hooks.json")]
    data = json.loads(body)
    assert how.startswith("replaced") and data["hooks"]["Stop"] == json.loads(CODEX_HOOKS)["hooks"]["Stop"]
    assert [g["matcher"] for g in data["hooks"]["PreToolUse"]] == ["^apply_patch$", "^Bash$"]
