"""Query expansion with a generative GGUF model, constrained by a GBNF grammar.

The grammar only admits `lex: …`, `vec: …` and `hyde: …` lines, so whatever a model
writes (even a tiny or untuned one) parses. Decoding is greedy, so a cached expansion is
the expansion.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from qmd.core.cancel import cancelled, checkpoint
from qmd.llm.runtime import LlamaModel, LoadOptions
from qmd.core.query import SubQuery

if TYPE_CHECKING:
    from llama_cpp import Llama, LlamaGrammar

GRAMMAR = r"""
root ::= line line? line? line? line? line?
line ::= kind ": " text "\n"
kind ::= "lex" | "vec" | "hyde"
text ::= [^\n\r: ] [^\n\r]{0,150}
"""

INSTRUCTIONS = (
    "Expand the search query for a personal notes search engine. Write two 'lex:' lines with "
    "keywords, two 'vec:' lines that rephrase the question, and one 'hyde:' line that is a short "
    "answer as it could appear in a note.\nQuery: {query}\n"
)
MAX_NEW_TOKENS = 220


def parse_expansion(text: str) -> list[SubQuery]:
    """The distinct `lex:`/`vec:`/`hyde:` lines of a model's output, in order."""
    out: list[SubQuery] = []
    for line in text.splitlines():
        kind, sep, value = line.partition(":")
        kind, value = kind.strip().lower(), value.strip()
        if sep and kind in ("lex", "vec", "hyde") and value and SubQuery(kind, value) not in out:
            out.append(SubQuery(kind, value))
    return out


class Generator(LlamaModel):
    """One loaded generate model: `expand(question)` → typed sub-queries."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        super().__init__(path, n_threads)
        self._grammar: LlamaGrammar | None = None

    def load_options(self) -> LoadOptions:
        """A plain causal LM."""
        return {"n_batch": min(512, self.n_ctx)}

    def on_load(self, llm: Llama) -> None:
        """Compile the expansion grammar."""
        from llama_cpp import LlamaGrammar

        self._grammar = LlamaGrammar.from_string(GRAMMAR, verbose=False)

    @property
    def tuned(self) -> bool:
        """Trained for qmd's query expansion (the default model, or a GGUF marked `qmd.expansion`).

        A general-purpose small model writes plausible lines that pull unrelated documents
        in: Gemma-3-270M lowered Cranfield nDCG@10 and the deep-research hit@1 (docs/ranking.md,
        Query expansion), so `query` expands with such a model only when asked (`--expand`).
        """
        mark = str(self.info.meta.get("qmd.expansion", "")).lower() in ("true", "1", "yes")
        return mark or "query-expansion" in f"{self.info.name} {self.info.path.name}".lower()

    def prompt(self, query: str) -> str:
        """The expansion prompt (in the chat format when the model has a ChatML template)."""
        text = INSTRUCTIONS.format(query=query)
        if "<|im_start|>" in str(self.info.meta.get("tokenizer.chat_template", "")):
            return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        return text + "\n"

    def expand(self, query: str) -> list[SubQuery]:
        """Typed sub-queries for `query` (greedy, grammar-constrained; a long question is cut)."""
        llm = self.llm
        room = self.n_ctx - MAX_NEW_TOKENS - len(self.tokenize(self.prompt(""), add_bos=True)) - 8
        tokens = self.tokenize(query)
        if len(tokens) > room:  # a long question is cut, never an error
            query = self.detokenize(tokens[: max(room, 1)])
        # A cancelled request stops generating at the next token, then raises here.
        import llama_cpp  # loaded by `llm`

        stop = llama_cpp.StoppingCriteriaList([lambda _ids, _logits: cancelled()])
        out = llm.create_completion(self.prompt(query), max_tokens=MAX_NEW_TOKENS, temperature=0.0, grammar=self._grammar, stopping_criteria=stop)
        checkpoint()
        if not isinstance(out, dict):  # a stream: never, without stream=True
            raise TypeError("create_completion returned a stream")
        return parse_expansion(out["choices"][0]["text"])


if TYPE_CHECKING:
    from qmd.llm.roles import ExpansionModel

    _is_an_expansion_model: type[ExpansionModel] = Generator
