"""The values shell completion offers that only qmd knows: collection and index names.

The completion scripts (completion.py) run `qmd [--index=NAME] completion --values KIND`
when a `-c/--collection` value or a collection-name argument (`--values collections`), or
an `--index` value (`--values indexes`), is being completed. Both read files only: the
index's config (through its parsed-config cache), the config and cache dirs' listings; no
database is opened, no model loaded, no typer imported (fast.py routes this command line).
A broken config or a bad index name gives no candidates, never an error: completion must
not write into the shell's line.
"""

from __future__ import annotations

KINDS = ("collections", "indexes")


def collection_names(index: str | None) -> list[str]:
    """The collections of the index that `--index` (None: the one qmd picks here) selects."""
    from qmd.core.config import Config
    from qmd.core.errors import QmdError
    from qmd.core.paths import resolve_index

    try:
        return sorted(Config.load(resolve_index(index).config_path).collections())
    except (QmdError, OSError, ValueError):
        return []


def index_names() -> list[str]:
    """The named indexes that exist: a config in the config dir or a database in the cache dir."""
    from qmd.core.errors import QmdError
    from qmd.core.paths import cache_dir, check_index_name, config_dir

    found: set[str] = set()
    for folder, suffix in ((config_dir(), ".yml"), (cache_dir(), ".sqlite")):
        try:
            names = [p.name[: -len(suffix)] for p in folder.iterdir() if p.name.endswith(suffix)]
        except OSError:
            continue
        for name in names:
            try:
                found.add(check_index_name(name))
            except QmdError:
                pass
    found.discard("models")  # models.yml: the installed model defaults, not an index
    return sorted(found)


def print_values(kind: str, index: str | None) -> None:
    """`qmd completion --values KIND` (one of KINDS): one candidate a line."""
    from qmd.cli.shared import out

    names = collection_names(index) if kind == "collections" else index_names()
    out("".join(f"{name}\n" for name in names if name.isprintable()))  # a line break in a name would offer two wrong names
