"""What the search code reads of an index (`Searchable`), and an index seen through a filter.

The hybrid pipeline runs several BM25 and vector lists, then fuses and reranks them.
Handing it the `Narrowed` view instead of the backend applies a metadata/date filter inside
each list (so before fusion and rerank, with an exact top-k) without the pipeline knowing.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Protocol

    from qmd.core.filters import Filter
    from qmd.backends.base import DocRow, Nearest, TextQuery, VectorModel

    class Searchable(Protocol):
        """The reads of an index that keyword, vector and hybrid search make (an IndexBackend has them)."""

        def bm25(self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None) -> list[tuple[int, float]]: ...

        def nearest_documents(self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None) -> list[Nearest]: ...

        def nearest_many(self, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = None) -> list[list[Nearest]]: ...

        def documents(self, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]: ...

        def docid_lengths(self, hashes: Sequence[str]) -> dict[str, int]: ...

        def vector_model(self, fingerprint: str) -> VectorModel | None: ...

        def vector_models_named(self, model: str) -> list[VectorModel]: ...

        def without_vectors(self, model: VectorModel, ids: Sequence[int]) -> set[int]: ...

        def vector_sample(self, model: VectorModel, size: int) -> list[Sequence[float]]: ...


class Narrowed:
    """`index` with `where` added to `bm25`, `nearest_documents` and `nearest_many`; the other reads as they are."""

    def __init__(self, index: Searchable, where: Filter) -> None:
        self._index = index
        self.where = where

    def bm25(self, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = None) -> list[tuple[int, float]]:
        return self._index.bm25(query, limit, collections, exclude, self._both(where))

    def nearest_documents(self, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None) -> list[Nearest]:
        return self._index.nearest_documents(model, query, limit, scope, self._both(where))

    def nearest_many(self, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = None) -> list[list[Nearest]]:
        return self._index.nearest_many(model, queries, limit, scope, self._both(where))

    def documents(self, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
        return self._index.documents(ids)

    def docid_lengths(self, hashes: Sequence[str]) -> dict[str, int]:
        return self._index.docid_lengths(hashes)

    def vector_model(self, fingerprint: str) -> VectorModel | None:
        return self._index.vector_model(fingerprint)

    def vector_models_named(self, model: str) -> list[VectorModel]:
        return self._index.vector_models_named(model)

    def without_vectors(self, model: VectorModel, ids: Sequence[int]) -> set[int]:
        return self._index.without_vectors(model, ids)

    def vector_sample(self, model: VectorModel, size: int) -> list[Sequence[float]]:
        return self._index.vector_sample(model, size)  # what a cosine means in the index, filter or not

    def _both(self, where: Filter | None) -> Filter:
        if where is None:
            return self.where
        from qmd.core.filters import Group

        return Group("and", (self.where, where))


def narrowed(index: Searchable, where: Filter | None) -> Searchable:
    """`index` itself without a filter, else the narrowed view of it."""
    return index if where is None else Narrowed(index, where)
