"""`embed`: chunk every document that needs it, embed the chunks, store the vectors.

Every document is chunked first (the work ahead is then known in chunks and tokens, which
the progress counts: qmd/index/embed_progress.py), then the chunks are embedded. Work is
committed in batches, each a transaction holding whole documents, so a killed run leaves no
half-embedded document: the next run embeds exactly what is missing.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import time
from collections.abc import Callable, Mapping, Sequence
from contextlib import AbstractContextManager, nullcontext
from dataclasses import dataclass, field

from qmd.core.cancel import checkpoint
from qmd.core.text import parse_front_matter
from qmd.index.chunking import chunk_text, heading_trail
from qmd.index.embed_progress import CollectionPlan, OnEmbedProgress, Tracker
from qmd.index.late_chunks import TokenEmbedder, late_chunking, late_vectors
from qmd.llm.families import Family
from qmd.llm.roles import EmbeddingModel
from qmd.backends.base import ChunkVector, IndexBackend, VectorModel

CHUNKER_VERSION = 1
TITLE_TOKENS = 32  # a title longer than this is cut, so it never crowds out the chunk
BATCH_CHUNKS = 32
SPANS_AT_ONCE = 500  # documents whose earlier chunks are read in one query


# Chunks that carry their context (issue 29), measured in docs/ranking.md: section units are
# the default (they win or tie hit@1 everywhere measured); heading paths stay off (they lose a
# held-out trust question that sections alone win).
HEADING_PATHS = False
SECTION_UNITS = True


def _switch(name: str, default: bool) -> bool:
    """An internal chunk switch: `1` on, `0` off, anything else the default."""
    value = os.environ.get(name, "")
    return default if value not in ("0", "1") else value == "1"


def heading_paths() -> bool:
    """Whether each chunk's input carries its heading path (`Title › Section › Subsection`),
    as contextual retrieval prepends a chunk's context. Off by default (docs/ranking.md);
    QMD_CHUNK_HEADINGS=1 turns it on, an internal switch for the bench. Part of the
    fingerprint, so an index never mixes vectors embedded with and without it.
    """
    return _switch("QMD_CHUNK_HEADINGS", HEADING_PATHS)


def section_units() -> bool:
    """Whether each heading-bounded section that fits a chunk is embedded too, beside the
    windows (a document scores by its best unit). On by default (issue 29, measured in
    docs/ranking.md); QMD_CHUNK_SECTIONS=0 turns it off, an internal switch for the bench.
    Part of the fingerprint, so an index embedded before the switch is re-embedded."""
    return _switch("QMD_CHUNK_SECTIONS", SECTION_UNITS)


# Files whose `#` lines are Markdown headings (heading paths and section units read them); in
# any other file (Python, shell, YAML, ...) a `#` line is a comment, whatever the chunk strategy.
MARKDOWN_SUFFIXES = (".md", ".markdown", ".mdx", ".mdown", ".mkd", ".mkdn", ".txt")


def is_markdown(path: str) -> bool:
    """Whether `path` names a Markdown (or plain-text note) file: its `#` lines are headings."""
    return path.lower().endswith(MARKDOWN_SUFFIXES)


def markdown_hashes(backend: IndexBackend, collections: Sequence[str], hashes: set[str]) -> set[str]:
    """The content hashes of `hashes` that some document of `collections` holds as a Markdown file."""
    out: set[str] = set()
    for collection in collections:
        out.update(row.hash for row in backend.find(collection=collection) if row.hash in hashes and is_markdown(row.path))
    return out


def sections(body: str, offset: int, count_tokens: Callable[[str], int], budget: int, windows: list[tuple[int, int, int, int]]) -> list[tuple[int, int, int, int]]:
    """(seq, start, end, tokens) of each section of `body` (a heading to the next heading of
    its level or above) of 8 to `budget` tokens that is not already one of `windows`; seqs
    follow the windows'."""
    def stripped(start: int, end: int) -> tuple[int, int]:  # a window's text without the blank lines around it
        text = body[start:end]
        return start + len(text) - len(text.lstrip()), start + len(text.rstrip())

    trail = heading_trail(body)
    seen = {stripped(start - offset, end - offset) for _, start, end, _ in windows}
    out: list[tuple[int, int, int, int]] = []
    for i, (pos, path) in enumerate(zip(trail.positions, trail.paths)):
        level = path[-1][1]
        end = next((p for p, q in zip(trail.positions[i + 1 :], trail.paths[i + 1 :]) if q[-1][1] <= level), len(body))
        span = stripped(pos, end)
        tokens = count_tokens(body[span[0] : span[1]])
        if 8 <= tokens <= budget and span not in seen:  # a note that is one window is not embedded twice
            seen.add(span)
            out.append((len(windows) + len(out), span[0] + offset, span[1] + offset, tokens))
    return out


def fingerprint(embedder: EmbeddingModel) -> str:
    """Model identity + input format + chunk settings: what makes two vectors comparable.

    The vector space. Each content's vectors also record how it was cut (`embedded.chunker`:
    `regex`, `ast`, or `ast!` for a source file that did not parse): the chunk strategy is the
    per-document part of the fingerprint, so switching a collection's strategy re-cuts only
    its source files of languages with a grammar, and re-embeds only those whose cut changed.
    """
    parts: list[object] = [embedder.info.identity, embedder.family.spec, CHUNKER_VERSION]
    if heading_paths():
        parts.append("heading-paths")
    if section_units():
        parts.append("sections")  # only when on: the vectors embedded before keep their fingerprint
    if late_chunking() and isinstance(embedder, TokenEmbedder):
        parts.append("late-chunks")  # a model without token outputs (a server's) embeds as before
    spec = json.dumps(parts)
    return hashlib.sha256(spec.encode()).hexdigest()[:16]


def ast_plan(collections: Sequence[str], strategies: Mapping[str, str]) -> dict[str, list[str]]:
    """collection → the extensions it cuts by syntax (those `auto` collections' grammars load)."""
    auto = [c for c in collections if strategies.get(c) == "auto"]
    if not auto:
        return {}
    from qmd.index.code_chunks import available_extensions

    extensions = available_extensions()
    return {c: extensions for c in auto} if extensions else {}


def grammar_notice(strategies: Mapping[str, str]) -> str | None:
    """What `auto` cannot do here (no tree-sitter, or some grammars missing); None: all there."""
    if "auto" not in strategies.values():
        return None
    from qmd.index.code_chunks import GRAMMARS_INSTALL, grammar_status

    missing = {lang: why for lang, why in grammar_status().items() if why is not None}
    if not missing:
        return None
    if len(missing) == len(grammar_status()):
        return f"chunk strategy auto: {next(iter(missing.values()))}; source files are chunked by regex"
    return f"chunk strategy auto: no grammar for {', '.join(sorted(missing))} ({GRAMMARS_INSTALL}): those files are chunked by regex"


@dataclass
class EmbedReport:
    model: str
    documents: int = 0
    chunks: int = 0
    already: int = 0  # documents (distinct content) of the collections embedded that had their vectors already
    seconds: float = 0.0
    skipped_collections: list[str] = field(default_factory=list)
    recut: int = 0  # documents re-embedded because their chunk strategy changed their cut
    relabeled: int = 0  # documents re-cut to the same chunks: vectors kept, strategy recorded
    not_parsed: list[str] = field(default_factory=list)  # source files cut by regex: syntax errors
    notice: str | None = None  # grammars missing for `auto`
    coded: int = 0  # chunks added to the approximate vector index (issue 31) by this run
    recall: str | None = None  # what this run measured of the approximate index's recall, and what searches do with it


@dataclass
class _Doc:
    hash: str
    starts: list[tuple[int, int, int, int]]  # (seq, start, end, tokens)
    title: str  # as the model sees it (cut to TITLE_TOKENS)
    overhead: int  # tokens every chunk's input adds to the chunk: the title, the template, special tokens
    chunker: str = "regex"
    recut: bool = False  # it had vectors, cut otherwise (its chunk strategy changed its cut)
    titles: list[str] | None = None  # per chunk: the title with the chunk's heading path (heading_paths())
    extra: list[int] | None = None  # per chunk: the tokens its heading path adds

    def inputs(self, family: Family, text: str) -> list[str]:
        """Every chunk of `text` (this document's content) formatted with the title for the model."""
        titles = self.titles or [self.title] * len(self.starts)
        return [family.document(title, text[start:end]) for title, (_, start, end, _) in zip(titles, self.starts)]

    @property
    def costs(self) -> list[int]:
        """Tokens of each chunk's input: the work of embedding it."""
        extra = self.extra or [0] * len(self.starts)
        return [tokens + self.overhead + more for (*_, tokens), more in zip(self.starts, extra)]


_SPACES = re.compile(r"\s+")


def _same_words(a: str, b: str) -> bool:
    return _SPACES.sub(" ", a).strip().casefold() == _SPACES.sub(" ", b).strip().casefold()


def chunk_titles(embedder: EmbeddingModel, text: str, offset: int, title: str, doc: _Doc) -> tuple[list[str], list[int]]:
    """Each chunk's title with the headings it sits under (`Title › Rollback › Steps`), as
    contextual retrieval prepends a chunk's context: a chunk deep in a long note then carries
    what it is about. The headings above the chunk's start only (one it starts with is in its
    text); a top heading that repeats the title is left out. Cut so the input fits the model."""
    trail = heading_trail(text[offset:])
    titles: list[str] = []
    extra: list[int] = []
    for _, start, end, tokens in doc.starts:
        lead = len(text[start:end]) - len(text[start:end].lstrip())  # a chunk may start with the blank line before its heading
        path = [h for pos, _, h in trail.path_at(start + lead - offset)]
        if path and _same_words(path[0], title):
            path = path[1:]
        if not path:
            titles.append(title)
            extra.append(0)
            continue
        room = min(TITLE_TOKENS, embedder.n_ctx - doc.overhead - tokens - 2)  # 2: the " › " and a margin
        line = embedder.fit(" › ".join(path), room) if room > 0 else ""
        titles.append(f"{title} › {line}" if title and line else title or line)
        extra.append(embedder.count_tokens(line) + 1 if line else 0)
    return titles, extra


def prepare(embedder: EmbeddingModel, text: str, title: str, content_hash: str, language: str | None = None, markdown: bool = True) -> _Doc:
    """Chunk one document's body: where each chunk starts and ends in `text`, and its tokens.

    `language`: cut this source file at its syntax tree's definitions too (chunker `ast`);
    a file with syntax errors is cut by regex (chunker `ast!`). `markdown`: its `#` lines are
    headings (heading paths, section units); false for a source or config file, where they
    are comments, whether it is cut by syntax or by regex.
    """
    chunker, code = "regex", None
    if language is not None:
        from qmd.index.code_chunks import GrammarMissing, NotParsed, code_points

        try:
            code, chunker = code_points(text, language), "ast"
        except (NotParsed, GrammarMissing):
            chunker = "ast!"
    fm = parse_front_matter(text) if code is None else None  # a source file has no front matter
    offset = fm.body_offset if fm is not None else 0
    body = text[offset:]
    family = embedder.family
    title = embedder.fit(title, TITLE_TOKENS)
    overhead = embedder.count_tokens(family.document(title, "")) + 4  # + special tokens
    budget = max(family.chunk_tokens - overhead, 16)
    chunks = chunk_text(body, embedder.count_tokens, max_tokens=budget, overlap_tokens=min(family.overlap_tokens, budget // 4), code=code)
    doc = _Doc(content_hash, [(c.seq, c.start + offset, c.end + offset, c.tokens) for c in chunks], title, overhead, chunker)
    markdown = markdown and language is None
    if markdown and section_units():
        doc.starts += sections(body, offset, embedder.count_tokens, budget, doc.starts)
    if markdown and heading_paths():
        doc.titles, doc.extra = chunk_titles(embedder, text, offset, title, doc)
    return doc


def chunk_documents(
    backend: IndexBackend,
    embedder: EmbeddingModel,
    model: VectorModel,
    todo: list[tuple[str, str]],
    report: EmbedReport,
    tracker: Tracker,
    writing: Callable[[], AbstractContextManager[None]] = nullcontext,
    languages: Mapping[str, tuple[str, str]] | None = None,
    markdown: set[str] | None = None,
) -> list[_Doc]:
    """Cut every document of `todo` (hash, title) into chunks, before any is embedded: the work
    ahead is then known in chunks and tokens.

    `languages`: content hash → (language, path) of the source files to cut by syntax. A
    document that has vectors already (its strategy changed) and is cut to the same chunks
    keeps them: only its chunker is recorded (one short write), and it is not embedded again.
    `markdown`: the hashes whose `#` lines are headings (None: all).
    """
    tracker.chunking()
    docs: list[_Doc] = []
    for n, (content_hash, title) in enumerate(todo, 1):
        checkpoint()
        text = backend.content(content_hash)
        if text is not None:  # None: a cleanup dropped it meanwhile: nothing left to embed
            language, path = (languages or {}).get(content_hash, (None, ""))
            doc = prepare(embedder, text, title, content_hash, language, markdown is None or content_hash in markdown)
            if doc.chunker == "ast!":
                report.not_parsed.append(path)
            docs.append(doc)
        tracker.chunked(n)
    same: dict[str, str] = {}
    for i in range(0, len(docs), SPANS_AT_ONCE):
        part = docs[i : i + SPANS_AT_ONCE]
        before = backend.chunk_spans(model, [doc.hash for doc in part])
        for doc in part:
            if doc.hash in before:
                if before[doc.hash] == [(s, e) for _, s, e, _ in doc.starts]:
                    same[doc.hash] = doc.chunker
                else:
                    doc.recut = True
    if same:
        with writing():
            backend.set_chunkers(model, same)
        report.relabeled += len(same)
    return [doc for doc in docs if doc.hash not in same]


def _through_model(embedder: EmbeddingModel, inputs: list[str], costs: list[int], tracker: Tracker) -> list[list[float]]:
    """The vectors of `inputs`, asked of the model in slices of about `batch_tokens` tokens,
    each slice's chunks and tokens told to `tracker` (a batch of one long document shows its
    progress too)."""
    vectors: list[list[float]] = []
    limit = embedder.batch_tokens
    start = 0
    while start < len(inputs):
        end, tokens = start, 0
        while end < len(inputs) and (end == start or tokens + costs[end] <= limit):
            tokens += costs[end]
            end += 1
        vectors += embedder.embed(inputs[start:end])
        tracker.embedded(end - start, tokens)
        start = end
        checkpoint()  # a cancelled request, or a Ctrl-C the model's callbacks swallowed, stops here
    return vectors


def _late(embedder: TokenEmbedder, family: Family, present: list[tuple[_Doc, str]], tracker: Tracker) -> list[list[float]]:
    """Each document's chunk vectors pooled from one pass over it (qmd/index/late_chunks.py);
    the input's head is the family's document format with the title and no chunk."""
    vectors: list[list[float]] = []
    for doc, text in present:
        head = family.document(doc.title, "")
        vectors += late_vectors(embedder, head, text, [(start, end) for _, start, end, _ in doc.starts])
        tracker.embedded(len(doc.starts), sum(doc.costs))
        checkpoint()
    return vectors


def embed_documents(
    backend: IndexBackend,
    embedder: EmbeddingModel,
    model: VectorModel,
    docs: list[_Doc],
    report: EmbedReport,
    tracker: Tracker,
    writing: Callable[[], AbstractContextManager[None]] = nullcontext,
) -> None:
    """Embed the chunked `docs` in batches of whole documents, about BATCH_CHUNKS chunks each.

    Only each batch's write happens inside `writing()` (the writer lock): the model runs
    outside it, so an `update` waiting for the lock gets in between two batches. A Ctrl-C
    (or a cancelled request) writes nothing of the batch under way.
    """
    batch: list[_Doc] = []

    def flush() -> None:
        checkpoint()
        present: list[tuple[_Doc, str]] = []
        for doc in batch:
            text = backend.content(doc.hash)
            if text is None:  # a cleanup between two batches dropped it: nothing left to embed
                tracker.dropped(len(doc.starts), sum(doc.costs))
            else:
                present.append((doc, text))
        if late_chunking() and isinstance(embedder, TokenEmbedder):
            vectors = iter(_late(embedder, embedder.family, present, tracker))
        else:
            inputs = [item for doc, text in present for item in doc.inputs(embedder.family, text)]
            vectors = iter(_through_model(embedder, inputs, [c for doc, _ in present for c in doc.costs], tracker))
        rows = [
            (doc.hash, [ChunkVector(doc.hash, seq, start, end, tokens, next(vectors)) for seq, start, end, tokens in doc.starts])
            for doc, _ in present
        ]
        if rows:
            with writing():
                report.chunks += backend.write_vectors(model, rows, {doc.hash: doc.chunker for doc, _ in present})
        report.documents += len(present)
        report.recut += sum(1 for doc, _ in present if doc.recut)
        tracker.written(len(present))
        batch.clear()

    pending_chunks = 0
    for doc in docs:
        batch.append(doc)
        pending_chunks += len(doc.starts)
        if pending_chunks >= BATCH_CHUNKS:
            flush()
            pending_chunks = 0
    if batch:
        flush()


def plan_for(
    backend: IndexBackend, model_id: int, collections: list[str], ast: Mapping[str, Sequence[str]], embedded: Mapping[str, int],
    changes: Mapping[str, tuple[int, int]] | None, forced: bool, stale: Mapping[str, int] | None = None,
) -> list[CollectionPlan]:
    """What the run is about to do per collection (`embedded`: its documents with vectors
    before the run; `changes`: collection → (new, changed) documents of the update just before;
    `stale`: its documents with this model's vectors under another fingerprint)."""
    pending = backend.pending_per_collection(model_id, collections, ast)
    return [
        CollectionPlan(name, pending[name], embedded.get(name, 0), *(changes or {}).get(name, (0, 0)), forced=forced, stale=(stale or {}).get(name, 0))
        for name in collections
        if pending.get(name)
    ]


def run_embed(
    backend: IndexBackend,
    embedder: EmbeddingModel,
    collections: list[str],
    skipped: list[str],
    *,
    force: bool = False,
    force_all: bool = True,
    progress: OnEmbedProgress | None = None,
    writing: Callable[[], AbstractContextManager[None]] = nullcontext,
    strategies: Mapping[str, str] | None = None,
    changes: Mapping[str, tuple[int, int]] | None = None,
    model_bytes: int | None = None,
) -> EmbedReport:
    """Embed what `collections` lack for this embedder's fingerprint.

    `strategies`: collection → chunk strategy (`regex` when absent; `auto` cuts source files
    of languages with a grammar by their syntax tree). `progress` hears every phase and count
    (qmd/index/embed_progress.py); `changes`: collection → (new, changed) documents of the
    update just before, for the plan it is told first; `model_bytes`: the model file's size.

    `writing()` is entered around every write (the writer lock, taken per batch); with
    nothing to embed and no `force`, no write happens, the lock is never taken and the
    model never loads.
    """
    started = time.perf_counter()
    fp = fingerprint(embedder)
    model = backend.vector_model(fp)
    if model is not None and model.dims != embedder.dims:  # vectors of other dims (an earlier import's lie): start the space over
        with writing():
            model = backend.reset_vector_model(model, embedder.dims)
    report = EmbedReport(embedder.info.name, skipped_collections=skipped)
    strategies = strategies or {}
    ast = ast_plan(collections, strategies)
    report.notice = grammar_notice({c: strategies.get(c, "regex") for c in collections})
    todo = backend.pending_embeddings(model.id if model else None, collections, ast)
    if not force and not todo:
        report.already = backend.embedded_in(model.id if model else None, collections)
        if model is not None and backend.vector_index_due(model):
            _vector_index(backend, model, report, writing)
        report.seconds = time.perf_counter() - started
        return report
    backend.check_vector_settings()  # a bad QMD_VECTOR_INDEX fails now, not after the embedding
    embedded = backend.embedded_per_collection(model.id) if model else {}
    stale: dict[str, int] = {}
    if model is None:  # vectors of this model cut otherwise (e.g. before section units became the default): say so
        for other in backend.vector_models_named(embedder.info.name):
            for name, n in backend.embedded_per_collection(other.id).items():
                stale[name] = max(stale.get(name, 0), n)
    with writing():
        model = backend.ensure_vector_model(fp, embedder.info.name, embedder.dims)
        if force:
            # `-f -c NAME` re-embeds that collection only; the other collections keep their vectors.
            backend.drop_vectors(model, None if force_all else [h for h, _ in backend.pending_embeddings(None, collections)])
    if force:
        todo = backend.pending_embeddings(model.id, collections, ast)
    report.already = backend.embedded_in(model.id, collections)
    plan = plan_for(backend, model.id, collections, ast, embedded, changes, force, stale)
    tracker = Tracker(progress, embedder.info.name, model_bytes, plan, len(todo))
    tracker.loading()
    embedder.load()
    languages = source_languages(backend, ast, {h for h, _ in todo})
    markdown = markdown_hashes(backend, collections, {h for h, _ in todo}) if heading_paths() or section_units() else None
    docs = chunk_documents(backend, embedder, model, todo, report, tracker, writing, languages, markdown)
    tracker.embedding(len(docs), sum(len(doc.starts) for doc in docs), sum(sum(doc.costs) for doc in docs))
    with backend.bulk_vectors(model, len(docs)):
        embed_documents(backend, embedder, model, docs, report, tracker, writing)
    if backend.vector_index_due(model):  # the approximate index (issue 31): built once big enough, then kept up by each write
        _vector_index(backend, model, report, writing)
    report.seconds = time.perf_counter() - started
    return report


def _vector_index(backend: IndexBackend, model: VectorModel, report: EmbedReport, writing: Callable[[], AbstractContextManager[None]]) -> None:
    """Build or finish the approximate vector index and measure its recall when due (under the
    writer lock); a measurement made is told in `report.recall`."""
    before = backend.vector_recall(model)
    with writing():
        report.coded = backend.build_vector_index(model)
    after = backend.vector_recall(model)
    if after is not None and after != before:
        status = backend.recall_status(model)
        use = "searches take it" if status["recall_trusted"] else f"not shown to reach {status['recall_target']}: searches compute every distance (QMD_VECTOR_INDEX=approx takes it anyway)"
        report.recall = f"{after.words()}; {use}"


def source_languages(backend: IndexBackend, ast: Mapping[str, Sequence[str]], hashes: set[str]) -> dict[str, tuple[str, str]]:
    """content hash → (language, path) of the documents of `hashes` cut by syntax under `ast`."""
    if not ast or not hashes:
        return {}
    from qmd.index.code_chunks import language_of

    out: dict[str, tuple[str, str]] = {}
    for collection, extensions in ast.items():
        for row in backend.find(collection=collection):
            if row.hash in hashes and row.hash not in out and row.path.lower().endswith(tuple(extensions)):
                language = language_of(row.path)
                if language is not None:
                    out[row.hash] = (language, f"{collection}/{row.path}")
    return out
