"""`qmd guard check|stats|log|refresh` through the real CLI entry point (the `guard` entry point)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import qmd
from qmd import harness
from guards import blocklog


def test_check_explains_a_deny(cli, world: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("guard", "check", "grep -rn 'retry policy' .", "--cwd", str(world / "repo"))
    assert code == 0, err
    assert out.startswith("deny  (shell-search-root)")
    assert "searches found:" in out and "reason shown to the agent:" in out
    assert "qmd search 'retry policy' -c notes" in out
    assert "grep -rn 'retry policy' README.md docs/guide.md src tests vendor/lib" in out
    assert not (harness.state_dir() / "guard" / "blocks.jsonl").exists()  # check never logs


def test_check_explains_an_allow(cli, world: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _err = cli("guard", "check", "grep -r foo src/ > notes/out.txt", "--cwd", str(world / "repo"))
    assert code == 0
    assert out.startswith("allow (outside)")


def test_check_grep_tool_as_json(cli, world: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, _err = cli("guard", "check", "retry", "--tool", "Grep", "--path", "notes", "--cwd", str(world / "repo"), "--json")
    assert code == 0
    result = json.loads(out)
    assert result["decision"] == "deny" and result["rule"] == "grep-tool" and result["folder"] == f"{world}/repo/notes"
    assert "qmd search retry -c notes" in result["reason"]
    code, out, _err = cli("guard", "check", "retry", "--tool", "Grep", "--glob", "*.py", "--cwd", str(world / "repo"), "--json")
    assert json.loads(out)["rule"] == "filtered"


def test_check_warns_when_the_cache_is_missing_or_stale(cli, world: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    harness.StateLayout.current().guard_folders.unlink()
    code, out, _err = cli("guard", "check", "rg foo", "--cwd", str(world / "repo"))
    assert code == 0 and "does not exist" in out and out.splitlines()[1].startswith("allow (no-knowledge)")
    notes = tmp_path / "more-notes"
    notes.mkdir()
    assert cli("collection", "add", str(notes), "--name", "more")[0] == 0
    config = qmd.resolve_index(None).config_path
    os.utime(config, (config.stat().st_mtime + 60, config.stat().st_mtime + 60))
    code, out, _err = cli("guard", "check", "rg foo", "--cwd", str(world / "repo"))
    assert "qmd guard refresh" in out
    code, out, _err = cli("guard", "refresh")
    assert code == 0 and "1 knowledge folder," in out


def test_check_rejects_an_unknown_tool(cli, world: Path) -> None:  # type: ignore[no-untyped-def]
    code, _out, err = cli("guard", "check", "x", "--tool", "Read")
    assert code == 2 and "Bash, Grep or Glob" in err


def _blocks() -> None:
    t0 = 1_700_000_000.0  # 2023-11-14T22:13:20Z
    day = 86400
    blocklog.record_block("a", "/w", "Bash", {"command": "rg foo notes"}, "shell-search", "/w/notes", now=t0)
    blocklog.record_block("a", "/w", "Bash", {"command": "rg  foo notes"}, "shell-search", "/w/notes", now=t0 + 30)
    blocklog.record_block("b", "/w", "Bash", {"command": "grep -rn foo ."}, "shell-search-root", "/w/notes", now=t0 + day)
    blocklog.record_block("b", "/w", "Grep", {"pattern": "foo", "path": "/w/notes"}, "grep-tool", "/w/notes", now=t0 + day + 5)


def test_stats_summarise_rules_days_retries_and_top_calls(cli) -> None:  # type: ignore[no-untyped-def]
    _blocks()
    code, out, _err = cli("guard", "stats", "--json")
    assert code == 0
    summary = json.loads(out)
    assert summary["total"] == 4 and summary["retries"] == 1 and summary["sessions"] == 2
    assert summary["by_rule"] == {"shell-search": 2, "shell-search-root": 1, "grep-tool": 1}
    assert summary["by_day"] == {"2023-11-14": 2, "2023-11-15": 2}
    assert summary["top_calls"][0] == {"call": "rg foo notes", "count": 2}
    code, out, _err = cli("guard", "stats")
    assert "4 blocks in 2 sessions; 1 retries" in out and "shell-search-root" in out and "Grep pattern=foo path=/w/notes" in out
    assert json.loads(cli("guard", "stats", "--days", "7", "--json")[1])["total"] == 0


def test_stats_and_log_when_nothing_was_blocked(cli) -> None:  # type: ignore[no-untyped-def]
    assert "No blocks logged yet." in cli("guard", "stats")[1]
    assert "No blocks logged yet" in cli("guard", "log")[1]


def test_log_tails_the_block_log(cli) -> None:  # type: ignore[no-untyped-def]
    _blocks()
    code, out, _err = cli("guard", "log", "-n", "2")
    assert code == 0
    lines = out.splitlines()
    assert len(lines) == 2
    assert "shell-search-root" in lines[0] and "grep -rn foo ." in lines[0]
    assert lines[1].startswith("2023-11-15T") and "grep-tool" in lines[1]
    raw = cli("guard", "log", "--json", "-n", "1")[1]
    assert json.loads(raw)["tool"] == "Grep"
    assert " retry " in cli("guard", "log", "-n", "3")[1].splitlines()[0]


def test_guard_help_lists_the_commands(cli) -> None:  # type: ignore[no-untyped-def]
    code, out, _err = cli("guard", "--help")
    assert code == 0
    for name in ("check", "stats", "log", "install", "uninstall", "refresh"):
        assert name in out
