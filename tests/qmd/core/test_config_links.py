"""A config that is a link (design §7: nothing of the user's lost). In qmd's own config folder a
link to a file (a dotfiles manager's: stow, chezmoi, yadm) is written through: saving replaced the
link with a plain file, and the dotfiles copy silently stopped being the one in use. Anywhere
else (a project's `.qmd/`, which a cloned repository controls) the link is replaced, never
written through: a repository must not make qmd write a file outside it."""

from __future__ import annotations

from pathlib import Path

from qmd.core.config import Config
from tests.support.modes import one_clear_error
from tests.support.modes import qmd_bound as qmd


def test_a_linked_config_in_the_config_folder_is_written_through(isolated_home: Path, notes: Path) -> None:
    dotfiles = isolated_home / "dotfiles" / "qmd" / "index.yml"
    dotfiles.parent.mkdir(parents=True)
    dotfiles.write_text("collections: {}\n")
    config = isolated_home / ".config" / "qmd" / "index.yml"
    config.parent.mkdir(parents=True)
    config.symlink_to(dotfiles)
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    assert code == 0, err
    assert config.is_symlink() and config.resolve() == dotfiles.resolve()  # the link kept
    assert "notes:" in dotfiles.read_text()  # and the file it names changed
    code, out, err = qmd("ls", cwd=isolated_home)
    assert code == 0 and "qmd://notes/" in out, out + err


def test_a_linked_config_whose_file_is_read_only_names_that_file(isolated_home: Path, notes: Path) -> None:
    dotfiles = isolated_home / "dotfiles" / "index.yml"
    dotfiles.parent.mkdir(parents=True)
    dotfiles.write_text("collections: {}\n")
    dotfiles.chmod(0o444)
    config = isolated_home / ".config" / "qmd" / "index.yml"
    config.parent.mkdir(parents=True)
    config.symlink_to(dotfiles)
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+w {dotfiles}")
    assert config.is_symlink() and dotfiles.read_text() == "collections: {}\n"


def test_a_linked_project_config_is_replaced_never_written_through(tmp_path: Path, isolated_home: Path) -> None:
    outside = tmp_path / "elsewhere.yml"
    outside.write_text("collections: {}\n")
    local = tmp_path / "project" / ".qmd" / "index.yml"
    local.parent.mkdir(parents=True)
    local.symlink_to(outside)
    config = Config.load(local)
    config.raw["global_context"] = "written"
    config.save()
    assert not local.is_symlink() and "written" in local.read_text()
    assert outside.read_text() == "collections: {}\n"  # the file outside the project untouched
