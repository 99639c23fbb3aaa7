"""`embed`: chunk every document that needs it, embed the chunks, store the vectors.

Work is committed in batches, each a transaction holding whole documents, so a killed
run leaves no half-embedded document: the next run embeds exactly what is missing.
"""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Callable
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from qmd.core.text import parse_front_matter
from qmd.index.chunking import chunk_text
from qmd.llm.roles import EmbeddingModel
from qmd.storage.backend import ChunkVector, IndexBackend, VectorModel

CHUNKER_VERSION = 1
TITLE_TOKENS = 32  # a title longer than this is cut, so it never crowds out the chunk
BATCH_CHUNKS = 32

EmbedProgress = Callable[[int, int, int], None]  # (documents done, documents total, chunks done)


def fingerprint(embedder: EmbeddingModel) -> str:
    """Model identity + input format + chunk settings: what makes two vectors comparable."""
    spec = json.dumps([embedder.info.identity, embedder.family.spec, CHUNKER_VERSION])
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


@dataclass
class EmbedReport:
    model: str
    documents: int = 0
    chunks: int = 0
    already: int = 0
    seconds: float = 0.0
    skipped_collections: list[str] = field(default_factory=list)


@dataclass
class _Doc:
    hash: str
    starts: list[tuple[int, int, int, int]]  # (seq, start, end, tokens)
    inputs: list[str]


def prepare(embedder: EmbeddingModel, text: str, title: str, content_hash: str) -> _Doc:
    """Chunk one document's body and format every chunk with its title for the model."""
    fm = parse_front_matter(text)
    body = text[fm.body_offset :]
    family = embedder.family
    title = embedder.fit(title, TITLE_TOKENS)
    overhead = embedder.count_tokens(family.document(title, "")) + 4  # + special tokens
    budget = max(family.chunk_tokens - overhead, 16)
    chunks = chunk_text(body, embedder.count_tokens, max_tokens=budget, overlap_tokens=min(family.overlap_tokens, budget // 4))
    return _Doc(
        content_hash,
        [(c.seq, c.start + fm.body_offset, c.end + fm.body_offset, c.tokens) for c in chunks],
        [family.document(title, c.text) for c in chunks],
    )


def embed_documents(
    backend: IndexBackend,
    embedder: EmbeddingModel,
    model: VectorModel,
    todo: list[tuple[str, str]],
    report: EmbedReport,
    progress: EmbedProgress | None = None,
    writing: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> None:
    """Embed `todo` (hash, title) in batches of about BATCH_CHUNKS chunks.

    Only each batch's write happens inside `writing()` (the writer lock): the model runs
    outside it, so an `update` waiting for the lock gets in between two batches.
    """
    batch: list[_Doc] = []

    def flush() -> None:
        inputs = [text for doc in batch for text in doc.inputs]
        vectors = iter(embedder.embed(inputs))
        rows = [
            (doc.hash, [ChunkVector(doc.hash, seq, start, end, tokens, next(vectors)) for seq, start, end, tokens in doc.starts])
            for doc in batch
        ]
        with writing():
            report.chunks += backend.write_vectors(model, rows)
        report.documents += len(batch)
        batch.clear()
        if progress is not None:
            progress(report.documents, len(todo), report.chunks)

    pending_chunks = 0
    for content_hash, title in todo:
        text = backend.content(content_hash)
        if text is None:  # a cleanup between two batches dropped it: nothing left to embed
            continue
        doc = prepare(embedder, text, title, content_hash)
        batch.append(doc)
        pending_chunks += len(doc.inputs)
        if pending_chunks >= BATCH_CHUNKS:
            flush()
            pending_chunks = 0
    if batch:
        flush()


def run_embed(
    backend: IndexBackend,
    embedder: EmbeddingModel,
    collections: list[str],
    skipped: list[str],
    *,
    force: bool = False,
    force_all: bool = True,
    progress: EmbedProgress | None = None,
    writing: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> EmbedReport:
    """Embed what `collections` lack for this embedder's fingerprint.

    `writing()` is entered around every write (the writer lock, taken per batch); with
    nothing to embed and no `force`, no write happens and the lock is never taken.
    """
    started = time.perf_counter()
    fp = fingerprint(embedder)
    model = backend.vector_model(fp)
    report = EmbedReport(embedder.info.name, skipped_collections=skipped)
    todo = backend.pending_embeddings(model.id if model else None, collections)
    if not force and not todo:
        report.already = backend.vector_counts(model.id if model else None)[1]
        report.seconds = time.perf_counter() - started
        return report
    with writing():
        model = backend.ensure_vector_model(fp, embedder.info.name, embedder.dims)
        if force:
            # `-f -c NAME` re-embeds that collection only; the other collections keep their vectors.
            backend.drop_vectors(model, None if force_all else [h for h, _ in backend.pending_embeddings(None, collections)])
    if force:
        todo = backend.pending_embeddings(model.id, collections)
    report.already = backend.vector_counts(model.id)[1]
    with backend.bulk_vectors(model, len(todo)):
        embed_documents(backend, embedder, model, todo, report, progress, writing)
    report.seconds = time.perf_counter() - started
    return report
