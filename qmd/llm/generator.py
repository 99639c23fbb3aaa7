"""Query expansion with a generative GGUF model, constrained by a GBNF grammar.

The grammar only admits `lex: …`, `vec: …` and `hyde: …` lines, so whatever a model
writes (even a tiny or untuned one) parses. Decoding is greedy, so a cached expansion is
the expansion.
"""

from __future__ import annotations

from pathlib import Path

from qmd.search.typed import SubQuery
from qmd.llm.embedder import MAX_CONTEXT, threads
from qmd.llm.gguf_info import model_info

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
    out: list[SubQuery] = []
    for line in text.splitlines():
        kind, sep, value = line.partition(":")
        kind, value = kind.strip().lower(), value.strip()
        if sep and kind in ("lex", "vec", "hyde") and value and SubQuery(kind, value) not in out:
            out.append(SubQuery(kind, value))
    return out


class Generator:
    """One loaded generate model: `expand(question)` → typed sub-queries."""

    def __init__(self, path: Path, n_threads: int | None = None) -> None:
        self.info = model_info(path)
        self.n_ctx = self.info.usable_context(MAX_CONTEXT)
        self._threads = n_threads or threads()
        self._llm = None
        self._grammar = None

    @property
    def llm(self):  # type: ignore[no-untyped-def]
        if self._llm is None:
            from llama_cpp import Llama, LlamaGrammar

            self._llm = Llama(
                model_path=str(self.info.path), n_ctx=self.n_ctx, n_batch=min(512, self.n_ctx),
                n_threads=self._threads, n_threads_batch=self._threads, verbose=False,
            )
            self._grammar = LlamaGrammar.from_string(GRAMMAR, verbose=False)
        return self._llm

    @property
    def tuned(self) -> bool:
        """Trained for qmd's query expansion (the default model, or a GGUF marked `qmd.expansion`).

        A general-purpose small model writes plausible lines that pull unrelated documents
        in: Gemma-3-270M lowered Cranfield nDCG@10 and the deep-research hit@1 (README,
        Performance), so `query` expands with such a model only when asked (`--expand`).
        """
        mark = str(self.info.meta.get("qmd.expansion", "")).lower() in ("true", "1", "yes")
        return mark or "query-expansion" in f"{self.info.name} {self.info.path.name}".lower()

    def prompt(self, query: str) -> str:
        text = INSTRUCTIONS.format(query=query)
        if "<|im_start|>" in str(self.info.meta.get("tokenizer.chat_template", "")):
            return f"<|im_start|>user\n{text}<|im_end|>\n<|im_start|>assistant\n"
        return text + "\n"

    def expand(self, query: str) -> list[SubQuery]:
        llm = self.llm
        room = self.n_ctx - MAX_NEW_TOKENS - len(llm.tokenize(self.prompt("").encode(), add_bos=True)) - 8
        tokens = llm.tokenize(query.encode("utf-8", "replace"), add_bos=False)
        if len(tokens) > room:  # a long question is cut, never an error
            query = llm.detokenize(tokens[: max(room, 1)]).decode("utf-8", "replace")
        out = llm.create_completion(self.prompt(query), max_tokens=MAX_NEW_TOKENS, temperature=0.0, grammar=self._grammar)
        return parse_expansion(out["choices"][0]["text"])

    def close(self) -> None:
        if self._llm is not None:
            self._llm.close()
            self._llm = None
