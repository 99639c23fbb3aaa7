"""Text → vectors with a GGUF embedding model through llama.cpp (imported lazily)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.llm.families import Family, family_for
from qmd.llm.gguf_info import ModelInfo, model_info

MAX_CONTEXT = 2048  # enough for 900-token chunks; never above the model's training context


def threads() -> int:
    """`QMD_THREADS`, else every core."""
    value = os.environ.get("QMD_THREADS", "")
    return max(1, int(value)) if value.isdigit() else max(1, os.cpu_count() or 1)


class Embedder:
    """One loaded embedding model: count tokens, embed documents and queries (L2-normalised)."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        self.info: ModelInfo = model_info(path)
        self.family: Family = family_for(self.info)
        if self.info.pooling == 4:
            raise QmdError(f"{path.name} is a reranker, not an embedding model", "set the embed model to an embedding GGUF (qmd status shows the roles)")
        self.n_ctx = self.info.usable_context(MAX_CONTEXT)
        self._threads = n_threads or threads()
        self._llm = None

    @property
    def llm(self):  # type: ignore[no-untyped-def]
        if self._llm is None:
            try:
                from llama_cpp import Llama
            except ImportError as exc:  # pragma: no cover - depends on the install
                raise QmdError(f"llama-cpp-python is not installed ({exc})", "re-run ./install.sh") from exc
            try:
                self._llm = Llama(
                    model_path=str(self.info.path),
                    embedding=True,
                    n_ctx=self.n_ctx,
                    n_batch=self.n_ctx,
                    n_ubatch=self.n_ctx,
                    n_threads=self._threads,
                    n_threads_batch=self._threads,
                    verbose=False,
                )
            except (ValueError, RuntimeError, OSError) as exc:
                raise QmdError(f"llama.cpp could not load {self.info.path}: {exc}", "check the file (qmd doctor) or import/download it again") from exc
        return self._llm

    @property
    def dims(self) -> int:
        return int(self.info.embedding_length or self.llm.n_embd())

    def tokens(self, text: str) -> list[int]:
        return self.llm.tokenize(self.family.normalise(text).encode("utf-8", "replace"), add_bos=False, special=False)

    def count_tokens(self, text: str) -> int:
        return len(self.tokens(text))

    def fit(self, text: str, limit: int) -> str:
        """`text` cut to at most `limit` tokens (embed() would truncate silently)."""
        toks = self.tokens(text)
        if len(toks) <= limit:
            return text
        return self.llm.detokenize(toks[:limit]).decode("utf-8", "replace")

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalised vectors for already formatted inputs (each must fit the context)."""
        if not texts:
            return []
        inputs = [self.family.normalise(t) for t in texts]
        vectors = self.llm.embed(inputs, normalize=True, truncate=False)
        return [list(v) for v in vectors]

    def embed_query(self, query: str) -> list[float]:
        text = self.fit(self.family.query(query), self.n_ctx - 4)
        return self.embed([text])[0]

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
