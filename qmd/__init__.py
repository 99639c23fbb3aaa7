"""qmd: on-device search for markdown notes.

The public API. The CLI, the MCP server and the harness packages use only what is
exported here. Nothing here imports a model runtime: `import qmd` stays fast.

    from qmd import Store
    with Store("/path/to/index.sqlite", "/path/to/index.yml") as store:
        store.add_collection("~/notes", name="notes")
        for hit in store.search("rollback"):
            print(hit.uri, hit.score)
"""

from __future__ import annotations

from .config import DEFAULT_PATTERN, CollectionConfig
from . import folders
from .errors import ConfigError, IndexBusyError, NotFoundError, QmdError
from .lock import writer_lock
from .paths import IndexPaths, cache_dir, config_dir, models_dir, resolve_index, state_dir
from .results import (
    CleanupReport,
    CollectionInfo,
    ContextInfo,
    Document,
    FileEntry,
    MultiGetItem,
    SearchHit,
    StatusInfo,
    UpdateReport,
)
from .store import Store

__version__ = "0.1.0"

__all__ = [
    "DEFAULT_PATTERN",
    "CleanupReport",
    "CollectionConfig",
    "CollectionInfo",
    "ConfigError",
    "ContextInfo",
    "Document",
    "FileEntry",
    "IndexBusyError",
    "IndexPaths",
    "MultiGetItem",
    "NotFoundError",
    "QmdError",
    "SearchHit",
    "StatusInfo",
    "Store",
    "UpdateReport",
    "__version__",
    "cache_dir",
    "folders",
    "config_dir",
    "models_dir",
    "resolve_index",
    "state_dir",
    "writer_lock",
]
