"""Cross-encoder reranking through llama.cpp rank pooling (BERT-family GGUFs).

Each (query, document) pair is fed as `[CLS] query [SEP] document [SEP]`; llama.cpp's rank
pooling returns classifier(tanh(pooler(h_CLS))), one logit per pair, which becomes a
score in [0, 1] through the sigmoid. (llama.cpp gives every token the segment-A token
type; cross-encoders trained with segment B for the document score slightly differently
than in transformers.)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.llm.embedder import MAX_CONTEXT, threads
from qmd.llm.gguf_info import model_info

RANK_POOLING = 4


def sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class CrossEncoder:
    """One loaded cross-encoder: `logits(query, docs)` and `scores(query, docs)`."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        self.info = model_info(path)
        if self.info.pooling != RANK_POOLING:
            raise QmdError(f"{path.name} is not a cross-encoder (no rank pooling)", "import a BertForSequenceClassification model with qmd models import")
        self.n_ctx = self.info.usable_context(MAX_CONTEXT)
        self._threads = n_threads or threads()
        self._llm = None

    @property
    def llm(self):  # type: ignore[no-untyped-def]
        if self._llm is None:
            import llama_cpp
            from llama_cpp import Llama

            self._llm = Llama(
                model_path=str(self.info.path), embedding=True, pooling_type=llama_cpp.LLAMA_POOLING_TYPE_RANK,
                n_ctx=self.n_ctx, n_batch=self.n_ctx, n_ubatch=self.n_ctx,
                n_threads=self._threads, n_threads_batch=self._threads, verbose=False,
            )
        return self._llm

    def pair_tokens(self, query: str, doc: str) -> list[int]:
        """`[CLS] query [SEP] doc [SEP]`, the document cut so the pair fits the context."""
        llm = self.llm
        q = llm.tokenize(query.encode("utf-8", "replace"), add_bos=True, special=False)  # [CLS] q [SEP]
        d = llm.tokenize(doc.encode("utf-8", "replace"), add_bos=False, special=False)
        sep = q[-1]
        room = max(self.n_ctx - len(q) - 1, 1)
        return q + d[:room] + [sep]

    def logits(self, query: str, docs: Sequence[str]) -> list[float]:
        """One raw classifier logit per document, in order, decoded several pairs per batch."""
        import llama_cpp

        llm = self.llm
        out: list[float] = []
        pending: list[list[int]] = []

        def flush() -> None:
            llm._ctx.kv_cache_clear()
            llm._batch.reset()
            for seq, tokens in enumerate(pending):
                llm._batch.add_sequence(tokens, seq, True)
            llm._ctx.decode(llm._batch)
            for seq in range(len(pending)):
                out.append(float(llama_cpp.llama_get_embeddings_seq(llm._ctx.ctx, seq)[0]))
            pending.clear()

        used = 0
        max_seqs = max(1, min(llm.context_params.n_seq_max, 64))
        for doc in docs:
            tokens = self.pair_tokens(query, doc)
            if pending and (used + len(tokens) > self.n_ctx or len(pending) >= max_seqs):
                flush()
                used = 0
            pending.append(tokens)
            used += len(tokens)
        if pending:
            flush()
        return out

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        """Relevance in [0, 1]: the sigmoid of each logit."""
        return [sigmoid(x) for x in self.logits(query, docs)]

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None


YES_NO_SYSTEM = (
    'Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
    'Note that the answer can only be "yes" or "no".'
)
YES_NO_INSTRUCT = "Given a search query, judge whether the note answers it"


class YesNoReranker:
    """A causal LM reranker in the Qwen3-Reranker form: P(yes) from the next-token logits."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        self.info = model_info(path)
        self.n_ctx = self.info.usable_context(MAX_CONTEXT)
        self._threads = n_threads or threads()
        self._llm = None
        self._ids: tuple[int, int] | None = None

    @property
    def llm(self):  # type: ignore[no-untyped-def]
        if self._llm is None:
            from llama_cpp import Llama

            self._llm = Llama(
                model_path=str(self.info.path), n_ctx=self.n_ctx, n_batch=min(512, self.n_ctx),
                n_threads=self._threads, n_threads_batch=self._threads, verbose=False, logits_all=False,
            )
            yes = self._llm.tokenize(b"yes", add_bos=False, special=False)
            no = self._llm.tokenize(b"no", add_bos=False, special=False)
            if len(yes) != 1 or len(no) != 1:
                raise QmdError(f"{self.info.path.name} cannot answer yes/no in one token", "use a cross-encoder or a Qwen3-Reranker GGUF as the rerank model")
            self._ids = (yes[0], no[0])
        return self._llm

    def prompt(self, query: str, doc: str) -> str:
        return (
            f"<|im_start|>system\n{YES_NO_SYSTEM}<|im_end|>\n<|im_start|>user\n"
            f"<Instruct>: {YES_NO_INSTRUCT}\n<Query>: {query}\n<Document>: {doc}<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        import llama_cpp

        llm = self.llm
        yes_id, no_id = self._ids  # type: ignore[misc]
        out = []
        for doc in docs:
            tokens = llm.tokenize(self.prompt(query, doc).encode("utf-8", "replace"), add_bos=True, special=True)
            tokens = tokens[-(self.n_ctx - 1):]
            llm.reset()
            llm.eval(tokens)  # only the last position's logits are computed
            logits = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            yes, no = float(logits[yes_id]), float(logits[no_id])
            out.append(sigmoid(yes - no))  # softmax over the two answers
        return out

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None


def load_reranker(path: Path, n_threads: int | None = None) -> CrossEncoder | YesNoReranker:
    """A cross-encoder when the GGUF has rank pooling, else the yes/no form."""
    info = model_info(path)
    return CrossEncoder(path, n_threads) if info.pooling == RANK_POOLING else YesNoReranker(path, n_threads)
