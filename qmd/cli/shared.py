"""What the CLI's commands share, without typer: the selected index, printing, option values.

The typer commands and the lean entry path (fast.py) both use these,
so `qmd search` can run without importing typer. The usage errors raised here are typer's
(`BadParameter`), imported only when there is one to raise.
"""

from __future__ import annotations

import os
import sys

FORMATS = ("cli", "json", "csv", "md", "xml", "files")  # the output formats (qmd/cli/formats.py renders them)
NO_GPU_NOTE = "note: --no-gpu: this qmd runs its models on the CPU (llama.cpp), so there is nothing to turn off"

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from qmd.store.store import Store
    from qmd.core.results import Document, MultiGetItem, SearchHit


class State:
    index_name: str | None = None


STATE = State()


def named_index(pattern: str) -> str:
    """`pattern` (a reference or a comma list) without the `?index=NAME` qmd prints on the
    URIs of a named index; that index is selected, unless --index already chose another
    or the references name two (a QmdError)."""
    from qmd.core.errors import QmdError
    from qmd.store.refs import strip_indexes

    stripped, names = strip_indexes(pattern)
    if not names:
        return pattern
    if len(names) > 1:
        raise QmdError(f"the references name {len(names)} indexes ({', '.join(sorted(names))})", "read each index's documents with its own command")
    (name,) = names
    if STATE.index_name is not None and STATE.index_name != name:
        raise QmdError(f"the reference names index '{name}', --index says '{STATE.index_name}'", f"drop --index, or use the URI without ?index={name}")
    STATE.index_name = name
    return stripped


def open_store() -> Store:
    """The Store of the index chosen with --index (default `index`)."""
    from qmd.store.store import open_index

    return open_index(STATE.index_name)


def out(text: str) -> None:
    """Write `text` to stdout as is; a closed pipe (`| head`) is not an error, and output that
    cannot be written (`> /dev/full`, a full disk under `> file`) is said to be the output's
    (it read as qmd's own folders being full)."""
    try:
        sys.stdout.write(text)
        sys.stdout.flush()
    except BrokenPipeError:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
    except OSError as exc:
        from qmd.core.errors import QmdError

        devnull = os.open(os.devnull, os.O_WRONLY)  # what is still buffered goes nowhere at exit
        os.dup2(devnull, sys.stdout.fileno())
        raise QmdError(f"cannot write the output: {exc.strerror or exc}", "free space where the output goes, or send it elsewhere (> FILE on another disk)") from None


def err(text: str) -> None:
    sys.stderr.write(text if text.endswith("\n") else text + "\n")


def _usage_error(message: str, param_hint: str) -> Exception:
    import typer

    return typer.BadParameter(message, param_hint=param_hint)


def filter_arg(value: str | None) -> str | None:
    """--filter as given; an empty one is a usage error (a script's unset "$F" must not
    search unfiltered)."""
    if value is not None and not value.strip():
        raise _usage_error("needs a JSON filter, e.g. '{\"key\": \"status\", \"operator\": \"eq\", \"value\": \"published\"}'", "--filter")
    return value


def pick_format(fmt: str | None, json_: bool, csv_: bool, md: bool, xml: bool, files: bool) -> str:
    """One output format from --format and the shorthand flags; two different ones is an error."""
    chosen = {name for name, on in (("json", json_), ("csv", csv_), ("md", md), ("xml", xml), ("files", files)) if on}
    if fmt is not None:
        if fmt not in FORMATS:
            raise _usage_error(f"unknown format {fmt!r}; choose one of {', '.join(FORMATS)}", "--format")
        chosen.add(fmt)
    if len(chosen) > 1:
        raise _usage_error("choose one output format", "--format/--json/--csv/--md/--xml/--files")
    return chosen.pop() if chosen else "cli"


def non_negative(value: int | None, flag: str) -> None:
    """A count, size or line number below 0 is a usage error (it silently meant 0 or line 1)."""
    if value is not None and value < 0:
        raise _usage_error("must be 0 or more", flag)


def result_limit(kind: str, n: int | None, all_: bool = False) -> int | None:
    """-n, else 5 (20 for json/files); None with --all. A non-positive -n is a usage error."""
    if n is not None and n < 1:
        raise _usage_error("must be at least 1", "-n")
    return None if all_ else (n or (20 if kind in ("json", "files") else 5))


def snippet_chars(kind: str) -> int:
    from qmd.core.requests import CLI_SNIPPET_CHARS, JSON_SNIPPET_CHARS

    return JSON_SNIPPET_CHARS if kind == "json" else CLI_SNIPPET_CHARS


def roots_of(store: Store) -> dict[str, str]:
    """Each collection's name → its folder."""
    return {c.name: c.path for c in store.collections()}


def fs_paths(roots: Mapping[str, str], items: Sequence[SearchHit | Document | MultiGetItem]) -> dict[str, str]:
    """qmd:// URI → absolute file-system path (for links, and --full-path), from the collections' folders."""
    return {it.uri: os.path.join(roots[it.collection], it.path) for it in items if it.collection in roots}


def render_full_path(path: str, cwd: str | None = None) -> str:
    """--full-path as the original prints it: `./rel` when the file (symlinks resolved) is
    under the working directory, else its absolute real path."""
    real = os.path.realpath(path)
    here = os.path.realpath(cwd or os.getcwd())
    if real == here:
        return "./"
    if real.startswith(here.rstrip("/") + "/"):
        return "./" + os.path.relpath(real, here)
    return real


def index_uri(uri: str) -> str:
    """A qmd:// URI as the original prints it for a named index: `qmd://c/p?index=NAME`."""
    name = STATE.index_name
    return uri if not name or name == "index" else f"{uri}?index={name}"


def display_names(roots: Mapping[str, str], items: Sequence[SearchHit | Document | MultiGetItem], full_path: bool) -> dict[str, str] | None:
    """URI → the name to print: with --full-path the file's path (render_full_path) when it
    exists, else the URI; `?index=NAME` on URIs of a named index; None when nothing changes."""
    names: dict[str, str] = {}
    disk = fs_paths(roots, items) if full_path else {}
    for it in items:
        path = disk.get(it.uri)
        if path is not None and os.path.exists(path):
            names[it.uri] = render_full_path(path)
        elif index_uri(it.uri) != it.uri:
            names[it.uri] = index_uri(it.uri)
    return names or None


def number_snippet(snippet: str) -> str:
    """A snippet's lines prefixed with their line numbers, from its `@@ -start,count @@` header."""
    header, _, body = snippet.partition("\n")
    try:
        first = int(header.split()[1].lstrip("-").split(",")[0])
    except (IndexError, ValueError):
        return snippet
    return header + "\n" + "\n".join(f"{first + i}: {line}" for i, line in enumerate(body.split("\n")))


def number_hits(hits: Sequence[SearchHit], line_numbers: bool) -> None:
    """`query --line-numbers`: each hit's body (`--full`), else its snippet, numbered."""
    from qmd.core.text import numbered

    if not line_numbers:
        return
    for hit in hits:
        if hit.body is not None:
            hit.body = numbered(hit.body, 1)
        else:
            hit.snippet = number_snippet(hit.snippet)
