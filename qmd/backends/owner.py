"""Which config an index belongs to, recorded in the index itself.

`update` drops the rows of every collection its config no longer names. That is right for
the config's own index and a disaster for anyone else's: a project-local config writing
into the home index's PostgreSQL schema, two index names that mapped to one schema, a
cloned repository whose `.qmd/index.sqlite` links to the user's own index, or `INDEX_PATH`
shared by two named indexes. So an index records its owner (the `owner` row of its `meta`
table, written when it is created or first written) and a config that is not its owner may
neither read nor write it.

The owner is a *logical* config, not a file: `index:<name>` for an index named in the config
dir (every team member's `index.yml` sharing one PostgreSQL schema is one owner, as the
team intends), `project:<real path of the project>/.qmd/index.yml` for a project-local one
(`project_identity`: a `.qmd` linked to another project's is not that project). A project's
own `.qmd/index.sqlite` (a regular file at its own place, reached through no link) is
`movable`: a record naming another *project* path is this project moved or copied, and it is
taken over; a record of a named index (`index:…`) never is.
"""

from __future__ import annotations

import json
import os

from qmd.core.errors import QmdError
from qmd.core.records import record

META_KEY = "owner"


class ForeignIndexError(QmdError):
    """The index belongs to another config: neither read nor written."""


@record(frozen=True)
class Owner:
    """One config's claim on an index: `key` decides, `config` and `host` are for messages."""

    key: str
    config: str
    movable: bool = False

    def to_text(self) -> str:
        import socket  # only when written: a search never pays for the import

        return json.dumps({"key": self.key, "config": self.config, "host": socket.gethostname()}, ensure_ascii=False)


def owner_for(config_path: str | os.PathLike[str], *, movable: bool = False) -> Owner:
    """The owner identity of the config at `config_path` (see the module docstring)."""
    from qmd.core.paths import is_local_config, project_identity

    absolute = os.path.abspath(config_path)
    if is_local_config(absolute):
        return Owner("project:" + project_identity(absolute), absolute, movable)
    stem = os.path.splitext(os.path.basename(absolute))[0]
    return Owner("index:" + stem, absolute)


WRITER_PREFIX = "writer:"  # meta key of the config that last indexed a collection: writer:<collection>


def writer_for(config_path: str | os.PathLike[str]) -> str:
    """The record of one config *file* (on this host) as a collection's writer: configs of one
    owner (two team members' `team.yml`, or two config dirs) are still told apart here, so
    neither drops what the other indexed."""
    import socket

    return json.dumps({"config": os.path.abspath(config_path), "host": socket.gethostname()}, ensure_ascii=False, sort_keys=True)


def writer_of(recorded: str | None, owner: str | None) -> tuple[str, str] | None:
    """(config, host) of a collection's recorded writer; without one (indexed before writers
    were recorded), the config that claimed the index; None when neither is known."""
    for text in (recorded, owner):
        if text:
            try:
                data = json.loads(text)
                return str(data["config"]), str(data.get("host", ""))
            except (ValueError, KeyError, TypeError):
                continue
    return None


def shown(writer: tuple[str, str]) -> str:
    """A writer for messages: its config, and its host when it is another machine."""
    import socket

    config, host = writer
    return f"{config} on {host}" if host and host != socket.gethostname() else config


def parse(text: str | None) -> tuple[str, str, str] | None:
    """(key, config, host) of a recorded owner; None when none is recorded (an index made
    before owners were: the next write claims it). An unreadable record is someone else's."""
    if text is None:
        return None
    try:
        data = json.loads(text)
        return str(data["key"]), str(data.get("config", "")), str(data.get("host", ""))
    except (ValueError, KeyError, TypeError):
        return ("?" + text[:200], "an unreadable owner record", "")


def decide(recorded: str | None, mine: Owner, location: str, hint: str) -> bool:
    """Whether `mine` may use the index at `location` whose owner record is `recorded`:
    True when the record should be (re)written by the next write (none yet, or a movable
    file's previous project), False when it is already `mine`; ForeignIndexError otherwise."""
    found = parse(recorded)
    if found is None:
        return True
    key, config, host = found
    if key == mine.key:
        return False
    if mine.movable and key.startswith("project:"):
        return True  # this project's own file, written where the project was before (moved or copied)
    raise ForeignIndexError(
        f"the index {location} belongs to another config ({shown((config, host))}), not to {mine.config}: "
        "qmd neither reads nor writes another config's index (its update would drop that config's collections)",
        hint,
    )
