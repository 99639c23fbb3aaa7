"""What the scanner meets on a real file system: FIFOs, sockets, symlink loops, a symlink
flipped to a secret mid-update, comma-separated patterns, warnings that outlive a no-op
update, and multi-get globs with `**/` and `*`."""

from __future__ import annotations

import os
import socket
import threading
from collections.abc import Callable
from pathlib import Path

import pytest

import qmd
from qmd.index.indexer import read_text
from qmd.index.scan import SkippedFile, glob_regex, scan

Cli = Callable[..., tuple[int, str, str]]


def test_fifos_sockets_and_symlink_loops_are_listed_as_skipped(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "ok.md").write_text("# ok\n")
    os.mkfifo(root / "pipe.md")
    sock = socket.socket(socket.AF_UNIX)
    sock.bind(str(root / "sock.md"))
    os.symlink("self.md", root / "self.md")  # a link to itself
    try:
        skipped = {i.rel: i.reason for i in scan(root, "**/*.md", []) if isinstance(i, SkippedFile)}
    finally:
        sock.close()
    assert skipped == {"pipe.md": "not a regular file (a FIFO)", "self.md": "symlink loop", "sock.md": "not a regular file (a socket)"}


def test_reading_never_waits_on_a_fifo(tmp_path: Path) -> None:
    os.mkfifo(tmp_path / "swapped.md")  # a file replaced by a FIFO between scan and read
    assert read_text(str(tmp_path / "swapped.md"), 10, str(tmp_path)) == (None, "not a regular file", None)


def test_a_symlink_flipped_outside_between_scan_and_read_is_refused(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "inside.md").write_text("# Inside\n\nharmless\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nthe password is hunter2\n")
    link = root / "race.md"
    os.symlink("inside.md", link)
    found = [i for i in scan(root, "**/*.md", []) if not isinstance(i, SkippedFile) and i.rel == "race.md"]
    assert found  # the scanner saw a link that stays inside
    os.remove(link)
    os.symlink(str(outside / "secret.md"), link)  # flipped after the scan, before the read
    text, skip, _ = read_text(found[0].path, found[0].size, os.path.realpath(root))
    assert text is None and skip == "symlink points outside the collection root"


@pytest.mark.slow
def test_a_flipping_symlink_never_gets_a_secret_indexed(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "inside.md").write_text("# Inside\n\nharmless text\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nthe password is hunter2\n")
    link = root / "race.md"
    os.symlink("inside.md", link)
    assert cli("collection", "add", str(root), "--name", "notes")[0] == 0
    stop = threading.Event()

    def flip() -> None:
        targets = ["inside.md", str(outside / "secret.md")]
        n = 0
        while not stop.is_set():
            tmp = root / f".race-{n}"
            os.symlink(targets[n % 2], tmp)
            os.replace(tmp, link)  # the attacker's atomic flip
            n += 1

    flipper = threading.Thread(target=flip)
    flipper.start()
    try:
        for _ in range(40):
            (root / "inside.md").write_text(f"# Inside\n\nharmless text {_}\n")  # force re-reads
            assert cli("update")[0] == 0
            assert "hunter2" not in cli("search", "password hunter2", "--json")[1]
    finally:
        stop.set()
        flipper.join()


def test_comma_separated_patterns_and_a_pattern_that_matches_nothing(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "docs"
    root.mkdir()
    (root / "kafka.txt").write_text("kafka consumer lag runbook\n")
    (root / "guide.rst").write_text("Guide\n=====\n\nrestore steps\n")
    (root / "skip.md").write_text("# not wanted\n")
    code, _, err = cli("collection", "add", str(root), "--name", "docs", "--pattern", "kafka.txt,*.rst")
    assert code == 0, err
    with qmd.open_index() as store:
        assert sorted(f.path for f in store.ls("docs")) == ["guide.rst", "kafka.txt"]
    code, _, err = cli("collection", "add", str(root), "--name", "typo", "--pattern", "**/*.mdx")
    assert code == 0 and "the pattern '**/*.mdx' matches no file" in err, err


def test_an_invalid_utf8_warning_stands_until_the_file_changes(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    (root / "latin1.md").write_bytes("# Caf\xe9\n\ncr\xe8me br\xfbl\xe9e\n".encode("latin-1"))
    code, _, err = cli("collection", "add", str(root), "--name", "notes")
    assert "warning latin1.md: invalid UTF-8" in err
    for _ in range(2):  # no-op updates: the file is not read again, the warning stays
        code, _, err = cli("update")
        assert code == 0 and "warning latin1.md: invalid UTF-8" in err, err
    assert "invalid UTF-8" in cli("status")[1]
    (root / "latin1.md").write_text("# Café\n\ncrème brûlée\n")
    os.utime(root / "latin1.md", ns=(1, 2_000_000_000_000_000_000))
    code, _, err = cli("update")
    assert code == 0 and "invalid UTF-8" not in err and "invalid UTF-8" not in cli("status")[1]


@pytest.mark.parametrize(
    ("pattern", "rel", "matches"),
    [
        ("notes/**/*.md", "notes/onboarding.md", True),  # `**/` is zero or more folders
        ("notes/**/*.md", "notes/a/b/c.md", True),
        ("notes/*.md", "notes/onboarding.md", True),
        ("notes/*.md", "notes/sub/x.md", False),  # `*` stops at `/`
        ("*.md", "a/b.md", False),
        ("**", "a/b.md", True),
        ("notes/{a,b}.md", "notes/b.md", True),
    ],
)
def test_glob_semantics(pattern: str, rel: str, matches: bool) -> None:
    assert bool(glob_regex(pattern).match(rel)) is matches


def test_multi_get_globs_follow_the_same_rules(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "notes"
    (root / "runbooks").mkdir(parents=True)
    (root / "onboarding.md").write_text("# Onboarding\n")
    (root / "runbooks" / "deploy.md").write_text("# Deploy\n")
    assert cli("collection", "add", str(root), "--name", "notes")[0] == 0
    import json

    # --json names a glob's files collection-relative, as the original does
    every = {d["file"] for d in json.loads(cli("multi-get", "notes/**/*.md", "--json")[1])}
    assert every == {"onboarding.md", "runbooks/deploy.md"}
    top = {d["file"] for d in json.loads(cli("multi-get", "notes/*.md", "--json")[1])}
    assert top == {"onboarding.md"}


def test_globs_a_regex_would_backtrack_on_match_the_same_in_pattern_times_path_steps() -> None:
    """`*a*a*a…x`, `{a,aa}{a,aa}…` and runs of stars once held a multi_get for hours (a
    backtracking regex); they run as a state machine now, with the regex's answers."""
    import random
    import re

    from qmd.index.scan import GlobMachine, _glob_tokens

    rng = random.Random(7)
    pieces = ["a", "b", "/", ".", "*", "**", "**/", "?", "{", "}", ",", "[ab]", "[!a]"]
    for _ in range(3000):  # the machine agrees with the regex on small patterns and paths
        pattern = "".join(rng.choice(pieces) for _ in range(rng.randint(0, 7)))
        tokens = [_glob_tokens(pattern)]
        regex = re.compile("".join(text for _, text in tokens[0]) + r"\Z", re.DOTALL)
        machine = GlobMachine(tokens)
        for _ in range(5):
            rel = "".join(rng.choice("ab/.") for _ in range(rng.randint(0, 8)))
            assert machine.match(rel) == bool(regex.match(rel)), (pattern, rel)
    rel = "notes/" + "a" * 60 + "/" + "a" * 60 + ".md"
    for pattern in ("*a" * 200 + "x", "**a" * 200 + "x", "{a,aa}" * 300 + "x", "notes/" + "*" * 3000 + "x", "**?" * 25 + "x"):
        assert not glob_regex(pattern).match(rel)  # a hang before
    assert glob_regex("**a" * 20 + "*.md").match(rel) and glob_regex("{a,aa}" * 30 + "*.md").match("a" * 40 + ".md")


def test_a_hostile_multi_get_glob_answers_instead_of_hanging(tmp_path: Path) -> None:
    from tests.support.run import run_qmd

    root = tmp_path / "notes"
    root.mkdir()
    for i in range(40):
        (root / f"n{i:03}-aaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaaa.md").write_text(f"# note {i}\n")
    assert run_qmd("collection", "add", str(root), "--name", "notes").returncode == 0
    proc = run_qmd("multi-get", "notes/" + "**a" * 40 + "x", timeout=120)  # hours with a backtracking regex
    assert proc.returncode == 1 and "no documents match" in proc.stderr, proc.stderr
    proc = run_qmd("multi-get", "notes/" + "*a" * 30 + "*.md", "--json", timeout=120)
    assert proc.returncode == 0 and proc.stdout.count('"file"') == 40, proc.stderr[-300:]


def test_a_glob_with_a_reversed_class_range_is_one_clear_error(tmp_path: Path, cli: Cli) -> None:
    """`[z-a]` was re.error: exit 3 from multi-get and collection add, an internal error over MCP."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text("# a\n")
    assert cli("collection", "add", str(root), "--name", "notes")[0] == 0
    for args in (("multi-get", "notes/[z-a]*"), ("collection", "add", str(root), "--name", "other", "--pattern", "[z-a]*.md")):
        code, _, err = cli(*args)
        assert code == 1 and err.startswith("Error: ") and "is not a valid glob" in err and "[a-z]" in err, (args, code, err)
    assert "other" not in cli("collection", "list")[1]


def test_adding_a_folder_that_is_a_symlink_loop_is_one_clear_error(tmp_path: Path, cli: Cli) -> None:
    """pathlib's resolve() raised RuntimeError for the loop: exit 3."""
    os.symlink(tmp_path / "loop", tmp_path / "loop")
    code, _, err = cli("collection", "add", str(tmp_path / "loop"), "--name", "loop")
    assert code == 1 and err.startswith("Error: ") and "symlink loop" in err and "hint: " in err, (code, err)
    assert "loop" not in cli("collection", "list")[1]


def test_notes_this_user_cannot_read_now_keep_what_is_indexed(tmp_path: Path) -> None:
    """An unlistable subfolder, and a changed file that cannot be read, are skipped with what
    the index holds for them kept (update removed them, exit 0: a later cleanup purged them and
    their vectors); an unlistable collection folder is refused as a missing one is, on update and
    on add, with nothing dropped or added. Real file modes (root runs through setpriv)."""
    import subprocess

    from tests.support.run import bound_by_modes, command, qmd_env

    notes = tmp_path / "notes"
    (notes / "sub").mkdir(parents=True)
    for rel in ("a.md", "b.md", "sub/c.md"):
        (notes / rel).write_text(f"# {rel}\n\nabout postgres failover {rel}\n")

    def run(*args: str) -> tuple[int, str, str]:
        proc = subprocess.run(bound_by_modes(command(*args)), env=qmd_env(), capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    def listed() -> list[str]:
        code, out, err = run("ls", "notes")
        assert code == 0, err
        return sorted(line.rsplit("qmd://notes/", 1)[1] for line in out.splitlines() if "qmd://notes/" in line)

    assert run("collection", "add", str(notes), "--name", "notes")[0] == 0
    everything = ["a.md", "b.md", "sub/c.md"]
    assert listed() == everything
    (notes / "b.md").write_text("# b.md\n\nchanged since\n")
    modes = [(notes / "sub", 0o000), (notes / "b.md", 0o000)]
    for path, mode in modes:
        path.chmod(mode)
    try:
        code, _, out = run("update")  # the report goes to stderr
        assert code == 0, out
        assert "0 removed" in out and "2 skipped" in out, out
        assert "skipped sub: cannot list folder: Permission denied; what is indexed below it (1 document) is kept as it was" in out, out
        assert "skipped b.md: cannot read: Permission denied; its indexed version is kept" in out, out
        assert listed() == everything
        (notes / "sub").chmod(0o755)
        notes.chmod(0o000)
        code, out, err = run("update")
        assert code == 1 and err.startswith("Error: collection 'notes': cannot list") and f"chmod u+rx {notes}" in err and "Traceback" not in err, (code, out, err)
        code, out, err = run("collection", "add", str(notes), "--name", "other")
        assert code == 1 and "cannot list" in err, (code, out, err)
    finally:
        notes.chmod(0o755)
        for path, _ in modes:
            path.chmod(0o755 if path.is_dir() else 0o644)
    assert listed() == everything
    assert "other" not in run("collection", "list")[1]
    code, _, out = run("update")
    assert code == 0 and "1 updated" in out and "0 removed" in out, (code, out)
    code, out, err = run("search", "changed since")
    assert code == 0 and "b.md" in out, (code, out, err)


@pytest.mark.skipif(not os.path.lexists("/proc/2/exe"), reason="needs Linux's /proc with a kernel thread at pid 2")
def test_a_link_the_kernel_cannot_read_back_is_skipped_not_a_crash(tmp_path: Path, cli: Cli) -> None:
    """A link whose target `realpath` cannot read (a kernel thread's or a zombie's
    /proc/PID/exe: readlink says ENOENT) crashed `collection add` with exit 3 (the session 21
    red team); it is listed as skipped, and the other notes are indexed."""
    try:
        os.path.realpath("/proc/2/exe")
        pytest.skip("/proc/2/exe reads back here")
    except OSError:
        pass
    root = tmp_path / "notes"
    root.mkdir()
    (root / "ok.md").write_text("# ok\n\nA plain note.\n")
    os.symlink("/proc/2/exe", root / "ghost.md")
    os.symlink("/proc/2/exe", root / "ghostdir")
    skipped = {i.rel: i.reason for i in scan(root, "**/*.md", []) if isinstance(i, SkippedFile)}
    assert skipped == {"ghost.md": "cannot read the symlink: No such file or directory"}
    code, out, err = cli("collection", "add", str(root), "--name", "notes")
    assert code == 0 and "1 new" in err and "ghost.md" in err and "Unexpected error" not in err, err
