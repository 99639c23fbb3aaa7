"""Text → vectors with a GGUF embedding model through llama.cpp (imported lazily)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from qmd.core.errors import QmdError
from qmd.llm.families import Family, family_for
from qmd.llm.gguf_info import RANK_POOLING, model_info
from qmd.llm.runtime import LlamaModel, LoadOptions, llama_cpp_module

__all__ = ["Embedder"]

SHORT_TOKENS = 96  # inputs (at most 8, each this long or shorter) embedded on one thread (LlamaModel.run_on)


class Embedder(LlamaModel):
    """One loaded embedding model: count tokens, embed documents and queries (L2-normalised)."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        info = model_info(path)
        if info.pooling == RANK_POOLING:
            raise QmdError(f"{path.name} is a reranker, not an embedding model", "set the embed model to an embedding GGUF (qmd status shows the roles)")
        super().__init__(path, n_threads, info=info)
        self.family: Family = family_for(self.info)
        self._tokens_llm: Llama | None = None  # pooling NONE, for late chunking (token_vectors)

    def load_options(self) -> LoadOptions:
        """Embedding mode, one batch holding a whole context (embed() truncates to the batch)."""
        return {"embedding": True, "n_batch": self.n_ctx, "n_ubatch": self.n_ctx}

    @property
    def dims(self) -> int:
        """Vector length (from the header, else from the loaded model)."""
        return int(self.info.embedding_length or self.llm.n_embd())

    @property
    def batch_tokens(self) -> int:
        """Two contexts: llama.cpp evaluates a context's worth of inputs at a time."""
        return 2 * self.n_ctx

    def tokens(self, text: str) -> list[int]:
        """Token ids of `text` as the model sees it (no special tokens)."""
        return self.tokenize(self.family.normalise(text))

    def count_tokens(self, text: str) -> int:
        """How many tokens `text` takes (without special tokens)."""
        return len(self.tokens(text))

    def fit(self, text: str, limit: int) -> str:
        """`text` cut to at most `limit` tokens (embed() would truncate silently)."""
        toks = self.tokens(text)
        if len(toks) <= limit:
            return text
        return self.detokenize(toks[:limit])

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Normalised vectors for already formatted inputs (each must fit the context).

        Search questions (each at most SHORT_TOKENS, a few of them) are evaluated on one
        thread, documents on all (LlamaModel.run_on)."""
        if not texts:
            return []
        inputs = [self.family.normalise(t) for t in texts]
        sizes = [len(self.tokenize(t)) for t in inputs] if len(inputs) <= 8 else [SHORT_TOKENS + 1]
        self.run_on(1 if max(sizes) <= SHORT_TOKENS and sum(sizes) <= 4 * SHORT_TOKENS else 0)
        vectors = [list(v) for v in self.llm.embed(inputs, normalize=True, truncate=False)]
        for text, vector in zip(texts, vectors):
            if not all(math.isfinite(x) for x in vector):
                raise QmdError(
                    f"the embed model {self.info.name} returned NaN or infinite values (for {text[:40]!r}); nothing was stored",
                    f"the model file {self.info.path} is broken: import or download it again, then: qmd embed",
                )
        return vectors

    def special_tokens(self) -> tuple[list[int], list[int]]:
        """The special tokens the model puts before and after an input ([CLS]/[SEP], <bos>/<eos>)."""
        plain = self.tokenize("x")
        full = self.tokenize("x", add_bos=True)
        at = next((i for i in range(len(full)) if full[i : i + len(plain)] == plain), 0)
        return full[:at], full[at + len(plain) :]

    def token_vectors(self, tokens: list[int]) -> list[list[float]]:
        """Every token's output vector (not normalised) of one pass over `tokens` (specials
        included, at most n_ctx): late chunking pools them per chunk (qmd/index/late_chunks.py).
        A second context without pooling, loaded on first use (the weights are shared by mmap)."""
        if self._tokens_llm is None:
            llama_cpp = llama_cpp_module()
            from llama_cpp import Llama

            opts = self.load_options()
            self._tokens_llm = Llama(
                model_path=str(self.info.path), n_ctx=self.n_ctx, n_threads=self._threads, n_threads_batch=self._threads,
                verbose=False, embedding=True, n_batch=opts["n_batch"], n_ubatch=opts["n_ubatch"], pooling_type=llama_cpp.LLAMA_POOLING_TYPE_NONE,
            )
        llm = self._tokens_llm
        tokens = tokens[: self.n_ctx]
        llm._batch.reset()  # Llama.embed() takes text only: the same decode, from token ids
        llm._batch.add_sequence(tokens, 0, True)
        llm._ctx.kv_cache_clear()
        llm._ctx.decode(llm._batch)
        llm._batch.reset()
        ptr = llama_cpp_module().llama_get_embeddings(llm._ctx.ctx)
        n = llm.n_embd()
        return [ptr[i * n : (i + 1) * n] for i in range(len(tokens))]

    def close(self) -> None:
        """Free the loaded model and the token-output context, if any."""
        if self._tokens_llm is not None:
            self._tokens_llm.close()
            self._tokens_llm = None
        super().close()

    def embed_query(self, query: str) -> list[float]:
        """The vector of a search question in the family's query format."""
        text = self.fit(self.family.query(query), self.n_ctx - 4)
        return self.embed([text])[0]


if TYPE_CHECKING:
    from llama_cpp import Llama

    from qmd.llm.roles import EmbeddingModel

    _is_an_embedding_model: type[EmbeddingModel] = Embedder
