"""`qmd --help` groups the commands under headings, as the original does, and every command
and subcommand is described by a whole line: a sentence that ends, never cut by click."""

from __future__ import annotations

import re

import pytest

from qmd.cli.menu import SECTIONS
from tests.support.run import qmd_env, run_qmd

WIDTH = 80  # click's help is at most 80 columns wide; COLUMNS pins it off a terminal


def _help(*args: str) -> str:
    done = run_qmd(*args, "--help", env=qmd_env({"COLUMNS": str(WIDTH)}))
    assert done.returncode == 0, done.stderr
    return done.stdout


def _sections(text: str) -> dict[str, list[tuple[str, str]]]:
    """Each `Heading:` block after Options → its (command, description) rows; a row that click
    wrapped shows as a line indented deeper, kept as a row with an empty name."""
    blocks: dict[str, list[tuple[str, str]]] = {}
    current: list[tuple[str, str]] | None = None
    for line in text.splitlines():
        heading = re.fullmatch(r"(\S.*):", line)
        if heading:
            current = None if heading.group(1) in ("Options", "Arguments") else blocks.setdefault(heading.group(1), [])
        elif current is not None and line.strip():
            row = re.fullmatch(r"  (\S+)\s+(\S.*)", line)
            current.append((row.group(1), row.group(2)) if row else ("", line.strip()))
    return blocks


def _whole(description: str) -> bool:
    return description.endswith(".") and not description.endswith("...")


def test_the_commands_are_grouped_under_headings_each_on_one_whole_line() -> None:
    blocks = _sections(_help())
    expected = [heading for heading, _ in SECTIONS]
    assert list(blocks) == expected, "the headings, in order, and no ungrouped 'Commands' block"
    listed = [name for rows in blocks.values() for name, _ in rows]
    assert "" not in listed, "a description wrapped onto a second line"
    assert len(listed) == len(set(listed))
    for wanted in ("search", "query", "get", "collection", "context", "models", "mcp", "token", "trust", "skill",
                   "update", "embed", "status", "doctor", "health", "guard", "hooks", "updater", "completion"):
        assert wanted in listed
    for name, description in (row for rows in blocks.values() for row in rows):
        assert _whole(description), f"{name}: {description!r} is cut or does not end"
    assert [name for name, _ in blocks["Search and read"]][:3] == ["search", "vsearch", "query"]


@pytest.mark.parametrize("group", ["collection", "context", "models", "mcp", "skill", "skills", "token", "trust", "guard", "hooks", "updater"])
def test_each_subcommand_is_one_whole_line(group: str) -> None:
    blocks = _sections(_help(group))
    rows = blocks.get("Commands", [])
    assert rows, f"qmd {group} --help lists no subcommands"
    for name, description in rows:
        assert name, f"qmd {group}: a description wrapped onto a second line: {description!r}"
        assert _whole(description), f"qmd {group} {name}: {description!r} is cut or does not end"


def test_every_command_in_the_app_has_its_own_line() -> None:
    """A command added without a line in menu.SECTIONS (or a subcommand without `short_help`)
    would fall back to click's cut text."""
    import typer.main

    from qmd.cli.main import build_app
    from qmd.cli.menu import SHORT_HELP

    root = typer.main.get_command(build_app([]))
    missing = sorted(set(root.commands) - set(SHORT_HELP))  # type: ignore[attr-defined]
    assert not missing, f"add these to qmd/cli/menu.py SECTIONS: {missing}"
    unsaid = [
        f"{group} {name}"
        for group, command in root.commands.items()  # type: ignore[attr-defined]
        for name, sub in getattr(command, "commands", {}).items()
        if not (sub.short_help and _whole(sub.short_help) and len(sub.short_help) <= WIDTH - 25)
    ]
    assert not unsaid, f"give these a short_help= of one short sentence: {unsaid}"
