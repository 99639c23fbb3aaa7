"""The built-in defaults a config can leave out: the model each role uses (pure).

Here, not in qmd/llm, because deciding what a project-local config may change
(qmd/core/trust.py: a model other than these is a gated field) needs them without loading
the model code.
"""

from __future__ import annotations

BUILTIN = {
    "embed": "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf",
    "rerank": "hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF/qwen3-reranker-0.6b-q8_0.gguf",
    "generate": "hf:tobil/qmd-query-expansion-1.7B-gguf/qmd-query-expansion-1.7B-q4_k_m.gguf",
}
