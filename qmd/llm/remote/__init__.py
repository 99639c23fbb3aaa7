"""Model roles served by an OpenAI-compatible server (`openai:BASE_URL#MODEL`).

Embed through `/embeddings`, generate (query expansion) through `/chat/completions` or
`/completions` with qmd's grammar where the server takes one, rerank through `/rerank` (the
Jina/Cohere body). Each class satisfies its role's protocol in `qmd.llm.roles`, so the
pipeline cannot tell it from a local model. stdlib HTTP only; nothing connects at import or
construction: the first request goes out when the role is first used, and every failure is
a QmdError naming the endpoint (never a silent fallback to a local model).
"""
