"""The `qmd` entry point: one error boundary, core commands, harness commands loaded lazily.

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

from .. import __version__
from ..errors import QmdError
from .collections import collection_app, context_app
from .common import STATE, err
from .read import get, ls, multi_get, search
from .update import cleanup, status, update
from .vectors import embed, models_app, pull, vsearch

ENTRY_POINT_GROUP = "qmd.commands"

app = typer.Typer(
    name="qmd",
    help="On-device search for your markdown notes: keyword (BM25) and vector search, documents, collections, contexts.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    context_settings={"help_option_names": ["-h", "--help"]},
)
app.add_typer(collection_app, name="collection")
app.add_typer(context_app, name="context")
app.add_typer(models_app, name="models")
for command in (update, status, cleanup, search, vsearch, get, ls, embed, pull):
    app.command()(command)
app.command("multi-get")(multi_get)


def _version(value: bool) -> None:
    if value:
        sys.stdout.write(f"qmd {__version__}\n")
        raise typer.Exit()


@app.callback()
def root(
    index: Annotated[str | None, typer.Option("--index", help="Use index NAME (default: index). Each has its own config and database.")] = None,
    version: Annotated[bool, typer.Option("--version", callback=_version, is_eager=True, help="Print the version.")] = False,
) -> None:
    """On-device search for your markdown notes."""
    STATE.index_name = index


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


def _register_harness(argv: list[str]) -> None:
    """Load only the harness sub-app being invoked (all of them for top-level --help)."""
    core = {c.name or (c.callback.__name__ if c.callback else "") for c in app.registered_commands} | {"collection", "context", "models", "multi-get"}
    first = _first_command(argv)
    if first in core:
        return
    eps = _harness_commands()
    wanted = eps if first is None else {k: v for k, v in eps.items() if k == first}
    for name, ep in wanted.items():
        try:
            sub = ep.load()  # type: ignore[attr-defined]
        except Exception as exc:  # a broken harness package must not break core commands
            if first is not None:
                raise QmdError(f"the '{name}' command failed to load: {exc}", "reinstall qmd (./install.sh) or run qmd doctor") from exc
            continue
        if isinstance(sub, typer.Typer):
            app.add_typer(sub, name=name)
        else:
            app.command(name)(sub)


def _crash_log(exc: BaseException) -> str:
    from ..paths import state_dir

    folder = state_dir() / "logs"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
        path.write_text("qmd " + " ".join(sys.argv[1:]) + "\n\n" + "".join(traceback.format_exception(exc)), encoding="utf-8")
        return str(path)
    except OSError:
        return "(could not write a crash log; traceback follows)\n" + "".join(traceback.format_exception(exc))


def main(argv: list[str] | None = None) -> int:
    """Run the CLI and map every outcome to the documented exit code."""
    from typer._click import exceptions as click_exc  # typer vendors click

    args = list(sys.argv[1:] if argv is None else argv)
    try:
        _register_harness(args)
        command = typer.main.get_command(app)
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
