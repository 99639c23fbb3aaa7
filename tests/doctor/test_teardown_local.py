"""`qmd teardown` and project-local indexes (`.qmd/index.yml` + `.qmd/index.sqlite`): the summary
lists the ones it knows of (registered with the harness, or found from the working directory);
without --purge they stay, with it their index files go and the committed config stays."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.support.run import local_env, local_project, qmd_at


def project(root: Path) -> Path:
    """A project with a built local index (`qmd init`, a collection, `update`)."""
    local_project(root)
    assert (root / ".qmd" / "index.sqlite").is_file()
    return root


def committed(root: Path) -> dict[str, bytes]:
    return {name: (root / ".qmd" / name).read_bytes() for name in ("index.yml", ".gitignore")}


@pytest.fixture
def home(isolated_home: Path) -> Path:
    return isolated_home


def test_teardown_lists_local_indexes_and_keeps_them_without_purge(home: Path, tmp_path: Path) -> None:
    a = project(tmp_path / "a")
    done = qmd_at(home, "teardown", "--yes")
    assert done.returncode == 0, done.stderr
    assert f"1 project-local ({a}/.qmd/index.sqlite)" in done.stdout, done.stdout
    assert "a project's .qmd/index.yml always stays" in done.stdout
    assert (a / ".qmd" / "index.sqlite").is_file()
    assert "alpha" in qmd_at(a, "search", "alpha").stdout


@pytest.mark.slow
def test_purge_deletes_the_index_files_of_local_indexes_never_their_config(home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support.harness import GIT_ENV, git

    a, b, c = project(tmp_path / "a"), project(tmp_path / "b"), project(tmp_path / "c")
    for key, value in GIT_ENV.items():
        monkeypatch.setenv(key, value)
    assert git(b, "init", "-q", "-b", "main").returncode == 0
    assert qmd_at(b, "hooks", "install", str(b)).returncode == 0
    before = {root: committed(root) for root in (a, b, c)}
    # Only a is still registered with the harness (the state lost b and c): b is found as an
    # enrolled repository, c from the working directory.
    state = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "local-indexes.json"
    state.write_text(json.dumps({"configs": [str(a / ".qmd" / "index.yml")]}))
    (a / ".qmd" / "index.sqlite.broken-20240101T000000").write_bytes(b"old")  # a copy doctor --fix kept

    plan = qmd_at(c / "docs", "teardown", "--purge")  # no terminal: shows the plan, then refuses
    assert plan.returncode == 1 and "--yes" in plan.stderr
    for root in (a, b, c):
        assert f"delete the project-local index {root}/.qmd/index.sqlite (--purge; {root}/.qmd/index.yml stays" in plan.stdout, plan.stdout
        assert (root / ".qmd" / "index.sqlite").is_file()

    done = qmd_at(c / "docs", "teardown", "--yes", "--purge")
    assert done.returncode == 0, done.stdout + done.stderr
    for root in (a, b, c):
        assert sorted(p.name for p in (root / ".qmd").iterdir()) == [".gitignore", "index.yml"]
        assert committed(root) == before[root]
        assert (root / "docs" / "a.md").is_file()
    assert not state.exists()


def test_nothing_installed_still_names_the_local_indexes_it_keeps(home: Path, tmp_path: Path) -> None:
    import shutil

    if shutil.which("claude") or shutil.which("codex"):
        pytest.skip("claude or codex is on PATH: teardown would have their registrations to remove")
    a = project(tmp_path / "a")
    done = qmd_at(a, "teardown")
    assert done.returncode == 0 and "Nothing to remove" in done.stdout, done.stdout + done.stderr
    assert f"1 project-local ({a}/.qmd/index.sqlite)" in done.stdout


def test_purge_keeps_an_index_whose_qmd_folder_links_outside_the_project(home: Path, tmp_path: Path) -> None:
    """A `.qmd` linked to another project's (or a shared folder): its index.sqlite is not this
    project's to delete. Before, --purge deleted the other project's index through the link."""
    other = project(tmp_path / "other")
    linked = tmp_path / "linked"
    (linked / "docs").mkdir(parents=True)
    (linked / ".qmd").symlink_to(other / ".qmd")
    state = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "local-indexes.json"
    state.unlink()  # only the link is known (the other project's own registration is gone)
    plan = qmd_at(linked, "teardown", "--purge")
    assert plan.returncode == 1, plan.stdout + plan.stderr
    assert f"keep the index {linked}/.qmd/index.sqlite: {other}/.qmd lies outside the project {linked}" in plan.stdout, plan.stdout
    assert f"delete the project-local index {linked}/.qmd/index.sqlite" not in plan.stdout
    done = qmd_at(linked, "teardown", "--yes", "--purge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"kept {linked}/.qmd/index.sqlite" in done.stdout
    assert (other / ".qmd" / "index.sqlite").is_file()
    assert "alpha" in qmd_at(other, "search", "alpha").stdout


def test_purge_deletes_the_owners_index_even_when_a_linking_project_is_listed_first(home: Path, tmp_path: Path) -> None:
    """`aa/.qmd` links to `zb/.qmd` and the harness lists `aa` first: --purge keeps the index
    for `aa` (not its own) but still deletes it as `zb`'s. Before, the two were folded into
    the first entry, so `zb`'s index was neither listed nor deleted, and teardown still said
    "All its data is deleted"."""
    owner = project(tmp_path / "zb")
    linked = tmp_path / "aa"
    linked.mkdir()
    (linked / ".qmd").symlink_to(owner / ".qmd")
    state = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "local-indexes.json"
    state.write_text(json.dumps({"configs": [str(linked / ".qmd" / "index.yml"), str(owner / ".qmd" / "index.yml")]}))
    done = qmd_at(home, "teardown", "--yes", "--purge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"delete the project-local index {owner}/.qmd/index.sqlite" in done.stdout, done.stdout
    assert not (owner / ".qmd" / "index.sqlite").exists()
    assert (owner / ".qmd" / "index.yml").is_file()
    assert "All its data is deleted." in done.stdout


def test_purge_that_keeps_an_index_says_so_at_the_end(home: Path, tmp_path: Path) -> None:
    other = project(tmp_path / "other")
    linked = tmp_path / "linked"
    linked.mkdir()
    (linked / ".qmd").symlink_to(other / ".qmd")
    (Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "local-indexes.json").unlink()
    done = qmd_at(linked, "teardown", "--yes", "--purge")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "except the index(es) kept above" in done.stdout and "All its data is deleted." not in done.stdout


def test_a_cloned_repos_mcp_json_linked_to_a_device_is_refused(home: Path, tmp_path: Path) -> None:
    """A repository can hold `.mcp.json` as a link to /dev/zero: teardown (and doctor, mcp
    install) run in it read the file, which never ended: the memory filled (MemoryError, exit 3
    under a 3 GB limit). Now only a regular file is read there, and the rest of teardown runs."""
    from tests.support.run import run_capped

    repo = tmp_path / "cloned"
    repo.mkdir()
    (repo / ".mcp.json").symlink_to("/dev/zero")
    done = run_capped("teardown", "--yes", cwd=repo, env=local_env())
    assert done.returncode != 3 and "MemoryError" not in done.stderr + done.stdout, done.stderr
    assert done.returncode == 0, done.stderr
