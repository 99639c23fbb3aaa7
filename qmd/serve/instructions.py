"""The MCP server's instructions, kept between starts: `initialize` answered before the index opens.

Agents start their first model turn as soon as the handshake allows, and opening the index
to count its documents is most of a stdio server's start. So each start keeps the text it
computed (`<cache>/mcp/instructions-<index>.json`; a project-local index's is
`instructions-local-<hash>.json`, named as its server's PID file) with the stamps
(qmd/core/stamps.py) of everything the text is made from, and the next start answers
`initialize` with it when every stamp is unchanged, while the index opens beside it as before
(and computes the text again only behind the tool calls already received, so a first call
waits for nothing the instructions need; a text that differs replaces the copy). The stamps:

- the index file, and its write-ahead log when that holds frames (an empty or absent log
  means the file itself is complete, whichever connection happens to be open);
- the index's config (collections, contexts), `models.yml` and the models folder (which
  embed model is current, hence whether vector search is on), `QMD_EMBED_MODEL`;
- the qmd version and the source of the module that words the text.

Only an index in a SQLite file is kept this way (`applies`): one in PostgreSQL changes
without touching a local file, so its server always opens it first.

A copy is written only when nothing changed while it was computed and every file had been
left alone for 2 s (git's racily-clean rule), so an edit can never hide behind an unchanged
stamp. Any doubt (no copy, a corrupt one, another index's) means: open the index first.
"""

from __future__ import annotations

import json
import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from pathlib import Path

    from qmd.core.paths import IndexPaths
    from qmd.core.stamps import Stamp
    from qmd.store.store import Store

VERSION = 1


def cache_path(index: str) -> Path:
    """Where the instructions of the index keyed `index` (`IndexPaths.key`) are kept:
    `instructions-<name>.json`, a project-local index's `instructions-local-<hash>.json`
    (`server_name`, as its server's PID file: its name `index` is the home index's too)."""
    from qmd.core.paths import cache_dir, server_name

    return cache_dir() / "mcp" / f"instructions-{server_name(index)}.json"


def inputs(paths: IndexPaths) -> list[Stamp]:
    """The stamps of everything the instructions of `paths`' index are made from."""
    from qmd.core.version import __version__
    from qmd.core.paths import config_dir, models_dir
    from qmd.core.stamps import stamp

    wal = stamp(f"{paths.index_path}-wal")
    if len(wal) == 6 and wal[1] == 0:
        wal = [wal[0], None]  # an empty log holds nothing: the same as none
    here = os.path.dirname(os.path.abspath(__file__))
    return [
        stamp(paths.index_path), wal, stamp(paths.config_path), stamp(config_dir() / "models.yml"), stamp(models_dir()),
        stamp(os.path.join(here, "answers.py")), ["QMD_EMBED_MODEL", os.environ.get("QMD_EMBED_MODEL")],
        ["QMD_DATABASE_URL", os.environ.get("QMD_DATABASE_URL")], ["version", __version__],
    ]


def applies(store: Store, paths: IndexPaths) -> bool:
    """Whether stamps can vouch for this index: it lives in the SQLite file they stamp. An
    index in PostgreSQL changes without touching any local file, so its text is never kept."""
    return store.backend.location == str(paths.index_path)


def read(paths: IndexPaths, key: list[Stamp]) -> str | None:
    """The kept instructions when `key` is exactly what they were made from, else None."""
    try:
        with open(cache_path(paths.key), encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return None
    if not isinstance(data, dict) or data.get("version") != VERSION or data.get("key") != key:
        return None
    text = data.get("text")
    return text if isinstance(text, str) and text else None


def keep(paths: IndexPaths, before: list[Stamp], text: str) -> None:
    """Keep `text`, computed from the files stamped `before`, when it is certainly current.

    Best effort: files changed meanwhile or too recently, or an unwritable cache dir, keep
    nothing (the next start opens the index first)."""
    import time

    from qmd.core.fileio import write_text
    from qmd.core.stamps import settled

    if inputs(paths) != before or not settled(before, time.time_ns()):
        return
    try:
        write_text(cache_path(paths.key), json.dumps({"version": VERSION, "key": before, "text": text}, ensure_ascii=False) + "\n", fsync=False)
    except OSError:
        pass
