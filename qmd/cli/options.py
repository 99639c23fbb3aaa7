"""The options the typer commands share: their declarations (`NOpt`, `CollectionOpt`, …), the one
definition of the output-format options (`with_output_format`), the writer-lock wait.
What the commands share without typer (the lean path uses it too) is in shared.py."""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Annotated

import typer

from qmd.search.confidence import THRESHOLD
from qmd.store.store import Store
from qmd.cli.shared import err, pick_format


FormatOpt = Annotated[str | None, typer.Option("--format", help="Output format: cli, json, csv, md, xml, files.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Same as --format csv.")]
MdOpt = Annotated[bool, typer.Option("--md", help="Same as --format md.")]
XmlOpt = Annotated[bool, typer.Option("--xml", help="Same as --format xml.")]
FilesOpt = Annotated[bool, typer.Option("--files", help="Same as --format files: docid,score,path lines.")]


_FORMAT_FLAGS: dict[str, tuple[object, object]] = {  # parameter → (annotation, default), in --help order
    "fmt": (FormatOpt, None),
    "json_": (JsonOpt, False),
    "csv_": (CsvOpt, False),
    "md": (MdOpt, False),
    "xml": (XmlOpt, False),
    "files": (FilesOpt, False),
}


def with_output_format(command: Callable[..., None]) -> Callable[..., None]:
    """The one definition of the output options (--format, --json, --csv, --md, --xml, --files).

    The decorated command declares a `kind: str` parameter instead and receives the chosen
    format there; the options are added after its own in the signature typer reads.
    """
    sig = inspect.signature(command, eval_str=True)
    own = [p for p in sig.parameters.values() if p.name != "kind"]
    extra = [inspect.Parameter(name, inspect.Parameter.KEYWORD_ONLY, default=default, annotation=ann) for name, (ann, default) in _FORMAT_FLAGS.items()]

    @functools.wraps(command)
    def wrapper(*args: object, **kwargs: object) -> None:
        flags = [kwargs.pop(name, default) for name, (_, default) in _FORMAT_FLAGS.items()]
        command(*args, kind=pick_format(*flags), **kwargs)  # type: ignore[arg-type]

    wrapper.__signature__ = sig.replace(parameters=own + extra)  # type: ignore[attr-defined]
    wrapper.__annotations__ = {p.name: p.annotation for p in own + extra} | {"return": None}
    del wrapper.__wrapped__  # typer must read the new signature, not the original's
    return wrapper


CollectionOpt = Annotated[list[str] | None, typer.Option("-c", "--collection", help="Search only this collection (repeatable).")]
NOpt = Annotated[int | None, typer.Option("-n", help="Number of results (default 5; 20 for json/files).", show_default=False)]
AllOpt = Annotated[bool, typer.Option("--all", help="Return every match.")]
MinScoreOpt = Annotated[float, typer.Option("--min-score", help="Drop hits scoring below this (0-1).")]
MinConfidenceOpt = Annotated[float | None, typer.Option("--min-confidence", metavar="0-1", help=f"Below this confidence a hit is a best guess, not an answer: flagged, and said first when no hit reaches it (default: the config's search: min_confidence, else {THRESHOLD}).", show_default=False)]
FullOpt = Annotated[bool, typer.Option("--full", help="Whole documents instead of snippets.")]
LineNumbersOpt = Annotated[bool, typer.Option("--line-numbers", help="Number the snippet lines.")]
FullPathOpt = Annotated[bool, typer.Option("--full-path", help="Show file-system paths instead of qmd:// paths (./relative under the working directory).")]
FilterOpt = Annotated[str | None, typer.Option("--filter", metavar="JSON", help='Only documents whose metadata matches, e.g. \'{"key":"status","operator":"eq","value":"published"}\' (eq ne gt gte lt lte in nin all exists; and/or/not).', show_default=False)]
SinceOpt = Annotated[str | None, typer.Option("--since", metavar="WHEN", help="Only documents dated since WHEN: an ISO date or an age (7d, 2w); front-matter date/updated, else the file's time.", show_default=False)]
UntilOpt = Annotated[str | None, typer.Option("--until", metavar="WHEN", help="Only documents dated until WHEN (an ISO date includes that day).", show_default=False)]
LocalOpt = Annotated[bool, typer.Option("--local", help="Search in this process even when the index's HTTP server runs (by default a running server of this build answers: its models are loaded).")]
MatchOpt = Annotated[str, typer.Option("--match", metavar="all|any", help="all: only documents with every term (the original); any: those first, then the best partial matches (marked).")]


WaitOpt = Annotated[float | None, typer.Option("--wait", metavar="SECONDS", help="When another process writes the index, wait at most this long (default: until it is done).", show_default=False)]
NoWaitOpt = Annotated[bool, typer.Option("--no-wait", help="When another process writes the index, give up at once (exit 1, naming it).")]


def wait_seconds(wait: float | None, no_wait: bool) -> float | None:
    """The writer-lock timeout from --wait/--no-wait (None: wait as long as it takes)."""
    if no_wait:
        if wait is not None:
            raise typer.BadParameter("give --wait SECONDS or --no-wait, not both", param_hint="--wait/--no-wait")
        return 0.0
    if wait is not None and not (wait >= 0 and wait != float("inf")):
        raise typer.BadParameter("must be a number of seconds, 0 or more", param_hint="--wait")
    return wait


def say_waiting(store: Store) -> Callable[[], None]:
    """The on_wait callback: name who holds the writer lock, and how not to wait."""

    def waiting() -> None:
        holder = store.lock_holder() or "another process"
        err(f"Waiting for {holder}, which is writing this index… (--no-wait gives up at once, --wait SECONDS bounds the wait)")

    return waiting
