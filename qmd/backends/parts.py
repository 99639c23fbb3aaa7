"""What each backend's own modules provide to the shared base: the protocols `IndexBackend`
(base.py) and the SQL both backends speak (sql.py) call them through.

For the type checker only (imported under TYPE_CHECKING, so no CLI call pays for `typing`):
a backend hands its `documents`, `fulltext`, `vectors` and `cache` modules to the base, and
mypy checks each module against its protocol there, so a function missing or with another
signature is an error before anything runs. `conn` is the backend's own
connection (apsw's or psycopg's), which the base only passes through: hence `Any`.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from contextlib import AbstractContextManager
from typing import Any, Protocol

from qmd.core.filters import Filter
from qmd.backends.rows import ChunkVector, CollectionWriter, DocRow, FieldsFor, Nearest, TextQuery, VectorModel


class Connection(Protocol):
    """What apsw's and psycopg's connections share: run a statement, iterate its rows."""

    def execute(self, sql: str, params: Sequence[Any], /) -> Iterable[Sequence[Any]]: ...


class DocumentsSql(Protocol):
    """A backend's `documents` module: what it reads and writes of documents its own way (the
    rest both say alike, in sql.py)."""

    def documents(self, conn: Any, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]: ...

    def docid_lengths(self, conn: Any, hashes: Sequence[str]) -> dict[str, int]: ...

    def count_matching(self, conn: Any, where: Filter, collections: list[str] | None, only: Sequence[int] | None = None) -> int: ...

    def collection_writer(self, conn: Any, collection: str) -> AbstractContextManager[CollectionWriter]: ...

    def drop_collection(self, conn: Any, name: str) -> int: ...

    def rename_collection(self, conn: Any, old: str, new: str, fields: FieldsFor) -> None: ...


class FulltextSql(Protocol):
    """A backend's `fulltext` module: keyword search ranked by BM25."""

    def bm25(
        self, conn: Any, query: TextQuery, limit: int | None, collections: list[str] | None, exclude: set[int], where: Filter | None = ...,
    ) -> list[tuple[int, float]]: ...


class VectorsSql(Protocol):
    """A backend's `vectors` module: vector spaces, chunk vectors, nearest documents."""

    def ensure_model(self, conn: Any, fingerprint: str, model: str, dims: int) -> VectorModel: ...

    def reset_model(self, conn: Any, model: VectorModel, dims: int) -> VectorModel: ...

    def write_batch(self, conn: Any, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = ...) -> int: ...

    def set_chunkers(self, conn: Any, model: VectorModel, chunkers: Mapping[str, str]) -> None: ...

    def drop_all(self, conn: Any, model: VectorModel, hashes: Sequence[str] | None = ...) -> None: ...

    def nearest_documents(
        self, conn: Any, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = ...,
    ) -> list[Nearest]: ...

    def nearest_many(
        self, conn: Any, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = ...,
    ) -> list[list[Nearest]]: ...

    def chunk_spans(self, conn: Any, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]: ...

    def vector_sample(self, conn: Any, model: VectorModel, size: int) -> list[Sequence[float]]: ...

    def chunk_vectors(self, conn: Any, model: VectorModel, hashes: Sequence[str]) -> dict[str, tuple[str, list[ChunkVector]]]: ...


class CacheSql(Protocol):
    """A backend's `cache` module: the LLM cache, written best-effort."""

    def get_many(self, conn: Any, keys: list[str]) -> dict[str, object]: ...

    def put_many(self, conn: Any, kind: str, items: dict[str, object]) -> bool: ...

