"""docs/cli.md is what the CLI says about itself, and nothing `--help` shows is undocumented:
every command, sub-command and option is in docs/cli.md, every top-level command in the
README's command table."""

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


def readme_commands(readme: str) -> set[str]:
    """The first word of each row of the README's command table."""
    table = readme.split("## Commands", 1)[1].split("\n## ", 1)[0]
    return {m.group(1) for m in re.finditer(r"^\| `([\w-]+)", table, flags=re.M)} - {"command"}


def test_every_top_level_command_is_in_the_readme_table() -> None:
    root = docgen.root_command()
    ctx = next(docgen.walk(root))[1]
    shown = {name for name in docgen.subcommands(root, ctx) if not root.get_command(ctx, name).hidden}  # type: ignore[attr-defined]
    listed = readme_commands((REPO / "README.md").read_text(encoding="utf-8"))
    assert sorted(shown - listed) == [], "a command --help shows without a row in the README's command table"
    assert sorted(listed - shown) == [], "a README command row for a command qmd does not have"


def test_the_readme_check_reads_the_table() -> None:
    readme = "# x\n\n## Commands\n\n| command | what |\n|---|---|\n| `search QUERY` | a |\n| `collection add\\|list` | b |\n\n## Next\n\n| `ls` | c |\n"
    assert readme_commands(readme) == {"search", "collection"}
