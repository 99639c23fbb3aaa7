"""Helpers shared by the CLI's commands: the selected index, output format, printing."""

from __future__ import annotations

import os
import sys
from typing import Annotated

import typer

from .. import Store, resolve_index
from ..formats import FORMATS


class State:
    index_name: str | None = None


STATE = State()


def open_store() -> Store:
    """The Store of the index chosen with --index (default `index`)."""
    paths = resolve_index(STATE.index_name)
    return Store(paths.index_path, paths.config_path)


def out(text: str) -> None:
    """Write `text` to stdout as is; a closed pipe (`| head`) is not an error."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())


def err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


FormatOpt = Annotated[str | None, typer.Option("--format", help="Output format: cli, json, csv, md, xml, files.", show_default=False)]
JsonOpt = Annotated[bool, typer.Option("--json", help="Same as --format json.")]
CsvOpt = Annotated[bool, typer.Option("--csv", help="Same as --format csv.")]
MdOpt = Annotated[bool, typer.Option("--md", help="Same as --format md.")]
XmlOpt = Annotated[bool, typer.Option("--xml", help="Same as --format xml.")]
FilesOpt = Annotated[bool, typer.Option("--files", help="Same as --format files: docid,score,path lines.")]


def pick_format(fmt: str | None, json_: bool, csv_: bool, md: bool, xml: bool, files: bool) -> str:
    """One output format from --format and the shorthand flags; two different ones is an error."""
    chosen = {name for name, on in (("json", json_), ("csv", csv_), ("md", md), ("xml", xml), ("files", files)) if on}
    if fmt is not None:
        if fmt not in FORMATS:
            raise typer.BadParameter(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", param_hint="--format")
        chosen.add(fmt)
    if len(chosen) > 1:
        raise typer.BadParameter("choose one output format", param_hint="--format/--json/--csv/--md/--xml/--files")
    return chosen.pop() if chosen else "cli"
