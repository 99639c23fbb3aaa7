"""A command line ending in `>&-`, `2>&-` or `<&-` starts qmd with that descriptor closed.
Python's stream was None, so every command that prints crashed with exit 3 (`search`, `ls`,
`status`, `get`, `collection list`, `completion`: the session 21 red team), and the next file
qmd opened would take the descriptor. A closed stream is /dev/null now, as `> /dev/null`
would make it: the command runs, its output goes nowhere, and no file takes descriptor 1."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from tests.support.run import command, qmd_env, run_qmd


@pytest.fixture
def indexed(isolated_home: Path, notes: Path) -> Path:
    proc = run_qmd("collection", "add", str(notes), "--name", "notes")
    assert proc.returncode == 0, proc.stderr
    return notes


def closed(redirect: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`qmd ARGS` run by bash with `redirect` (such as `>&-`) on its command line."""
    return subprocess.run(["bash", "-c", f'"$@" {redirect}', "qmd", *command(*args)], env=qmd_env(), capture_output=True, text=True, timeout=120)


@pytest.mark.parametrize(
    "args", [("search", "rollback"), ("ls",), ("status",), ("get", "notes/runbooks/deploy.md"), ("collection", "list"), ("completion", "bash"), ("search", "--json", "rollback")], ids=" ".join,
)
def test_a_closed_stdout_is_no_crash(indexed: Path, args: tuple[str, ...]) -> None:
    proc = closed(">&-", *args)
    assert proc.returncode == 0 and "Unexpected error" not in proc.stderr and "Traceback" not in proc.stderr, proc.stderr


def test_every_stream_closed_still_gives_the_exit_code(indexed: Path) -> None:
    assert closed(">&- 2>&- <&-", "search", "rollback").returncode == 0
    assert closed(">&- 2>&- <&-", "search", "-c", "nope", "rollback").returncode == 1  # the error line goes nowhere, the code stays
    assert closed("2>&-", "search", "-c", "nope", "rollback").returncode == 1


def test_an_update_with_stdout_closed_leaves_no_stray_write_in_its_files(indexed: Path, notes: Path) -> None:
    (notes / "new.md").write_text("# New\n\nA note about canaries.\n")
    proc = closed(">&-", "update")
    assert proc.returncode == 0, proc.stderr
    found = run_qmd("search", "canaries", "--json")
    assert found.returncode == 0 and "new.md" in found.stdout
    check = run_qmd("status")
    assert check.returncode == 0 and "Unexpected error" not in check.stderr


@pytest.mark.skipif(not Path("/dev/full").exists(), reason="needs /dev/full")
@pytest.mark.parametrize("args", [("search", "rollback"), ("search", "--json", "rollback"), ("status",), ("ls",)], ids=" ".join)
def test_output_that_cannot_be_written_is_said_to_be_the_outputs(indexed: Path, args: tuple[str, ...]) -> None:
    """`> /dev/full` (or a full disk under `> FILE`): the output could not be written. It read
    "free space on the file system qmd was writing to (its config, cache and state folders)"."""
    proc = closed("> /dev/full", *args)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: cannot write the output: No space left on device"), proc.stderr
    assert "config, cache" not in proc.stderr and len(proc.stderr.splitlines()) == 2
