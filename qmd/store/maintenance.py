"""Keeping an index sound: status, cleanup, integrity checks, repairs and rebuilds."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from qmd.core.errors import IndexDamagedError, QmdError
from qmd.backends.base import IndexBackend, IndexCheck, RebuildReport, VectorModel
from qmd.store.activity import running
from qmd.store.collections import Collections
from qmd.store.models import Models
from qmd.core.results import CleanupReport, GrammarInfo, StatusInfo
from qmd.store.state import IndexState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.index.indexer import Progress

NOT_PARSED = "not cut by syntax (chunk strategy auto: syntax errors, or over the syntax-tree budget): chunked by regex"  # the status warning of such a file


def _grammars() -> list[GrammarInfo]:
    """The tree-sitter grammars of `--chunk-strategy auto`: which load, and the install command
    of those that do not."""
    from qmd.index.code_chunks import GRAMMARS_INSTALL, grammar_status

    return [GrammarInfo(lang, why is None, why, None if why is None else GRAMMARS_INSTALL) for lang, why in grammar_status().items()]


class Maintenance:
    """What `status`, `cleanup`, `rebuild` and doctor ask of an index."""

    def __init__(self, state: IndexState, collections: Collections, models: Models) -> None:
        self.state = state
        self.collections = collections
        self.models = models

    def cleanup(self, wait: float | None = None, on_wait: Callable[[], None] | None = None) -> CleanupReport:
        backend = self.state.backend
        before = backend.size_bytes() if backend.exists() else 0
        with backend.writer_lock(timeout=wait, on_wait=on_wait):
            dropped, kept = self.collections.drop_orphaned()
            inactive, orphans = self.state.db().cleanup()
        return CleanupReport(inactive, orphans, before, backend.size_bytes(), dropped, kept)

    def check(self, quick: bool) -> IndexCheck:
        return self.state.backend.inspect(quick=quick)

    def repair_fts(self) -> int:
        from qmd.index.indexer import search_fields  # the indexer loads only for what writes

        self.state.writes += 1
        with self.state.backend.writer_lock():
            return self.state.db().repair_fulltext(search_fields)

    def backup(self) -> Path:
        with self.state.backend.writer_lock():
            return self.state.db().backup()

    def rebuild(self, progress: Progress | None) -> RebuildReport:
        """Build the index anew from the config's collections and swap it in atomically.

        The writer lock of the index is held throughout; the fresh file takes none (no
        lock file is left beside it). `update:` commands do not run.
        """
        from qmd.index.indexer import index_collection

        def build(fresh: IndexBackend) -> int:
            fresh.open(create=True)
            for coll in self.state.collections().values():
                try:
                    index_collection(fresh, coll, progress)
                except QmdError as exc:
                    raise QmdError(f"rebuild stopped: collection '{coll.name}': {exc.message}", "fix that collection (or remove it), then: qmd rebuild") from exc
            return fresh.totals().active

        backend = self.state.backend
        self.state.writes += 1
        with backend.writer_lock():
            if backend.exists():
                try:
                    self.state.db()  # opening it checks its owner: another config's index is refused
                except IndexDamagedError:
                    pass  # a damaged file cannot say whose it is; it is kept aside (.broken), not lost
            return backend.rebuild(build)

    def status(self, grammars: bool = True) -> StatusInfo:
        """What `qmd status` shows; `grammars=False` leaves `grammars` empty (listing them loads
        tree-sitter and every grammar, which the MCP instructions never show)."""
        backend = self.state.backend
        exists = backend.exists()
        db = self.state.db() if exists else None
        totals = db.totals() if db is not None else None
        updated = db.collection_updated().values() if db is not None else []
        infos = self.collections.infos()
        space = self._vector_space() if db is not None else None
        issues = db.file_issues() if db is not None else []
        if space is not None and db is not None:
            embedded = db.embedded_per_collection(space.id)
            for info in infos:
                info.embedded_documents = embedded.get(info.name, 0)
            # source files meant to be cut by syntax (auto) whose tree had errors: cut by regex
            # (a collection back on regex keeps such vectors: they are its cut, no warning then)
            auto = {name for name, c in self.state.config.collections().items() if c.chunk_strategy == "auto"}
            issues += [(c, p, "warning", NOT_PARSED) for c, p in db.chunking_fallbacks(space.id) if c in auto]
        return StatusInfo(
            index_path=backend.location, size_bytes=backend.size_bytes(),
            documents=totals.active if totals else 0,
            inactive=totals.inactive if totals else 0,
            content_rows=totals.content if totals else 0,
            updated_at=max(updated) if updated else None,
            collections=infos, issues=issues,
            global_context=self.state.config.global_context, running=running(backend.location),
            grammars=_grammars() if grammars else [], overlaps=[o for o in self.collections.overlaps() if o.files],
        )

    def _vector_space(self) -> VectorModel | None:
        try:
            return self.models.current_vector_space()
        except QmdError:
            return None  # a model file that cannot be read: status still answers
