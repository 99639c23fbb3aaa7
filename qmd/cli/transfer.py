"""`qmd export` and `qmd import`: a built index to one file and back (qmd/store/transfer.py)."""

from __future__ import annotations

import dataclasses
import json
from typing import Annotated

import typer

from qmd.cli.options import NoWaitOpt, WaitOpt, say_waiting, wait_seconds
from qmd.cli.shared import err, open_store, out
from qmd.core.text import line_safe
from qmd.core.units import human_size


def export(
    file: Annotated[str, typer.Argument(metavar="FILE", help="The file to write (gzip'd JSON lines), e.g. notes.qmd.gz.")],
    collection: Annotated[list[str] | None, typer.Option("--collection", "-c", metavar="NAME", help="Export this collection only (repeatable; default: all).")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Write the index's documents, vectors and collections to one file that qmd import reads elsewhere."""
    with open_store() as store:
        report = store.export(file, collection or None)
    if json_:
        out(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
        return
    vectors = f", {report.embedded:,} embedded ({report.chunks:,} chunks of {report.model})" if report.model else ", no vectors (no embed model here)"
    err(
        f"Exported {', '.join(report.collections)}: {report.documents:,} documents ({report.contents:,} distinct contents){vectors} "
        f"to {report.path} ({human_size(report.bytes)}, {report.seconds:.1f}s)"
    )


def import_(
    file: Annotated[str, typer.Argument(metavar="FILE", help="A file written by qmd export.")],
    collection: Annotated[list[str] | None, typer.Option("--collection", "-c", metavar="NAME=PATH", help="Place collection NAME at folder PATH here (repeatable).")] = None,
    root: Annotated[str | None, typer.Option("--root", metavar="DIR", help="Place the other collections at DIR/<their folder's name> (default: the current folder).")] = None,
    replace: Annotated[bool, typer.Option("--replace", help="Replace collections of the same name already in this index.")] = False,
    force_model: Annotated[bool, typer.Option("--force-model", help="Import from another embed model: its vectors are kept unused; qmd embed embeds with yours.")] = False,
    wait: WaitOpt = None,
    no_wait: NoWaitOpt = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the report as JSON.")] = False,
) -> None:
    """Import a file of qmd export: no embedding again when the embed model is the same."""
    from qmd.store.transfer import parse_places

    places = parse_places(collection or [])
    with open_store() as store:
        report = store.import_file(
            file, places=dict(places), root=root, force_model=force_model, replace=replace, wait=wait_seconds(wait, no_wait), on_wait=say_waiting(store),
        )
    if json_:
        out(json.dumps(dataclasses.asdict(report), indent=2) + "\n")
        return
    for c in report.collections:
        verb = "replaced" if c.replaced else "imported"
        err(f"{c.name}: {verb} {c.documents:,} documents at {c.path}: {c.match:,} match the files here, {c.differ:,} differ, {c.missing:,} missing")
        for sub, text in c.contexts.items():  # someone else's text, shown to agents from now on: the user sees it
            err(f"  context for qmd://{line_safe(c.name)}{line_safe(sub)} (shown to agents): {line_safe(text)}")
        if c.folder_missing:
            err(f"  warning: {c.path} does not exist: its documents are searchable; put the folder there (or re-import with --collection {c.name}=PATH) before qmd update")
    if report.model_forced:
        err(f"Vectors of {report.model} kept unused (another embed model than this index's): run qmd embed")
    elif report.model:
        err(f"Vectors of {report.embedded:,} documents ({report.chunks:,} chunks, {report.model}) imported: nothing to embed for them")
    else:
        err("The file holds no vectors: run qmd embed")
    changed = sum(c.differ + c.missing for c in report.collections)
    if changed:
        err(f"{changed:,} documents differ from or are missing in the folders here: the next qmd update and qmd embed bring them in line")
    err(f"Done in {report.seconds:.1f}s")
