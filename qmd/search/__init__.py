"""Search: query syntax, BM25 over FTS5, snippets."""
