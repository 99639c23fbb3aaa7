"""The `qmd` console script: a lean path for the commands agents shell out to, typer for the rest.

Importing typer and building its app costs more than a keyword search itself. So `run()`
first offers the command line to a small route table: each route parses the arguments of
one command (a subset of what click accepts: the forms agents and scripts use) with the
option table generated from its typer declaration (fastspec.json, written by fastgen.py), and
returns the command to run, or None for anything it does not fully understand. None hands the
command line, untouched, to the typer app (main.py): help, usage errors, every other
command and every unusual spelling get typer's exact behaviour. A routed command calls
the same function as its typer command (actions.py) inside the same error boundary
(boundary.py), so the two paths print the same bytes and exit with the same code;
tests/qmd/cli/test_fast_path.py runs both on a matrix of command lines.

Adding a route: add the command to fastgen.ROUTED and to ROUTES, give actions.py a function
of that name taking the parameter values, and regenerate fastspec.json (`python -m
qmd.cli.fastgen`). A route of its own (`_mcp`) takes the arguments after the command name,
`--index` already taken out, and returns None whenever in doubt. `QMD_FAST=0` turns the
lean path off.
"""

from __future__ import annotations

import os
import sys

from qmd.cli.argv import first_command, hoist_globals, not_text
from qmd.cli.shared import NO_GPU_NOTE, STATE, err, pick_format
from qmd.cli.boundary import guarded, run_command, usage_error

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

    # fastspec.json, per command: argument, takes many, flags, options, defaults (see fastgen.render)
    Spec = tuple[str | None, bool, dict[str, tuple[str, bool]], dict[str, tuple[str, str, bool]], dict[str, object]]
    Command = Callable[[], object]
    Route = Callable[[list[str]], "Command | None"]


class _Unsure(Exception):
    """The command line is not one the route fully understands: let typer parse it."""


def _whole(value: str) -> int:
    """A plain non-negative decimal integer (click would accept more; typer handles the rest;
    a value the command rejects, such as -n 0, is its usage error, reported by typer)."""
    if not (value.isascii() and value.isdigit() and len(value) <= 18):
        raise _Unsure
    return int(value)


def _fraction(value: str) -> float:
    """A plain decimal number such as 0.3, 1 or .25."""
    whole, _, decimals = value.partition(".")
    if not (value.isascii() and (whole + decimals).isdigit() and value.count(".") <= 1):
        raise _Unsure
    return float(value)


def _text(value: str) -> str:
    return value


CONVERTERS: dict[str, Callable[[str], object]] = {"int": _whole, "float": _fraction, "str": _text}  # fastspec.json's option kinds


def _parse(args: list[str], spec: Spec) -> dict[str, object]:
    """The command's parameter values as click parses them, for the plain forms only:
    `--opt V`, `--opt=V`, `-xV` (one-letter options), flags, `--`, and the argument(s);
    the defaults for the rest. Raises _Unsure on anything else."""
    argument, many, flags, options, defaults = spec
    values: dict[str, object] = dict(defaults)
    repeated: set[str] = set()
    positional: list[str] = []
    i = 0
    while i < len(args):
        arg = args[i]
        i += 1
        if arg == "--":
            positional += args[i:]
            break
        if arg[:1] != "-" or arg == "-":
            positional.append(arg)
            continue
        name, value = arg, None
        if arg.startswith("--"):
            if "=" in arg:
                name, value = arg.split("=", 1)
        elif len(arg) > 2:
            name, value = arg[:2], arg[2:]
        if name in flags and value is None:
            param, setting = flags[name]
            values[param] = setting
            continue
        if name not in options:
            raise _Unsure
        if value is None:
            if i >= len(args) or args[i][:1] == "-":
                raise _Unsure
            value = args[i]
            i += 1
        param, kind, repeatable = options[name]
        converted = CONVERTERS[kind](value)
        if repeatable:
            if param not in repeated:
                repeated.add(param)
                values[param] = []
            values[param].append(converted)  # type: ignore[attr-defined]
        else:
            values[param] = converted
    if argument is None:
        if positional:
            raise _Unsure
    elif many:
        if not positional:
            raise _Unsure  # typer's "Missing argument"
        values[argument] = positional
    elif len(positional) != 1:
        raise _Unsure  # missing, or an extra argument
    else:
        values[argument] = positional[0]
    return values


_FORMATS = ("fmt", "json_", "csv_", "md", "xml", "files")  # with_output_format's parameters, in pick_format's order


def _routed(name: str) -> Route:
    """The route of a command in fastspec.json: its values parsed, checked as the command
    checks them (a usage error goes to typer, which reports it), then the command's action."""

    def route(args: list[str]) -> Command | None:
        from qmd.cli import actions

        params = _parse(args, spec(name))
        check = CHECKS.get(name)
        try:
            if "fmt" in params:
                params["kind"] = pick_format(*(params.pop(p) for p in _FORMATS))  # type: ignore[arg-type]
            if check is not None:
                getattr(actions, check)(params)
        except Exception as exc:
            if usage_error(exc):
                raise _Unsure from exc
            raise
        action = getattr(actions, name)
        return lambda: action(params)

    return route


def spec(name: str) -> Spec:
    """The option table of command `name` (fastspec.json, generated from typer by fastgen.py)."""
    import json

    with open(os.path.join(os.path.dirname(__file__), "fastspec.json"), encoding="utf-8") as fh:
        argument, many, flags, options, defaults = json.load(fh)[name]
    return argument, many, flags, options, defaults


CHECKS = {"search": "search_request", "vsearch": "vsearch_request", "query": "query_request", "get": "get_request"}  # actions' request builders


def _mcp(args: list[str]) -> Command | None:
    """`qmd [--index NAME] mcp`: the stdio MCP server, which an agent starts before its first
    turn; it answers `initialize` while the index opens (qmd/serve/stdio.py)."""
    if args:
        return None  # --http, stop, install, --help: typer
    from qmd.serve.stdio import run

    return lambda: run(STATE.index_name)


def _completion(args: list[str]) -> Command | None:
    """`qmd [--index NAME] completion --values collections|indexes`: what the completion
    scripts ask for while a word is completed (candidates.py); the scripts themselves: typer."""
    from qmd.cli.candidates import KINDS, print_values

    kind = args[1] if len(args) == 2 and args[0] == "--values" else args[0].split("=", 1)[1] if len(args) == 1 and args[0].startswith("--values=") else None
    if kind not in KINDS:
        return None
    return lambda: print_values(kind, STATE.index_name)


ROUTES: dict[str, Route] = {name: _routed(name) for name in ("search", "vsearch", "query", "get", "status")} | {"mcp": _mcp, "completion": _completion}


def route(argv: list[str]) -> Command | None:
    """The command to run for `argv` without typer, or None to let the typer app parse it."""
    args = hoist_globals(argv)
    index: str | None = None
    no_gpu = False
    i = 0
    while i < len(args) and args[i][:1] == "-":  # the options before the command: --index, --no-gpu
        if args[i] == "--no-gpu" and not no_gpu:
            no_gpu = True
        elif index is not None:
            return None
        elif args[i].startswith("--index="):
            index = args[i].split("=", 1)[1]
        elif args[i] == "--index" and i + 1 < len(args) and args[i + 1][:1] != "-":
            index = args[i + 1]
            i += 1
        else:
            return None
        i += 1
    if i >= len(args) or args[i] not in ROUTES or first_command(args) != args[i]:
        return None
    try:
        command = ROUTES[args[i]](args[i + 1 :])
    except _Unsure:
        return None
    if command is None:
        return None

    def selected() -> object:
        if no_gpu:  # what the typer app's root callback does with --no-gpu and --index
            err(NO_GPU_NOTE)
        STATE.index_name = index
        return command()

    return selected


def main(argv: list[str] | None = None) -> int:
    """Run one command line: through a route when one understands it, else through typer."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not_text(args):
        return 2
    command = route(args) if os.environ.get("QMD_FAST") != "0" else None
    if command is None:
        import gc

        gc.enable()  # typer's commands include the long ones (update, embed, the HTTP server): collected as usual
        from qmd.cli.main import main as typer_main

        return typer_main(args)
    return guarded(lambda: run_command(command))


def run() -> None:
    """The console script. The cyclic collector is off for a routed command (one search, get
    or status, then the process ends): its passes walked every module's objects while they
    were imported, ≈ 7% of a `qmd search` (stdio's server turns it on again after its first
    answer; every other command turns it on in `main`)."""
    import gc

    gc.disable()
    _open_closed_streams()
    sys.exit(main())


def _open_closed_streams() -> None:
    """A command line ending in `>&-` (or `2>&-`, `<&-`) starts qmd with that descriptor
    closed: Python's stream is None, so every write crashed (exit 3), and the next file qmd
    opened would take the descriptor, so a write meant for the terminal (a library's log line)
    could land in that file. Each closed one is /dev/null instead, as `> /dev/null` makes it."""
    for fd, name in ((0, "stdin"), (1, "stdout"), (2, "stderr")):
        if getattr(sys, name) is not None:
            continue
        try:
            os.fstat(fd)
        except OSError:
            null = os.open(os.devnull, os.O_RDWR)
            if null != fd:
                os.dup2(null, fd)
                os.close(null)
        setattr(sys, name, open(fd, "r" if fd == 0 else "w", encoding="utf-8", errors="replace", closefd=False))
