"""A search question is embedded on one llama thread, documents on all of them (LlamaModel.run_on):
on a machine whose cores are busy, two threads meeting at llama.cpp's spinning barrier stall
a few-token query by 10-100x; documents keep the configured threads."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

import qmd.llm.runtime as runtime
from qmd.llm.embedder import SHORT_TOKENS, Embedder


def test_queries_run_on_one_thread_and_documents_on_all(tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    calls: list[tuple[int, int]] = []
    module = runtime.llama_cpp_module()
    real = module.llama_set_n_threads

    def spy(ctx: object, n: int, n_batch: int) -> None:
        calls.append((n, n_batch))
        real(ctx, n, n_batch)

    monkeypatch.setattr(module, "llama_set_n_threads", spy)
    embedder = Embedder(tiny_models["embed"], 2)
    chunk = "title: a | text:"
    while embedder.count_tokens(chunk) <= SHORT_TOKENS:  # a chunk past SHORT_TOKENS, within the tiny model's context
        chunk += " pager"
    assert embedder.count_tokens(chunk) < embedder.n_ctx - 4
    documents = [chunk, "title: b | text: restore the backup"]
    before = embedder.embed(documents)
    assert calls == []  # loaded on the configured threads: nothing to switch
    query = embedder.embed_query("how do we undo a bad release?")
    assert calls == [(1, 1)]
    assert embedder.embed_query("rotate the pager") and calls == [(1, 1)]  # stays on one: no switch per query
    after = embedder.embed(documents)
    assert calls == [(1, 1), (2, 2)]
    long_query = embedder.embed_query(" ".join(["word"] * (SHORT_TOKENS + 20)))
    assert calls == [(1, 1), (2, 2)]  # a long question keeps every thread
    embedder.embed(["search_query: rollback", "search_query: undo a release", "search_document: a hyde answer"])
    assert calls == [(1, 1), (2, 2), (1, 1)]  # a query's few expansions, as `qmd query` embeds them
    # the same vectors whichever threads computed them
    assert np.allclose(before, after, atol=1e-6)
    one = Embedder(tiny_models["embed"], 1)
    assert np.allclose(one.embed_query("how do we undo a bad release?"), query, atol=1e-6)
    assert len(long_query) == len(query)
    embedder.close()
    one.close()
