"""Which index a process reads, as one digest: what the CLI and a warm server compare.

A PID file is per index *name*, but two processes with the same name can still read
different data: another `INDEX_PATH`, `QMD_DATABASE_URL`, config dir or model setting in
their environment. The CLI hands its work to a server only when both compute the same
digest here (qmd/cli/remote.py sends it; qmd/serve/cliroute.py compares), so a server
never answers for an index the CLI would not have read. Only the SHA-256 crosses the
wire: paths and database URLs (which may hold a password) are never sent.
"""

from __future__ import annotations

import hashlib
import json
import os

# What chooses the data and the models a search reads (the settings `qmd mcp install` pins,
# resolved to the paths they select). Knobs that only tune speed are not part of it.
MODEL_VARS = ("QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL")


def index_identity(name: str | None) -> str:
    """The digest of index `name` as this process's environment resolves it."""
    from qmd.core.paths import DEFAULT_INDEX, models_dir, resolve_index

    paths = resolve_index(name or DEFAULT_INDEX)
    parts = {
        "index": paths.name,
        "index_path": os.path.abspath(paths.index_path),
        "config_path": os.path.abspath(paths.config_path),
        "database_url": os.environ.get("QMD_DATABASE_URL") or "",
        "models_dir": os.path.abspath(models_dir()),
        **{var: os.environ.get(var) or "" for var in MODEL_VARS},
    }
    return hashlib.sha256(json.dumps(parts, sort_keys=True).encode("utf-8", "surrogatepass")).hexdigest()
