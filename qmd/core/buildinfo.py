"""Which build of qmd is running: the version plus a hash of the installed sources."""

from __future__ import annotations

import hashlib
from functools import lru_cache
from pathlib import Path

from qmd.core.version import __version__

_PACKAGE = Path(__file__).resolve().parents[1]  # the qmd package (this file is qmd/core/buildinfo.py)


def source_digest(root: Path = _PACKAGE) -> str:
    """sha256 over every `.py` file under `root` (relative path and bytes, in path order)."""
    digest = hashlib.sha256()
    for path in sorted(root.rglob("*.py")):
        if "__pycache__" in path.parts:
            continue
        digest.update(path.relative_to(root).as_posix().encode() + b"\0")
        digest.update(path.read_bytes())
        digest.update(b"\0")
    return digest.hexdigest()


@lru_cache(maxsize=1)
def build_id() -> str:
    """`<version>+<first 12 hex of the source digest>`: an editable checkout changes it.

    The MCP server reports it in /health and its PID file, so `doctor` can tell a server
    started from older code than what is installed now.
    """
    return f"{__version__}+{source_digest()[:12]}"
