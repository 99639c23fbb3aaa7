"""`query`: expansion → BM25 and vector lists → RRF → rerank → position-aware blend.

1. Parse the query (plain, or typed lex/vec/hyde/intent/expand lines).
2. Plain questions: a BM25 probe; a strong all-terms hit (top ≥ 0.85, gap ≥ 0.15, no
   intent) skips expansion. Otherwise the generate model expands the question into typed
   lines (cached); `lex:` lines sharing no term with the question are dropped.
3. Routing: lex → BM25, vec/hyde → vectors, the original question → both; top 20 each.
   The original question's lists (or the first typed line's) weigh 2. Each BM25 hit
   carries its coverage (share of the sub-query's content terms in the document).
4. Pseudo-relevance feedback (plain questions with both lists): up to 5 documents in the top
   10 of both the question's BM25 and vector lists lend their 10 most common shared words
   to one more BM25 search (the question's terms plus those words), a list weighing 1 ×
   the BM25 list's evidence; no second KNN. Then evidence-weighted reciprocal rank fusion
   (qmd/search/fusion.py `fuse_lists`): any-term fill counts by its coverage, a fill-only
   BM25 list by its best coverage, a vector list by its best cosine; a clear vector winner
   goes first.
5. The top `candidates` documents are reranked on their best chunk (cached per chunk).
6. Position-aware blend of fused rank and rerank score; without a reranker the score is
   1 / fused rank. Each missing model skips its stage, and the result says so.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable, Hashable, Sequence
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (nor dataclasses: records.py) on a query's path

from qmd.core.cancel import checkpoint
from qmd.core.errors import QmdError
from qmd.search.confidence import QueryJudge, VectorScale, unmatched_words, vector_sample, vector_scale
from qmd.search.fts import bm25_search
from qmd.search.fusion import RankedList, blend, blend_weight, coverage, feedback_list, feedback_seeds, feedback_terms, fuse_lists, list_label
from qmd.search.syntax import STOPWORDS, parse_query
from qmd.core.query import SubQuery
from qmd.search.typed import TypedQuery, parse_typed
from qmd.backends.base import DocRow
from qmd.core.records import field, record
from qmd.core.results import QueryResult, SearchHit, Stages

if TYPE_CHECKING:
    from typing import Any, Protocol

    from qmd.core.requests import QueryRequest
    from qmd.search.narrowed import Searchable
    from qmd.llm.roles import EmbeddingModel, ExpansionModel, RerankModel
    from qmd.search.vector import VectorModel
    from qmd.search.why import WhyTarget

    class QueryModels(Protocol):
        """The model roles the pipeline uses; each raises QmdError when its model is absent."""

        def embedder(self) -> EmbeddingModel: ...

        def generator(self) -> ExpansionModel: ...

        def reranker(self) -> RerankModel: ...

        def expand(self, question: str, generator: ExpansionModel | None = None) -> list[SubQuery]: ...

        def rerank(self, query: str, texts: list[str], reranker: RerankModel | None = None) -> list[float]: ...

        def chunks_for(self, hashes: list[str]) -> dict[str, list[tuple[int, int]]]: ...


    class HitMaker(Protocol):
        """Turns a document row into a result: snippet at the best line, context; `lengths`: the
        page's docid lengths, fetched once (else one query per hit)."""

        def __call__(
            self, row: DocRow, text: str, score: float, match: str, words: list[str], snippet_chars: int,
            line_numbers: bool = False, chunk: tuple[int, int] | None = None, full: bool = False, lengths: dict[str, int] | None = None,
        ) -> SearchHit: ...


LIST_DEPTH = 20
STRONG_SCORE = 0.85
STRONG_GAP = 0.15

Progress = Callable[[str], None]


@record(frozen=True)
class QueryContext:
    """What one query runs against: the index, the collections in scope, the models."""

    backend: Searchable  # the index, or its view through a filter (narrowed.py)
    scope: list[str] | None  # None: every collection
    models: QueryModels
    hit: HitMaker
    pending: Callable[[VectorModel], int] | None = None  # documents in scope without vectors of the model (for the notice)
    why: WhyTarget | None = None  # the document `why` asks about (qmd/search/why.py)
    scale: Callable[[VectorModel, Sequence[float]], VectorScale | None] | None = None  # the question's VectorScale (cached by the Store); None: read here


@record
class Candidate:
    """A fused document before and after reranking (everything --explain shows)."""

    doc_id: int
    rrf_score: float
    rrf_rank: int
    contributions: list[tuple[str, int, float]]
    rerank: float | None = None
    score: float = 0.0
    chunk: tuple[int, int] | None = None  # the (start, end) the reranker read
    bonus: float = 0.0  # the fused score's rank bonus


@record
class QueryPlan:
    """What ran: the sub-queries actually searched, the stages, notices and timings."""

    question: str
    intent: str | None
    searches: list[SubQuery] = field(default_factory=list)
    stages: Stages = field(default_factory=Stages)
    notices: list[str] = field(default_factory=list)
    timings_ms: dict[str, float] = field(default_factory=dict)
    scale: VectorScale | None = None  # what a cosine means for the question's vector here (the confidence's)


def question_terms(text: str) -> set[str]:
    return {w for w in parse_query(text).words if w not in STOPWORDS}


def shares_a_term(lex: str, question: str) -> bool:
    """A `lex:` expansion is kept only when it shares a (stemmed-prefix) term with the question."""
    q = question_terms(question)
    for word in question_terms(lex):
        if any(word[:5] == t[:5] for t in q):
            return True
    return False


def strong_signal(scores: list[float]) -> bool:
    if not scores or scores[0] < STRONG_SCORE:
        return False
    return len(scores) == 1 or scores[0] - scores[1] >= STRONG_GAP


class Timer:
    def __init__(self, plan: QueryPlan) -> None:
        self.plan = plan

    def __call__(self, stage: str) -> _Span:
        return _Span(self.plan, stage)


class _Span:
    def __init__(self, plan: QueryPlan, stage: str) -> None:
        self.plan, self.stage = plan, stage

    def __enter__(self) -> None:
        self.t0 = time.perf_counter()

    def __exit__(self, *exc: object) -> None:
        self.plan.timings_ms[self.stage] = self.plan.timings_ms.get(self.stage, 0.0) + (time.perf_counter() - self.t0) * 1000


def plan_searches(typed: TypedQuery, expansions: list[SubQuery] | None) -> tuple[str, list[tuple[str, str, float, str]]]:
    """(question, [(list name, kind, weight, text)]) for a parsed query and its expansions.

    kind is "bm25" or "vector"; the first list(s) weigh 2.
    """
    lists: list[tuple[str, str, float, str]] = []
    if typed.searches:
        for i, sub in enumerate(typed.searches):
            kind = "bm25" if sub.type == "lex" else "vector"
            lists.append((f"{sub.type}#{i + 1}", kind, 2.0 if i == 0 else 1.0, sub.text))
        return typed.question, lists
    question = typed.question
    lists.append(("bm25:query", "bm25", 2.0, question))
    lists.append(("vec:query", "vector", 2.0, question))
    for i, sub in enumerate(expansions or []):
        kind = "bm25" if sub.type == "lex" else "vector"
        lists.append((f"{sub.type}#{i + 1}", kind, 1.0, sub.text))
    return question, lists


def fuse(named: list[RankedList], without_vectors: frozenset[int] = frozenset()) -> list[Candidate]:
    fused = fuse_lists(named, without_vectors=without_vectors)
    return [Candidate(doc_id(f.key), f.score, rank, f.contributions, bonus=f.bonus) for rank, f in enumerate(fused, start=1)]


def doc_id(key: Hashable) -> int:
    """A fused key back as the document id it was (every list here ranks document ids)."""
    if not isinstance(key, int):
        raise TypeError(f"fused key {key!r} is not a document id")
    return key


def finish(candidates: list[Candidate], reranked: bool) -> list[Candidate]:
    """Final scores: the blend with rerank scores, else 1 / fused rank; best first."""
    for c in candidates:
        c.score = blend(c.rrf_rank, c.rerank or 0.0) if reranked and c.rerank is not None else 1.0 / c.rrf_rank
    return sorted(candidates, key=lambda c: (-c.score, c.rrf_rank))


_WORDS = re.compile(r"\w+")


def best_chunk(text: str, chunks: list[tuple[int, int]], words: set[str], intent_words: set[str], fallback_chars: int) -> tuple[int, int]:
    """The (start, end) with the most query-term overlap (intent terms count half)."""
    if not chunks:
        chunks = [(i, min(len(text), i + fallback_chars)) for i in range(0, max(len(text), 1), max(fallback_chars * 3 // 4, 1))]
    best, best_score = chunks[0], -1.0
    for start, end in chunks:
        low = text[start:end].lower()
        score = sum(1.0 for w in words if w in low) + sum(0.5 for w in intent_words if w in low)
        if score > best_score:
            best, best_score = (start, end), score
    return best



class Documents:
    """The rows and texts of the documents one query has read, each read once."""

    def __init__(self, backend: Searchable) -> None:
        self.backend = backend
        self.rows: dict[int, DocRow] = {}
        self.texts: dict[str, str] = {}  # content hash → text

    def load(self, ids: list[int]) -> None:
        """Read the documents of `ids` not read yet (a document gone since is left out)."""
        missing = [i for i in dict.fromkeys(ids) if i not in self.rows]
        for doc, (row, text) in self.backend.documents(missing).items():
            self.rows[doc] = row
            self.texts[row.hash] = text

    def text(self, doc: int) -> str:
        return self.texts[self.rows[doc].hash]

    def coverage(self, doc: int, terms: set[str]) -> float:
        """Share of `terms` in the document's path, title and text (0 if it is gone)."""
        row = self.rows.get(doc)
        return 0.0 if row is None else coverage(terms, f"{row.path}\n{row.title}\n{self.texts[row.hash]}")


@record(frozen=True)
class VectorSide:
    """The embed model and the index's vectors of it: what the vector lists search."""

    embedder: EmbeddingModel
    model: VectorModel


def run_query(ctx: QueryContext, request: QueryRequest, progress: Progress | None = None) -> QueryResult:
    """The whole pipeline, stage by stage (see the module docstring)."""

    def say(message: str) -> None:  # every stage begins here: a cancelled request stops
        checkpoint()
        if progress is not None:
            progress(message)

    started = time.perf_counter()
    typed = parse_typed(request.text)
    plan = QueryPlan(typed.question, request.intent or typed.intent)
    timer = Timer(plan)
    vectors = vector_side(ctx, typed, plan)  # 1
    expansions = expand(ctx, typed, request, plan, timer, say)  # 2
    question, lists = plan_searches(typed, expansions)  # 3
    if not request.keyword:
        lists = [item for item in lists if item[1] == "vector"]
    plan.searches = list(typed.searches) if typed.searches else [SubQuery("query", question), *(expansions or [])]
    docs = Documents(ctx.backend)
    named = vector_lists(ctx, lists, vectors, plan, timer, say) + keyword_lists(ctx, lists, request, docs, plan, timer)
    order = {name: i for i, (name, _, _, _) in enumerate(lists)}
    named.sort(key=lambda item: order[item.name])
    if not typed.searches and request.keyword:  # 4
        with timer("feedback"):
            plan.stages.feedback = feedback(ctx, question, named, docs)
    fresh = unembedded(ctx, vectors, named)
    with timer("fusion"):
        candidates = fuse(named, fresh)
    words = set(parse_query(question).words)
    intent_words = set(parse_query(plan.intent).words) if plan.intent else set()
    reranked = rerank(ctx, candidates, request, docs, plan, words, intent_words, timer, say)  # 5
    checkpoint()
    ranked = finish(candidates[: max(request.candidates, request.limit)] if reranked else candidates, reranked)  # 6
    judge = QueryJudge(named, plan.scale, question, ranked[0].doc_id if ranked else None)
    hits = make_hits(ctx, ranked, request, docs, sorted(words | intent_words), typed=bool(typed.searches), judge=judge)
    result = QueryResult(hits, plan.stages, [{"type": s.type, "query": s.text} for s in plan.searches], plan.notices, {})
    result.unmatched = unmatched_words(ctx.backend, judge.words, ctx.scope, held=judge.judged.held)
    if vectors is not None and plan.stages.vector:
        result.model = vectors.embedder.info.name
        result.pending = ctx.pending(vectors.model) if ctx.pending is not None else 0
    if ctx.why is not None:
        from qmd.search.why import Trace, explain_why

        trace = Trace(lists, named, vectors, candidates, ranked, hits, fresh, plan.stages.rerank, bool(typed.searches))
        result.why = explain_why(ctx, request, ctx.why, trace)
    plan.timings_ms["total"] = (time.perf_counter() - started) * 1000
    result.timings_ms = {k: round(v, 2) for k, v in plan.timings_ms.items()}
    return result


def vector_side(ctx: QueryContext, typed: TypedQuery, plan: QueryPlan) -> VectorSide | None:
    """The embed model and its vectors, or None (with the notice why): usable only with an
    embed model that has embedded something; a keyword-only typed query never loads it."""
    if typed.searches and all(s.type == "lex" for s in typed.searches):
        return None
    from qmd.search.vector import current_model

    try:
        embedder = ctx.models.embedder()
        return VectorSide(embedder, current_model(ctx.backend, embedder))
    except QmdError as exc:
        plan.notices.append(f"vector search skipped: {exc.message}" + (f" ({exc.hint})" if exc.hint else ""))
        return None


def unembedded(ctx: QueryContext, vectors: VectorSide | None, named: list[RankedList]) -> frozenset[int]:
    """The documents of the keyword lists without vectors for their current content, when
    vector lists ran: fusion counts them in the vector lists at their keyword rank."""
    if vectors is None or not any(x.kind == "vector" for x in named):
        return frozenset()
    ids = sorted({doc_id(k) for x in named if x.kind == "bm25" for k in x.keys})
    return frozenset(ctx.backend.without_vectors(vectors.model, ids)) if ids else frozenset()


def expand(ctx: QueryContext, typed: TypedQuery, request: QueryRequest, plan: QueryPlan, timer: Timer, say: Progress) -> list[SubQuery] | None:
    """Stage 2: the question's expansions (None: not expanded), unless a strong keyword
    match makes them moot, they are off, or no model trained for them is there."""
    if typed.searches:
        return None
    strong = False
    if typed.plain is not None and not plan.intent and request.keyword:
        with timer("probe"):
            probe = bm25_search(ctx.backend, parse_query(typed.plain), 2, ctx.scope)
        strong = all(h.match == "all" for h in probe[:1]) and strong_signal([h.score for h in probe])
    plan.stages.strong_signal = strong
    if strong:
        plan.stages.expand = "skipped: strong keyword match"
        return None
    if request.expand is False:
        plan.stages.expand = "off"
        return None
    try:
        generator = ctx.models.generator()
    except QmdError as exc:
        plan.stages.expand = "skipped: no generate model"
        plan.notices.append(f"expansion skipped: {exc.message}")
        return None
    if request.expand is None and typed.expand is None and not generator.tuned:
        name = generator.info.name
        plan.stages.expand = f"skipped: {name} is not trained for query expansion"
        plan.notices.append(f"expansion skipped: {name} is not trained for query expansion (such models lowered quality when measured); force it with --expand")
        return None
    say("expanding…")
    with timer("expand"):
        expansions = ctx.models.expand(typed.question, generator)
    kept = [e for e in expansions if e.type != "lex" or shares_a_term(e.text, typed.question)]
    plan.stages.expand = f"{len(kept)} lines ({len(expansions) - len(kept)} lex dropped)"
    return kept if request.keyword else [e for e in kept if e.type != "lex"]


def same_text(text: str) -> str:
    """A sub-query's text as work is shared by: case, spacing and punctuation aside."""
    return " ".join(_WORDS.findall(text.casefold())) or text


def vector_lists(ctx: QueryContext, lists: list[tuple[str, str, float, str]], vectors: VectorSide | None, plan: QueryPlan, timer: Timer, say: Progress) -> list[RankedList]:
    """Stage 3, vectors: each distinct vec/hyde line (and the question) embedded and searched
    once, its nearest documents a list under each name that asked for it; all embedded in one
    call and searched together (`nearest_many`: one pass over the vectors on SQLite)."""
    wanted = [(n, w, t) for n, kind, w, t in lists if kind == "vector"]
    if not wanted or vectors is None:
        plan.stages.vector = 0
        return []
    from qmd.search.vector import query_inputs  # here: a keyword-only query has no vector side

    embedder = vectors.embedder
    slot: dict[tuple[bool, str], int] = {}  # a hyde line is embedded as a passage: never the same as a question
    distinct: list[tuple[str, str]] = []
    for n, _, t in wanted:
        slot.setdefault((n.startswith("hyde"), same_text(t)), len(distinct))
        if len(slot) > len(distinct):
            distinct.append((n, t))
    say(f"embedding {len(distinct)} queries…")
    with timer("embed"):
        embedded = embedder.embed(query_inputs(embedder, distinct))
    with timer("vector"):
        plan.scale = question_scale(ctx, vectors.model, embedded[0]) if embedded else None  # the question's vector: the first asked
        checkpoint()
        found = [[(d, s) for d, s, _ in near] for near in ctx.backend.nearest_many(vectors.model, embedded, LIST_DEPTH, ctx.scope)]  # one pass for all
    plan.stages.vector = len(distinct)
    return [
        RankedList(name, weight, [d for d, _ in near], [s for _, s in near], "vector")
        for name, weight, text in wanted
        for near in [found[slot[(name.startswith("hyde"), same_text(text))]]]
    ]


def keyword_lists(ctx: QueryContext, lists: list[tuple[str, str, float, str]], request: QueryRequest, docs: Documents, plan: QueryPlan, timer: Timer) -> list[RankedList]:
    """Stage 3, keywords: each distinct lex line (and the question) searched once with BM25,
    each hit with its coverage of the line's terms (1 for an all-terms hit)."""
    # One keyword list and no rerank: fusion keeps its order, so the top `limit` rows are the
    # answer and reading LIST_DEPTH (and maybe an any-term fill query) would be wasted work.
    depth = request.limit if len(lists) == 1 and not request.rerank else LIST_DEPTH
    named: list[RankedList] = []
    done: dict[object, RankedList] = {}  # the same terms (case and punctuation aside) searched once
    with timer("bm25"):
        for name, kind, weight, text in lists:
            if kind != "bm25":
                continue
            parsed = parse_query(text)
            key = tuple(tuple(sorted((t.phrase, same_text(t.text)) for t in terms)) for terms in (parsed.positive, parsed.negative))
            if key not in done:
                checkpoint()
                found = bm25_search(ctx.backend, parsed, depth, ctx.scope)
                docs.load([h.doc_id for h in found if h.match != "all"])
                terms = question_terms(text)
                cover = [1.0 if h.match == "all" else docs.coverage(h.doc_id, terms) for h in found]
                done[key] = RankedList(name, weight, [h.doc_id for h in found], [h.score for h in found], "bm25", sum(1 for h in found if h.match == "all"), cover)
            same = done[key]
            named.append(RankedList(name, weight, same.keys, same.scores, "bm25", same.exact, same.coverage))
    plan.stages.bm25 = len(done)
    return named


def feedback(ctx: QueryContext, question: str, named: list[RankedList], docs: Documents) -> int:
    """Pseudo-relevance feedback (fusion.py, "Feedback"): the documents both of the question's
    lists have in their top 10 lend their common words to one more BM25 search, appended to
    `named` as a list weighing 1 × the BM25 list's evidence. Returns the expansion words used
    (0: no seeds, no evidence or no words, and nothing appended). A question with negated
    terms gets none: the feedback search would not exclude them."""
    if parse_query(question).negative:
        return 0
    seeds = [doc_id(k) for k in feedback_seeds(named, fuse_lists(named))]
    if not seeds:
        return 0
    docs.load(seeds)
    terms = question_terms(question)
    words = feedback_terms(terms, [docs.text(d) for d in seeds if d in docs.rows])
    if not words:
        return 0
    checkpoint()
    found = bm25_search(ctx.backend, parse_query(" ".join(sorted(terms) + words)), LIST_DEPTH, ctx.scope)
    named.append(feedback_list(named, [h.doc_id for h in found]))
    return len(words)


def rerank(
    ctx: QueryContext, candidates: list[Candidate], request: QueryRequest, docs: Documents, plan: QueryPlan, words: set[str], intent_words: set[str],
    timer: Timer, say: Progress,
) -> bool:
    """Stage 5: the top `candidates` reranked on their best chunk; True when they were."""
    if not request.rerank:
        plan.stages.rerank = "off"
        return False
    if not candidates:
        return False
    try:
        reranker = ctx.models.reranker()
    except QmdError as exc:
        plan.stages.rerank = "skipped: no rerank model"
        plan.notices.append(f"rerank skipped: {exc.message}")
        return False
    top = candidates[: request.candidates]
    docs.load([c.doc_id for c in top])
    top = [c for c in top if c.doc_id in docs.rows]  # removed since the lists were read: not reranked (it crashed, exit 3)
    say(f"reranking {len(top)} chunks…")
    with timer("rerank"):
        hashes = [docs.rows[c.doc_id].hash for c in top]
        chunk_map = ctx.models.chunks_for(hashes)
        chunks = [best_chunk(docs.texts[h], chunk_map.get(h, []), words, intent_words, 1200) for h in hashes]
        rerank_query = f"{plan.intent}\n{plan.question}" if plan.intent else plan.question
        scores = ctx.models.rerank(rerank_query, [docs.texts[h][start:end] for h, (start, end) in zip(hashes, chunks)], reranker)
        for c, chunk, score in zip(top, chunks, scores):
            c.chunk, c.rerank = chunk, score
    plan.stages.rerank = len(top)
    return True


def question_scale(ctx: QueryContext, model: VectorModel, query: Sequence[float]) -> VectorScale | None:
    """What a cosine means for the question's vector in this index (the Store's cached sample)."""
    return ctx.scale(model, query) if ctx.scale is not None else vector_scale(vector_sample(ctx.backend, model), query)


def make_hits(
    ctx: QueryContext, ranked: list[Candidate], request: QueryRequest, docs: Documents, words: list[str], typed: bool = False, judge: QueryJudge | None = None,
) -> list[SearchHit]:
    """Stage 6's page: the best `limit` candidates scoring at least `min_score`, as hits
    (their docid lengths read once for the page), each with its confidence (`judge`);
    `typed`: the lists are the user's own lines."""
    eligible = [c for c in ranked if c.score >= request.min_score]
    page: list[Candidate] = []
    taken = 0
    while len(page) < request.limit and taken < len(eligible):  # a document removed since the lists were read is left out, the next one taken
        more = eligible[taken : taken + request.limit - len(page)]
        taken += len(more)
        docs.load([c.doc_id for c in more])
        page += [c for c in more if c.doc_id in docs.rows]
    lengths = ctx.backend.docid_lengths([docs.rows[c.doc_id].hash for c in page])
    hits: list[SearchHit] = []
    for c in page:
        row = docs.rows[c.doc_id]
        hit = ctx.hit(row, docs.texts[row.hash], c.score, "hybrid", words, request.snippet_chars, chunk=c.chunk, lengths=lengths)
        if judge is not None:
            judge(hit, row, docs.texts[row.hash], c.rerank)
        if request.explain:
            hit.explain = explained(c, typed)
        hits.append(hit)
    return hits


def explained(c: Candidate, typed: bool = False) -> dict[str, Any]:
    """What --explain shows of one hit: its lists (each with a readable `label`), ranks,
    fused and rerank scores, blend."""
    return {
        "lists": [{"list": n, "label": list_label(n, typed), "rank": r, "rrf": round(v, 6)} for n, r, v in c.contributions],
        "bonus": round(c.bonus, 6),
        "rrf": round(c.rrf_score, 6),
        "rrf_rank": c.rrf_rank,
        "rerank": None if c.rerank is None else round(c.rerank, 6),
        "blend_weight": None if c.rerank is None else blend_weight(c.rrf_rank),
        "score": round(c.score, 6),
    }
