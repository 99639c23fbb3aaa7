"""qmd: on-device search for markdown notes.

The public API. The CLI, the MCP server and the harness packages use only what is
exported here (plus the small documented surfaces of `qmd.serve`, for the MCP server's
lifecycle and probes, and `qmd.agents`, for Claude Code's and Codex's configuration files). Names are imported on first use (PEP 562), so `import qmd` stays cheap
and never loads a model runtime.

    from qmd import Store
    with Store("/path/to/index.sqlite", "/path/to/index.yml") as store:
        store.add_collection("~/notes", name="notes")
        for hit in store.search("rollback"):
            print(hit.uri, hit.score)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms of every CLI call)

from qmd.core.lazy import lazy_exports

__version__ = "0.1.0"

_EXPORTS = {
    "DEFAULT_PATTERN": "core.config",
    "BUILTIN_MODELS": "core.defaults:BUILTIN",
    "CollectionConfig": "core.config",
    "ConfigError": "core.errors",
    "IndexBusyError": "core.errors",
    "IndexDamagedError": "core.errors",
    "NotFoundError": "core.errors",
    "QmdError": "core.errors",
    "writer_lock": "core.locks",
    "FileLockHandle": "core.locks",
    "process_alive": "core.process",
    "remove_own_record": "core.process",
    "try_lock": "core.locks",
    "lock_file": "core.locks",
    "is_locked": "core.locks",
    "local_configs": "core.indexes",
    "index_keys": "core.indexes",
    "read_index": "core.indexes",
    "ConfiguredIndex": "core.indexes",
    "RefreshReport": "store.refresh",
    "local_trust": "index.folders",
    "grammar_status": "index.code_chunks",
    "language_of": "index.code_chunks",
    "GRAMMARS_INSTALL": "index.code_chunks",
    "IndexPaths": "core.paths",
    "cache_dir": "core.paths",
    "config_dir": "core.paths",
    "models_dir": "core.paths",
    "resolve_index": "core.paths",
    "state_dir": "core.paths",
    "StateLayout": "core.paths",
    "now_iso": "core.clock",
    "parse_iso": "core.clock",
    "age": "core.clock",
    "ago": "core.clock",
    "read_json": "core.fileio",
    "write_json": "core.fileio",
    "write_text": "core.fileio",
    "write_bytes": "core.fileio",
    "replace_file": "core.fileio",
    "CleanupReport": "core.results",
    "CollectionInfo": "core.results",
    "ContextInfo": "core.results",
    "Document": "core.results",
    "FileEntry": "core.results",
    "ModelStatus": "core.results",
    "MultiGetItem": "core.results",
    "SearchHit": "core.results",
    "StatusInfo": "core.results",
    "UpdateReport": "core.results",
    "VectorSearch": "core.results",
    "VectorStatus": "core.results",
    "Store": "store.store",
    "open_index": "store.store",
    "EmbedReport": "index.embedding",
    "build_id": "core.buildinfo",
    "IndexCheck": "storage.backend",
    "RebuildReport": "storage.backend",
    "refresh_folder_cache": "index.folders",
}

__all__ = sorted([*_EXPORTS, "__version__"])


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from qmd.core.buildinfo import build_id
    from qmd.core.defaults import BUILTIN as BUILTIN_MODELS
    from qmd.core.errors import ConfigError, IndexBusyError, IndexDamagedError, NotFoundError, QmdError
    from qmd.core.locks import FileLockHandle, is_locked, lock_file, try_lock, writer_lock
    from qmd.core.clock import age, ago, now_iso, parse_iso
    from qmd.core.fileio import read_json, replace_file, write_bytes, write_json, write_text
    from qmd.core.process import process_alive, remove_own_record
    from qmd.core.paths import IndexPaths, StateLayout, cache_dir, config_dir, models_dir, resolve_index, state_dir
    from qmd.index.embedding import EmbedReport
    from qmd.core.config import DEFAULT_PATTERN, CollectionConfig
    from qmd.core.results import (
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
    from qmd.storage.backend import IndexCheck, RebuildReport
    from qmd.store.store import Store, open_index
    from qmd.index.code_chunks import GRAMMARS_INSTALL, grammar_status, language_of
    from qmd.index.folders import local_trust, refresh_folder_cache
    from qmd.core.indexes import ConfiguredIndex, index_keys, local_configs, read_index
    from qmd.store.refresh import RefreshReport
