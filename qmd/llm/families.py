"""How each embedding model family wants its input, and how big its chunks may be (design §7)."""

from __future__ import annotations

import json
from dataclasses import dataclass

from qmd.llm.gguf_info import ModelInfo


@dataclass(frozen=True)
class Family:
    """Input formats and chunk sizes for one family of embedding models."""

    name: str
    query_template: str  # {q}
    document_template: str  # {title}, {chunk}
    chunk_tokens: int
    overlap_tokens: int

    def query(self, text: str) -> str:
        return self.query_template.format(q=text)

    def document(self, title: str, chunk: str) -> str:
        return self.document_template.format(title=title, chunk=chunk)

    def normalise(self, text: str) -> str:
        """Text as the model's tokenizer should see it.

        BERT (WordPiece) only: llama.cpp's WPM vocabulary marks word starts with U+2581,
        so a literal U+2581 in the text would split a word that BERT sees as one unknown
        word; U+2582 (also outside the vocabulary) reproduces BERT's [UNK].
        """
        return text.replace("\u2581", "\u2582") if self.name == "bert" else text

    @property
    def spec(self) -> str:
        """The part of the embedding fingerprint that this family decides."""
        return json.dumps([self.name, self.query_template, self.document_template, self.chunk_tokens, self.overlap_tokens])


def _known_prefixes(arch: str, name: str) -> tuple[str, str]:
    """Task prefixes of models trained with them, for a GGUF that does not declare its own
    (`qmd.query_prefix` / `qmd.document_prefix`): the same file works however it was obtained."""
    if arch == "nomic-bert" or "nomic-embed-text" in name:
        return "search_query: ", "search_document: "
    if "e5" in name:
        return "query: ", "passage: "
    return "", ""


def family_for(info: ModelInfo) -> Family:
    """The family of a GGUF model, from its architecture, name and qmd's own metadata keys."""
    name = info.name.lower()
    meta = info.meta
    if info.arch in ("bert", "nomic-bert", "jina-bert-v2", "modern-bert") or meta.get("qmd.family") == "bert":
        # 512-position BERT models are trained at ≤ 256 tokens: chunk at the served length.
        limit = int(meta.get("qmd.max_tokens") or (256 if info.context_length <= 512 else 900))
        chunk = max(32, min(limit, info.context_length))
        q_prefix = str(meta.get("qmd.query_prefix", "") or "")
        d_prefix = str(meta.get("qmd.document_prefix", "") or "")
        if not q_prefix and not d_prefix:
            q_prefix, d_prefix = _known_prefixes(info.arch, name)
        return Family("bert", q_prefix.replace("{", "{{").replace("}", "}}") + "{q}", d_prefix.replace("{", "{{").replace("}", "}}") + "{title}\n\n{chunk}", chunk, max(chunk * 15 // 100, 1))
    if "qwen3" in info.arch and "embed" in name:
        return Family(
            "qwen3-embedding",
            "Instruct: Retrieve relevant documents for the given query\nQuery: {q}",
            "{title}\n{chunk}",
            min(900, info.context_length - 64),
            135,
        )
    # EmbeddingGemma and other decoder-style embedders: the original's prompts.
    return Family(
        "embeddinggemma",
        "task: search result | query: {q}",
        "title: {title} | text: {chunk}",
        min(900, max(info.context_length - 64, 64)),
        135,
    )
