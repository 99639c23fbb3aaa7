"""Vector search: the documents whose best chunk is nearest to the query.

The backend returns exact nearest documents under a collection filter (never a short
page); this module ties them to the current embedding model's vector space.
"""

from __future__ import annotations

from qmd.core.errors import QmdError
from qmd.core.results import VectorStatus

TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing at run time
if TYPE_CHECKING:
    from collections.abc import Mapping, Sequence

    from qmd.llm.roles import EmbeddingModel
    from qmd.search.narrowed import Searchable
    from qmd.backends.base import IndexBackend, VectorModel


def current_model(backend: Searchable, embedder: EmbeddingModel) -> VectorModel:
    """The vector space of `embedder`; a QmdError naming `qmd embed` when it has none yet,
    saying so when the index holds this model's vectors cut otherwise (another qmd's chunk
    settings, another build of the file): they are never mixed with the current ones."""
    from qmd.index.embedding import fingerprint  # with a model to read only (status without one skips it)

    model = backend.vector_model(fingerprint(embedder))
    if model is None:
        name = embedder.info.name
        if backend.vector_models_named(name):
            raise QmdError(f"the index's vectors for {name} were embedded with other chunk settings or another build of the model", "run: qmd embed (re-embeds every document)")
        raise QmdError(f"no vectors yet for the embed model {name}", "run: qmd embed")
    if model.dims != embedder.dims:
        raise QmdError(dims_mismatch(model, embedder.dims), DIMS_FIX)
    return model


DIMS_FIX = "run: qmd embed (recreates the vector table and embeds every document again)"


def dims_mismatch(model: VectorModel, dims: int) -> str:
    """The line for a vector space stored with other dims than its model makes: left by an
    import that lied about them (refused since); every search and embed failed on it."""
    return f"the index's vectors for {model.model} have {model.dims} dims but the model makes {dims} (left by an earlier qmd import)"


def query_inputs(embedder: EmbeddingModel, searches: Sequence[tuple[str, str]]) -> list[str]:
    """The model's input for each (list name, text) of a query: a `hyde` line is embedded as
    a passage (it is written like an answer), any other as a question cut to the context."""
    family = embedder.family
    return [family.document("", t) if n.startswith("hyde") else embedder.fit(family.query(t), embedder.n_ctx - 4) for n, t in searches]


def pending_count(backend: IndexBackend, model: VectorModel, embeddable: list[str]) -> int:
    """Documents in `embeddable` collections without vectors for this model."""
    return len(backend.pending_embeddings(model.id, embeddable))


def embed_advice(pending: int, embedded: bool = True) -> str:
    """What `query`, `vsearch`, `update` and the MCP query answer say of documents without
    vectors for the current embed model (`embedded`: the model has embedded something before)."""
    docs = "1 document" if pending == 1 else f"{pending:,} documents"
    return f"{docs} changed since the last embed (run qmd embed)" if embedded else f"{docs} not embedded yet (run qmd embed to search them by meaning)"


def vector_status(
    backend: IndexBackend, probe: EmbeddingModel | None, embeddable: list[str], ast: Mapping[str, Sequence[str]] | None = None,
) -> VectorStatus:
    """Counts for the current embed model (`probe`: its header read, not loaded; None: no model
    file); `ast`: the collections' extensions cut by syntax (`chunk_strategy: auto`)."""
    if probe is None:
        n = len(backend.pending_embeddings(None, embeddable))
        return VectorStatus(None, None, 0, 0, n, n)
    from qmd.index.embedding import fingerprint

    fp = fingerprint(probe)
    model = backend.vector_model(fp)
    model_id = model.id if model else None
    chunks, done = backend.vector_counts(model_id)
    pending = [h for h, _ in backend.pending_embeddings(model_id, embeddable, ast)]
    # The reason `qmd embed` gives: vectors of this model cut otherwise (another fingerprint of
    # the same model name, e.g. from before section units; or this one's, by another chunker).
    spaces = [m.id for m in backend.vector_models_named(probe.info.name)] if pending else []
    other = len(backend.embedded_hashes(spaces, pending)) if spaces else 0
    return VectorStatus(probe.info.name, fp, chunks, done, len(pending), len(pending) - other, other)
