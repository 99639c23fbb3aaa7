"""Query expansion through an OpenAI-compatible `/chat/completions` or `/completions` endpoint.

The prompt and the parser are the local generator's; the GBNF grammar that admits only
`lex:`/`vec:`/`hyde:` lines goes in the body as `grammar` (llama.cpp's server and
llama-cpp-python take it). A server that refuses the field (400/422) is asked again
without it, once per process: the parser keeps only well-formed lines either way.
Decoding is greedy (temperature 0), so a cached expansion is the expansion.
"""

from __future__ import annotations

from qmd.core.cancel import checkpoint
from qmd.core.query import SubQuery
from qmd.llm.generator import GRAMMAR, INSTRUCTIONS, MAX_NEW_TOKENS, parse_expansion
from qmd.llm.models import RemoteSpec
from qmd.llm.remote.embedder import RemoteInfo
from qmd.llm.remote.http import Endpoint, EndpointError

__all__ = ["RemoteGenerator"]

MAX_QUERY_CHARS = 2000  # a long question is cut, never an error


class RemoteGenerator:
    """The generate role served remotely: `expand(question)` → typed sub-queries."""

    def __init__(self, spec: RemoteSpec) -> None:
        self.spec = spec
        self.endpoint = Endpoint(spec, "generate")
        self.info = RemoteInfo(spec.model, f"{spec.identity}|{spec.api}", spec.uri)
        self.grammar = True  # False once the server has refused the field

    @property
    def tuned(self) -> bool:
        """Trained for qmd's expansion: `tuned:` in the config, else "query-expansion" in the name."""
        return self.spec.tuned if self.spec.tuned is not None else "query-expansion" in self.spec.model.lower()

    def body(self, query: str) -> tuple[str, dict[str, object]]:
        """The route and request body for `query`."""
        text = INSTRUCTIONS.format(query=query[:MAX_QUERY_CHARS])
        common: dict[str, object] = {"model": self.spec.model, "max_tokens": MAX_NEW_TOKENS, "temperature": 0.0}
        if self.grammar:
            common["grammar"] = GRAMMAR
        if self.spec.api == "chat":
            return "/chat/completions", {**common, "messages": [{"role": "user", "content": text}]}
        return "/completions", {**common, "prompt": text + "\n"}

    def expand(self, query: str) -> list[SubQuery]:
        """Typed sub-queries for `query`."""
        checkpoint()
        route, body = self.body(query)
        try:
            answer = self.endpoint.post(route, body)
        except EndpointError as exc:
            if not self.grammar or exc.status not in (400, 422):
                raise
            self.grammar = False  # e.g. OpenAI's own API: unknown parameter 'grammar'
            route, body = self.body(query)
            answer = self.endpoint.post(route, body)
        checkpoint()
        return parse_expansion(self._text(answer))

    def _text(self, answer: object) -> str:
        choices = answer.get("choices") if isinstance(answer, dict) else None
        first = choices[0] if isinstance(choices, list) and choices and isinstance(choices[0], dict) else None
        if first is None:
            raise EndpointError(f"the generate endpoint {self.spec.uri} answered without choices", "is it a text-generation model?")
        message = first.get("message")
        text = message.get("content") if isinstance(message, dict) else first.get("text")
        return text if isinstance(text, str) else ""

    def close(self) -> None:
        """Close the kept-alive connection."""
        self.endpoint.close()


TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.llm.roles import ExpansionModel

    _is_an_expansion_model: type[ExpansionModel] = RemoteGenerator
