"""Files the user made read-only (design §7: nothing lost or half-written, one clear line naming
the fix). An atomic replace needs only the folder's write bit, so qmd's temp-file-and-rename
writes went straight through a 0400 `index.yml`, an export file at 0444 or agents' settings at
0444, where `>`, `cp` or an editor would have refused; a user's write protection is now kept.
qmd runs with file modes binding (`bound_by_modes`: root without its DAC override)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modes import everything, indexed_home, moded, one_clear_error
from tests.support.modes import qmd_bound as qmd


@pytest.fixture
def indexed(isolated_home: Path, notes: Path) -> Path:
    return indexed_home(isolated_home, notes)


@pytest.fixture
def frozen_config(indexed: Path) -> Iterator[Path]:
    """index.yml at 0400 (its folder writable) for the test's body; returns the config file."""
    with moded(indexed / "index.yml", 0o400, 0o600) as config:
        yield config


def listing(home: Path) -> str:
    code, out, err = qmd("ls", cwd=home)
    assert code == 0, err
    return out


@pytest.mark.parametrize(
    "args",
    [
        ("collection", "add", "{notes}", "--name", "more"),
        ("context", "add", "qmd://notes/", "deploy runbooks"),
        ("collection", "rename", "notes", "nn"),
        ("collection", "remove", "notes"),
    ],
    ids=["collection-add", "context-add", "rename", "remove"],
)
def test_a_config_the_user_made_read_only_is_not_changed(frozen_config: Path, isolated_home: Path, notes: Path, args: tuple[str, ...]) -> None:
    """Each of these rewrote the 0400 index.yml (exit 0)."""
    folder = frozen_config.parent
    before, listed = everything(folder), listing(isolated_home)
    code, out, err = qmd(*(a.format(notes=notes) for a in args), cwd=isolated_home)
    line = one_clear_error(code, out, err, f"chmod u+w {frozen_config}")
    assert "read-only (mode 0400)" in line and str(frozen_config) in line, line
    assert everything(folder) == before  # the config as it was, no stray temp file
    assert listing(isolated_home) == listed  # and the index with it


def test_an_export_over_a_read_only_file_leaves_it(indexed: Path, isolated_home: Path, tmp_path: Path) -> None:
    """`qmd export notes.qmd.gz` replaced a 0444 earlier export (exit 0)."""
    bundle = tmp_path / "out" / "notes.qmd.gz"
    bundle.parent.mkdir()
    code, out, err = qmd("export", str(bundle), cwd=isolated_home)
    assert code == 0, err
    bundle.chmod(0o444)
    before = everything(bundle.parent)
    code, out, err = qmd("export", str(bundle), cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+w {bundle}")
    assert everything(bundle.parent) == before


def test_a_rebuild_of_a_read_only_index_leaves_it(indexed: Path, isolated_home: Path) -> None:
    """`qmd rebuild` swapped a new index in over a 0444 one, which came back 0644."""
    index = isolated_home / ".cache" / "qmd" / "index.sqlite"
    assert index.is_file()
    index.chmod(0o444)
    try:
        before = index.read_bytes()
        code, out, err = qmd("rebuild", cwd=isolated_home)
        one_clear_error(code, out, err, f"chmod u+rw {index}")
        assert index.read_bytes() == before and index.stat().st_mode & 0o777 == 0o444
        assert not list(index.parent.glob("index.sqlite.broken-*"))
    finally:
        index.chmod(0o644)


def test_agent_settings_made_read_only_are_not_rewritten_or_backed_up(isolated_home: Path) -> None:
    """`qmd guard install --claude` rewrote a 0444 ~/.claude/settings.json and left a backup of it."""
    claude = isolated_home / ".claude"
    claude.mkdir()
    settings = claude / "settings.json"
    settings.write_text(json.dumps({"permissions": {"allow": []}}, indent=2) + "\n")
    settings.chmod(0o444)
    before = everything(claude)
    code, out, err = qmd("guard", "install", "--claude", cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+w {settings}")
    assert everything(claude) == before  # no backup, no temp file


def test_a_skill_install_refused_for_claude_installs_nothing(isolated_home: Path) -> None:
    """With ~/.claude read-only, `qmd skill install --global --claude` installed into ~/.agents
    and then failed: half done, exit 1 after a ✓ line."""
    claude = isolated_home / ".claude"
    claude.mkdir()
    claude.chmod(0o555)
    try:
        code, out, err = qmd("skill", "install", "--global", "--claude", cwd=isolated_home)
    finally:
        claude.chmod(0o755)
    one_clear_error(code, out, err, f"chmod u+rwx {claude}")
    assert "✓" not in out, out
    assert not (isolated_home / ".agents").exists()
    assert list(claude.iterdir()) == []
    code, out, err = qmd("skill", "install", "--global", "--claude", cwd=isolated_home)
    assert code == 0, err
    assert (claude / "skills" / "qmd" / "SKILL.md").is_file()
