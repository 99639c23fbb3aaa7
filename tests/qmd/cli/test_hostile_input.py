"""User input that used to crash (exit 3) or print nothing: huge numbers, NaN, NUL bytes."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import qmd

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def indexed(cli: Cli, notes: Path) -> Path:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    return notes


@pytest.mark.parametrize("command", ["search", "query"])
def test_a_huge_result_count_means_everything(cli: Cli, indexed: Path, command: str) -> None:
    code, out, err = cli(command, "lex: balancer" if command == "query" else "balancer", "-n", "99999999999999999999", "--files")
    assert code == 0, err
    assert "qmd://notes/runbooks/deploy.md" in out


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("score", ["nan", "inf", "-inf", "-0.5", "1.5"])
def test_a_minimum_score_outside_0_to_1_is_one_clear_error(cli: Cli, indexed: Path, command: str, score: str) -> None:
    code, out, err = cli(command, "balancer", f"--min-score={score}")
    assert code == 1, err
    assert err.splitlines()[0].startswith("Error: the minimum score must be a number from 0 to 1") and "hint: " in err
    assert out == "" and "Traceback" not in err


@pytest.mark.parametrize("text", ["load\x00balancer", "\x00", "load\x1bbalancer", "load\x7fbalancer"])
def test_control_characters_in_a_query_separate_words(indexed: Path, text: str) -> None:
    with qmd.open_index() as store:
        hits = store.search(text)
        result = store.query("lex: " + text, rerank=False)
    if text.strip("\x00"):
        assert [h.path for h in hits] == ["runbooks/deploy.md"] and [h.path for h in result.hits] == ["runbooks/deploy.md"]
    else:
        assert hits == []


def test_the_api_refuses_a_limit_below_one(indexed: Path) -> None:
    with qmd.open_index() as store:
        with pytest.raises(qmd.QmdError, match="at least 1"):
            store.search("balancer", limit=0)
        assert len(store.search("balancer", limit=10**30)) == 1


@pytest.mark.parametrize("fmt", ["--files", "--format=cli", "--md"])
def test_a_newline_or_escape_in_a_file_name_never_splits_or_colors_a_line(cli: Cli, tmp_path: Path, fmt: str) -> None:
    root = tmp_path / "odd"
    root.mkdir()
    (root / "two\nlines.md").write_text("# Odd\n\nquokka habitat\n")
    (root / "red\x1b[31m.md").write_text("# Red\n\nquokka colour\n")
    assert cli("collection", "add", str(root), "--name", "odd")[0] == 0
    code, out, _ = cli("search", "quokka", fmt)
    assert code == 0 and "\x1b" not in out
    assert "two\\nlines.md" in out and "red\\x1b[31m.md" in out
    if fmt == "--files":
        assert len(out.splitlines()) == 2  # one line per hit
    for args in (("ls", "odd"), ("multi-get", "odd/*.md", "--files")):
        listing = cli(*args)[1]
        assert "\x1b" not in listing and "two\\nlines.md" in listing and not any(line.endswith("two") for line in listing.splitlines())


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
@pytest.mark.parametrize("value", ["", "   "])
def test_an_empty_filter_is_a_usage_error_not_no_filter(cli: Cli, indexed: Path, command: str, value: str) -> None:
    """A script's `--filter "$F"` with F unset once searched unfiltered, silently."""
    code, out, err = cli(command, "balancer", "--filter", value)
    assert code == 2 and "--filter" in err and "needs a JSON filter" in err and out == "", err
