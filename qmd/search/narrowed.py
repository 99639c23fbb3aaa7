"""An index backend seen through a filter: every keyword and vector search it runs is narrowed.

The hybrid pipeline runs several BM25 and vector lists, then fuses and reranks them.
Handing it this view instead of the backend applies a metadata/date filter inside each
list (so before fusion and rerank, with an exact top-k) without the pipeline knowing.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence

    from qmd.core.filters import Filter
    from qmd.storage.backend import IndexBackend, Nearest, TextQuery, VectorModel


class Narrowed:
    """`backend` with `where` added to `bm25` and `nearest_documents`; all else passes through."""

    def __init__(self, backend: IndexBackend, where: Filter) -> None:
        self._backend = backend
        self.where = where

    def bm25(self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None) -> list[tuple[int, float]]:
        return self._backend.bm25(query, limit, collections, exclude, self._both(where))

    def nearest_documents(self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None) -> list[Nearest]:
        return self._backend.nearest_documents(model, query, limit, scope, self._both(where))

    def _both(self, where: Filter | None) -> Filter:
        if where is None:
            return self.where
        from qmd.core.filters import Group

        return Group("and", (self.where, where))

    def __getattr__(self, name: str) -> object:
        return getattr(self._backend, name)


def narrowed(backend: IndexBackend, where: Filter | None) -> IndexBackend:
    """`backend` itself without a filter, else the narrowed view of it."""
    return backend if where is None else Narrowed(backend, where)  # type: ignore[return-value]
