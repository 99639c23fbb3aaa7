"""What every part of a `Store` shares: the config, the backend, and the collections."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.backends.base import IndexBackend
from qmd.core.config import CollectionConfig, Config
from qmd.core.contexts import contexts_for

CONFIG_LOCK_S = 30.0  # how long a config change waits for another process's (each holds it for one read and one write)

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from qmd.core.trust import Decision


def stat_key(path: Path) -> tuple[int, int, int] | None:
    """(mtime, size, inode) of a file, or None when it is missing: has it changed?"""
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


class IndexState:
    """One index's config and backend, with the collections cached per config version."""

    blind = False  # a scoped reader's view: references never consult the file system (qmd/store/refs.py)

    def __init__(self, config_path: Path, backend: IndexBackend, config: Config | None = None) -> None:
        self.config_path = config_path
        self.config = config if config is not None else Config.load(config_path)
        self.config_stat = stat_key(config_path)
        self._trust: Decision | None = None
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

    def storage_key(self) -> tuple[object, ...]:
        """What decides where the index lives besides the paths (see `Store.storage_moved`)."""
        from qmd.core.paths import trust_file_path

        return (stat_key(self.config_path), stat_key(trust_file_path()), os.environ.get("QMD_DATABASE_URL"))

    def refresh_config(self) -> bool:
        """Re-read the config file if it changed on disk, and reconnect if the index was
        replaced under its path (`IndexBackend.follow`); True if either happened."""
        followed = self.backend.follow()
        return self.read_config_again() or followed

    def read_config_again(self, force: bool = False) -> bool:
        """Re-read the config file if it changed on disk (or `force`); True if it was read.
        Its stat (mtime, size, inode) can miss a change: two saves within one tick of the file
        system's clock, of the same size, the second taking the inode the first freed. A
        change to the config (`editing_config`) forces the read; `update` trusts the stat (a
        collection added or removed changes the size)."""
        stat = stat_key(self.config_path)
        if stat == self.config_stat and not force:
            return False
        self.config = Config.load(self.config_path)
        self.config_stat = stat
        self._colls = None
        self._trust = None
        return True

    @contextmanager
    def editing_config(self) -> Iterator[Config]:
        """One change to the config, made to the file as it is now and saved when the block
        ends. Under a lock on the config's folder (flock, no file left there), the config is
        read again if another process changed it, the block changes it, and it is saved: four
        `qmd collection add` at once each saved the copy it had read, and the config kept one
        to three of the four collections. A block that raises leaves the file as it was (the
        copy in memory is read again)."""
        from qmd.core.locks import lock_folder

        held = ExitStack()
        try:
            self.config_path.parent.mkdir(parents=True, exist_ok=True)  # the first changes of a fresh home race to make it
            held.enter_context(lock_folder(self.config_path.parent, CONFIG_LOCK_S))
        except TimeoutError:
            raise QmdError(f"the config {self.config_path} is being changed by another qmd process", "try again in a moment") from None
        except OSError:
            pass  # a folder this user cannot make or open: the save names the fix
        with held:
            self.read_config_again(force=True)
            try:
                yield self.config
                self.save_config()
            except BaseException:
                self.read_config_again(force=True)
                raise

    def save_config(self) -> None:
        from qmd.index.folder_cache import refresh_quietly

        self._colls = None
        self._trust = None
        self.config.save()
        self.config_stat = stat_key(self.config_path)
        refresh_quietly(self.config_path)

    @property
    def local(self) -> bool:
        """A project-local config (`.qmd/index.yml`): the trust gate applies (checked without importing it)."""
        from qmd.core.paths import is_local_config

        return is_local_config(self.config_path)

    @property
    def trust(self) -> Decision:
        """The trust gate of this config (qmd/core/trust.py): a project-local config that is
        not approved has its update commands, outside collections and custom models skipped."""
        if self._trust is None:
            from qmd.core.trust import decide

            self._trust = decide(self.config_path, self.config.raw)
        return self._trust

    def collections(self) -> dict[str, CollectionConfig]:
        if self._colls is None or self._colls[0] != self.config.version:
            colls = self.config.collections()
            if self.local:
                from qmd.core.indexes import gated  # a project-local config only: the search path of the others stays lean

                self._trust = None  # the config may have changed in memory
                colls = gated(self.config_path, colls, self.trust)
            self._colls = (self.config.version, colls)
        return self._colls[1]

    def models_config(self) -> dict[str, object] | None:
        """The config's `models:` section, without the custom models of an untrusted local config."""
        models = self.config.raw.get("models")
        if not isinstance(models, dict):
            return None
        if self.local and self.trust.skipped:
            custom = {slot for slot, _ in self.trust.gated.models}
            return {role: spec for role, spec in models.items() if role not in custom}
        return models

    def collection(self, name: str) -> CollectionConfig:
        colls = self.collections()
        if name not in colls:
            from qmd.store.refs import unknown_collection

            raise unknown_collection(name, colls)
        return colls[name]

    def editable(self, name: str) -> CollectionConfig:
        """Collection `name` as the config file has it (no path resolved, nothing gated out):
        what a change made through `config.set_collection` starts from."""
        colls = self.config.collections()
        if name not in colls:
            from qmd.store.refs import unknown_collection

            raise unknown_collection(name, colls)
        return colls[name]

    def context(self, collection: str, path: str) -> str | None:
        """The context text of a document (global, collection and folder levels)."""
        coll = self.collections().get(collection)
        if coll is None or not coll.context:  # the common case: one answer per collection
            return self.config.global_context or None
        return contexts_for(self.config.global_context, coll, path)

    def search_scope(self, collections: Sequence[str] | None) -> list[str] | None:
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
        from qmd.store.refs import collection_of_path

        fs = os.path.join(cwd or os.getcwd(), os.path.expanduser(target))
        return collection_of_path(self.collections(), fs)
