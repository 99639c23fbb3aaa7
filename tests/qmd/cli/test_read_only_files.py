"""Files the user made read-only (design §7: nothing lost or half-written, one clear line naming
the fix). An atomic replace needs only the folder's write bit, so qmd's temp-file-and-rename
writes went straight through a 0400 `index.yml`, an export file at 0444 or agents' settings at
0444, where `>`, `cp` or an editor would have refused; a user's write protection is now kept.
qmd runs with file modes binding (`bound_by_modes`: root without its DAC override)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modes import everything, indexed_home, moded, one_clear_error
from tests.support.modes import qmd_bound as qmd
from tests.support.run import command, qmd_env


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


root_only = pytest.mark.skipif(os.geteuid() != 0, reason="needs root (mount, chattr, another user)")


# --- the hint must name a fix that fixes it ------------------------------------------------


@root_only
def test_an_immutable_config_is_not_told_to_chmod(indexed: Path, isolated_home: Path) -> None:
    """`chattr +i index.yml` (mode 0600): "it is read-only (mode 0600)" + "chmod u+w": the mode
    already has u+w, the chmod changes nothing; the file is immutable (chattr -i)."""
    config = indexed / "index.yml"
    if subprocess.run(["chattr", "+i", str(config)], capture_output=True).returncode != 0:
        pytest.skip("no chattr +i here")
    try:
        code, out, err = qmd("context", "add", "qmd://notes/", "x", cwd=isolated_home)
    finally:
        subprocess.run(["chattr", "-i", str(config)], check=True)
    assert code == 1, err
    assert "chmod u+w" not in err, err  # a chmod that cannot help
    assert "chattr -i" in err or "immutable" in err, err


@root_only
def test_a_config_owned_by_another_user_is_not_told_to_chmod() -> None:
    """index.yml owned by root (0644) in a config folder of uid 1000's: qmd run as uid 1000 says
    "read-only (mode 0644)" and "chmod u+w FILE", which uid 1000 may not run (EPERM)."""
    base = Path(tempfile.mkdtemp(prefix="qmd-rt-owner-"))
    try:
        base.chmod(0o755)
        home = base / "home"
        notes = base / "notes"
        notes.mkdir()
        (notes / "a.md").write_text("# A\n\nalpha\n")
        env = {k: v for k, v in qmd_env({"QMD_SERVER": "off"}).items() if not k.startswith(("XDG_", "QMD_TRUST"))}
        env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"), XDG_STATE_HOME=str(home / ".local/state"),
                   XDG_DATA_HOME=str(home / ".local/share"), PYTHONPATH=str(Path(__file__).resolve().parents[3]))
        home.mkdir()
        done = subprocess.run(command("collection", "add", str(notes), "--name", "notes"), env=env, cwd=home, capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        config = home / ".config" / "qmd" / "index.yml"
        subprocess.run(["chown", "-R", "1000:1000", str(home), str(notes)], check=True)
        os.chown(config, 0, 0)
        config.chmod(0o644)
        as_user = ["setpriv", "--reuid=1000", "--regid=1000", "--clear-groups"]
        done = subprocess.run([*as_user, *command("context", "add", "qmd://notes/", "x")], env=env, cwd=home, capture_output=True, text=True)
        assert done.returncode == 1, done.stderr
        assert f"chmod u+w {config}" not in done.stderr, done.stderr  # uid 1000 cannot chmod root's file
        assert "owned by" in done.stderr or "chown" in done.stderr or "sudo" in done.stderr, done.stderr
    finally:
        shutil.rmtree(base, ignore_errors=True)


@root_only
def test_a_config_file_bind_mounted_read_only_is_refused_before_the_index_changes(indexed: Path, isolated_home: Path) -> None:
    """`-v ./index.yml:…/index.yml:ro` (a file mounted read-only, its folder writable): `collection
    remove` emptied the index, then failed to save the config with "Device or resource busy" and a
    hint to check the (writable) folder; the config still lists the collection, with 0 files."""
    config = indexed / "index.yml"
    listed = listing(isolated_home)
    if subprocess.run(["mount", "--bind", str(config), str(config)], capture_output=True).returncode != 0:
        pytest.skip("cannot bind-mount here")
    try:
        subprocess.run(["mount", "-o", "remount,bind,ro", str(config)], check=True)
        code, out, err = qmd("collection", "remove", "notes", cwd=isolated_home)
        after = listing(isolated_home)
    finally:
        subprocess.run(["umount", str(config)], check=True)
    line = one_clear_error(code, out, err, "mount the folder that holds it instead")
    assert "mounted on its own" in line and "busy" not in err, err
    assert after == listed  # the index as it was: its 2 files still listed


# --- two files: both checked before either is written ---------------------------------------


def _read_only_codex_config(home: Path) -> Path:
    """~/.codex/config.toml holding a setting of the user's, at 0444."""
    toml = home / ".codex" / "config.toml"
    toml.parent.mkdir()
    toml.write_text('model = "x"\n')
    toml.chmod(0o444)
    return toml


def test_guard_install_codex_with_a_read_only_config_toml_writes_nothing(isolated_home: Path) -> None:
    """config.toml 0444: hooks.json was created and recorded, then exit 1 on config.toml."""
    toml = _read_only_codex_config(isolated_home)
    codex = toml.parent
    code, out, err = qmd("guard", "install", "--codex", cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+w {toml}")
    assert not (codex / "hooks.json").exists(), "hooks.json written, config.toml refused: half installed"
    assert not (isolated_home / ".local" / "state" / "qmd" / "guard" / "installed.json").exists()


def test_mcp_install_claude_and_codex_with_a_read_only_codex_config_writes_nothing(isolated_home: Path) -> None:
    """~/.claude.json was registered (a ✓ line), then exit 1 on Codex's 0444 config.toml."""
    toml = _read_only_codex_config(isolated_home)
    code, out, err = qmd("mcp", "install", "--claude", "--codex", cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+w {toml}")
    assert not (isolated_home / ".claude.json").exists(), out


# --- removal ----------------------------------------------------------------------------------


@pytest.mark.parametrize("agent", ["--claude", "--codex"])
def test_guard_uninstall_does_not_delete_a_file_made_read_only(isolated_home: Path, agent: str) -> None:
    """A settings.json / hooks.json / config.toml qmd created, then made 0444 by the user, was
    deleted by `guard uninstall` (exit 0): write_or_remove refuses removing such a file, guard's
    own `path.unlink()` does not ask."""
    code, out, err = qmd("guard", "install", agent, cwd=isolated_home)
    assert code == 0, err
    files = [p for p in (isolated_home / ".claude" / "settings.json", isolated_home / ".codex" / "hooks.json", isolated_home / ".codex" / "config.toml") if p.exists()]
    assert files
    for p in files:
        p.chmod(0o444)
    code, out, err = qmd("guard", "uninstall", agent, cwd=isolated_home)
    assert all(p.exists() for p in files), out  # deleted though read-only
    one_clear_error(code, out, err, "chmod u+w")


def test_teardown_names_a_read_only_file_in_words(isolated_home: Path) -> None:
    """teardown over a 0444 ~/.claude.json printed "failed: …: [Errno 13] read-only (mode 0444):
    '/…/.claude.json'" (Python's repr of the exception) and no fix but "fix what they name"."""
    assert qmd("mcp", "install", "--claude", cwd=isolated_home)[0] == 0
    (isolated_home / ".claude.json").chmod(0o444)
    code, out, err = qmd("teardown", "--yes", cwd=isolated_home)
    assert code == 1, err
    assert "[Errno" not in err, err
    assert f"chmod u+w {isolated_home / '.claude.json'}" in err, err


# --- the skill -----------------------------------------------------------------------------------


@pytest.mark.parametrize("blocker", [".claude", ".claude/skills"])
def test_skill_install_claude_with_a_file_where_claudes_folder_goes_installs_nothing(isolated_home: Path, blocker: str) -> None:
    """A file at ~/.claude (or ~/.claude/skills): `_ready_for_claude` probes the nearest folder
    that exists (HOME) and passes; ~/.agents got the skill (✓), then exit 1. For ~/.claude the
    message and hint name ~/.claude/skills, which does not exist."""
    path = isolated_home / blocker
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("not a folder\n")
    code, out, err = qmd("skill", "install", "--global", "--claude", cwd=isolated_home)
    assert code == 1, err
    assert "✓" not in out, out
    assert not (isolated_home / ".agents").exists(), "half installed: .agents written, Claude's side refused"
    assert str(path) in err.splitlines()[-1], err  # the hint names the file in the way


def test_skill_install_claude_over_a_read_only_claude_copy_folder_installs_nothing(isolated_home: Path) -> None:
    """~/.claude/skills/qmd a copy of the skill in a 0555 folder: .agents installed (✓), then
    exit 1 saying it "cannot create files in HOME" with `chmod u+rwx HOME` (HOME is writable)."""
    copy = isolated_home / ".claude" / "skills" / "qmd"
    copy.mkdir(parents=True)
    text = qmd("skill", "show", cwd=isolated_home)[1]
    (copy / "SKILL.md").write_text(text)
    copy.chmod(0o555)
    try:
        code, out, err = qmd("skill", "install", "--global", "--claude", cwd=isolated_home)
    finally:
        copy.chmod(0o755)
    assert code == 1, err
    assert not (isolated_home / ".agents").exists(), out
    assert f"chmod u+rwx {isolated_home})" not in err and str(copy) in err, err


def test_reinstalling_the_same_skill_over_a_read_only_copy_is_not_an_error(isolated_home: Path) -> None:
    """SKILL.md already holds exactly the skill, at 0444: nothing would change, yet `skill
    install --global` exited 1 (exit 0 before the protection was kept)."""
    code, out, err = qmd("skill", "install", "--global", "--no-claude", cwd=isolated_home)
    assert code == 0, err
    skill = isolated_home / ".agents" / "skills" / "qmd" / "SKILL.md"
    skill.chmod(0o444)
    code, out, err = qmd("skill", "install", "--global", "--no-claude", cwd=isolated_home)
    assert code == 0, err


def test_a_config_change_that_changes_nothing_is_no_error_over_a_read_only_config(indexed: Path, isolated_home: Path) -> None:
    """`context add` of the context already set, over a 0400 index.yml: nothing to write, exit 0
    (it exited 1 naming the chmod); a real change is still refused."""
    assert qmd("context", "add", "qmd://notes/", "deploy runbooks", cwd=isolated_home)[0] == 0
    with moded(indexed / "index.yml", 0o400, 0o600) as config:
        before = config.read_bytes()
        code, out, err = qmd("context", "add", "qmd://notes/", "deploy runbooks", cwd=isolated_home)
        assert code == 0, err
        code, out, err = qmd("context", "add", "qmd://notes/", "something else", cwd=isolated_home)
        one_clear_error(code, out, err, f"chmod u+w {config}")
        assert config.read_bytes() == before


# --- other files of the user's ------------------------------------------------------------------


def test_a_read_only_tokens_file_is_not_replaced(indexed: Path, isolated_home: Path) -> None:
    """~/.config/qmd/index.tokens.json at 0444 (beside index.yml): `token add` and `token revoke`
    replace it (exit 0) and it comes back 0600."""
    assert qmd("token", "add", "alice", cwd=isolated_home)[0] == 0
    tokens = indexed / "index.tokens.json"
    tokens.chmod(0o444)
    before = everything(indexed)
    code, out, err = qmd("token", "add", "bob", cwd=isolated_home)
    assert everything(indexed) == before and tokens.stat().st_mode & 0o777 == 0o444, out
    one_clear_error(code, out, err, f"chmod u+w {tokens}")


def test_a_refused_write_through_a_dotfiles_link_leaves_no_backup(isolated_home: Path, tmp_path: Path) -> None:
    """~/.claude/settings.json -> dots/settings.json (writable) in a 0555 dots folder: the
    backup is made beside the link, then the write into dots/ fails: exit 1 with a stray
    settings.json.qmd-backup-* left in ~/.claude."""
    dots = tmp_path / "dots"
    dots.mkdir()
    (dots / "settings.json").write_text(json.dumps({"permissions": {"allow": []}}, indent=2) + "\n")
    claude = isolated_home / ".claude"
    claude.mkdir()
    (claude / "settings.json").symlink_to(dots / "settings.json")
    dots.chmod(0o555)
    try:
        code, out, err = qmd("guard", "install", "--claude", cwd=isolated_home)
    finally:
        dots.chmod(0o755)
    assert code == 1, err
    assert not list(claude.glob("settings.json.qmd-backup-*")), "a refused write left a backup"


_ = sys  # keep the import list stable
