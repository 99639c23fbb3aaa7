"""`qmd update`, `qmd status`, `qmd cleanup`."""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli import actions
from qmd.cli.progress import Bar, EmbedBar
from qmd.core.units import human_size
from qmd.core.results import UpdateReport, VectorStatus
from qmd.cli.options import NoWaitOpt, WaitOpt, say_waiting, wait_seconds
from qmd.cli.shared import err, open_store, out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.index.embed_progress import EmbedProgress
    from qmd.store.refresh import RefreshReport


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
    from qmd.core.text import line_safe

    for name, message in report.command_failures:
        err(f"Error: {line_safe(name)}: {line_safe(message, newlines=True)}")
        err("hint: fix the collection's update command (qmd collection show " + line_safe(name) + "); files were indexed as they are on disk")
    for name, message, hint in report.errors:
        err(f"Error: {line_safe(name)}: {line_safe(message, newlines=True)}")
        if hint:
            err(f"hint: {line_safe(hint, newlines=True)}")
    return 1 if report.command_failures or report.errors else 0


def update(
    collection: Annotated[list[str] | None, typer.Option("-c", "--collection", help="Only this collection (repeatable).")] = None,
    no_commands: Annotated[bool, typer.Option("--no-commands", help="Skip the collections' update commands.")] = False,
    pull: Annotated[bool, typer.Option("--pull", help="Run the collections' update commands (e.g. git pull) first: the default here; accepted for the original's scripts.")] = False,
    embed: Annotated[bool, typer.Option("--embed", help="Then embed what updated cleanly (as qmd embed); skipped, with a note, when no embedding model is set up at all.")] = False,
    wait: WaitOpt = None,
    no_wait: NoWaitOpt = False,
) -> None:
    """Re-index collections: new, changed and deleted files (unchanged files are not re-read).

    A file or subfolder that is there but cannot be read now (its permissions, an I/O error) is
    listed as skipped and what the index holds for it is kept as it was; a collection folder that
    cannot be listed is refused, as a missing one is (exit 1), with nothing dropped.
    """
    if pull and no_commands:
        raise typer.BadParameter("--pull runs the update commands and --no-commands skips them: give one", param_hint="--pull/--no-commands")
    with open_store() as store:
        from qmd.core.paths import is_local_config

        if is_local_config(store.config_path):
            from qmd.index.folder_cache import register_local

            register_local(store.config_path)  # the updater, guard and doctor serve it from now on
        for warning in store.config_warnings():
            err(f"warning: {warning}")
        said = _Said(Bar("Indexed"))
        on_wait, seconds = say_waiting(store), wait_seconds(wait, no_wait)
        if embed:
            said.refreshed(store.refresh(
                collection or None, progress=said.indexed, run_commands=not no_commands, on_command=said.command, on_wait=on_wait, wait=seconds,
                on_updated=said.updated, embed_progress=said.embedding,
            ))
        else:
            said.updated(store.update(collection or None, progress=said.indexed, run_commands=not no_commands, on_command=said.command, on_wait=on_wait, wait=seconds))
            said.pending(store.vector_status(collection or None))
    raise typer.Exit(said.code)


class _Said:
    """What `qmd update [--embed]` says as it goes: the update's bar and report, then the embed's."""

    def __init__(self, bar: Bar) -> None:
        self.bar = bar
        self.embed_bar = EmbedBar()
        self.code = 0  # 1 when an update command failed or a collection could not be indexed

    def indexed(self, rel: str, n: int) -> None:
        if n % 100 == 0 or not self.bar.tty:
            self.bar.update(n, None, "files new or changed")

    def command(self, name: str, cmd: str) -> None:
        from qmd.core.text import line_safe

        err(f"{line_safe(name)}: running update command: {line_safe(cmd)}")  # as the trust prompt showed it: no \r or escape hides a part

    def updated(self, report: UpdateReport) -> None:
        self.bar.close()
        self.code = print_report(report)
        t = report.totals
        err(f"Done: {t['new']} new, {t['updated']} updated, {t['unchanged']} unchanged, {t['removed']} removed, {t['skipped']} skipped")

    def pending(self, status: VectorStatus) -> None:
        """The advice an update without --embed ends with when documents lack vectors (as the
        original's update says to run embed); nothing without an embed model file."""
        if status.model is not None and status.pending_documents:
            from qmd.search.vector import embed_advice

            err(embed_advice(status.pending_documents, status.embedded_documents > 0))

    def embedding(self, progress: EmbedProgress) -> None:
        self.embed_bar(progress)

    def refreshed(self, report: RefreshReport) -> None:
        """The embed's part of `update --embed` (the update's was said by `updated`)."""
        from qmd.cli.vectors import print_embed_report

        self.embed_bar.close()
        if report.embed_skipped is not None:
            err(f"note: embedding skipped: {report.embed_skipped}")
        elif report.embed_error is not None:
            raise report.embed_error  # said as every error is (one line and a hint), after the update's report
        elif report.embed is not None:
            print_embed_report(report.embed)


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
