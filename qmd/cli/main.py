"""The `qmd` entry point: one error boundary, core commands, harness commands loaded lazily.

Harness sub-apps find `qmd --index NAME` in `ctx.meta["qmd.index"]` (click shares `meta`
with every nested context), so they need nothing of the CLI's own state.

Exit codes: 0 ok, 1 a QmdError (message + hint), 2 usage, 3 unexpected (traceback
written under the state dir's logs/), 130 on Ctrl-C.
"""

from __future__ import annotations

import os
import sys
import time
import traceback
from typing import Annotated

import typer

from qmd import __version__
from qmd.core.errors import QmdError
from qmd.cli.common import STATE, err

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
    "collection": ("qmd.cli.collections", "collection_app", True),
    "context": ("qmd.cli.collections", "context_app", True),
    "models": ("qmd.cli.vectors", "models_app", True),
    "pull": ("qmd.cli.vectors", "pull", False),
    "bench": ("qmd.cli.bench", "bench", False),
    "mcp": ("qmd.cli.mcp", "mcp_app", True),
}


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"qmd {__version__}\n")
        raise typer.Exit()


INDEX_META_KEY = "qmd.index"  # harness commands read the --index NAME from click's ctx.meta


def root(
    ctx: typer.Context,
    index: Annotated[str | None, typer.Option("--index", help="Use index NAME (default: index). Each has its own config and database.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
    no_gpu: Annotated[bool, typer.Option("--no-gpu", help="Accepted for scripts written for the original qmd: this build runs models on the CPU.")] = False,
) -> None:
    """On-device search for your markdown notes."""
    if no_gpu:
        err("note: --no-gpu: this qmd runs its models on the CPU (llama.cpp), so there is nothing to turn off")
    STATE.index_name = index
    ctx.meta[INDEX_META_KEY] = index


def _harness_commands() -> dict[str, object]:
    """Entry points registered by harness packages (hooks, updater, doctor, guard, …)."""
    from importlib.metadata import entry_points

    return {ep.name: ep for ep in entry_points(group=ENTRY_POINT_GROUP)}


def _first_command(argv: list[str]) -> str | None:
    skip_next = False
    for arg in argv:
        if skip_next:
            skip_next = False
            continue
        if arg == "--index":
            skip_next = True
            continue
        if not arg.startswith("-"):
            return arg
    return None


def _add(app: typer.Typer, name: str, target: object) -> None:
    if isinstance(target, typer.Typer):
        app.add_typer(target, name=name)
    elif callable(target):
        app.command(name)(target)
    else:
        raise TypeError(f"the '{name}' command is neither a function nor a typer app")


def build_app(argv: list[str]) -> typer.Typer:
    """The typer app holding the invoked command (every command for help or a typo)."""
    import importlib

    app = typer.Typer(
        name="qmd",
        help="On-device search for your markdown notes: keyword (BM25) and vector search, documents, collections, contexts.",
        no_args_is_help=True,
        add_completion=False,
        pretty_exceptions_enable=False,
        rich_markup_mode=None,
        context_settings={"help_option_names": ["-h", "--help"]},
    )
    app.callback()(root)
    first = _first_command(argv)
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


def _crash_log(exc: BaseException) -> str:
    from qmd.core.paths import state_dir

    folder = state_dir() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        path.write_text("qmd " + " ".join(sys.argv[1:]) + "\n\n" + "".join(traceback.format_exception(exc)), encoding="utf-8")
        return str(path)
    except OSError:
        return "(could not write a crash log; traceback follows)\n" + "".join(traceback.format_exception(exc))


# Commands with an `--index` option of their own (it keeps its meaning there).
OWN_INDEX_OPTION = frozenset({"mcp", "doctor"})


def hoist_index(args: list[str]) -> list[str]:
    """`qmd search x --index work` → `qmd --index work search x`: the original accepts
    `--index` after the command, so scripts written for it pass it there.

    Left alone: commands with their own `--index`, and anything after a `--`.
    """
    first = _first_command(args)
    if first is None or first in OWN_INDEX_OPTION:
        return args
    start = args.index(first) + 1
    head, rest, moved = args[:start], [], []
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--index" and i + 1 < len(args):
            moved += [arg, args[i + 1]]
            i += 2
            continue
        if arg.startswith("--index="):
            moved += ["--index", arg.split("=", 1)[1]]
        else:
            rest.append(arg)
        i += 1
    if not moved:
        return args
    position = head.index(first)
    return [*head[:position], *moved, *head[position:], *rest]


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and map every outcome to the documented exit code."""
    from typer._click import exceptions as click_exc  # typer vendors click

    args = hoist_index(list(sys.argv[1:] if argv is None else argv))
    try:
        command = typer.main.get_command(build_app(args))
        result = command.main(args=args, prog_name="qmd", standalone_mode=False)
        return result if isinstance(result, int) else 0
    except QmdError as exc:
        err(f"Error: {exc.message}")
        if exc.hint:
            err(f"hint: {exc.hint}")
        return 1
    except typer.Exit as exc:
        return int(exc.exit_code or 0)
    except click_exc.ClickException as exc:
        exc.show()
        return 2
    except (KeyboardInterrupt, typer.Abort):
        err("Interrupted.")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the boundary for everything unexpected
        where = _crash_log(exc)
        err(f"Unexpected error: {type(exc).__name__}: {exc}")
        err(f"hint: this is a bug; the traceback is in {where}")
        return 3


def run() -> None:
    sys.exit(main())


if __name__ == "__main__":
    run()
