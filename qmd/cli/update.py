"""`qmd update`, `qmd status`, `qmd cleanup`."""

from __future__ import annotations

import sys
from typing import Annotated

import typer

from qmd.core.errors import QmdError
from qmd.cli.formats import format_collection, human_size, to_json
from qmd.core.clock import ago
from qmd.store.results import UpdateReport
from qmd.cli.common import err, open_store, out


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
) -> None:
    """Re-index collections: new, changed and deleted files (unchanged files are not re-read)."""
    with open_store() as store:
        tty = sys.stderr.isatty()

        def progress(rel: str, n: int) -> None:
            if tty and n % 100 == 0:
                sys.stderr.write(f"\r  indexed {n} files…")
                sys.stderr.flush()

        report = store.update(
            collection or None,
            progress=progress,
            run_commands=not no_commands,
            on_command=lambda name, cmd: err(f"{name}: running update command: {cmd}"),
            on_wait=lambda: err("Waiting for another process writing this index…"),
        )
        if tty:
            sys.stderr.write("\r\033[K")
        code = print_report(report)
        t = report.totals
        err(f"Done: {t['new']} new, {t['updated']} updated, {t['unchanged']} unchanged, {t['removed']} removed, {t['skipped']} skipped")
    raise typer.Exit(code)


def status(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Show the index: documents, vectors, collections, models, skipped files."""
    with open_store() as store:
        info = store.status()
        models = store.models()
        vectors, vector_error = None, None
        if info.documents or store.backend.exists():
            try:
                vectors = store.vector_status()
            except QmdError as exc:
                vector_error = exc.message
    if json_:
        payload = dict(info.__dict__, vectors=vectors, vector_error=vector_error, models=models)
        out(to_json(payload, default=lambda o: o.__dict__))
        return
    lines = [
        "QMD Status",
        "",
        f"Index: {info.index_path}",
        f"Size:  {human_size(info.size_bytes)}",
        "",
        "Documents",
        f"  Total:    {info.documents} files indexed",
    ]
    if vectors is not None:
        model = f" ({vectors.model})" if vectors.model else " (no embed model file yet: qmd pull, or qmd models import)"
        lines.append(f"  Vectors:  {vectors.embedded_documents} documents embedded, {vectors.chunks} chunks{model}")
        if vectors.pending_documents:
            lines.append(f"  Pending:  {vectors.pending_documents} need embedding (run 'qmd embed')")
    elif vector_error:
        lines.append(f"  Vectors:  unavailable: {vector_error}")
    if info.inactive:
        lines.append(f"  Deleted:  {info.inactive} (run 'qmd cleanup' to drop them)")
    lines.append(f"  Updated:  {ago(info.updated_at)}")
    if info.global_context:
        lines += ["", "Global context", f"  {info.global_context}"]
    lines += ["", "Collections"]
    if not info.collections:
        lines.append("  none — add one with: qmd collection add DIR --name NAME")
    for c in info.collections:
        lines.append("  " + format_collection(c, compact=True).rstrip("\n").replace("\n", "\n  "))
    skipped = [i for i in info.issues if i[2] == "skipped"]
    warnings = [i for i in info.issues if i[2] == "warning"]
    if skipped or warnings:
        lines += ["", "Files needing attention"]
        for coll, path, severity, reason in skipped + warnings:
            lines.append(f"  {severity:8} qmd://{coll}/{path}: {reason}")
    if info.collections:
        name = info.collections[0].name
        lines += [
            "",
            "Examples",
            "  # List files in a collection",
            f"  qmd ls {name}",
            "  # Get a document",
            f"  qmd get qmd://{name}/path/to/file.md",
            "  # Search within a collection",
            f'  qmd search "query" -c {name}',
        ]
    labels = {"embed": "Embedding", "rerank": "Reranking", "generate": "Generation"}
    sources = {"config": "index config", "env": "environment", "installed": "installed default", "default": "built-in default"}
    lines += ["", "Models"]
    for m in models:
        state = "ready" if m.available else ("not downloaded: qmd pull" if m.spec.startswith("hf:") else "file missing")
        lines.append(f"  {labels[m.role] + ':':12} {m.spec} ({sources[m.source]}; {state})")
    bare = [c.name for c in info.collections if not c.contexts]
    if bare and not info.global_context:
        lines += [
            "",
            "Tips",
            f"  Add context to collections for better search results: {', '.join(bare)}",
            '    qmd context add qmd://<name>/ "What this collection contains"',
            '    qmd context add qmd://<name>/meeting-notes "Weekly team meeting notes"',
        ]
    out("\n".join(lines) + "\n")


def cleanup() -> None:
    """Drop deleted documents and unused content, then compact the index file."""
    with open_store() as store:
        report = store.cleanup()
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
    if embed:
        err("Vectors are not carried over: run qmd embed")
