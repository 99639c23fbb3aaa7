"""The typer app of `qmd`: core commands, harness commands loaded lazily, the error boundary.

The console script enters through fast.py, which runs `qmd search`, `get` and `status`
without typer when it understands the command line and hands everything else to `main` here.

Harness sub-apps find `qmd --index NAME` in `ctx.meta["qmd.index"]` (click shares `meta`
with every nested context), so they need nothing of the CLI's own state.

Exit codes: 0 ok, 1 a QmdError (message + hint), 2 usage, 3 unexpected (traceback
written under the state dir's logs/), 130 on Ctrl-C.
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer
import typer.core
from typer import _click as click
from typer._click import exceptions as click_exc  # typer vendors click

from qmd.core.version import __version__
from qmd.core.errors import QmdError
from qmd.cli.argv import OWN_INDEX_OPTION, dash_word, first_command, hoist_globals, not_text
from qmd.cli.boundary import guarded
from qmd.cli.shared import NO_GPU_NOTE, STATE, err

__all__ = ["CORE_COMMANDS", "OWN_INDEX_OPTION", "build_app", "hoist_globals", "main", "run"]

ENTRY_POINT_GROUP = "qmd.commands"

# name → (module, attribute, is_group). Only the invoked command's module is imported:
# building every command costs ~40 ms of typer introspection on each call.
CORE_COMMANDS: dict[str, tuple[str, str, bool]] = {
    "search": ("qmd.cli.read", "search", False),
    "vsearch": ("qmd.cli.vectors", "vsearch", False),
    "query": ("qmd.cli.query", "query", False),
    "get": ("qmd.cli.read", "get", False),
    "multi-get": ("qmd.cli.read", "multi_get", False),
    "ls": ("qmd.cli.read", "ls", False),
    "update": ("qmd.cli.update", "update", False),
    "embed": ("qmd.cli.vectors", "embed", False),
    "status": ("qmd.cli.update", "status", False),
    "cleanup": ("qmd.cli.update", "cleanup", False),
    "rebuild": ("qmd.cli.update", "rebuild", False),
    "export": ("qmd.cli.transfer", "export", False),
    "import": ("qmd.cli.transfer", "import_", False),
    "collection": ("qmd.cli.collections", "collection_app", True),
    "context": ("qmd.cli.collections", "context_app", True),
    "models": ("qmd.cli.vectors", "models_app", True),
    "pull": ("qmd.cli.vectors", "pull", False),
    "bench": ("qmd.cli.bench", "bench", False),
    "mcp": ("qmd.cli.mcp", "mcp_app", True),
    "skill": ("qmd.cli.skills", "skill_app", True),
    "skills": ("qmd.cli.skills", "skills_app", True),
    "completion": ("qmd.cli.completion", "completion", False),
    "init": ("qmd.cli.extras", "init", False),
    "token": ("qmd.cli.token", "token_app", True),
    "trust": ("qmd.cli.trust", "trust_app", True),
}

# Commands that may use a project-local config's gated fields (update commands, outside
# collections, custom models): asked for on a terminal first (vsearch and query ask in actions.py).
TRUST_ASKING = frozenset({"update", "embed", "pull"})


def _skill(value: bool) -> None:
    if value:
        from qmd.cli.skills import skill_show

        skill_show()
        raise typer.Exit()


def _version(value: bool) -> None:
    if value:
        from qmd.cli.extras import version_string

        sys.stdout.write(version_string() + "\n")
        raise typer.Exit()


INDEX_META_KEY = "qmd.index"  # harness commands read the --index NAME from click's ctx.meta


def root(
    ctx: typer.Context,
    index: Annotated[str | None, typer.Option("--index", help="Use index NAME (default: index). Each has its own config and database.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
    skill: Annotated[bool, typer.Option("--skill", callback=_skill, is_eager=True, help="Print the qmd skill for agents (as qmd skill show).")] = False,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Accepted anywhere on the line, for scripts written for the original qmd: this build runs models on the CPU.")] = False,
) -> None:
    """On-device search for your markdown notes."""
    if no_gpu:
        err(NO_GPU_NOTE)
    STATE.index_name = index
    ctx.meta[INDEX_META_KEY] = index
    if ctx.invoked_subcommand in TRUST_ASKING and not ctx.resilient_parsing and not {"-h", "--help"} & set(sys.argv):
        from qmd.cli.trustask import ask_local_trust

        ask_local_trust()


def _harness_commands() -> dict[str, object]:
    """Entry points registered by harness packages (hooks, updater, doctor, guard, …)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _add(app: typer.Typer, name: str, target: object) -> None:
    from qmd.cli.menu import SHORT_HELP

    line = SHORT_HELP.get(name)  # `qmd --help`'s line for it (menu.py)
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=name, short_help=line)
    elif callable(target):
        app.command(name, short_help=line)(target)
    else:
        raise TypeError(f"the '{name}' command is neither a function nor a typer app")


def build_app(argv: list[str]) -> typer.Typer:
    """The typer app holding the invoked command (every command for help or a typo)."""
    import importlib

    from qmd.cli.menu import SectionedGroup

    app = typer.Typer(
        name="qmd",
        cls=SectionedGroup,
        help="On-device search for your markdown notes: keyword (BM25) and vector search, documents, collections, contexts.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(root)
    first = first_command(argv)
    core = [first] if first in CORE_COMMANDS else list(CORE_COMMANDS)
    for name in core:
        module, attr, _ = CORE_COMMANDS[name]
        _add(app, name, getattr(importlib.import_module(module), attr))
    if first in CORE_COMMANDS:
        return app
    eps = _harness_commands()
    wanted = eps if first is None or first not in eps else {first: eps[first]}
    for name, ep in wanted.items():
        try:
            sub = ep.load()  # type: ignore[attr-defined]
        except Exception as exc:  # a broken harness package must not break core commands
            if first == name:
                raise QmdError(f"the '{name}' command failed to load: {exc}", "reinstall qmd (./install.sh) or run qmd doctor") from exc
            continue
        _add(app, name, sub)
    return app


class _PlainArgument(typer.core.TyperArgument):
    """An argument named as click names one, `QUERY`, `REF`, `[TARGET]`, `[COMMAND]...`
    (typer 0.27 writes a required one in braces, `{QUERY}`, and keeps the parameter's case)."""

    def make_metavar(self, ctx: click.Context, *, usage: bool = False) -> str:
        var = self.metavar or (self.name or "").upper()
        if usage and not self.required and not var.startswith("["):
            var = f"[{var}]"
        return var + "..." if self.metavar is None and self.nargs != 1 else var


def command_tree(argv: list[str]) -> click.Command:
    """The click command of the typer app for `argv` (see build_app), as --help and usage
    errors show it (docs/cli.md is written from the same tree)."""
    return plain_usage(typer.main.get_command(build_app(argv)))


def plain_usage(command: click.Command) -> click.Command:
    """`command` (and every command under it) with its arguments named as in normal usage lines."""
    for param in command.params:
        if type(param) is typer.core.TyperArgument:
            param.__class__ = _PlainArgument
    for sub in getattr(command, "commands", {}).values():
        plain_usage(sub)
    return command


def _said_dash_word(args: list[str], exc: click_exc.UsageError) -> bool:
    """For `qmd search -rollback` ("No such option: -r"): the usage error naming the word
    as typed, and the hint to put `--` before the query; False (nothing said) for any other."""
    ctx = exc.ctx
    if isinstance(exc, click_exc.NoSuchOption):
        rejected = [exc.option_name]
    elif isinstance(exc, click_exc.BadParameter) and isinstance(exc.param, typer.core.TyperOption):
        rejected = list(exc.param.opts)
    else:
        return False
    if ctx is None:
        return False
    options = {name: not (p.is_flag or p.count) for p in ctx.command.params if isinstance(p, typer.core.TyperOption) for name in [*p.opts, *p.secondary_opts]}
    options.update(dict.fromkeys(ctx.help_option_names, False))
    found = dash_word(args, rejected, options)
    if found is None:
        return False
    import shlex

    typed, fixed = found
    if isinstance(exc, click_exc.NoSuchOption):
        exc.message = f"No such option: {typed}"
    exc.show()
    err(f"hint: a query word starting with '-' goes after --: qmd {shlex.join(fixed)}")
    return True


def main(argv: list[str] | None = None) -> int:
    """Run the CLI through the typer app and map every outcome to the documented exit code."""
    args = hoist_globals(list(sys.argv[1:] if argv is None else argv))
    if not_text(args):
        return 2

    def invoke() -> int:
        command = command_tree(args)
        try:
            result = command.main(args=args, prog_name="qmd", standalone_mode=False)
        except click_exc.UsageError as exc:
            if not _said_dash_word(args, exc):
                raise
            return 2
        return result if isinstance(result, int) else 0

    return guarded(invoke)


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
