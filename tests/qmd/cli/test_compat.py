"""Command lines written for the original qmd 2.8.3 keep working (issue: a drop-in for its users)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from qmd.cli.main import hoist_globals
from tests.support.run import qmd_env, run_qmd

Cli = Callable[..., tuple[int, str, str]]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["search", "x", "--index", "work"], ["--index", "work", "search", "x"]),
        (["search", "--index=work", "x", "-n", "3"], ["--index", "work", "search", "x", "-n", "3"]),
        (["collection", "add", ".", "--index", "w", "--name", "n"], ["--index", "w", "collection", "add", ".", "--name", "n"]),
        (["--index", "a", "search", "x"], ["--index", "a", "search", "x"]),  # already in front
        (["doctor", "--index", "w"], ["doctor", "--index", "w"]),  # doctor's own option
        (["mcp", "stop", "--index", "w"], ["mcp", "stop", "--index", "w"]),  # mcp stop's own option
        (["search", "--", "--index", "w"], ["search", "--", "--index", "w"]),  # after `--` it is query text
        (["update", "--index"], ["update", "--index"]),  # no value: left for the usage error
        (["search", "x", "--no-gpu"], ["--no-gpu", "search", "x"]),
        (["search", "x", "--no-gpu", "--index", "w", "-n", "2"], ["--no-gpu", "--index", "w", "search", "x", "-n", "2"]),
        (["doctor", "--index", "w", "--no-gpu"], ["--no-gpu", "doctor", "--index", "w"]),  # doctor keeps its --index
        (["search", "--", "x", "--no-gpu"], ["search", "--", "x", "--no-gpu"]),  # query text
    ],
)
def test_index_after_the_command_moves_in_front(args: list[str], expected: list[str]) -> None:
    assert hoist_globals(args) == expected


def test_a_script_passing_index_after_the_command_reads_that_index(tmp_path: Path) -> None:
    notes = tmp_path / "work-notes"
    notes.mkdir()
    (notes / "pager.md").write_text("# Pager rotation\n\nThe pager moves every Monday.\n")
    assert run_qmd("collection", "add", str(notes), "--name", "work", "--index", "work").returncode == 0
    after = run_qmd("search", "pager", "--index", "work", "--files")
    before = run_qmd("--index", "work", "search", "pager", "--files")
    assert after.returncode == 0 and after.stdout == before.stdout and "qmd://work/pager.md" in after.stdout
    assert "no collections yet" in run_qmd("search", "pager").stderr  # the default index is untouched


@pytest.mark.parametrize(
    ("args", "note"),
    [
        (["--no-gpu", "status"], "runs its models on the CPU"),
        (["status", "--no-gpu"], "runs its models on the CPU"),
        (["search", "rollback", "--no-gpu"], "runs its models on the CPU"),
        (["collection", "list", "--no-gpu"], "runs its models on the CPU"),
        (["update", "--pull"], None),
        (["collection", "add", "{notes}", "--name", "m", "--mask", "**/*.md"], None),
        (["collection", "add", "{notes}", "--name", "g", "--glob", "**/*.md"], None),
    ],
)
def test_the_originals_flags_are_accepted(cli: Cli, notes: Path, args: list[str], note: str | None) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    code, _, err = cli(*[a.replace("{notes}", str(notes)) for a in args])
    assert code == 0, err
    if note:
        assert note in err


def test_the_originals_embed_flags_are_accepted_and_explained(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    code, _, err = cli("embed", "--timeout", "600", "--max-docs-per-batch", "10", "--max-batch-mb", "4", "--chunk-strategy", "auto")
    assert code == 0, err
    for flag in ("--timeout", "--max-docs-per-batch", "--max-batch-mb", "--chunk-strategy auto"):
        assert f"note: {flag}" in err
    assert "Embedded 4 documents" in err
    assert cli("embed", "--chunk-strategy", "ast")[0] == 2
    assert cli("update", "--pull", "--no-commands")[0] == 2


def test_index_after_mcp_selects_the_index_but_mcp_stop_keeps_its_own() -> None:
    from qmd.cli.argv import hoist_globals

    assert hoist_globals(["mcp", "--index", "work"]) == ["--index", "work", "mcp"]
    assert hoist_globals(["mcp", "--http", "--port", "9000", "--index", "work"]) == ["--index", "work", "mcp", "--http", "--port", "9000"]
    assert hoist_globals(["mcp", "stop", "--index", "work"]) == ["mcp", "stop", "--index", "work"]
    assert hoist_globals(["doctor", "--index", "work"]) == ["doctor", "--index", "work"]


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["cleanup", "--dry-run"], "Dry run — no changes made."),
        (["collection", "update-cmd", "notes", "git", "pull"], "Set update command for 'notes': git pull"),
        (["collection", "update-cmd", "notes"], "Cleared update command for 'notes'"),
        (["query", "lex: rollback", "--full", "--all", "--line-numbers", "--json"], None),
        (["search", "rollback", "--match", "all", "--files"], None),
        (["completion", "bash"], "complete -F _qmd qmd"),
        (["completion", "zsh"], "compdef _qmd qmd"),
        (["completion", "fish"], "complete -c qmd"),
    ],
)
def test_more_of_the_originals_command_lines_work(cli: Cli, notes: Path, args: list[str], said: str | None) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    code, out, err = cli(*args)
    assert code == 0, err
    if said:
        assert said in out + err


def test_init_makes_the_project_local_index_where_it_is_run(cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    project = tmp_path / "project"
    project.mkdir()
    monkeypatch.chdir(project)  # never the working directory the tests were started from
    code, out, err = cli("init")
    assert code == 0, err
    assert "new local index" in out and (project / ".qmd" / "index.yml").is_file() and (project / ".qmd" / "index.sqlite").is_file()


def test_update_cmd_is_kept_in_the_config(cli: Cli, notes: Path) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("collection", "update-cmd", "notes", "git pull --ff-only")[0] == 0
    assert "Update:   git pull --ff-only" in cli("collection", "show", "notes")[1]
    assert cli("collection", "update-cmd", "nope", "x")[0] == 1


def test_cleanup_dry_run_changes_nothing(cli: Cli, notes: Path) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    victim = sorted(notes.rglob("*.md"))[0]
    victim.unlink()
    assert cli("update")[0] == 0
    out = cli("cleanup", "--dry-run")[1]
    assert "Would remove 1 inactive document records" in out
    assert "Would remove 1 inactive document records" in cli("cleanup", "--dry-run")[1]  # still there
    cli("cleanup")
    assert "Would remove 0 inactive document records" in cli("cleanup", "--dry-run")[1]


def test_query_full_and_line_numbers(cli: Cli, notes: Path) -> None:
    import json

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    hits = json.loads(cli("query", "lex: rollback", "--full", "--json")[1])
    assert hits and all("body" in h and "snippet" not in h for h in hits)
    hits = json.loads(cli("query", "lex: rollback", "--line-numbers", "--json")[1])
    first = int(hits[0]["snippet"].split()[1].lstrip("-").split(",")[0])
    assert hits[0]["snippet"].split("\n")[1].startswith(f"{first}: ")


def test_ls_json_lists_collections_and_files_that_get_reads_back(notes: Path) -> None:
    """The original prints its text listing whatever the flags; `--json` here is JSON."""
    import json

    def qmd(*args: str) -> str:
        done = run_qmd(*args)
        assert done.returncode == 0, done.stderr
        return done.stdout

    qmd("collection", "add", str(notes), "--name", "notes")
    listed = qmd("ls", "--json")
    assert listed == qmd("collection", "list", "--json") and [c["name"] for c in json.loads(listed)] == ["notes"]
    files = json.loads(qmd("ls", "notes/runbooks", "--json"))
    assert [f["path"] for f in files] == ["runbooks/deploy.md", "runbooks/postgres.md"]
    assert {"file", "collection", "docid", "title", "size", "modified"} <= set(files[0]) and files[0]["title"] == "Deploy Runbook"
    for f in files:
        assert json.loads(qmd("get", f["file"], "--json"))["docid"] == f["docid"]
    qmd("--index", "work", "collection", "add", str(notes), "--name", "w")
    named = json.loads(qmd("--index", "work", "ls", "w", "--json"))
    assert named[0]["file"] == "qmd://w/ideas.md?index=work"  # the URI get takes back, as search prints it
    assert json.loads(qmd("get", named[0]["file"], "--json"))["docid"] == named[0]["docid"]
    missing = run_qmd("ls", "nope", "--json")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: unknown collection 'nope'")


def test_version_names_the_commit() -> None:
    import re

    out = run_qmd("--version").stdout
    assert re.fullmatch(r"qmd \d+\.\d+\.\d+ \(([0-9a-f]{7,}(-dirty)?|source [0-9a-f]{12})\)\n", out), out


def test_collection_add_says_embed_makes_documents_searchable_by_meaning(cli: Cli, notes: Path) -> None:
    code, _, err = cli("collection", "add", str(notes), "--name", "notes")
    assert code == 0 and "qmd embed" in err and "by meaning" in err


def test_api_add_collection_twice_and_api_shaped_hints(tmp_path: Path, notes: Path) -> None:
    from qmd import QmdError, Store

    with Store(tmp_path / "i.sqlite", tmp_path / "i.yml") as store:
        with pytest.raises(QmdError) as no_coll:
            store.search("x")
        assert "store.add_collection" in (no_coll.value.hint or "") and "qmd " not in (no_coll.value.hint or "")
        store.add_collection(notes, name="notes", exist_ok=True)
        store.add_collection(notes, name="notes", exist_ok=True)  # a second run is fine
        with pytest.raises(QmdError) as twice:
            store.add_collection(notes, name="notes")
        assert "exist_ok=True" in (twice.value.hint or "") and "--name" not in (twice.value.hint or "")
        assert "qmd collection remove notes" in (twice.value.cli_hint or "")
        other = tmp_path / "other"
        other.mkdir()
        with pytest.raises(QmdError):
            store.add_collection(other, name="notes", exist_ok=True)  # another folder: still an error


def test_multi_level_contexts_in_every_format(cli: Cli, notes: Path) -> None:
    import csv
    import io
    import json

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    cli("context", "add", "/", "Everything")
    cli("context", "add", "qmd://notes/", "Team notes")
    ctx = "Everything\n\nTeam notes"
    assert all(h["context"] == ctx for h in json.loads(cli("search", "rollback", "--json")[1]))
    assert all(r["context"] == ctx for r in csv.DictReader(io.StringIO(cli("search", "rollback", "--csv")[1])))
    assert f',"{ctx}"' in cli("search", "rollback", "--files")[1]
    assert f"Context: {ctx}\n" in cli("search", "rollback")[1]
    assert f"**context:** {ctx}\n" in cli("search", "rollback", "--md")[1]
    assert 'context="Everything&#10;&#10;Team notes"' in cli("search", "rollback", "--xml")[1]


def test_vsearch_names_a_named_index_in_its_uris_as_search_does(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The original prints `qmd://c/p?index=NAME` for hits of a named index, vsearch too."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert cli("--index", "work", "collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("--index", "work", "embed")[0] == 0
    for command in (["vsearch", "rollback"], ["vsearch", "--expand", "rollback"], ["search", "rollback"]):
        for fmt in ("--files", "--json", "--csv"):
            code, stdout, err = cli("--index", "work", *command, fmt, "-n", "2")
            assert code == 0, err
            assert stdout.count("?index=work") >= 1 and "qmd://notes/" in stdout, (command, fmt, stdout)


def test_query_all_returns_every_fused_document(cli: Cli, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`query --all` stopped at the reranking candidates (-C, default 40; or the format's
    default -n when larger) while `-n 100000` gave every fused document: --all is every one
    now, as its help says."""
    import json

    notes = tmp_path / "many"
    notes.mkdir()
    for i in range(60):
        (notes / f"n{i:02}.md").write_text(f"# River {i}\n\nriver crossing number {i}\n")
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert cli("collection", "add", str(notes), "--name", "many")[0] == 0
    assert cli("embed")[0] == 0
    code, everything, err = cli("query", "river", "--all", "--json", "-C", "10")
    assert code == 0, err
    code, long, _ = cli("query", "river", "-n", "100000", "--json", "-C", "10")
    assert len(json.loads(everything)) == len(json.loads(long)) > 20  # more than the candidates and the json default
