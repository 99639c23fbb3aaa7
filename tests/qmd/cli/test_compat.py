"""Command lines written for the original qmd 2.8.3 keep working (issue: a drop-in for its users)."""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from qmd.cli.main import hoist_index

Cli = Callable[..., tuple[int, str, str]]
RunQmd = Callable[..., subprocess.CompletedProcess[str]]


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
    ],
)
def test_index_after_the_command_moves_in_front(args: list[str], expected: list[str]) -> None:
    assert hoist_index(args) == expected


def test_a_script_passing_index_after_the_command_reads_that_index(run_qmd: RunQmd, tmp_path: Path) -> None:
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
    from qmd.cli.argv import hoist_index

    assert hoist_index(["mcp", "--index", "work"]) == ["--index", "work", "mcp"]
    assert hoist_index(["mcp", "--http", "--port", "9000", "--index", "work"]) == ["--index", "work", "mcp", "--http", "--port", "9000"]
    assert hoist_index(["mcp", "stop", "--index", "work"]) == ["mcp", "stop", "--index", "work"]
    assert hoist_index(["doctor", "--index", "work"]) == ["doctor", "--index", "work"]
