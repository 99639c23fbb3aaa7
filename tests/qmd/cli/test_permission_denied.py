"""A hostile environment of file modes (design §7: one clear line naming the fix, exit 1, nothing
lost or half-written; exit 3 "this is a bug" is for bugs only): a config folder qmd may not write
in, a working folder or project `.qmd` it may not look into, a project folder `qmd init` may not
write in. qmd runs with file modes binding (`bound_by_modes`: root without its DAC override)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modes import everything, indexed_home, moded, one_clear_error
from tests.support.modes import qmd_bound as qmd


@pytest.fixture
def indexed(isolated_home: Path, notes: Path) -> Path:
    return indexed_home(isolated_home, notes)


@pytest.fixture
def read_only(indexed: Path) -> Iterator[Path]:
    """The config folder at 0500 for the test's body."""
    with moded(indexed, 0o500, 0o755):
        yield indexed


def search_paths(home: Path, query: str = "rollback") -> list[str]:
    code, out, err = qmd("search", query, "--json", cwd=home)
    assert code == 0, err
    return [hit["file"] for hit in json.loads(out)]


@pytest.mark.parametrize(
    "args",
    [
        ("collection", "add", "{notes}", "--name", "more"),
        ("context", "add", "qmd://notes/", "deploy runbooks"),
        ("token", "add", "bob"),
        ("collection", "rename", "notes", "nn"),
        ("collection", "remove", "notes"),
    ],
    ids=["collection-add", "context-add", "token-add", "rename", "remove"],
)
def test_a_config_folder_qmd_may_not_write_in_is_one_line_naming_the_chmod(read_only: Path, isolated_home: Path, notes: Path, args: tuple[str, ...]) -> None:
    """Each of these crashed with exit 3 (PermissionError on `.index.yml.<pid>.tmp`)."""
    before = everything(read_only)
    code, out, err = qmd(*(a.format(notes=notes) for a in args), cwd=isolated_home)
    one_clear_error(code, out, err, f"chmod u+rwx {read_only}")
    assert "cannot" in err and str(read_only) in err.splitlines()[0]
    assert everything(read_only) == before  # no stray temp file, nothing half-written


def test_an_import_the_config_cannot_follow_is_one_line_and_adds_nothing(indexed: Path, isolated_home: Path, tmp_path: Path) -> None:
    """`qmd import` crashed with exit 3 on the config's temp file; the index rolls back with it."""
    bundle = tmp_path / "notes.qmdx"
    code, out, err = qmd("export", str(bundle), cwd=isolated_home)
    assert code == 0, err
    code, out, err = qmd("--index", "other", "import", str(bundle), cwd=isolated_home)
    assert code == 0, err  # the config folder writable: it works
    code, out, err = qmd("--index", "third", "ls", cwd=isolated_home)
    assert code == 0 and "qmd://notes/" not in out
    indexed.chmod(0o500)
    try:
        before = everything(indexed)
        code, out, err = qmd("--index", "third", "import", str(bundle), cwd=isolated_home)
        one_clear_error(code, out, err, f"chmod u+rwx {indexed}")
        assert everything(indexed) == before
    finally:
        indexed.chmod(0o755)
    code, out, err = qmd("--index", "third", "ls", cwd=isolated_home)
    assert code == 0 and "qmd://notes/" not in out, out


def test_a_rename_or_remove_refused_for_the_config_leaves_the_index_as_it_was(read_only: Path, isolated_home: Path) -> None:
    """Both changed the index first and crashed on the config: the index said `nn` (or held
    nothing) while the config still said `notes`, so searches found nothing and the next
    update dropped and re-added every document. A refusal now changes neither."""
    assert search_paths(isolated_home)
    for args in (("collection", "rename", "notes", "nn"), ("collection", "remove", "notes")):
        code, out, err = qmd(*args, cwd=isolated_home)
        assert code == 1, (args, code, err)
        hits = search_paths(isolated_home)
        assert hits and all(h.startswith("qmd://notes/") for h in hits), (args, hits)
        code, out, err = qmd("ls", cwd=isolated_home)
        assert code == 0 and "qmd://notes/" in out and "nn" not in out, (args, out)
    read_only.chmod(0o755)
    code, out, err = qmd("collection", "rename", "notes", "nn", cwd=isolated_home)
    assert code == 0, err
    hits = search_paths(isolated_home)
    assert hits and all(h.startswith("qmd://nn/") for h in hits), hits


def test_a_first_run_under_a_config_home_qmd_may_not_write_in_names_it(isolated_home: Path, notes: Path) -> None:
    """`~/.config` at 0500, no `qmd` folder in it yet: creating it crashed with exit 3."""
    config_home = isolated_home / ".config"
    config_home.mkdir()
    config_home.chmod(0o500)
    try:
        code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    finally:
        config_home.chmod(0o755)
    one_clear_error(code, out, err, f"chmod u+rwx {config_home}")
    assert not (config_home / "qmd").exists()


@pytest.mark.parametrize("mode", [0o000, 0o600])
@pytest.mark.parametrize("args", [("search", "rollback"), ("status",), ("ls",), ("update",)], ids=lambda a: a[0])
def test_a_working_folder_qmd_cannot_look_into_is_passed_over(indexed: Path, tmp_path: Path, mode: int, args: tuple[str, ...]) -> None:
    """`sudo -u alice qmd …` from /root, or `chmod 000 .`: looking for `.qmd/index.yml` there
    crashed (exit 3); such a folder cannot hold an index this user could use, so the default
    index serves."""
    work = tmp_path / "w"
    work.mkdir()
    work.chmod(mode)
    try:
        code, out, err = qmd(*args, cwd=work)
    finally:
        work.chmod(0o755)
    assert code == 0, (code, out, err)
    assert "Traceback" not in err and "bug" not in err, err
    if args[0] in ("search", "ls"):
        assert "qmd://notes/" in out, out


@pytest.fixture
def locked_project(indexed: Path, tmp_path: Path) -> Iterator[tuple[Path, Path]]:
    """A project with `qmd init` done, its `.qmd` at mode 000; (the project's sub-folder, its .qmd)."""
    project = tmp_path / "project"
    (project / "sub").mkdir(parents=True)
    code, out, err = qmd("init", cwd=project)
    assert code == 0, err
    local = project / ".qmd"
    local.chmod(0o000)
    try:
        yield project / "sub", local
    finally:
        local.chmod(0o755)


def test_your_own_project_index_folder_you_cannot_read_is_one_line_naming_it(locked_project: tuple[Path, Path]) -> None:
    """Searching the home index instead, or adding a collection to it, would quietly do the wrong
    thing: the error names the folder, the chmod, and `--index` for another index."""
    sub, local = locked_project
    code, out, err = qmd("status", cwd=sub)
    one_clear_error(code, out, err, f"chmod u+rwx {local}")
    assert str(local) in err.splitlines()[0] and "--index" in err
    code, out, err = qmd("--index", "index", "search", "rollback", cwd=sub)
    assert code == 0 and "qmd://notes/" in out, (code, out, err)


@pytest.mark.skipif(not hasattr(os, "geteuid") or os.geteuid() != 0, reason="giving a folder to another user needs root")
def test_someone_elses_project_index_folder_is_passed_over(locked_project: tuple[Path, Path]) -> None:
    """A `.qmd` of another user's above the working folder cannot hold an index this user could
    use: the default index serves (it crashed with exit 3)."""
    sub, local = locked_project
    os.chown(local, 54321, 54321)
    code, out, err = qmd("search", "rollback", cwd=sub)
    assert code == 0 and "qmd://notes/" in out, (code, out, err)


def test_init_in_a_folder_qmd_may_not_write_in_names_the_chmod(isolated_home: Path, tmp_path: Path) -> None:
    """Creating DIR/.qmd crashed with exit 3."""
    project = tmp_path / "ro"
    project.mkdir()
    project.chmod(0o555)
    try:
        code, out, err = qmd("init", cwd=project)
    finally:
        project.chmod(0o755)
    one_clear_error(code, out, err, f"chmod u+rwx {project}")
    assert list(project.iterdir()) == []


def test_the_boundary_turns_a_permission_error_into_one_line_naming_the_folder(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The safety net for any refusal that reaches the top: exit 1, the path to fix, not 'this is a bug'."""
    import errno

    from qmd.cli.boundary import guarded

    folder = tmp_path / "f"
    folder.mkdir()

    def body() -> int:
        raise PermissionError(errno.EACCES, "Permission denied", str(folder / ".x.123.tmp"))

    assert guarded(body) == 1
    err = capsys.readouterr().err
    assert err.splitlines() == [f"Error: cannot create files in {folder}: Permission denied", f"hint: make it writable to you (chmod u+rwx {folder}), or run qmd as the user who owns it"]

    def other() -> int:
        raise OSError(errno.EIO, "Input/output error", str(folder))

    assert guarded(other) == 3  # not a refusal of the environment: still the crash handler's


def test_an_export_file_this_user_may_not_read_names_the_chmod_not_a_new_export(indexed: Path, isolated_home: Path, tmp_path: Path) -> None:
    """The file may be sound: "export it again" was the wrong fix for a mode."""
    bundle = tmp_path / "notes.qmd.gz"
    code, out, err = qmd("export", str(bundle), cwd=isolated_home)
    assert code == 0, err
    bundle.chmod(0o000)
    try:
        code, out, err = qmd("import", str(bundle), "--index", "other", cwd=isolated_home)
    finally:
        bundle.chmod(0o644)
    one_clear_error(code, out, err, f"chmod u+rw {bundle}")
    assert "export it again" not in err and "nothing was imported" in err, err
