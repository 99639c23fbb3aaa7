"""`qmd update`, `qmd status`, `qmd cleanup`."""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli import actions
from qmd.cli.formats import human_size
from qmd.cli.progress import Bar
from qmd.core.results import UpdateReport
from qmd.cli.common import NoWaitOpt, WaitOpt, err, open_store, out, say_waiting, wait_seconds


def print_report(report: UpdateReport) -> int:
    """Print what an update did (to stderr); 1 when an update command failed, else 0."""
    for c in report.collections:
        err(
            f"{c.name}: {c.new} new, {c.updated} updated, {c.unchanged} unchanged, {c.removed} removed, "
            f"{len(c.skipped)} skipped ({c.seconds:.2f}s)"
        )
        for rel, reason in c.skipped:
            err(f"  skipped {rel}: {reason}")
        for rel, reason in c.warnings:
            err(f"  warning {rel}: {reason}")
        if c.matched_nothing:
            err(f"  warning: the pattern {c.pattern!r} matches no file in this collection's folder (see qmd collection show {c.name})")
    said_dropped(report.dropped_collections, report.kept_collections)
    for name, message in report.command_failures:
        err(f"Error: {name}: {message}")
        err("hint: fix the collection's update command (qmd collection show " + name + "); files were indexed as they are on disk")
    for name, message, hint in report.errors:
        err(f"Error: {name}: {message}")
        if hint:
            err(f"hint: {hint}")
    return 1 if report.command_failures or report.errors else 0


def update(
    collection: Annotated[list[str] | None, typer.Option("-c", "--collection", help="Only this collection (repeatable).")] = None,
    no_commands: Annotated[bool, typer.Option("--no-commands", help="Skip the collections' update commands.")] = False,
    pull: Annotated[bool, typer.Option("--pull", help="Run the collections' update commands (e.g. git pull) first: the default here; accepted for the original's scripts.")] = False,
    wait: WaitOpt = None,
    no_wait: NoWaitOpt = False,
) -> None:
    """Re-index collections: new, changed and deleted files (unchanged files are not re-read)."""
    if pull and no_commands:
        raise typer.BadParameter("--pull runs the update commands and --no-commands skips them: give one", param_hint="--pull/--no-commands")
    with open_store() as store:
        from qmd.core.paths import is_local_config

        if is_local_config(store.config_path):
            from qmd.index.folders import register_local

            register_local(store.config_path)  # the updater, guard and doctor serve it from now on
        for warning in store.config_warnings():
            err(f"warning: {warning}")
        bar = Bar("Indexed")

        def progress(rel: str, n: int) -> None:
            if n % 100 == 0 or not bar.tty:
                bar.update(n, None, "files new or changed")

        report = store.update(
            collection or None,
            progress=progress,
            run_commands=not no_commands,
            on_command=lambda name, cmd: err(f"{name}: running update command: {cmd}"),
            on_wait=say_waiting(store),
            wait=wait_seconds(wait, no_wait),
        )
        bar.close()
        code = print_report(report)
        t = report.totals
        err(f"Done: {t['new']} new, {t['updated']} updated, {t['unchanged']} unchanged, {t['removed']} removed, {t['skipped']} skipped")
    raise typer.Exit(code)


def status(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show the index: documents, vectors, collections, models, skipped files."""
    actions.status(locals())


def cleanup(
    wait: WaitOpt = None,
    no_wait: NoWaitOpt = False,
    dry_run: Annotated[bool, typer.Option("--dry-run", help="Only say what would be removed (as the original's --dry-run).")] = False,
) -> None:
    """Drop deleted documents and unused content, then compact the index file."""
    if dry_run:
        with open_store() as store:
            check = store.check(quick=True)
            orphaned = store.orphaned_collections()
        out("Dry run — no changes made.\n\n")
        for name in orphaned:
            out(f"Would drop collection '{name}' (no longer in the config)\n")
        out(f"Would remove {check.inactive} inactive document records\n")
        out(f"Would remove {check.orphan_content} orphaned content hashes\n")
        out(f"Would remove {check.orphan_chunks} orphaned embedding chunks\n" if check.orphan_chunks else "No orphaned embeddings to remove\n")
        out("Would compact the database\n")
        return
    with open_store() as store:
        report = store.cleanup(wait=wait_seconds(wait, no_wait), on_wait=say_waiting(store))
    said_dropped(report.dropped_collections, report.kept_collections)
    err(
        f"Removed {report.inactive_removed} deleted documents and {report.orphaned_content_removed} unused content rows; "
        f"{human_size(report.bytes_before)} → {human_size(report.bytes_after)}"
    )


def rebuild() -> None:
    """Rebuild the index from its collections into a new file, swapped in atomically (the old file is kept beside it)."""
    with open_store() as store:
        report = store.rebuild()
        embed = store.model("embed").available
    kept = f"; the old file is kept at {report.kept}" if report.kept else ""
    err(f"Rebuilt {report.path}: {report.documents} documents in {report.seconds:.1f}s{kept}")
    if report.vectors_kept:
        err(f"Kept the vectors of {report.vectors_kept} unchanged documents")
    if embed and report.vectors_kept < report.documents:
        err("Documents without vectors need: qmd embed")


def said_dropped(dropped: list[tuple[str, int]], kept: list[tuple[str, str]]) -> None:
    """The collections an update or cleanup dropped, and those it kept because another
    config indexed them (its documents are that config's, not this one's to drop)."""
    for name, documents in dropped:
        err(f"{name}: no longer in the config: dropped its {documents} documents from the index")
    for name, other in kept:
        err(f"{name}: not in this config, but indexed by {other}: kept (add it to this config, or drop it: qmd collection remove {name})")
