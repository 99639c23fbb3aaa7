"""`qmd collection …` and `qmd context …`."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Annotated

import typer

from qmd.cli.formats import collections_json, format_collection, format_collection_list, overlap_line, to_json
from qmd.cli.shared import err, open_store, out
from qmd.cli.update import print_report
from qmd.core.text import line_safe

collection_app = typer.Typer(help="Manage collections: folders of markdown that qmd indexes.", no_args_is_help=True)
context_app = typer.Typer(help="Describe the index, a collection or a folder; contexts come back with every hit.", no_args_is_help=True)


@collection_app.command("add", short_help="Add a folder as a collection and index it.")
def collection_add(
    path: Annotated[str, typer.Argument(help="Folder to index.")],
    name: Annotated[str | None, typer.Option("--name", help="Collection name (default: the folder's name).")] = None,
    pattern: Annotated[str, typer.Option("--pattern", "--mask", "--glob", help="Glob of files to index (several: comma-separated).")] = "**/*.md",
    ignore: Annotated[list[str] | None, typer.Option("--ignore", help="Glob to leave out (repeatable).")] = None,
    update_cmd: Annotated[str | None, typer.Option("--update", help="Shell command run in the folder before each update (e.g. 'git pull').")] = None,
    no_index: Annotated[bool, typer.Option("--no-index", help="Only register it; index later with qmd update.")] = False,
) -> None:
    """Add a folder as a collection and index it."""
    from qmd.cli.trustask import before_change, keep_trust_after

    before = before_change()
    with open_store() as store:
        # what the user just typed needs no second approval: approved once saved, before its update command runs
        report = store.add_collection(path, name, pattern, ignore or [], update_cmd, index=not no_index, on_saved=lambda: keep_trust_after(before))
        coll = store.collection(Path(path).expanduser().resolve().name if name is None else name)
        err(f"Added collection '{coll.name}' → {coll.path} ({coll.pattern})")
        code = 0
        if report is not None:
            code = print_report(report)
        for overlap in store.overlapping_collections(coll.name):  # each file in both is a hit twice
            if overlap.files or report is None:  # once indexed: only when they share files (other patterns share none)
                err(f"warning: {overlap_line(overlap)}" + ("" if overlap.files else " (once indexed, the files in both show twice in searches)"))
        if report is not None:
            if report.totals["new"] + report.totals["updated"]:
                err("Run 'qmd embed' to make the new documents searchable by meaning (qmd vsearch, qmd query); keyword search works now.")
            raise typer.Exit(code)


@collection_app.command("update-cmd", short_help="Set or clear the command run before an update.")
def collection_update_cmd(
    name: Annotated[str, typer.Argument(help="The collection.")],
    command: Annotated[list[str] | None, typer.Argument(help="Shell command run in its folder before each update (e.g. 'git pull'); none clears it.")] = None,
) -> None:
    """Set (or clear) the command run before a collection is updated, as the original's update-cmd."""
    text = " ".join(command or []).strip() or None
    from qmd.cli.trustask import before_change, keep_trust_after

    before = before_change()
    with open_store() as store:
        store.set_update_command(name, text)
    keep_trust_after(before)
    err(f"✓ Set update command for '{name}': {text}" if text else f"✓ Cleared update command for '{name}'")


@collection_app.command("list", short_help="List collections with file counts and update times.")
def collection_list(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List collections with their file counts and last update."""
    with open_store() as store:
        colls = store.collections()
    out(collections_json(colls) if json_ else format_collection_list(colls))


@collection_app.command("show", short_help="Show one collection's settings and metadata keys.")
def collection_show(name: str, json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show one collection's settings, contexts, counts and metadata keys (for --filter)."""
    with open_store() as store:
        coll = store.collection(name)
        keys = store.metadata_keys(name)
    if json_:
        out(to_json(dict(coll.__dict__, metadata=[{"key": k, "type": t, "documents": n} for k, t, n in keys])))
        return
    out(format_collection(coll, detailed=True) + _metadata_lines(keys))


def _metadata_lines(keys: list[tuple[str, str, int]]) -> str:
    """The metadata keys of a collection, each with its types and how many documents have it."""
    if not keys:
        return "  Metadata: none (front-matter keys become filterable metadata: --filter)\n"
    by_key: dict[str, list[str]] = {}
    for key, kind, count in keys:
        by_key.setdefault(key, []).append(f"{kind} {count}")
    width = max(len(k) for k in by_key)
    lines = [f"  Metadata: {len(by_key)} keys (documents per type; filter with --filter)"]
    lines += [f"    {key.ljust(width)}  {', '.join(kinds)}" for key, kinds in by_key.items()]
    return "\n".join(lines) + "\n"


@collection_app.command("remove", short_help="Forget a collection; its files stay on disk.")
def collection_remove(name: str) -> None:
    """Forget a collection (its files on disk are not touched)."""
    with open_store() as store:
        dropped = store.remove_collection(name)
    err(f"Removed collection '{name}' ({dropped} documents dropped from the index)")


@collection_app.command("rename", short_help="Rename a collection and its qmd:// paths.")
def collection_rename(old: str, new: str) -> None:
    """Rename a collection (its qmd:// paths change with it)."""
    with open_store() as store:
        store.rename_collection(old, new)
    err(f"Renamed collection '{old}' → '{new}'")


@collection_app.command("include", short_help="Search this collection by default.")
def collection_include(name: str) -> None:
    """Search this collection by default."""
    with open_store() as store:
        store.set_include_by_default(name, True)
    err(f"Collection '{name}' is searched by default")


@collection_app.command("exclude", short_help="Search this collection only when named with -c.")
def collection_exclude(name: str) -> None:
    """Search this collection only when asked for with -c."""
    with open_store() as store:
        store.set_include_by_default(name, False)
    err(f"Collection '{name}' is searched only with -c {name}")


@context_app.command("add", short_help="Describe the index, a collection or a folder.")
def context_add(
    target_or_text: Annotated[str, typer.Argument(metavar="[TARGET]", help="'/' (global), qmd://name/sub-path, or a folder; default: the current folder.")],
    text: Annotated[str | None, typer.Argument(metavar="TEXT", show_default=False)] = None,
) -> None:
    """Attach a description to the index, a collection or a folder inside one."""
    target = target_or_text if text is not None else os.getcwd()
    body = text if text is not None else target_or_text
    with open_store() as store:
        info = store.add_context(target, body)
    err(f"Context set for {info.target}")


@context_app.command("list", short_help="List every context.")
def context_list(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """List every context."""
    with open_store() as store:
        items = store.contexts()
    if json_:
        out(to_json([c.__dict__ for c in items]))
    elif not items:
        out('No contexts. Add one with: qmd context add qmd://NAME/ "What this collection holds"\n')
    else:
        out("".join(f"{line_safe(c.target)}\n  {line_safe(c.text, newlines=True)}\n" for c in items))  # a cloned config's text: inert on a terminal


@context_app.command("rm", short_help="Remove a context.")
def context_rm(target: Annotated[str, typer.Argument(help="'/' for the global context, or qmd://name/sub-path.")]) -> None:
    """Remove a context."""
    with open_store() as store:
        store.remove_context(target)
    err(f"Removed context {target}")
