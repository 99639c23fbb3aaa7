"""docs/cli.md is what the CLI says about itself, and nothing `--help` shows is undocumented:
every command, sub-command and option is in docs/cli.md."""

from __future__ import annotations

import re

from qmd.cli import docgen
from tests.support.paths import REPO


def test_cli_md_is_the_generators_output() -> None:
    assert docgen.TARGET == REPO / "docs" / "cli.md"
    assert docgen.TARGET.read_text(encoding="utf-8") == docgen.render(), "docs/cli.md is stale: run python -m qmd.cli.docgen"


def sections(text: str) -> dict[str, str]:
    """`## qmd …` heading → the section's text."""
    parts = re.split(r"^## (qmd(?: [\w-]+)*)$", text, flags=re.M)
    return dict(zip(parts[1::2], parts[2::2]))


def undocumented(reference: str) -> list[str]:
    """Each command that has no section in `reference`, and each argument or option (as `--help`
    lists it) missing from its command's section."""
    found = sections(reference)
    missing = []
    for command, ctx in docgen.walk(docgen.root_command()):
        path = ctx.command_path
        if path not in found:
            missing.append(path)
            continue
        for param in command.params:
            record = param.get_help_record(ctx)
            if record is not None and f"`{record[0].replace('|', chr(92) + '|')}`" not in found[path]:
                missing.append(f"{path} {record[0]}")
        help_option = command.get_help_option(ctx)
        if help_option is not None and ", ".join(help_option.opts) not in reference:
            missing.append(f"{path} {', '.join(help_option.opts)}")
    return missing


def test_every_command_and_option_is_in_the_reference() -> None:
    assert undocumented(docgen.TARGET.read_text(encoding="utf-8")) == []


def test_the_reference_check_sees_a_missing_option_and_command() -> None:
    reference = docgen.render()
    assert undocumented(reference.replace("| `--min-score <float>` |", "| `--min-score` |", 1)) == ["qmd search --min-score <float>"]
    assert "qmd hooks status" in undocumented(reference.replace("## qmd hooks status\n", "## qmd hooks state\n"))

