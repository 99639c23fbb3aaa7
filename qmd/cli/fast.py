"""The `qmd` console script: a lean path for the commands agents shell out to, typer for the rest.

Importing typer and building its app costs more than a keyword search itself. So `run()`
first offers the command line to a small route table: each route parses the arguments of
one command (a subset of what click accepts: the forms agents and scripts use) and returns
the command to run, or None for anything it does not fully understand. None hands the
command line, untouched, to the typer app (main.py): help, usage errors, every other
command and every unusual spelling get typer's exact behaviour. A routed command calls
the same function as its typer command (actions.py) inside the same error boundary
(boundary.py), so the two paths print the same bytes and exit with the same code;
tests/qmd/cli/test_fast_path.py runs both on a matrix of command lines.

Adding a route: write `def _name(args: list[str]) -> Command | None` (args: what follows
the command name, `--index` already taken out), return None whenever in doubt, and add it
to ROUTES. `QMD_FAST=0` turns the lean path off.
"""

from __future__ import annotations

import os
import sys

from qmd.cli.argv import first_command, hoist_index, not_text
from qmd.cli.base import FORMATS, STATE
from qmd.cli.boundary import guarded, run_command

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable, Mapping

    Command = Callable[[], object]
    Route = Callable[[list[str]], "Command | None"]


class _Unsure(Exception):
    """The command line is not one the route fully understands: let typer parse it."""


def _count(value: str) -> int:
    """A plain positive decimal integer (click would accept more; typer handles the rest)."""
    if not (value.isascii() and value.isdigit() and len(value) <= 18) or int(value) < 1:
        raise _Unsure
    return int(value)


def _line(value: str) -> int:
    """A plain non-negative decimal integer."""
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


def _format(value: str) -> str:
    if value not in FORMATS:
        raise _Unsure
    return value


def _match(value: str) -> str:
    if value not in ("all", "any"):
        raise _Unsure
    return value


_FORMAT_FLAGS = {"--json": "json", "--csv": "csv", "--md": "md", "--xml": "xml", "--files": "files"}


def _parse(
    args: list[str], flags: Mapping[str, tuple[str, object]], options: Mapping[str, tuple[str, Callable[[str], object]]], repeatable: frozenset[str] = frozenset(),
) -> tuple[dict[str, object], list[str]]:
    """Options and positional arguments as click parses them, for the plain forms only.

    `flags`: option → (parameter, value it sets); `options`: option → (parameter, converter)
    for options taking a value (`--opt V`, `--opt=V`, `-xV` for one-letter ones); a
    parameter in `repeatable` collects a list. Raises _Unsure on anything else.
    """
    values: dict[str, object] = {}
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
        param, convert = options[name]
        converted = convert(value)
        if param in repeatable:
            values.setdefault(param, [])
            values[param].append(converted)  # type: ignore[attr-defined]
        else:
            values[param] = converted
    return values, positional


def _output_kind(values: dict[str, object]) -> str:
    """The output format of --format/--json/…; _Unsure when two differ (typer's usage error)."""
    chosen = {name for name in _FORMAT_FLAGS.values() if values.get(name)}
    fmt = values.get("format")
    if isinstance(fmt, str):
        chosen.add(fmt)
    if len(chosen) > 1:
        raise _Unsure
    return chosen.pop() if chosen else "cli"


def _format_flags() -> dict[str, tuple[str, object]]:
    return {flag: (name, True) for flag, name in _FORMAT_FLAGS.items()}


def _search(args: list[str]) -> Command | None:
    """`qmd search QUERY… [-n N] [--all] [--min-score X] [--full] [--line-numbers] [-c NAME]… [--full-path] [--local] [format]`."""
    from qmd.cli import actions

    flags = {
        "--all": ("all_", True), "--full": ("full", True), "--line-numbers": ("line_numbers", True), "--full-path": ("full_path", True), "--local": ("local", True),
        **_format_flags(),
    }
    options = {
        "-n": ("n", _count), "--min-score": ("min_score", _fraction), "-c": ("collection", _text), "--collection": ("collection", _text), "--format": ("format", _format),
        "--match": ("match", _match),
    }
    values, query = _parse(args, flags, options, frozenset({"collection"}))
    if not query:
        raise _Unsure  # typer's "Missing argument"
    kind = _output_kind(values)
    n, min_score, collection = values.get("n"), values.get("min_score", 0.0), values.get("collection")
    assert (n is None or isinstance(n, int)) and isinstance(min_score, float) and (collection is None or isinstance(collection, list))
    return lambda: actions.search(
        query, n, bool(values.get("all_")), min_score, bool(values.get("full")), bool(values.get("line_numbers")), collection, bool(values.get("full_path")), kind,
        str(values.get("match", "any")), local=bool(values.get("local")),
    )


def _vsearch(args: list[str]) -> Command | None:
    """`qmd vsearch QUERY… [-n N] [--all] [--min-score X] [--full] [--line-numbers] [-c NAME]… [--full-path] [--expand] [--local] [format]`."""
    from qmd.cli import actions

    flags = {
        "--all": ("all_", True), "--full": ("full", True), "--line-numbers": ("line_numbers", True), "--full-path": ("full_path", True),
        "--expand": ("expand", True), "--local": ("local", True), **_format_flags(),
    }
    options = {"-n": ("n", _count), "--min-score": ("min_score", _fraction), "-c": ("collection", _text), "--collection": ("collection", _text), "--format": ("format", _format)}
    values, query = _parse(args, flags, options, frozenset({"collection"}))
    if not query:
        raise _Unsure
    kind = _output_kind(values)
    n, min_score, collection = values.get("n"), values.get("min_score", 0.0), values.get("collection")
    assert (n is None or isinstance(n, int)) and isinstance(min_score, float) and (collection is None or isinstance(collection, list))
    return lambda: actions.vsearch(
        query, n, bool(values.get("all_")), min_score, bool(values.get("full")), bool(values.get("line_numbers")), collection, bool(values.get("full_path")),
        bool(values.get("expand")), kind, local=bool(values.get("local")),
    )


def _query(args: list[str]) -> Command | None:
    """`qmd query QUERY… [-n N] [-C N] [--min-score X] [--intent TEXT] [--no-rerank] [--expand|--no-expand] [--explain] [-c NAME]…
    [--full-path] [--all] [--full] [--line-numbers] [--local] [format]`."""
    from qmd.cli import actions

    flags = {
        "--all": ("all_", True), "--full": ("full", True), "--line-numbers": ("line_numbers", True), "--full-path": ("full_path", True),
        "--no-rerank": ("no_rerank", True), "--expand": ("expand", True), "--no-expand": ("expand", False), "--explain": ("explain", True),
        "--local": ("local", True), **_format_flags(),
    }
    options = {
        "-n": ("n", _count), "-C": ("candidates", _count), "--candidates": ("candidates", _count), "--min-score": ("min_score", _fraction),
        "--intent": ("intent", _text), "-c": ("collection", _text), "--collection": ("collection", _text), "--format": ("format", _format),
    }
    values, text = _parse(args, flags, options, frozenset({"collection"}))
    if not text:
        raise _Unsure
    kind = _output_kind(values)
    n, candidates, min_score, collection = values.get("n"), values.get("candidates", 40), values.get("min_score", 0.0), values.get("collection")
    intent, expand = values.get("intent"), values.get("expand")
    assert (n is None or isinstance(n, int)) and isinstance(candidates, int) and isinstance(min_score, float) and (collection is None or isinstance(collection, list))
    assert (intent is None or isinstance(intent, str)) and (expand is None or isinstance(expand, bool))
    return lambda: actions.query(
        text, n, candidates, min_score, intent, bool(values.get("no_rerank")), expand, bool(values.get("explain")), collection,
        bool(values.get("full_path")), bool(values.get("all_")), bool(values.get("full")), bool(values.get("line_numbers")), kind, local=bool(values.get("local")),
    )


def _get(args: list[str]) -> Command | None:
    """`qmd get REF [--from N] [-l N] [--line-numbers/--no-line-numbers] [--raw] [--full-path] [format]`."""
    from qmd.cli import actions

    flags = {
        "--line-numbers": ("line_numbers", True), "--no-line-numbers": ("line_numbers", False), "--raw": ("raw", True), "--full-path": ("full_path", True),
        **_format_flags(),
    }
    options = {"--from": ("from_line", _line), "-l": ("lines", _line), "--lines": ("lines", _line), "--format": ("format", _format)}
    values, refs = _parse(args, flags, options)
    if len(refs) != 1:
        raise _Unsure  # missing, or an extra argument
    kind = _output_kind(values)
    from_line, lines = values.get("from_line"), values.get("lines")
    assert (from_line is None or isinstance(from_line, int)) and (lines is None or isinstance(lines, int))
    return lambda: actions.get(refs[0], from_line, lines, values.get("line_numbers", True) is True, bool(values.get("raw")), bool(values.get("full_path")), kind)


def _status(args: list[str]) -> Command | None:
    """`qmd status [--json]`."""
    from qmd.cli import actions

    values, extra = _parse(args, {"--json": ("json", True)}, {})
    if extra:
        raise _Unsure
    return lambda: actions.status(bool(values.get("json")))


def _mcp(args: list[str]) -> Command | None:
    """`qmd [--index NAME] mcp`: the stdio MCP server, which an agent starts before its first
    turn; it answers `initialize` while the index opens (qmd/serve/stdio.py)."""
    if args:
        return None  # --http, stop, install, --help: typer
    from qmd.serve.stdio import run

    return lambda: run(STATE.index_name)


ROUTES: dict[str, Route] = {"search": _search, "vsearch": _vsearch, "query": _query, "get": _get, "status": _status, "mcp": _mcp}


def route(argv: list[str]) -> Command | None:
    """The command to run for `argv` without typer, or None to let the typer app parse it."""
    args = hoist_index(argv)
    index: str | None = None
    i = 0
    while i < len(args) and args[i][:1] == "-":  # the options before the command: --index only
        if index is not None:
            return None
        if args[i].startswith("--index="):
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
        STATE.index_name = index  # what the typer app's root callback does with --index
        return command()

    return selected


def main(argv: list[str] | None = None) -> int:
    """Run one command line: through a route when one understands it, else through typer."""
    args = list(sys.argv[1:] if argv is None else argv)
    if not_text(args):
        return 2
    command = route(args) if os.environ.get("QMD_FAST") != "0" else None
    if command is None:
        from qmd.cli.main import main as typer_main

        return typer_main(args)
    return guarded(lambda: run_command(command))


def run() -> None:
    sys.exit(main())
