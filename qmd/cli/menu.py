"""`qmd --help`'s command list: grouped under headings, one whole line per command.

click lists a group's commands in one block and cuts each help text at the column's end
("Re-index collections: new, changed and..."). The original qmd 2.8.3 prints its commands
grouped (search, collections, maintenance, agents), each with a short line. `SECTIONS` holds
the headings, the commands under each in order, and each command's line (its `short_help`,
given where main.py adds the command); the harness commands (loaded from entry points) are
named here as plain words, never imported. A command no section names is listed last
under "Other commands" with click's own short help.

Subcommands (`qmd collection --help`) carry their own `short_help=` where they are declared.
tests/qmd/cli/test_help.py checks that every command and subcommand has a line that ends
and fits the terminal.
"""

from __future__ import annotations

from typer._click import Command, Context, HelpFormatter  # typer vendors click
from typer.core import TyperGroup

SECTIONS: tuple[tuple[str, tuple[tuple[str, str], ...]], ...] = (
    ("Search and read", (
        ("search", "Keyword search (BM25); needs no model."),
        ("vsearch", "Vector search: the documents nearest in meaning."),
        ("query", "Hybrid search: keywords, vectors and reranking."),
        ("get", "Print a document, or a range of its lines."),
        ("multi-get", "Print several documents by glob, list or docid."),
        ("bench", "Measure search quality on a fixture or qrels."),
    )),
    ("Collections and contexts", (
        ("collection", "Add, list, rename or remove indexed folders."),
        ("context", "Describe the index, a collection or a folder."),
        ("ls", "List the collections, or the files in one."),
        ("init", "Create a project-local index in .qmd/."),
        ("trust", "Approve a checked-in project config."),
    )),
    ("Models", (
        ("models", "List the model roles, or import a local model."),
        ("pull", "Download the configured models."),
        ("embed", "Embed the documents that have no vectors yet."),
    )),
    ("Agents and harness", (
        ("mcp", "Serve the index to agents over MCP (stdio or HTTP)."),
        ("token", "Manage bearer tokens for the HTTP server."),
        ("skill", "Show or install the qmd skill for agents."),
        ("skills", "List and print the agent skills qmd ships."),
        ("guard", "Steer agents from grep sweeps to qmd."),
        ("hooks", "Git hooks that queue a reindex after commits."),
        ("updater", "Drain the reindex queue that the git hooks fill."),
        ("health", "Show the flag raised while updates keep failing."),
    )),
    ("Maintenance", (
        ("update", "Re-index the collections from their folders."),
        ("status", "Show the index, its collections and models."),
        ("cleanup", "Drop deleted documents and compact the index."),
        ("rebuild", "Rebuild the index into a new file."),
        ("export", "Write the built index to one portable file."),
        ("import", "Import an exported index, vectors and all."),
        ("doctor", "Check the install, the indexes and the harness."),
        ("teardown", "Remove what qmd's installers added."),
        ("completion", "Print a shell completion script."),
    )),
)

SHORT_HELP: dict[str, str] = {name: line for _, rows in SECTIONS for name, line in rows}


class SectionedGroup(TyperGroup):
    """The root group: its commands printed under SECTIONS' headings, aligned across them."""

    def format_commands(self, ctx: Context, formatter: HelpFormatter) -> None:
        commands: dict[str, Command] = {}
        for name in self.list_commands(ctx):
            command = self.get_command(ctx, name)
            if command is not None and not command.hidden:
                commands[name] = command
        if not commands:
            return
        width = max(len(name) for name in commands)
        limit = formatter.width - 6 - width
        groups = [(heading, [name for name, _ in rows if name in commands]) for heading, rows in SECTIONS]
        named = {name for _, names in groups for name in names}
        groups.append(("Other commands", [name for name in commands if name not in named]))
        for heading, names in groups:
            if names:
                with formatter.section(heading):
                    formatter.write_dl([(name.ljust(width), commands[name].get_short_help_str(limit)) for name in names])
