"""The block log and the error log refuse to write through links (symlinks and hard links).

Before: `blocks.jsonl` was opened following a symlink, its target chmod'ed to 0600 and
appended to; rotation followed the link's size. Now a link at `blocks.jsonl` (or
`errors.log`, or `blocks.jsonl.1` when rotating) means nothing is written there, the
decision stands, and the refusal goes to errors.log unless that is a link too.
Tested with the real `qmd-guard` and real links to a file outside the state dir.
"""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from guards import blocklog
from tests.guards.test_guard_hook import blocks, errors, guard_dir, run_guard

OUTSIDE_TEXT = "someone else's file\n"


def _outside(tmp_path: Path, size: int = 0) -> Path:
    target = tmp_path / "elsewhere" / "victim.txt"
    target.parent.mkdir(exist_ok=True)
    target.write_text(OUTSIDE_TEXT + "y" * size)
    target.chmod(0o644)
    return target


def _unchanged(target: Path, size: int = 0) -> None:
    assert target.read_text() == OUTSIDE_TEXT + "y" * size
    assert stat.S_IMODE(target.stat().st_mode) == 0o644


def _deny(root: Path) -> bytes:
    return json.dumps({"session_id": "s", "cwd": f"{root}/repo", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": "grep -r foo notes"}}).encode()


def _still_denied(proc) -> None:  # type: ignore[no-untyped-def]
    assert proc.returncode == 0 and proc.stderr == b""
    assert json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecision"] == "deny"


def test_symlinked_block_log_is_not_written_through(world: Path, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    (guard_dir() / "blocks.jsonl").symlink_to(target)
    _still_denied(run_guard(_deny(world)))
    _unchanged(target)
    assert (guard_dir() / "blocks.jsonl").is_symlink()
    [line] = errors()
    assert "blocks.jsonl" in line and "link" in line, line


def test_symlinked_error_log_gets_nothing(world: Path, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    (guard_dir() / "errors.log").symlink_to(target)
    proc = run_guard(b"{not json")
    assert proc.returncode == 0 and proc.stdout == b""
    _unchanged(target)
    assert (guard_dir() / "errors.log").is_symlink()


def test_both_logs_symlinked_the_decision_stands_and_nothing_is_written(world: Path, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    (guard_dir() / "blocks.jsonl").symlink_to(target)
    (guard_dir() / "errors.log").symlink_to(target)
    _still_denied(run_guard(_deny(world)))
    _unchanged(target)
    assert sorted(p.name for p in guard_dir().iterdir()) == ["blocks.jsonl", "errors.log", "folders.json"]


def test_hard_linked_block_log_is_not_written_through(world: Path, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    os.link(target, guard_dir() / "blocks.jsonl")
    _still_denied(run_guard(_deny(world)))
    _unchanged(target)
    [line] = errors()
    assert "blocks.jsonl" in line and "link" in line, line


def test_dangling_symlink_is_not_created_through(world: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere" / "created.txt"
    target.parent.mkdir()
    (guard_dir() / "blocks.jsonl").symlink_to(target)
    _still_denied(run_guard(_deny(world)))
    assert not target.exists()


def test_rotation_does_not_follow_a_symlinked_block_log(world: Path, tmp_path: Path) -> None:
    big = blocklog.MAX_BYTES
    target = _outside(tmp_path, size=big)
    (guard_dir() / "blocks.jsonl").symlink_to(target)
    _still_denied(run_guard(_deny(world)))
    _unchanged(target, size=big)
    assert (guard_dir() / "blocks.jsonl").is_symlink() and not (guard_dir() / "blocks.jsonl.1").exists()


def test_rotation_does_not_replace_a_symlinked_old_log(world: Path, tmp_path: Path) -> None:
    target = _outside(tmp_path)
    current = guard_dir() / "blocks.jsonl"
    current.write_bytes(b'{"filler": true}\n' * (blocklog.MAX_BYTES // 17 + 1))
    current.chmod(0o600)
    size = current.stat().st_size
    (guard_dir() / "blocks.jsonl.1").symlink_to(target)
    _still_denied(run_guard(_deny(world)))
    _unchanged(target)
    assert (guard_dir() / "blocks.jsonl.1").is_symlink() and current.stat().st_size == size
    assert any("blocks.jsonl.1" in e and "link" in e for e in errors()), errors()


def test_a_regular_block_log_is_still_written_0600(world: Path) -> None:
    path = guard_dir() / "blocks.jsonl"
    path.write_text("")
    path.chmod(0o644)
    _still_denied(run_guard(_deny(world)))
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and len(blocks()) == 1


def test_record_block_raises_link_refused_in_process(tmp_path: Path) -> None:
    target = _outside(tmp_path)
    guard_dir().mkdir(parents=True)
    (guard_dir() / "blocks.jsonl").symlink_to(target)
    with pytest.raises(blocklog.LinkRefused):
        blocklog.record_block("s", "/w", "Grep", {"pattern": "x"}, "grep-tool", "/w/notes")
    _unchanged(target)


@pytest.mark.parametrize("broken", ["folder", "read-only"])
def test_a_block_log_that_cannot_be_written_still_denies(world: Path, broken: str) -> None:
    """blocks.jsonl unwritable (a folder in its place, or a read-only file: what an agent could
    arrange) let the OSError reach the fail-open handler, so the search ran: the guard was off.
    The decision was made; only its record failed: denied all the same, and errors.log says so
    (test_guard_hook's test_block_log_that_cannot_be_written asserted the allow it replaces)."""
    path = guard_dir() / "blocks.jsonl"
    if broken == "folder":
        path.mkdir()
    else:
        path.write_text("")
        path.chmod(0o400)
        if os.access(path, os.W_OK):  # root writes a 0400 file anyway: make it a folder's child that cannot be created
            path.unlink()
            path.mkdir()
    _still_denied(run_guard(_deny(world)))
    [line] = errors()
    assert "blocks.jsonl" in line and "denied all the same" in line, line
