"""A read view of one index that sees only some of its collections (a scoped token's).

`scoped_view(store, names)` is a `Store` whose config seems to hold only `names`: search,
vsearch, query, get, multi-get and ls treat every other collection as absent, exactly as
they treat a collection removed from the config by hand (rows of collections not in the
config are never served: qmd/store/refs.py `served`). So a docid, `qmd://` path, glob or
comma list naming another collection finds nothing, the did-you-mean suggestions and the
"ambiguous docid" listings come from the visible collections only, and a query without
`collections` searches the visible collections that are included by default (all visible
ones when none is).

The view shares the store's backend, config and loaded models (and so its thread rules):
it is for reading, and is never closed on its own (close the store). Index-wide numbers
(`status().documents`, `document_count()`, BM25 statistics) stay the index's; callers that
must not reveal them sum the visible collections (qmd/serve/service.py).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence

from qmd.core.config import CollectionConfig, Config
from qmd.store.state import IndexState
from qmd.store.store import Store


class ScopedState(IndexState):
    """`base` (an IndexState) with only the collections in `names` visible; blind: a
    reference naming no visible document gets one answer, and the server's disk is never
    looked at for it (qmd/store/refs.py `resolve`)."""

    blind = True

    def __init__(self, base: IndexState, names: frozenset[str]) -> None:  # no super().__init__: everything is the base's
        self.base = base
        self.names = names
        self.config_path = base.config_path
        self.backend = base.backend
        self._visible: tuple[int, dict[str, CollectionConfig]] | None = None

    @property
    def config(self) -> Config:
        return self.base.config

    @config.setter
    def config(self, value: Config) -> None:
        self.base.config = value

    @property
    def writes(self) -> int:
        return self.base.writes

    @writes.setter
    def writes(self, value: int) -> None:
        self.base.writes = value

    def refresh_config(self) -> bool:
        return self.base.refresh_config()

    def save_config(self) -> None:
        raise RuntimeError("a scoped view of an index is read-only")

    def collections(self) -> dict[str, CollectionConfig]:
        version = self.base.config.version
        if self._visible is None or self._visible[0] != version:
            self._visible = (version, {n: c for n, c in self.base.collections().items() if n in self.names})
        return self._visible[1]

    def search_scope(self, collections: Sequence[str] | None) -> list[str] | None:
        """The visible collections to search: never None ("everything") unless every
        collection in the index is visible, never empty when some collection is."""
        scope = super().search_scope(collections)
        if scope is not None and not scope and not collections:
            scope = list(self.collections())
        return scope


def scoped_view(store: Store, names: Iterable[str]) -> Store:
    """`store` as seen by a reader of `names` only (see the module docstring)."""
    view = object.__new__(Store)
    view.index_path, view.config_path, view.backend = store.index_path, store.config_path, store.backend
    view._state = ScopedState(store._state, frozenset(names))
    view.__dict__["_models"] = store._models  # one set of loaded models per process
    return view
