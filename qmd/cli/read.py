"""`qmd search`, `qmd get`, `qmd multi-get`, `qmd ls`."""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli import actions
from qmd.cli.formats import format_ls, format_ls_root, format_multi, collections_json, ls_json
from qmd.cli.options import (
    AllOpt,
    CollectionOpt,
    FullOpt,
    FullPathOpt,
    MatchOpt,
    FilterOpt,
    LocalOpt,
    SinceOpt,
    UntilOpt,
    LineNumbersOpt,
    MinConfidenceOpt,
    MinScoreOpt,
    NOpt,
    with_output_format,
)
from qmd.cli.shared import err, index_uri, open_store, out
from qmd.core.errors import QmdError


@with_output_format
def search(
    query: Annotated[list[str], typer.Argument(metavar="QUERY", help='Words (prefix match), "exact phrases", -excluded words.')],
    n: NOpt = None,
    all_: AllOpt = False,
    min_score: MinScoreOpt = 0.0,
    min_confidence: MinConfidenceOpt = None,
    full: FullOpt = False,
    line_numbers: LineNumbersOpt = False,
    collection: CollectionOpt = None,
    full_path: FullPathOpt = False,
    match: MatchOpt = "any",
    filter_: FilterOpt = None,
    since: SinceOpt = None,
    until: UntilOpt = None,
    local: LocalOpt = False,
    kind: str = "cli",
) -> None:
    """Keyword search (BM25): all-terms matches first, then documents sharing most terms."""
    actions.search(locals())


@with_output_format
def get(
    ref: Annotated[str, typer.Argument(help="path, qmd://collection/path, #docid; path:FROM or path:FROM:COUNT for a line range.")],
    from_line: Annotated[int | None, typer.Option("--from", help="First line (1-based).")] = None,
    lines: Annotated[int | None, typer.Option("-l", "--lines", help="Number of lines.")] = None,
    line_numbers: Annotated[bool, typer.Option("--line-numbers/--no-line-numbers", help="Number the lines.")] = True,
    raw: Annotated[bool, typer.Option("--raw", help="Only the text, no header or numbers.")] = False,
    full_path: Annotated[bool, typer.Option("--full-path", help="Show the file-system path.")] = False,
    kind: str = "cli",
) -> None:
    """Print a document, or a range of its lines."""
    actions.get(locals())


@with_output_format
def multi_get(
    patterns: Annotated[list[str], typer.Argument(metavar="PATTERN", help="Glob over collection/path ('notes/**/*.md': quote it), or a comma-separated list of paths/#docids, each with an optional line range (notes/a.md:10:5: from line 10, 5 lines). Several arguments (a glob the shell expanded) are read as that list.")],
    lines: Annotated[int | None, typer.Option("-l", "--lines", help="At most this many lines per document.")] = None,
    max_bytes: Annotated[int, typer.Option("--max-bytes", help="Skip documents larger than this.")] = 65536,
    line_numbers: Annotated[bool, typer.Option("--line-numbers/--no-line-numbers", help="Number the lines.")] = True,
    full_path: Annotated[bool, typer.Option("--full-path", help="Show file-system paths (./relative under the working directory).")] = False,
    kind: str = "cli",
) -> None:
    """Print several documents at once."""
    from qmd.cli.shared import display_names, named_index, non_negative, roots_of

    non_negative(lines, "-l")
    non_negative(max_bytes, "--max-bytes")
    pattern = named_index(one_pattern(patterns))  # URIs printed for a named index read that index
    with open_store() as store:
        items = store.multi_get(pattern, lines, max_bytes)
        names = display_names(roots_of(store), items, full_path) or {}
    if kind == "cli":  # a name that finds no document is said on stderr, as the original; structured formats list it as skipped
        for it in items:
            if not it.found:
                err(f"skipped {it.path}: {it.skipped}")
        items = [it for it in items if it.found]
    if not is_list_pattern(pattern):
        # A glob: the collection-relative path, as the original names its matches.
        names = {it.uri: it.path for it in items} | {k: v for k, v in names.items() if not v.startswith("qmd://")}
    out(format_multi(items, kind, line_numbers, names))


def one_pattern(patterns: list[str]) -> str:
    """The pattern of `multi-get ARG...`: one argument as it is; several (`multi-get notes/*.md`
    unquoted: the shell expanded the glob into paths) as the comma list they name."""
    if len(patterns) == 1:
        return patterns[0]
    with_comma = next((p for p in patterns if "," in p), None)
    if with_comma is not None:
        raise QmdError(f"multi-get takes one pattern, and '{with_comma[:80]}' holds a comma, so the {len(patterns)} arguments cannot be read as one list",
                       "quote the glob so the shell does not expand it: qmd multi-get 'notes/*.md'")
    return ",".join(patterns)


def is_list_pattern(pattern: str) -> bool:
    """The original's rule: a comma list (no glob characters) or one #docid, not a glob."""
    import re

    return ("," in pattern and not any(ch in pattern for ch in "*?{")) or re.fullmatch(r"#?[0-9a-fA-F]{6,}(?::\d+){0,2}", pattern.strip()) is not None


def ls(
    target: Annotated[str | None, typer.Argument(help="A collection, collection/sub-path or qmd:// path; none lists collections.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="JSON: the collections as collection list --json prints them, or one object per file.")] = False,
) -> None:
    """List collections, or the files in one."""
    with open_store() as store:
        if not target:
            colls = store.collections()
            out(collections_json(colls) if json_ else format_ls_root(colls))
        else:
            files = store.ls(target)
            out(ls_json(files, index_uri) if json_ else format_ls(files))
