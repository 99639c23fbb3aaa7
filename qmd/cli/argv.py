"""The command line before any parser sees it: which command it names, and the global options
(`--index`, `--no-gpu`) moved in front of it (shared by the typer app, main.py, and the lean
entry path, fast.py)."""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence


def first_command(argv: list[str]) -> str | None:
    """The first argument that is not an option (nor the value of a leading `--index`)."""
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


# Commands with an `--index` option of their own (it keeps its meaning there): doctor, and
# `mcp stop` (`qmd mcp --index work`, the stdio server, takes the root option like the rest).
OWN_INDEX_OPTION = frozenset({"mcp", "doctor"})


def _owns_index(args: list[str], first: str) -> bool:
    if first == "mcp":
        return first_command(args[args.index(first) + 1 :]) == "stop"
    return first in OWN_INDEX_OPTION


def hoist_globals(args: list[str]) -> list[str]:
    """`qmd search x --index work --no-gpu` → `qmd --index work --no-gpu search x`: the
    original reads its global options anywhere on the line, so scripts written for it pass
    them after the command.

    Left alone: `--index` of the commands with their own, and anything after a `--`.
    """
    first = first_command(args)
    if first is None:
        return args
    own_index = _owns_index(args, first)
    start = args.index(first) + 1
    head, rest, moved = args[:start], [], []
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            rest += args[i:]
            break
        if arg == "--no-gpu":
            moved.append(arg)
        elif own_index:
            rest.append(arg)
        elif arg == "--index" and i + 1 < len(args):
            moved += [arg, args[i + 1]]
            i += 2
            continue
        elif arg.startswith("--index="):
            moved += ["--index", arg.split("=", 1)[1]]
        else:
            rest.append(arg)
        i += 1
    if not moved:
        return args
    position = head.index(first)
    return [*head[:position], *moved, *head[position:], *rest]


QUERY_COMMANDS = frozenset({"search", "vsearch", "query"})  # their argument is query text, where `-word` excludes a word


def dash_word(args: list[str], rejected: Sequence[str], options: Mapping[str, bool]) -> tuple[str, list[str]] | None:
    """A query word the option parser took for an option: `qmd search -rollback` fails on
    `-r`, `qmd search -nginx` on `-n`'s value. `args`: the command line (`--index` in
    front), `rejected`: the option names the parser's error is about, `options`: the
    command's option names → whether each takes a value.

    Returns (the word as typed, the command line with `--` before the query words), or
    None when the error is not about a `-word` of a search command's query."""
    first = first_command(args)
    if first not in QUERY_COMMANDS:
        return None
    start = args.index(first) + 1
    rest = args[start:]
    if "--" in rest:
        rest = rest[: rest.index("--")]

    def dashed(arg: str) -> bool:  # `-word`, or `-1`: one dash and a character that is no short option's letter
        return arg[:1] == "-" and arg[1:2] not in ("", "-") and (len(arg) > 2 or not arg[1].isalpha())

    def is_word(arg: str) -> bool:  # dashed, and no option of the command
        return dashed(arg) and arg not in options and not options.get(arg[:2], False)

    typed = next((a for a in rest if dashed(a) and a.startswith(tuple(rejected))), None)
    if typed is None:
        return None
    head: list[str] = []
    words: list[str] = []
    i = start
    while i < len(args):
        arg = args[i]
        if arg == "--":
            words += args[i + 1 :]
            break
        if arg == typed or arg[:1] != "-" or arg == "-" or is_word(arg):
            words.append(arg)
        elif options.get(arg) and i + 1 < len(args):
            head += [arg, args[i + 1]]
            i += 1
        else:
            head.append(arg)
        i += 1
    return typed, [*args[:start], *head, "--", *words]


def not_text(argv: list[str]) -> bool:
    """Whether an argument is not valid UTF-8 (bytes the locale could not decode, such as a
    Latin-1 word in a UTF-8 shell, arrive as lone surrogates): then says so on stderr in one
    line, for a usage error (exit 2). Nothing downstream could encode it (a path, a query)."""
    import sys

    for n, arg in enumerate(argv, start=1):
        try:
            arg.encode("utf-8")
        except UnicodeEncodeError:
            shown = arg.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            sys.stderr.write(f"Error: argument {n} is not valid UTF-8 text: {shown!r}\nhint: retype it, or convert it: iconv -f latin1 -t utf-8\n")
            return True
    return False
