"""What every part of a `Store` shares: the config, the backend, and the collections."""

from __future__ import annotations

import os
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.store import refs
from qmd.storage.backend import IndexBackend
from qmd.core.config import CollectionConfig, Config
from qmd.core.contexts import contexts_for


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode) of a file, or None when it is missing: has it changed?"""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class IndexState:
    """One index's config and backend, with the collections cached per config version."""

    def __init__(self, config_path: Path, backend: IndexBackend) -> None:
        self.config_path = config_path
        self.config = Config.load(config_path)
        self.config_stat = stat_key(config_path)
        self.backend = backend
        self.writes = 0  # bumped by this Store's own writes (change_token only sees others')
        self._colls: tuple[int, dict[str, CollectionConfig]] | None = None

    def db(self, create: bool = False) -> IndexBackend:
        """The open backend; a missing index is an error naming the fix unless `create`."""
        if not create and not self.backend.exists():
            if self.config.collections():
                raise QmdError(f"the index {self.backend.location} has not been built", "run: qmd update", api_hint="call store.update() first")
            raise QmdError("no collections yet", "add one with: qmd collection add DIR --name NAME", api_hint="add one with store.add_collection(path, name=...)")
        self.backend.open(create=create)
        return self.backend

    def refresh_config(self) -> bool:
        """Re-read the config file if it changed on disk; True if it did."""
        stat = stat_key(self.config_path)
        if stat == self.config_stat:
            return False
        self.config = Config.load(self.config_path)
        self.config_stat = stat
        self._colls = None
        return True

    def save_config(self) -> None:
        from qmd.index.folders import refresh_quietly

        self._colls = None
        self.config.save()
        self.config_stat = stat_key(self.config_path)
        refresh_quietly(self.config_path)

    def collections(self) -> dict[str, CollectionConfig]:
        if self._colls is None or self._colls[0] != self.config.version:
            self._colls = (self.config.version, self.config.collections())
        return self._colls[1]

    def collection(self, name: str) -> CollectionConfig:
        colls = self.collections()
        if name not in colls:
            raise refs.unknown_collection(name, colls)
        return colls[name]

    def context(self, collection: str, path: str) -> str | None:
        """The context text of a document (global, collection and folder levels)."""
        coll = self.collections().get(collection)
        if coll is None or not coll.context:  # the common case: one answer per collection
            return self.config.global_context or None
        return contexts_for(self.config.global_context, coll, path)

    def search_scope(self, collections: list[str] | None) -> list[str] | None:
        """Collections to search; None means "everything in the index" (the fast path)."""
        colls = self.collections()
        if collections:
            return [self.collection(n).name for n in dict.fromkeys(collections)]
        wanted = [c.name for c in colls.values() if c.include_by_default]
        present = set(self.db().collection_updated())
        return None if present <= set(wanted) else wanted

    def embeddable(self, collections: list[str] | None = None) -> tuple[list[str], list[str]]:
        """(collections to embed, collections skipped because of `embed: false`)."""
        colls = self.collections()
        names = list(colls) if not collections else [self.collection(n).name for n in collections]
        return [n for n in names if colls[n].embed], [n for n in names if not colls[n].embed]

    def fs_context_target(self, target: str, cwd: str | None) -> tuple[str, str] | None:
        """(collection, sub-path) of a file-system path inside a collection, or None."""
        fs = os.path.join(cwd or os.getcwd(), os.path.expanduser(target))
        return refs.collection_of_path(self.collections(), fs)
