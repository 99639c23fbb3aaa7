"""Token counts for a remote embedder, which has no local tokenizer.

Chunking and `fit` need the model's token counts. The server's own tokenizer is used when
it offers one, found once per endpoint by asking, in this order:

1. llama.cpp's server: `POST /tokenize {content, add_special: false}` → `{tokens}`;
2. llama-cpp-python's server: `POST /extras/tokenize/count {input}` → `{count}` (it counts
   the special tokens, so the count of the empty text is taken off);
3. neither (Ollama, vLLM, hosted APIs): an estimate from the UTF-8 length, one token per 3
   bytes and one per digit, which over-counts ordinary prose by a third (chunks come out
   smaller than the family's budget, never larger).

A route that does not exist (404, 405, 400, 422, 501) moves on to the next; a server
that does not answer fails the count, as it would fail the embedding. Counts are kept per
text (a bounded cache), so the chunker asking twice costs one request.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable

from qmd.llm.remote.http import Endpoint, EndpointError

MISSING_ROUTE = frozenset({400, 404, 405, 422, 501})
CACHE_TEXTS = 4096


def estimate_tokens(text: str) -> int:
    """A conservative token count without a tokenizer: ⌈(UTF-8 bytes + 2 × digits) / 3⌉."""
    digits = sum(1 for ch in text if ch.isdigit())
    return -(-(len(text.encode("utf-8", "surrogatepass")) + 2 * digits) // 3)


class RemoteTokenizer:
    """Counts tokens through the endpoint's tokenizer route, or estimates them (see the module doc)."""

    def __init__(self, endpoint: Endpoint) -> None:
        self.endpoint = endpoint
        self.kind: str | None = None  # llama.cpp | llama-cpp-python | estimate, once known
        self._count: Callable[[str], int] | None = None
        self._cache: OrderedDict[str, int] = OrderedDict()

    def _llama_cpp(self, text: str) -> int:
        answer = self.endpoint.post("/tokenize", {"content": text, "add_special": False}, root=True)
        tokens = answer.get("tokens") if isinstance(answer, dict) else None
        if not isinstance(tokens, list):
            raise EndpointError(f"{self.endpoint.where}: /tokenize answered without tokens", None, 422)
        return len(tokens)

    def _llama_cpp_python(self, text: str) -> int:
        answer = self.endpoint.post("/extras/tokenize/count", {"input": text}, root=True)
        count = answer.get("count") if isinstance(answer, dict) else None
        if not isinstance(count, int):
            raise EndpointError(f"{self.endpoint.where}: /extras/tokenize/count answered without a count", None, 422)
        return count

    def _detect(self) -> Callable[[str], int]:
        for kind, count in (("llama.cpp", self._llama_cpp), ("llama-cpp-python", self._llama_cpp_python)):
            try:
                specials = count("")
            except EndpointError as exc:
                if exc.status in MISSING_ROUTE:
                    continue
                raise
            self.kind = kind
            if not specials:
                return count

            def without_specials(text: str, count: Callable[[str], int] = count, specials: int = specials) -> int:
                return max(count(text) - specials, 0)

            return without_specials
        self.kind = "estimate"
        return estimate_tokens

    def count(self, text: str) -> int:
        """Tokens of `text` without special tokens (from the server, else the estimate)."""
        cached = self._cache.get(text)
        if cached is not None:
            self._cache.move_to_end(text)
            return cached
        if self._count is None:
            self._count = self._detect()
        n = self._count(text)
        self._cache[text] = n
        if len(self._cache) > CACHE_TEXTS:
            self._cache.popitem(last=False)
        return n

    def fit(self, text: str, limit: int) -> str:
        """`text` cut to at most `limit` tokens: no request when its bytes alone are within the limit."""
        if len(text.encode("utf-8", "surrogatepass")) <= limit:  # a token holds at least one byte
            return text
        n = self.count(text)
        while n > limit and text:
            # Strictly shorter each round, aiming just under the limit by this text's density.
            text = text[: max(min(int(len(text) * limit / n * 0.97), len(text) - 1), 0)]
            n = self.count(text)
        return text
