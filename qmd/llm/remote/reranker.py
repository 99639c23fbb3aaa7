"""Reranking through a `/rerank` endpoint (the Jina/Cohere shape llama.cpp's server speaks).

Request `{model, query, documents, top_n}`, answer `{results: [{index, relevance_score}]}`
(in any order; `top_n` asks for all of them). Jina and Cohere return probabilities in
[0, 1]; llama.cpp's server returns the classifier's raw logit. `scores: probability` takes
the numbers as they are, `scores: logit` maps them through the sigmoid, and `auto` (the
default) takes an answer whose scores all lie in [0, 1] as probabilities and maps any
other answer through the sigmoid. Pin it for a server whose logits may all fall in [0, 1].
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from qmd.core.cancel import checkpoint
from qmd.llm.models import RemoteSpec
from qmd.llm.remote.embedder import RemoteInfo
from qmd.llm.remote.http import Endpoint, EndpointError
from qmd.llm.reranker import sigmoid

__all__ = ["RemoteReranker"]


class RemoteReranker:
    """The rerank role served remotely: `scores(query, docs)` in [0, 1]."""

    def __init__(self, spec: RemoteSpec) -> None:
        self.spec = spec
        self.endpoint = Endpoint(spec, "rerank")
        self.info = RemoteInfo(spec.model, f"{spec.identity}|{spec.scores}", spec.uri)

    def scores(self, query: str, docs: Sequence[str]) -> list[float]:
        """Relevance in [0, 1] of each document, in order, `batch` documents per request."""
        out: list[float] = []
        for i in range(0, len(docs), self.spec.batch):
            checkpoint()  # between batches: a cancelled request stops here
            out += self._request(query, list(docs[i : i + self.spec.batch]))
        return out

    def _request(self, query: str, docs: list[str]) -> list[float]:
        answer = self.endpoint.post("/rerank", {"model": self.spec.model, "query": query, "documents": docs, "top_n": len(docs)})
        results = answer.get("results") if isinstance(answer, dict) else None
        raw: dict[int, float] = {}
        for item in results if isinstance(results, list) else ():
            index = item.get("index") if isinstance(item, dict) else None
            score = item.get("relevance_score", item.get("score")) if isinstance(item, dict) else None
            if isinstance(index, int) and 0 <= index < len(docs) and isinstance(score, (int, float)) and math.isfinite(score):
                raw[index] = float(score)
        if len(raw) != len(docs):
            raise EndpointError(
                f"the rerank endpoint {self.spec.uri} scored {len(raw)} of {len(docs)} documents",
                "it must answer {results: [{index, relevance_score}]} for every document (a /v1/rerank route: llama.cpp's server with --reranking)",
            )
        values = [raw[i] for i in range(len(docs))]
        mode = self.spec.scores
        if mode == "logit" or (mode == "auto" and any(not 0.0 <= v <= 1.0 for v in values)):
            return [sigmoid(v) for v in values]
        return [min(max(v, 0.0), 1.0) for v in values]

    def close(self) -> None:
        """Close the kept-alive connection."""
        self.endpoint.close()


TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.llm.roles import RerankModel

    _is_a_reranker: type[RerankModel] = RemoteReranker
