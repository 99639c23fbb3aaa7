"""Where an index lives: the storage backend its paths and its config name, checked for
whose it is (qmd/backends/owner.py) and, for a project-local config, for what the trust
gate allows (qmd/core/trust.py)."""

from __future__ import annotations

import os
from pathlib import Path

from qmd.core.config import Config

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.backends.base import IndexBackend


def backend_for(index_path: Path, config_path: Path, config: Config | None = None) -> IndexBackend:
    """Where the index lives, and which config owns it (qmd/backends/owner.py).

    The PostgreSQL database named by `QMD_DATABASE_URL` or the config's own `database:`, in a
    schema of this index's own (`schema_for`: one per index name and per project-local
    config; a `?schema=NAME` in the config's own URL is that index's choice, in
    `QMD_DATABASE_URL` the default index's schema and the prefix of every other's); else
    the SQLite file at `index_path`. A project-local config is gated (qmd/core/trust.py):
    untrusted, it may name no database, and its `.qmd/index.sqlite` must be the project's
    own file (not a link or hard link to a file elsewhere, such as the user's own index).
    """
    from qmd.core.paths import DEFAULT_INDEX, is_local_config, project_identity
    from qmd.backends.owner import owner_for

    local = is_local_config(config_path)
    config = config if config is not None else Config.load(config_path)
    decision = None
    if local:
        from qmd.core.trust import decide

        decision = decide(config_path, config.raw)
    env = os.environ.get("QMD_DATABASE_URL")
    own = None if env else config.database
    if own is not None and decision is not None and decision.skipped:
        own = None  # a cloned repository must not choose where its notes and every query go
    url = env or own
    if url:
        try:
            from qmd.backends.postgres.backend import PostgresBackend
            from qmd.backends.postgres.connection import legacy_schema, schema_for, split_url
        except ImportError as exc:
            from qmd.core.errors import QmdError

            raise QmdError(f"this index is in PostgreSQL, but the driver is missing ({exc})", "install the extra: pip install 'qmd-harness[postgres]'") from exc
        libpq, named = split_url(url)
        index = config_path.stem
        project = project_identity(config_path) if local else None
        adopt = None
        if named and (own is not None or (not local and index == DEFAULT_INDEX)):
            schema = named
        else:
            schema = schema_for(index, project=project, base=named or "qmd")
            old = legacy_schema(index)
            if not local and not named and old != schema and not (config_path.parent / f"{old[len('qmd_'):]}.yml").exists():
                adopt = (old, frozenset(config.collections()))  # an older qmd's schema for this name (see adopt_schema)
        return PostgresBackend(libpq, schema, index_name=index, owner=owner_for(config_path), adopt=adopt)
    from qmd.backends.sqlite.backend import SqliteBackend

    movable = False
    if decision is not None:
        if decision.gated.index_file and decision.skipped:
            from qmd.core.trust import index_file_error

            raise index_file_error(config_path, decision.gated.index_file)
        movable = not decision.gated.index_file
    return SqliteBackend(index_path, owner_for(config_path, movable=movable))
