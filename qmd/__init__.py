"""qmd: on-device search for markdown notes.

The public API, for a library user: `Store` (one index) and `open_index` / `resolve_index`
(an index at the paths the CLI uses), what its methods return, its errors and the
collection config. Names are imported on first use (PEP 562), so `import qmd` stays cheap
and never loads a model runtime. The harness packages (hooks, updater, doctor, guards) use
this API, plus `qmd.harness` (state-dir layout, file and lock helpers, the configured
indexes) and the small documented surfaces of `qmd.serve` (the MCP server's lifecycle and
probes) and `qmd.agents` (Claude Code's and Codex's configuration files).

    from qmd import Store
    with Store("/path/to/index.sqlite", "/path/to/index.yml") as store:
        store.add_collection("~/notes", name="notes")
        for hit in store.search("rollback"):
            print(hit.uri, hit.score)
"""

from __future__ import annotations

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms of every CLI call)

from qmd.core.lazy import lazy_exports

_EXPORTS = {
    "__version__": "core.version",
    # one index
    "Store": "store.store",
    "open_index": "store.store",
    "resolve_index": "core.paths",
    "IndexPaths": "core.paths",
    # errors
    "QmdError": "core.errors",
    "ConfigError": "core.errors",
    "IndexBusyError": "core.errors",
    "IndexDamagedError": "core.errors",
    "IndexAccessError": "core.errors",
    "NotFoundError": "core.errors",
    # the config
    "CollectionConfig": "core.config",
    "DEFAULT_PATTERN": "core.config",
    # what the Store's searches take (or their fields as keywords) and what a search command prints
    "SearchRequest": "core.requests",
    "QueryRequest": "core.requests",
    "Outcome": "core.requests",
    # what the Store's methods return
    "SearchHit": "core.results",
    "Stages": "core.results",
    "VectorSearch": "core.results",
    "QueryResult": "core.results",
    "Document": "core.results",
    "MultiGetItem": "core.results",
    "FileEntry": "core.results",
    "CollectionInfo": "core.results",
    "ContextInfo": "core.results",
    "Overlap": "core.results",
    "StatusInfo": "core.results",
    "UpdateReport": "core.results",
    "CleanupReport": "core.results",
    "VectorStatus": "core.results",
    "ModelStatus": "core.results",
    "EmbedReport": "index.embedding",
    # what a running embed tells its `progress` callback, and a callback that writes it as lines
    "EmbedProgress": "index.embed_progress",
    "CollectionPlan": "index.embed_progress",
    "ProgressLines": "index.embed_progress",
    "RefreshReport": "store.refresh",
    "IndexCheck": "backends.base",
    "RebuildReport": "backends.base",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from qmd.core.config import DEFAULT_PATTERN, CollectionConfig
    from qmd.core.errors import ConfigError, IndexAccessError, IndexBusyError, IndexDamagedError, NotFoundError, QmdError
    from qmd.core.paths import IndexPaths, resolve_index
    from qmd.core.requests import Outcome, QueryRequest, SearchRequest
    from qmd.core.results import (
        CleanupReport,
        CollectionInfo,
        ContextInfo,
        Document,
        FileEntry,
        ModelStatus,
        MultiGetItem,
        Overlap,
        QueryResult,
        SearchHit,
        Stages,
        StatusInfo,
        UpdateReport,
        VectorSearch,
        VectorStatus,
    )
    from qmd.core.version import __version__
    from qmd.index.embed_progress import CollectionPlan, EmbedProgress, ProgressLines
    from qmd.index.embedding import EmbedReport
    from qmd.backends.base import IndexCheck, RebuildReport
    from qmd.store.refresh import RefreshReport
    from qmd.store.store import Store, open_index
