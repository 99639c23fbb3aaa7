"""qmd: on-device search for markdown notes.

The public API. The CLI, the MCP server and the harness packages use only what is
exported here. Names are imported on first use (PEP 562), so `import qmd` stays cheap
and never loads a model runtime.

    from qmd import Store
    with Store("/path/to/index.sqlite", "/path/to/index.yml") as store:
        store.add_collection("~/notes", name="notes")
        for hit in store.search("rollback"):
            print(hit.uri, hit.score)
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

__version__ = "0.1.0"

_EXPORTS = {
    "DEFAULT_PATTERN": "config",
    "CollectionConfig": "config",
    "ConfigError": "errors",
    "IndexBusyError": "errors",
    "NotFoundError": "errors",
    "QmdError": "errors",
    "writer_lock": "lock",
    "IndexPaths": "paths",
    "cache_dir": "paths",
    "config_dir": "paths",
    "models_dir": "paths",
    "resolve_index": "paths",
    "state_dir": "paths",
    "CleanupReport": "results",
    "CollectionInfo": "results",
    "ContextInfo": "results",
    "Document": "results",
    "FileEntry": "results",
    "ModelStatus": "results",
    "MultiGetItem": "results",
    "SearchHit": "results",
    "StatusInfo": "results",
    "UpdateReport": "results",
    "VectorSearch": "results",
    "VectorStatus": "results",
    "Store": "store",
    "EmbedReport": "embedding",
    "build_id": "buildinfo",
    "selected_index": "cli.common",
    "IndexCheck": "integrity",
    "RebuildReport": "integrity",
}
_SUBMODULES = {"folders", "mcp_daemon", "mcp_install", "mcp_probe"}

__all__ = sorted([*_EXPORTS, *_SUBMODULES, "__version__"])


def __getattr__(name: str) -> Any:
    if name in _SUBMODULES:
        return importlib.import_module(f".{name}", __name__)
    module = _EXPORTS.get(name)
    if module is None:
        raise AttributeError(f"module 'qmd' has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{module}", __name__), name)
    globals()[name] = value
    return value


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from . import folders, mcp_daemon, mcp_install, mcp_probe
    from .integrity import IndexCheck, RebuildReport
    from .buildinfo import build_id
    from .cli.common import selected_index
    from .config import DEFAULT_PATTERN, CollectionConfig
    from .embedding import EmbedReport
    from .errors import ConfigError, IndexBusyError, NotFoundError, QmdError
    from .lock import writer_lock
    from .paths import IndexPaths, cache_dir, config_dir, models_dir, resolve_index, state_dir
    from .results import (
        CleanupReport,
        CollectionInfo,
        ContextInfo,
        Document,
        FileEntry,
        ModelStatus,
        MultiGetItem,
        SearchHit,
        StatusInfo,
        UpdateReport,
        VectorSearch,
        VectorStatus,
    )
    from .store import Store
