"""What the index and search code need of each model role, as structural types.

The local llama.cpp classes (`Embedder`, `CrossEncoder`/`YesNoReranker`, `Generator`)
satisfy these; another implementation (a remote OpenAI-compatible endpoint, say) can
stand in by offering the same members. Importing this module loads no model runtime.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Protocol

from qmd.llm.families import Family

if TYPE_CHECKING:
    from qmd.core.query import SubQuery


class ModelDescription(Protocol):
    """Who a model is: a display name and an identity that changes when the weights do.

    The identity keys the embedding fingerprint and the rerank/expansion caches.
    """

    @property
    def name(self) -> str: ...

    @property
    def identity(self) -> str: ...


class Model(Protocol):
    """What every role has: a description, and `close()` to free what it holds."""

    @property
    def info(self) -> ModelDescription: ...

    def close(self) -> None: ...


class EmbeddingModel(Model, Protocol):
    """Text → L2-normalised vectors, with the token accounting chunking needs."""

    @property
    def family(self) -> Family:
        """Input templates and chunk sizes of the model."""
        ...

    @property
    def dims(self) -> int: ...

    @property
    def n_ctx(self) -> int:
        """Tokens one input may hold."""
        ...

    @property
    def batch_tokens(self) -> int:
        """About how many tokens of inputs one `embed` call should carry: enough to run at
        full speed, few enough that a long embed can tell its progress often."""
        ...

    def load(self) -> None:
        """Make the model ready now (a local one loads on first use otherwise)."""
        ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per already formatted input, in order (each must fit `n_ctx`)."""
        ...

    def embed_query(self, query: str) -> list[float]:
        """The vector of a search question, formatted and cut as the family wants."""
        ...

    def count_tokens(self, text: str) -> int: ...

    def fit(self, text: str, limit: int) -> str:
        """`text` cut to at most `limit` tokens."""
        ...


class RerankModel(Model, Protocol):
    """Relevance of each text to a query, in [0, 1]."""

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        """One score per document text, in order."""
        ...


class ExpansionModel(Model, Protocol):
    """A question → typed `lex:`/`vec:`/`hyde:` sub-queries."""

    @property
    def tuned(self) -> bool:
        """Trained for qmd's query expansion (else `query` expands only when asked)."""
        ...

    def expand(self, query: str) -> list[SubQuery]:
        """Sub-queries for the question `query` (a long one is cut, never an error)."""
        ...
