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
from typing import TYPE_CHECKING

from qmd.core.cancel import checkpoint
from qmd.core.errors import QmdError
from qmd.llm.gguf_info import RANK_POOLING, ModelInfo, model_info
from qmd.llm.runtime import LlamaModel, LoadOptions, llama_cpp_module

if TYPE_CHECKING:
    from llama_cpp import Llama

__all__ = ["CrossEncoder", "YesNoReranker", "load_reranker", "sigmoid"]


def sigmoid(x: float) -> float:
    """The logistic function, without overflow for large |x|."""
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


class CrossEncoder(LlamaModel):
    """One loaded cross-encoder: `logits(query, docs)` and `scores(query, docs)`."""

    def __init__(self, path: Path, n_threads: int | None = None, *, info: ModelInfo | None = None) -> None:
        info = info or model_info(path)
        if info.pooling != RANK_POOLING:
            raise QmdError(f"{path.name} is not a cross-encoder (no rank pooling)", "import a BertForSequenceClassification model with qmd models import")
        super().__init__(path, n_threads, info=info)

    def load_options(self) -> LoadOptions:
        """Rank pooling, one batch holding a whole context."""
        return {"embedding": True, "pooling_type": int(llama_cpp_module().LLAMA_POOLING_TYPE_RANK), "n_batch": self.n_ctx, "n_ubatch": self.n_ctx}

    def pair_tokens(self, query: str, doc: str) -> list[int]:
        """`[CLS] query [SEP] doc [SEP]`, the document cut so the pair fits the context."""
        q = self.tokenize(query, add_bos=True)  # [CLS] q [SEP]
        d = self.tokenize(doc)
        sep = q[-1]
        room = max(self.n_ctx - len(q) - 1, 1)
        return q + d[:room] + [sep]

    def logits(self, query: str, docs: Sequence[str]) -> list[float]:
        """One raw classifier logit per document, in order, decoded several pairs per batch."""
        llm = self.llm
        import llama_cpp  # loaded by `llm`

        out: list[float] = []
        pending: list[list[int]] = []

        def flush() -> None:
            checkpoint()  # between batches: a cancelled request stops here
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


YES_NO_SYSTEM = (
    'Judge whether the Document meets the requirements based on the Query and the Instruct provided. '
    'Note that the answer can only be "yes" or "no".'
)
YES_NO_INSTRUCT = "Given a search query, judge whether the note answers it"


class YesNoReranker(LlamaModel):
    """A causal LM reranker in the Qwen3-Reranker form: P(yes) from the next-token logits."""

    def __init__(self, path: Path, n_threads: int | None = None, *, info: ModelInfo | None = None) -> None:
        super().__init__(path, n_threads, info=info)
        self._ids = (0, 0)  # the "yes" and "no" token ids, once loaded

    def load_options(self) -> LoadOptions:
        """A plain causal LM; only the last position's logits are needed."""
        return {"n_batch": min(512, self.n_ctx), "logits_all": False}

    def on_load(self, llm: Llama) -> None:
        """Find the one-token answers, or refuse the model."""
        yes = llm.tokenize(b"yes", add_bos=False, special=False)
        no = llm.tokenize(b"no", add_bos=False, special=False)
        if len(yes) != 1 or len(no) != 1:
            raise QmdError(f"{self.info.path.name} cannot answer yes/no in one token", "use a cross-encoder or a Qwen3-Reranker GGUF as the rerank model")
        self._ids = (yes[0], no[0])

    def prompt(self, query: str, doc: str) -> str:
        """The Qwen3-Reranker judging prompt for one pair."""
        return (
            f"<|im_start|>system\n{YES_NO_SYSTEM}<|im_end|>\n<|im_start|>user\n"
            f"<Instruct>: {YES_NO_INSTRUCT}\n<Query>: {query}\n<Document>: {doc}<|im_end|>\n"
            "<|im_start|>assistant\n<think>\n\n</think>\n\n"
        )

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        """P(yes) against P(no) for each document, in [0, 1]."""
        llm = self.llm
        import llama_cpp  # loaded by `llm`

        yes_id, no_id = self._ids
        out = []
        for doc in docs:
            checkpoint()  # one pair per step: a cancelled request stops here
            tokens = self.tokenize(self.prompt(query, doc), add_bos=True, special=True)
            tokens = tokens[-(self.n_ctx - 1):]
            llm.reset()
            llm.eval(tokens)  # only the last position's logits are computed
            logits = llama_cpp.llama_get_logits_ith(llm._ctx.ctx, -1)
            yes, no = float(logits[yes_id]), float(logits[no_id])
            out.append(sigmoid(yes - no))  # softmax over the two answers
        return out


def load_reranker(path: Path, n_threads: int | None = None) -> CrossEncoder | YesNoReranker:
    """A cross-encoder when the GGUF has rank pooling, else the yes/no form."""
    info = model_info(path)
    return CrossEncoder(path, n_threads, info=info) if info.pooling == RANK_POOLING else YesNoReranker(path, n_threads, info=info)


if TYPE_CHECKING:
    from qmd.llm.roles import RerankModel

    _cross_encoder_is_a_reranker: type[RerankModel] = CrossEncoder
    _yes_no_is_a_reranker: type[RerankModel] = YesNoReranker
