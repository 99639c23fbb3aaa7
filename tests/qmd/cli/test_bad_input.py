"""Bad input: one clear error (`Error: …` then `hint: …` naming the fix), the documented
exit code, and nothing half-written. Real files, real SQLite, real subprocesses.

Exit codes (design §7): 0 ok, 1 a QmdError, 2 usage, 3 unexpected (traceback in logs/).
Fault injection works as root: a regular file where a folder is expected, never chmod.
"""

from __future__ import annotations

import hashlib
import json
import os
import pty
import select
import signal
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import apsw
import pytest

import qmd
from tests.support.run import command, qmd_env, run_qmd

Cli = Callable[..., tuple[int, str, str]]


def assert_error(code: int, out: str, err: str, *fragments: str, exit_code: int = 1) -> None:
    """One `Error:` line first, a `hint:` line, no traceback, nothing on stdout."""
    assert code == exit_code, f"exit {code}, stderr:\n{err}"
    lines = err.strip("\n").split("\n")
    assert lines[0].startswith("Error: "), err
    assert sum(1 for line in lines if line.startswith("Error: ")) == 1, err
    assert any(line.startswith("hint: ") and len(line) > len("hint: ") for line in lines[1:]), err
    assert "Traceback" not in err
    assert out == ""
    for fragment in fragments:
        assert fragment in err, f"{fragment!r} not in:\n{err}"


def hint_of(err: str) -> str:
    return next(line for line in err.splitlines() if line.startswith("hint: "))


def config_bytes() -> bytes | None:
    path = qmd.resolve_index(None).config_path
    return path.read_bytes() if path.exists() else None


def make_notes(root: Path, files: dict[str, str]) -> Path:
    for rel, text in files.items():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(text)
    return root


NOTES = {
    "runbooks/deploy.md": "# Deploy Runbook\n\nHow to ship the api service.\n\n## Rollback\n\nFlip the load balancer back to blue.\n",
    "postgres.md": "# Postgres Backups\n\nNightly pg_dump to object storage.\n",
}


@pytest.fixture
def indexed(tmp_path: Path, cli: Cli) -> Path:
    """A small collection `small`, indexed."""
    root = make_notes(tmp_path / "small", NOTES)
    code, _, err = cli("collection", "add", str(root), "--name", "small")
    assert code == 0, err
    return root


# --- collection add ------------------------------------------------------------------------

def test_add_missing_path(tmp_path: Path, cli: Cli) -> None:
    missing = tmp_path / "no-such-folder"
    assert_error(*cli("collection", "add", str(missing), "--name", "x"), str(missing), "does not exist")
    assert config_bytes() is None and not qmd.resolve_index(None).index_path.exists()


def test_add_missing_path_hint_names_a_working_fix(tmp_path: Path, cli: Cli) -> None:
    code, out, err = cli("collection", "add", str(tmp_path / "nope"), "--name", "x")
    assert code == 1
    assert "collection remove" not in hint_of(err)


def test_add_regular_file(tmp_path: Path, cli: Cli) -> None:
    f = tmp_path / "note.md"
    f.write_text("# Just a file\n")
    code, out, err = cli("collection", "add", str(f), "--name", "y")
    assert_error(code, out, err, str(f), "not a folder")
    assert "folder" in hint_of(err)
    assert config_bytes() is None


def test_add_duplicate_name(tmp_path: Path, cli: Cli, indexed: Path) -> None:
    other = make_notes(tmp_path / "other", {"a.md": "# A\n\nalpha words\n"})
    before = config_bytes()
    code, out, err = cli("collection", "add", str(other), "--name", "small")
    assert_error(code, out, err, "'small' already exists", str(indexed))
    assert "--name" in hint_of(err)
    assert config_bytes() == before
    assert cli("search", "alpha", "--files")[1] == ""  # the other folder was not indexed


@pytest.mark.parametrize("name", ["a/b", "../up", "-dash", "sp ace", "x" * 65, "qmd://x"])
def test_add_invalid_name(tmp_path: Path, cli: Cli, name: str) -> None:
    root = make_notes(tmp_path / "n", {"a.md": "# A\n\nalpha\n"})
    code, out, err = cli("collection", "add", str(root), f"--name={name}")
    assert_error(code, out, err, "invalid collection name")
    assert "letters, digits" in hint_of(err)
    assert config_bytes() is None


def test_add_empty_name_is_consistent(tmp_path: Path, cli: Cli) -> None:
    root = make_notes(tmp_path / "n", {"a.md": "# A\n\nalpha\n"})
    code, out, err = cli("collection", "add", str(root), "--name=")
    registered = b"n:" in (config_bytes() or b"")
    # Either refused with nothing registered, or accepted under the folder's name.
    assert (code == 1 and not registered) or (code == 0 and registered and "Added collection 'n'" in err)


def test_add_the_same_folder_twice_warns_and_status_says_so(tmp_path: Path, cli: Cli, indexed: Path) -> None:
    """Every hit twice, and nothing said: now `collection add` names the other collection and
    how to keep one, and `status` (and --json) lists the pair."""
    code, _, err = cli("collection", "add", str(indexed), "--name", "again")
    assert code == 0, err
    assert "warning: 'again' indexes the same folder as 'small': 2 files are in both; keep one: qmd collection remove again\n" in err
    code, out, err = cli("status")
    assert code == 0 and "Collections over the same files (a search shows each of them twice)\n  'again' indexes the same folder as 'small': 2 files are in both; keep one: qmd collection remove again\n" in out
    overlaps = json.loads(cli("status", "--json")[1])["overlaps"]
    assert overlaps == [{"collection": "again", "other": "small", "files": 2, "same_folder": True}]
    code, _, err = cli("collection", "add", str(indexed / "runbooks"), "--name", "inner")
    assert "warning: 'inner' indexes a folder inside 'small': 1 file is in both; keep one: qmd collection remove inner\n" in err
    code, _, err = cli("collection", "add", str(indexed), "--name", "later", "--no-index")
    assert "warning: 'later' indexes the same folder as 'small'; keep one: qmd collection remove later (once indexed" in err


def test_the_same_folder_with_other_files_is_no_overlap(tmp_path: Path, cli: Cli, indexed: Path) -> None:
    make_notes(indexed, {"notes.txt": "plain text\n"})
    code, _, err = cli("collection", "add", str(indexed), "--name", "text", "--pattern", "**/*.txt")
    assert code == 0 and "warning: 'text'" not in err, err
    assert json.loads(cli("status", "--json")[1])["overlaps"] == []
    assert "Collections over the same files" not in cli("status")[1]


# --- update ---------------------------------------------------------------------------------

def test_update_with_deleted_folder_names_collection_remove(tmp_path: Path, cli: Cli, indexed: Path) -> None:
    gone = make_notes(tmp_path / "gone", {"g.md": "# Gone\n\nvanishing words\n"})
    assert cli("collection", "add", str(gone), "--name", "gone")[0] == 0
    for p in gone.iterdir():
        p.unlink()
    gone.rmdir()
    code, out, err = cli("update")
    # The other collections are updated first; the missing folder is then one Error + hint.
    assert code == 1 and out == "" and "Traceback" not in err
    assert "Error: gone: " in err and str(gone) in err and "does not exist" in err
    assert "qmd collection remove gone" in hint_of(err)
    # The index is still whole and usable.
    assert "qmd://small/runbooks/deploy.md" in cli("search", "balancer", "--files")[1]
    assert "qmd://gone/g.md" in cli("search", "vanishing", "--files")[1]  # not half-dropped either
    code, _, err = cli("collection", "remove", "gone")
    assert code == 0 and cli("update")[0] == 0


def test_one_missing_folder_does_not_block_other_collections(tmp_path: Path, cli: Cli) -> None:
    first = make_notes(tmp_path / "first", {"f.md": "# First\n\nfirst words\n"})
    second = make_notes(tmp_path / "second", {"s.md": "# Second\n\nsecond words\n"})
    assert cli("collection", "add", str(first), "--name", "first")[0] == 0
    assert cli("collection", "add", str(second), "--name", "second")[0] == 0
    (first / "f.md").unlink()
    first.rmdir()
    (second / "new.md").write_text("# New\n\nfreshly added zanzibar\n")
    code, _, err = cli("update")
    assert code == 1 and "qmd collection remove first" in err
    assert _paths(cli("search", "zanzibar", "--files")[1])[-1:] == ["qmd://second/new.md"]


# --- files the indexer must skip or repair ------------------------------------------------

BIG = 10 * 1024 * 1024 + 1


@pytest.fixture
def messy(tmp_path: Path, cli: Cli) -> tuple[Path, int, str]:
    """A folder with every kind of problem file; returns (root, exit code, stderr of the add)."""
    root = tmp_path / "messy"
    outside = make_notes(tmp_path / "outside", {"secret.md": "# Secret\n\nexfiltrated quokka\n"})
    make_notes(root, {
        "ok.md": "# Fine\n\nperfectly normal words\n",
        "sub/real.md": "# Real\n\nlinked wombat inside\n",
    })
    (root / "binary.md").write_bytes(b"# Bin\n\x00\x01\x02\xff binary numbat\n")
    (root / "latin1.md").write_bytes("# Latin\n\ncaf\xe9 zebracorn valid words\n".encode("latin-1"))
    with open(root / "huge.md", "wb") as fh:  # sparse: 10 MB + 1 byte, written in microseconds
        fh.write(b"# Huge\n\nhugeword\n")
        fh.truncate(BIG)
    (root / "empty.md").write_bytes(b"")
    (root / "blank.md").write_text("  \n\n\t\n")
    os.symlink(outside / "secret.md", root / "outlink.md")
    os.symlink("sub/real.md", root / "inlink.md")
    os.symlink("nowhere.md", root / "dangling.md")
    os.symlink("..", root / "sub" / "loop")  # a directory cycle back to the root
    os.symlink(root / "sub", root / "sub" / "self")  # and one to itself
    code, _, err = cli("collection", "add", str(root), "--name", "messy")
    return root, code, err


def test_problem_files_do_not_fail_the_update(messy: tuple[Path, int, str], cli: Cli) -> None:
    root, code, err = messy
    assert code == 0, err  # skips are warnings (design §7)
    assert "messy: 4 new, 0 updated, 0 unchanged, 0 removed, 8 skipped" in err
    files = sorted(line.split("  ")[-1] for line in cli("ls", "messy")[1].splitlines())
    assert files == ["qmd://messy/inlink.md", "qmd://messy/latin1.md", "qmd://messy/ok.md", "qmd://messy/sub/real.md"]


@pytest.mark.parametrize(
    ("rel", "reason"),
    [
        ("binary.md", "binary file (NUL bytes)"),
        ("huge.md", f"larger than 10 MB ({BIG} bytes)"),
        ("empty.md", "empty file"),
        ("blank.md", "empty file"),
        ("outlink.md", "symlink points outside the collection root"),
        ("dangling.md", "broken symlink"),
        ("sub/loop", "symlink to a folder already indexed (a loop, or a second way in)"),
        ("sub/self", "symlink to a folder already indexed (a loop, or a second way in)"),
    ],
)
def test_skipped_file_has_reason_and_is_listed_in_status(messy: tuple[Path, int, str], cli: Cli, rel: str, reason: str) -> None:
    _, code, err = messy
    assert code == 0
    assert f"  skipped {rel}: {reason}\n" in err
    status = cli("status")[1]
    assert "\nFiles needing attention\n" in status
    assert f"  skipped  qmd://messy/{rel}: {reason}\n" in status


def test_skipped_files_are_not_searchable(messy: tuple[Path, int, str], cli: Cli) -> None:
    for word in ("numbat", "hugeword", "quokka"):
        assert cli("search", word) == (0, "No results found.\n", f"Note: no note contains '{word}'\n")


def test_invalid_utf8_is_indexed_with_replacement_and_warning(messy: tuple[Path, int, str], cli: Cli) -> None:
    _, code, err = messy
    assert code == 0
    assert "  warning latin1.md: invalid UTF-8 at byte 12; indexed with replacement characters\n" in err
    hits = json.loads(cli("search", "zebracorn", "--json")[1])
    assert [h["file"] for h in hits] == ["qmd://messy/latin1.md"]
    assert "caf\ufffd zebracorn" in hits[0]["snippet"]
    assert cli("get", "messy/latin1.md")[1].endswith("3: caf\ufffd zebracorn valid words\n4: \n")
    assert "  warning  qmd://messy/latin1.md: invalid UTF-8" in cli("status")[1]


def test_symlink_inside_root_is_indexed(messy: tuple[Path, int, str], cli: Cli) -> None:
    files = sorted(cli("search", "wombat", "--files")[1].splitlines())
    assert [f.split(",")[2] for f in files] == ["qmd://messy/inlink.md", "qmd://messy/sub/real.md"]
    assert files[0].split(",")[0] == files[1].split(",")[0]  # same content, same docid


def test_symlink_loops_do_not_hang(tmp_path: Path) -> None:
    root = make_notes(tmp_path / "loops", {"a/b/c.md": "# C\n\ncyclic capybara\n"})
    os.symlink("..", root / "a" / "b" / "up")
    os.symlink(root, root / "a" / "root")
    os.symlink(root / "a", root / "a" / "b" / "again")
    started = time.monotonic()
    proc = run_qmd("collection", "add", str(root), "--name", "loops", timeout=30)
    assert proc.returncode == 0, proc.stderr
    assert time.monotonic() - started < 30
    assert "loops: 1 new" in proc.stderr
    assert _paths(run_qmd("search", "capybara", "--files").stdout)[0] == "qmd://loops/a/b/c.md"


def test_symlink_outside_root_cannot_be_read_through_get(messy: tuple[Path, int, str], cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    root, _, _ = messy
    monkeypatch.chdir(root.parent)
    for ref in ("messy/outlink.md", "qmd://messy/outlink.md", str(root / "outlink.md"), str(root.parent / "outside" / "secret.md")):
        code, out, err = cli("get", ref)
        assert code == 1 and out == "" and "quokka" not in err, ref
        assert err.startswith("Error: ")


# --- malformed query syntax -----------------------------------------------------------------

MALFORMED = [  # an empty or blank query is a usage error (test_an_empty_query_prints_the_usage)
    '"unclosed', "AND OR NOT", "*", "(((", "NEAR(", "col:thing", "-", '""', "^x",
    "NEAR(blue green, 2)", "title:rollback", "blue AND", "OR blue", "NOT", "blue -", '"', "'", "\\", "{", "}",
    "blue*", "*blue", "+blue", "blue^2", "a:b:c", "\x00", "café ☕ 🚀", "日本語 検索", "🚀" * 50,
]


@pytest.mark.parametrize("query", MALFORMED, ids=[repr(q)[:24] for q in MALFORMED])
def test_malformed_queries_never_error(indexed: Path, cli: Cli, query: str) -> None:
    for fmt in ((), ("--json",)):
        code, out, err = cli("search", query, *fmt)
        assert code == 0, err
        assert only_notes(err), err
        if fmt:
            assert isinstance(json.loads(out), list)
        else:
            assert out == "No results found.\n" or out.startswith("qmd://small/")
        for word in ("fts5", "syntax error", "SQL", "Traceback"):
            assert word not in out + err


@pytest.mark.parametrize(
    ("query", "expected"),
    [
        ('"load balancer', "qmd://small/runbooks/deploy.md"),  # unclosed quote: still a phrase
        ("rollback)", "qmd://small/runbooks/deploy.md"),
        ("(((rollback", "qmd://small/runbooks/deploy.md"),
        ("rollback NEAR(", "qmd://small/runbooks/deploy.md"),
        ("pg_dump*", "qmd://small/postgres.md"),
        ('pg_dump"', "qmd://small/postgres.md"),
    ],
)
def test_odd_syntax_around_real_words_still_finds(indexed: Path, cli: Cli, query: str, expected: str) -> None:
    code, out, err = cli("search", query, "--files")
    assert code == 0, err
    assert out.splitlines()[0].split(",")[2] == expected  # docid,score,path[,context[,[any-term]]]


@pytest.mark.parametrize("query", ['"unclosed', "(((", "^x", "col:thing", "*", "café ☕ 🚀"])
def test_queries_with_no_match_say_no_results(indexed: Path, cli: Cli, query: str) -> None:
    code, out, err = cli("search", query)
    assert (code, out) == (0, "No results found.\n") and only_notes(err), err


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("query", ["", "   ", "\t\n"])
def test_an_empty_query_prints_the_usage(indexed: Path, cli: Cli, command: str, query: str) -> None:
    """As the original prints its usage for `qmd search ""`: a script's unset "$Q" is a
    usage error (exit 2, the usage line first), not a search for nothing."""
    code, out, err = cli(command, query, "--json")
    assert (code, out) == (2, ""), err
    assert err.splitlines()[0] == f"Usage: qmd {command} [OPTIONS] QUERY"
    assert err.splitlines()[-1] == "Error: Invalid value for QUERY: the query is empty; give words to search for"


def test_five_thousand_character_query(indexed: Path, cli: Cli) -> None:
    words = " ".join(f"filler{i}x" for i in range(600))
    query = ("rollback " + words)[:5000]
    assert len(query) == 5000
    started = time.monotonic()
    code, out, err = cli("search", query, "--json")
    assert code == 0, err
    assert time.monotonic() - started < 10
    hits = json.loads(out)
    assert [h["file"] for h in hits] == ["qmd://small/runbooks/deploy.md"]
    assert hits[0]["match"] == "any"  # no document has the filler words: any-term fill
    assert _paths(cli("search", "blue " * 1000, "--files")[1])[-1:] == ["qmd://small/runbooks/deploy.md"]


@pytest.mark.parametrize("fast", ["1", "0"])
def test_dash_query_in_a_subprocess(indexed: Path, fast: str) -> None:
    # `--` ends options, so a query may start with a dash (negation only: nothing positive),
    # through the lean path (QMD_FAST=1) and typer alike.
    env = qmd_env({"QMD_FAST": fast})
    proc = run_qmd("search", "--", "-rollback", env=env)
    assert (proc.returncode, proc.stdout, proc.stderr) == (0, "No results found.\n", "")  # nothing positive: no word to name
    proc = run_qmd("search", "--files", "--", "blue -postgres", env=env)
    assert proc.returncode == 0 and _paths(proc.stdout)[-1:] == ["qmd://small/runbooks/deploy.md"]
    proc = run_qmd("search", "--files", "--", "nightly", "-rollback", env=env)  # the hint's own form: words after --
    assert (proc.returncode, _paths(proc.stdout)) == (0, ["qmd://small/postgres.md"]), proc.stderr
    proc = run_qmd("search", "--files", "--", "nightly", "-pg_dump", env=env)
    assert (proc.returncode, proc.stdout) == (0, ""), proc.stderr


@pytest.mark.parametrize(
    ("args", "said", "hint"),
    [
        (["search", "-rollback"], "No such option: -rollback", "qmd search -- -rollback"),
        (["search", "nightly", "-rollback", "--json", "-n", "3"], "No such option: -rollback", "qmd search --json -n 3 -- nightly -rollback"),
        (["search", "-nginx"], "Invalid value for '-n': 'ginx'", "qmd search -- -nginx"),
        (["search", "-1"], "No such option: -1", "qmd search -- -1"),  # a number-like word (issue 27)
        (["query", "rollback", "-2", "-n", "3"], "No such option: -2", "qmd query -n 3 -- rollback -2"),
        (["vsearch", "-c", "small", "undo", "-rollback"], "No such option: -rollback", "qmd vsearch -c small -- undo -rollback"),
        (["--index", "work", "query", "how do we", "-rollback"], "No such option: -rollback", "qmd --index work query -- 'how do we' -rollback"),
    ],
)
def test_a_query_word_taken_for_an_option_hints_at_dashes(indexed: Path, cli: Cli, args: list[str], said: str, hint: str) -> None:
    """`qmd search -rollback` was "No such option: -r" alone: the word as typed, and the fix."""
    code, out, err = cli(*args)
    assert (code, out) == (2, ""), err
    assert f"Error: {said}" in err and "Traceback" not in err
    assert hint_of(err) == f"hint: a query word starting with '-' goes after --: {hint}"


@pytest.mark.parametrize("args", [["search", "--bogus", "x"], ["search", "-x", "x"], ["get", "-rollback"], ["search", "-n", "many", "x"]])
def test_other_option_errors_get_no_dash_hint(indexed: Path, cli: Cli, args: list[str]) -> None:
    code, _, err = cli(*args)
    assert code == 2 and "Error: " in err and "hint:" not in err, err


# --- unknown collections and documents -----------------------------------------------------

def test_search_unknown_collection(indexed: Path, cli: Cli) -> None:
    code, out, err = cli("search", "blue", "-c", "nope")
    assert_error(code, out, err, "unknown collection 'nope'")
    assert hint_of(err) == "hint: collections: small"
    code, out, err = cli("search", "blue", "-c", "smal")
    assert_error(code, out, err, "unknown collection 'smal'")
    assert hint_of(err) == "hint: did you mean: small"


def test_unknown_collection_suggests_at_most_five(tmp_path: Path, cli: Cli) -> None:
    for letter in "abcdefg":
        root = make_notes(tmp_path / f"n{letter}", {"a.md": f"# {letter}\n\nword {letter}\n"})
        assert cli("collection", "add", str(root), "--name", f"notes-{letter}", "--no-index")[0] == 0
    assert cli("update")[0] == 0
    code, out, err = cli("search", "word", "-c", "notes")
    assert_error(code, out, err, "unknown collection 'notes'")
    names = hint_of(err).removeprefix("hint: did you mean: ").split(", ")
    assert len(names) == 5 and all(n.startswith("notes-") for n in names)


def test_ls_of_an_unknown_collection_names_the_known_ones(indexed: Path, cli: Cli, tmp_path: Path) -> None:
    assert cli("collection", "add", str(make_notes(tmp_path / "work", {"a.md": "# A\n"})), "--name", "work")[0] == 0
    for target in ("nope", "qmd://nope/", "nope/runbooks"):
        code, out, err = cli("ls", target)
        assert_error(code, out, err, "unknown collection 'nope'")
        assert hint_of(err) == "hint: collections: small, work"


def test_ls_of_a_sub_path_without_files_says_so(indexed: Path, cli: Cli) -> None:
    """`qmd ls small/nope` printed nothing and exited 0: one line saying there are no files
    under it, a close folder when there is one, exit 1."""
    code, out, err = cli("ls", "small/nope")
    assert_error(code, out, err, "no files under qmd://small/nope")
    assert hint_of(err) == "hint: list the collection's files with: qmd ls small"
    code, out, err = cli("ls", "qmd://small/runbok/")  # a typo of a folder
    assert_error(code, out, err, "no files under qmd://small/runbok")
    assert hint_of(err) == "hint: did you mean: qmd ls small/runbooks"
    code, out, err = cli("ls", "small/x/runbooks")  # the folder's name at another place
    assert hint_of(err) == "hint: did you mean: qmd ls small/runbooks"


def test_a_dot_dot_path_inside_a_collection_is_one_line_not_a_crash(indexed: Path, cli: Cli) -> None:
    """`qmd ls small/..` and `qmd context add small/.. TEXT` were 'Unexpected error: ValueError' (exit 3)."""
    for args in (("ls", "small/.."), ("ls", "qmd://small/runbooks/../.."), ("context", "add", "small/..", "text")):
        code, out, err = cli(*args)
        assert_error(code, out, err, "'..' is not allowed in a path inside a collection")
    code, out, _ = cli("ls", "small/%")  # LIKE's wildcards are plain characters in a prefix
    assert code == 1 and out == ""


def test_ls_of_a_path_prefix_lists_what_starts_with_it(indexed: Path, cli: Cli) -> None:
    """As the original: `qmd ls small/run` lists runbooks/…, `small/post` postgres.md."""
    assert cli("ls", "small/run")[1].endswith("qmd://small/runbooks/deploy.md\n")
    assert cli("ls", "small/post")[1].endswith("qmd://small/postgres.md\n")
    assert cli("ls", "small/runbooks")[1] == cli("ls", "small/runbooks/")[1] == cli("ls", "small/run")[1]


def test_get_missing_document_suggests_similar(indexed: Path, cli: Cli) -> None:
    code, out, err = cli("get", "small/runbooks/deploy-guide.md")
    assert_error(code, out, err, "document not found: small/runbooks/deploy-guide.md")
    assert hint_of(err).startswith("hint: did you mean: qmd://small/runbooks/deploy.md")
    code, out, err = cli("get", "qmd://small/postgress.md")
    assert_error(code, out, err)
    assert "qmd://small/postgres.md" in hint_of(err)
    assert len(hint_of(err).split(", ")) <= 5


def test_get_missing_document_does_not_suggest_unrelated(indexed: Path, cli: Cli, tmp_path: Path) -> None:
    names = {f"{n}.md": f"# {n}\n\n{n} words\n" for n in ("ok", "todo", "faq", "inbox")}
    assert cli("collection", "add", str(make_notes(tmp_path / "notes", names)), "--name", "notes")[0] == 0
    code, out, err = cli("get", "xyzzy.md")
    assert code == 1
    assert hint_of(err) == "hint: list documents with: qmd ls"


def test_get_of_a_removed_document_says_it_was_removed(indexed: Path, cli: Cli) -> None:
    """A file deleted before the last update: not "not found" with unrelated names, but
    removed, and when (its row is kept, inactive, until cleanup)."""
    old = indexed / "runbooks" / "deploy.md"
    os.utime(old, (1_600_000_000, 1_600_000_000))  # its own time far from the update's
    make_notes(indexed, {"runbooks/deploy-notes.md": "# Deploy notes\n\nUnrelated.\n"})
    assert cli("update")[0] == 0
    docid = json.loads(cli("get", "small/runbooks/deploy.md", "--json")[1])["docid"]
    old.unlink()
    before = time.strftime("%Y-%m-%d %H:%M", time.gmtime())
    assert cli("update")[0] == 0
    for ref in ("small/runbooks/deploy.md", "qmd://small/runbooks/deploy.md", "runbooks/deploy.md", str(old), "small/runbooks/deploy.md:2:1"):
        code, out, err = cli("get", ref)
        assert_error(code, out, err, "qmd://small/runbooks/deploy.md was removed from the index at the update of ")
        first = err.splitlines()[0]
        assert before in first or time.strftime("%Y-%m-%d %H:%M", time.gmtime()) in first, first
        assert "deploy-notes" not in err  # no unrelated suggestion
        assert hint_of(err) == "hint: restore the file and run qmd update, or find where it went: qmd search deploy"
    code, out, err = cli("get", docid)
    assert_error(code, out, err, f"{docid} (qmd://small/runbooks/deploy.md) was removed from the index at the update of ")
    assert cli("cleanup")[0] == 0  # the row is gone: not found again
    code, out, err = cli("get", "small/runbooks/deploy.md")
    assert_error(code, out, err, "document not found: small/runbooks/deploy.md")


@pytest.mark.parametrize("ref", ["../../etc/passwd", "/etc/passwd", "qmd://small/../../etc/passwd", "small/../../etc/passwd", "~/../../etc/passwd", "qmd://small/../../../etc/passwd"])
def test_get_refuses_paths_outside_collections(indexed: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch, ref: str) -> None:
    monkeypatch.chdir(indexed / "runbooks")
    code, out, err = cli("get", ref)
    assert_error(code, out, err)
    assert "root:" not in out + err
    assert "outside every collection" in err or "leaves its collection" in err


def test_get_refuses_sibling_folder_in_subprocess(indexed: Path) -> None:
    secret = make_notes(indexed.parent / "private", {"diary.md": "# Diary\n\nmy pangolin secret\n"})
    for ref in ("../private/diary.md", str(secret / "diary.md"), "/etc/passwd"):
        proc = run_qmd("get", ref, cwd=indexed)
        assert proc.returncode == 1 and proc.stdout == ""
        assert proc.stderr.startswith("Error: ") and "outside every collection" in proc.stderr
        assert "pangolin" not in proc.stderr and "root:" not in proc.stderr
    proc = run_qmd("multi-get", "../private/diary.md,/etc/passwd", cwd=indexed)
    assert proc.returncode == 1 and proc.stdout == "" and "pangolin" not in proc.stderr


# --- docids -----------------------------------------------------------------------------------

def _paths(files: str) -> list[str]:
    """The path field of each --files row (docid,score,path[,context,mark,confidence…])."""
    return [line.split(",")[2] for line in files.splitlines()]


def only_notes(err: str) -> bool:
    """stderr holds nothing but the note naming words no note contains (issue 28)."""
    return all(line.startswith("Note: no note contains ") for line in err.splitlines())


def _docid(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


@pytest.mark.parametrize("ref", ["#zz", "#abc", "#12345", "#zzzzzz", "#", "#9d49-1"])
def test_bad_docids(indexed: Path, cli: Cli, ref: str) -> None:
    code, out, err = cli("get", ref)
    assert_error(code, out, err, "is not a docid")
    assert "at least 6 hex digits" in hint_of(err)


def test_docid_prefixes_of_six_or_more_hex_digits(indexed: Path, cli: Cli) -> None:
    full = _docid(NOTES["postgres.md"])
    expected = cli("get", "small/postgres.md")[1]
    assert expected.startswith(f"qmd://small/postgres.md  #{full[:6]}\n")
    for ref in (f"#{full[:6]}", f"#{full[:7]}", f"#{full[:12]}", f"#{full}", f"#{full[:8].upper()}", full[:6]):
        assert cli("get", ref) == (0, expected, ""), ref
    code, out, err = cli("get", f"#{full[:6]}0000" if full[6:10] != "0000" else f"#{full[:6]}1111")
    assert_error(code, out, err, "no document with docid")


def test_ambiguous_docid_prefix_lists_candidates(tmp_path: Path, cli: Cli) -> None:
    # Two texts whose sha256 share 6 hex digits: the birthday bound finds one in ~5k tries.
    seen: dict[str, str] = {}
    i = 0
    while True:
        text = f"# Note {i}\n\ncollide token\n"
        prefix = _docid(text)[:6]
        if prefix in seen:
            break
        seen[prefix] = text
        i += 1
    one, two = seen[prefix], text
    root = make_notes(tmp_path / "amb", {"one.md": one, "two.md": two})
    assert cli("collection", "add", str(root), "--name", "amb")[0] == 0
    code, out, err = cli("get", f"#{prefix}")
    assert_error(code, out, err, f"docid #{prefix} is ambiguous", "amb/one.md", "amb/two.md")
    assert "more hex digits" in hint_of(err)
    for name, body in (("one.md", one), ("two.md", two)):
        longer = _docid(body)[:8]
        assert f"#{longer} amb/{name}" in err  # each candidate with enough digits to tell them apart
        code, out, _ = cli("get", f"#{longer}")
        header = out.split("\n", 1)[0]
        printed = header.rsplit("#", 1)[1]  # the docid get prints: unique, so longer than the shared 6
        assert code == 0 and header.startswith(f"qmd://amb/{name}  #{prefix}") and len(printed) > 6 and _docid(body).startswith(printed)


# --- config, index name, file-system faults -----------------------------------------------

def test_invalid_config_yaml(indexed: Path, cli: Cli, tmp_path: Path) -> None:
    path = qmd.resolve_index(None).config_path
    path.write_text("collections:\n  small: [unclosed\n")
    before = path.read_bytes()
    for args in (("search", "blue"), ("status",), ("collection", "add", str(tmp_path), "--name", "z"), ("update",), ("ls",)):
        code, out, err = cli(*args)
        assert_error(code, out, err, str(path), "not valid YAML")
        assert f"fix or remove {path}" in hint_of(err)
        assert "\n" not in err.split("\n")[0]  # the YAML error is folded into one line
    assert path.read_bytes() == before  # never overwritten


@pytest.mark.parametrize(
    ("text", "fragment"),
    [("- a\n- b\n", "must be a mapping"), ("collections:\n  small:\n    pattern: x\n", "needs a 'path'"), ("collections: [1]\n", "must be a mapping")],
)
def test_config_with_wrong_shape(indexed: Path, cli: Cli, text: str, fragment: str) -> None:
    path = qmd.resolve_index(None).config_path
    path.write_text(text)
    code, out, err = cli("search", "blue")
    assert_error(code, out, err, fragment, str(path))


@pytest.mark.parametrize("name", ["bad/name", "../escape", ".hidden", "x" * 65, "a b"])
def test_invalid_index_name(indexed: Path, cli: Cli, name: str) -> None:
    home = Path(os.environ["HOME"])
    before = sorted(p.relative_to(home) for p in home.rglob("*"))
    code, out, err = cli("--index", name, "status")
    assert_error(code, out, err, f"invalid index name {name!r}")
    assert "letters, digits" in hint_of(err)
    assert sorted(p.relative_to(home) for p in home.rglob("*")) == before  # nothing created


def test_invalid_index_name_in_subprocess(indexed: Path) -> None:
    proc = run_qmd("--index", "bad/name", "search", "blue")
    assert proc.returncode == 1 and proc.stdout == ""
    assert proc.stderr == "Error: invalid index name 'bad/name'\nhint: use letters, digits, '.', '_' or '-' (at most 64 characters)\n"


def test_cache_dir_is_a_file_on_search(indexed: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    code, out, err = cli("search", "blue")
    assert_error(code, out, err, str(blocker))


def test_cache_dir_is_a_file_on_update(indexed: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    monkeypatch.setenv("XDG_CACHE_HOME", str(blocker))
    code, out, err = cli("update")
    assert_error(code, out, err, str(blocker))
    assert "XDG_CACHE_HOME" in hint_of(err) or "INDEX_PATH" in hint_of(err)


def test_failed_collection_add_leaves_nothing_registered(tmp_path: Path) -> None:
    root = make_notes(tmp_path / "notes", NOTES)
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("x")
    proc = run_qmd("collection", "add", str(root), "--name", "notes", env=qmd_env({"XDG_CACHE_HOME": str(blocker)}))
    assert proc.returncode != 0  # the add failed (exit 3 today: see test_cache_dir_is_a_file_on_update)
    assert config_bytes() is None or b"notes" not in (config_bytes() or b"")
    proc = run_qmd("collection", "add", str(root), "--name", "notes")
    assert proc.returncode == 0, proc.stderr


def test_index_path_is_a_directory(indexed: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    folder = tmp_path / "idx-dir"
    folder.mkdir()
    monkeypatch.setenv("INDEX_PATH", str(folder))
    for args in (("search", "blue"), ("update",)):
        assert_error(*cli(*args), f"the index path {folder} is a folder", "move the folder aside")


def test_index_file_is_not_a_database(indexed: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    junk = tmp_path / "junk.sqlite"
    junk.write_bytes(b"this is not sqlite\n" * 100)
    monkeypatch.setenv("INDEX_PATH", str(junk))
    assert_error(*cli("search", "blue"), f"the index {junk} is damaged", "not a SQLite database", "qmd doctor --fix")
    assert junk.read_bytes() == b"this is not sqlite\n" * 100


def test_config_that_is_a_fifo_is_an_error_not_a_hang(indexed: Path, tmp_path: Path) -> None:
    """A FIFO where the config goes: every command (and the updater, which reads every config
    holding its lock) blocked in open() for good; now one line naming the file."""
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"
    config.unlink()
    os.mkfifo(config)
    proc = run_qmd("status", timeout=30)
    assert proc.returncode == 1 and f"cannot read config {config}" in proc.stderr and "not a regular file" in proc.stderr, proc.stderr


def test_config_dir_is_a_file(indexed: Path, cli: Cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "cfg-file"
    blocker.write_text("x")
    monkeypatch.setenv("QMD_CONFIG_DIR", str(blocker))
    assert_error(*cli("status"), f"cannot read config {blocker}/index.yml")
    assert_error(*cli("collection", "add", str(indexed), "--name", "again"), str(blocker))
    assert blocker.read_text() == "x"


@pytest.mark.parametrize("args", [("search",), ("search", "x", "--bogus"), ("nosuchcommand",), ("get",), ("search", "x", "-n", "many")])
def test_usage_errors_exit_2_without_traceback(indexed: Path, args: tuple[str, ...]) -> None:
    proc = run_qmd(*args)
    assert proc.returncode == 2, proc.stderr
    assert "Traceback" not in proc.stderr and proc.stderr.strip()


# --- a crash mid-update ----------------------------------------------------------------------

def _kill_update_while_indexing() -> int | None:
    """Run `qmd update` with stderr on a pty (so it reports progress) and SIGKILL it at the
    first "Indexed N files" line. Returns the exit status, None if no progress was seen."""
    master, slave = pty.openpty()
    proc = subprocess.Popen(
        command("update"), env=qmd_env(), stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=slave,
    )
    os.close(slave)
    seen = b""
    deadline = time.monotonic() + 60
    try:
        while b"Indexed" not in seen and time.monotonic() < deadline and proc.poll() is None:
            ready, _, _ = select.select([master], [], [], 0.05)
            if ready:
                try:
                    seen += os.read(master, 4096)
                except OSError:
                    break
        progressed = b"Indexed" in seen
        if proc.poll() is None:
            proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    finally:
        os.close(master)
    return proc.returncode if progressed else None


def test_kill_mid_update_keeps_previous_index(tmp_path: Path, cli: Cli, indexed: Path) -> None:
    big = tmp_path / "big"
    for i in range(3000):
        d = big / f"d{i % 30:02d}"
        d.mkdir(parents=True, exist_ok=True)
        (d / f"n{i:04d}.md").write_text(f"# Bulk note {i}\n\nbulkword unique{i}x in note {i}.\n")
    assert cli("collection", "add", str(big), "--name", "big", "--no-index")[0] == 0
    index_path = qmd.resolve_index(None).index_path

    status = None
    for _ in range(3):  # the kill must land while indexing: retry if the update outran us
        status = _kill_update_while_indexing()
        if status == -signal.SIGKILL:
            break
    assert status == -signal.SIGKILL, f"could not kill qmd update mid-way (exit status {status})"

    # The previous index is intact and readable.
    conn = apsw.Connection(str(index_path), flags=apsw.SQLITE_OPEN_READONLY)
    assert conn.execute("PRAGMA integrity_check").fetchall() == [("ok",)]
    conn.close()
    assert _paths(cli("search", "balancer", "--files")[1])[-1:] == ["qmd://small/runbooks/deploy.md"]
    assert cli("get", "small/postgres.md", "-l", "1")[1].endswith("1: # Postgres Backups\n")
    # One transaction per collection: the killed one left nothing half-indexed.
    partial = len(cli("search", "bulkword", "--files", "--all")[1].splitlines())
    assert partial in (0, 3000), f"{partial} of 3000 documents visible after the kill"

    # The writer lock died with the process: a new update runs at once and completes.
    code, _, err = cli("update")
    assert code == 0, err
    assert "Waiting for another process" not in err
    assert len(cli("search", "bulkword", "--files", "--all")[1].splitlines()) == 3000
    assert _paths(cli("search", "unique2999x", "--files")[1])[-1:] == ["qmd://big/d29/n2999.md"]
    assert qmd.Store(index_path, qmd.resolve_index(None).config_path).status().documents == 3002


@pytest.mark.parametrize("argv", [[b"search", b"\xffrestore"], [b"get", b"\xff.md"], [b"context", b"add", b"qmd://notes/", b"\xff"], [b"--index", b"w\xe9"]])
def test_an_argument_that_is_not_utf8_is_a_usage_error(tmp_path: Path, argv: list[bytes]) -> None:
    """Bytes the shell passed that are not UTF-8 (a Latin-1 word): one line and exit 2, never a
    traceback (it used to crash twice: in the command, then in writing the crash log)."""
    import os
    import subprocess
    import sys

    proc = subprocess.run([sys.executable.encode(), b"-m", b"qmd", *argv], capture_output=True, timeout=120, cwd=tmp_path, env=dict(os.environ))
    err = proc.stderr.decode("utf-8", "replace")
    assert proc.returncode == 2 and err.startswith("Error: argument") and "not valid UTF-8" in err and "Traceback" not in err, err


# --- usage lines ---------------------------------------------------------------------------

def test_usage_lines_name_arguments_as_usage_does(cli: Cli) -> None:
    """`Usage: qmd search [OPTIONS] QUERY`, not typer 0.27's `{QUERY}` (nor `{ref}`)."""
    code, _, err = cli("search")
    assert code == 2 and err.splitlines()[0] == "Usage: qmd search [OPTIONS] QUERY", err
    assert cli("get", "-h")[1].splitlines()[0] == "Usage: qmd get [OPTIONS] REF"
    assert cli("ls", "-h")[1].splitlines()[0] == "Usage: qmd ls [OPTIONS] [TARGET]"
    assert cli("collection", "update-cmd", "-h")[1].splitlines()[0] == "Usage: qmd collection update-cmd [OPTIONS] NAME [COMMAND]..."
    from qmd.cli.docgen import root_command, walk

    paths = [tuple(ctx.command_path.split()[1:]) for _, ctx in walk(root_command())][1:]  # every command, harness ones too
    assert ("search",) in paths and ("doctor",) in paths and len(paths) > 40
    for path in paths:
        code, out, err = cli(*path, "-h")
        usage = out.splitlines()[0] if out else err
        assert code == 0 and usage.startswith(f"Usage: qmd {' '.join(path)}"), (path, out, err)
        assert "{" not in usage and "}" not in usage, usage


def test_multi_get_of_commas_alone_is_refused(indexed: Path) -> None:
    """A comma list naming nothing (`,,,`: a script's empty join) printed an empty list and
    exited 0, as if every document asked for had been fetched; now one line and exit 1."""
    for pattern in (",", ",,,", " , ,"):
        proc = run_qmd("multi-get", pattern, "--json", cwd=indexed)
        assert_error(proc.returncode, proc.stdout, proc.stderr, "no document names")


def test_multi_get_of_a_glob_the_shell_expanded_reads_the_files_it_names(indexed: Path) -> None:
    """`qmd multi-get notes/*.md` unquoted: the shell hands over one path an argument, and
    typer said "Got unexpected extra argument(s)" (exit 2) with no fix named. The arguments
    are now the comma list they spell; one holding a comma cannot be, and says to quote."""
    names = sorted(str(p.relative_to(indexed)) for p in indexed.rglob("*.md"))  # as `*.md */*.md` expands
    assert len(names) == 2
    several = run_qmd("multi-get", *names, "--json", cwd=indexed)
    listed = run_qmd("multi-get", ",".join(names), "--json", cwd=indexed)
    assert several.returncode == 0, several.stderr
    assert several.stdout == listed.stdout and len(json.loads(several.stdout)) == 2
    proc = run_qmd("multi-get", names[0], "a,b", cwd=indexed)
    assert_error(proc.returncode, proc.stdout, proc.stderr, "holds a comma", "quote the glob")
