"""Local models: the one place that knows llama-cpp-python (imported lazily, never by `import qmd`).

`roles` says what the index and search code need of each role (structural protocols);
`runtime` is the llama.cpp loader base that `embedder`, `reranker` and `generator` build on;
`models` resolves which file serves a role, `hub` downloads it, `importing`/`convert` make
one from a local BERT folder, `gguf_info` reads a file's header without llama.cpp.
"""
