"""`query --why REF`: where one document stood in each stage of a query, and why it was not shown.

A user or an agent who expected a document asks where it stood. The answer, a JSON-able
dict (`QueryResult.why`), says in order:
1. whether the reference names a document of the index (`missing`: why not);
2. whether the query could see it at all: its collection searched (`outside`: why not),
   its metadata and date matching the filter (`filtered`: why not);
3. its vectors: whether the embed model has vectors for its current content, and the state
   of each chunk (embedded for this model, pending: cut as the next `qmd embed` would cut it,
   orphaned: chunks of an earlier version of the file, searched by nobody until `cleanup`);
4. each list of the query (keyword, vector, feedback): its rank and score there, or, when the
   list's top LIST_DEPTH left it out, where it stood below that (up to WHY_DEPTH), or that
   it matched none of the words / had no vectors (it then stands in the vector lists at its
   keyword rank, qmd/search/fusion.py `stand_ins`);
5. its fused rank and score; whether the reranker read it (or the candidate limit, -C,
   left it out) and its score; its final rank and score, and what cut it: the candidate
   limit, --min-score or the number of results asked for (-n);
6. `confidence` and `threshold`: a shown hit's confidence (None when the document is not shown) and the threshold in force.

The Store resolves the reference and checks scope, filter and chunks (`WhyTarget`, before
the query); the pipeline hands over what it ran (`Trace`), and `explain_why` adds the ranks.
Nothing here runs when `why` is not asked for. `why_lines` writes the answer for people
(the CLI and the MCP text alike).
"""

from __future__ import annotations

from dataclasses import dataclass

from qmd.core.errors import QmdError
from qmd.search.fusion import list_label

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.backends.base import DocRow, IndexBackend, VectorModel
    from qmd.core.requests import QueryRequest
    from qmd.core.results import SearchHit
    from qmd.llm.roles import EmbeddingModel
    from qmd.search.fusion import RankedList
    from qmd.search.hybrid import Candidate, QueryContext, VectorSide
    from qmd.search.narrowed import Searchable

WHY_DEPTH = 1000  # how far down a list the report looks for a document its top LIST_DEPTH left out
ORPHANS_READ = 200  # orphaned contents compared with the document's text, at most
SAME_VERSION = 0.5  # an orphaned content sharing this share of its lines is an earlier version


@dataclass(frozen=True)
class WhyTarget:
    """What the Store knows of the document asked about, before the query runs."""

    ref: str
    row: DocRow | None = None  # None: no document found
    missing: str = ""  # why no document was found (message and hint)
    outside: str = ""  # why its collection is not searched ("": it is)
    filtered: str = ""  # why the filter leaves it out ("": it matches, or there is none)
    index: Searchable | None = None  # the whole index (no filter): where the document would have stood
    chunks: dict[str, Any] | None = None  # `chunk_states`


@dataclass
class Trace:
    """What the pipeline ran, handed to `explain_why` (only when `why` is asked for)."""

    lists: list[tuple[str, str, float, str]]  # (name, kind, weight, text) as planned
    named: list[RankedList]  # the lists as fused (the feedback list included)
    vectors: VectorSide | None
    candidates: list[Candidate]  # fused order
    ranked: list[Candidate]  # final order (after the candidate limit when reranked)
    hits: list[SearchHit]
    without_vectors: frozenset[int]
    rerank: object  # the rerank stage: a count, "off" or "skipped: why"
    typed: bool = False  # the lists are the user's own lines (their names for people: fusion.list_label)


def chunk_states(backend: IndexBackend, embedder: EmbeddingModel | None, model: VectorModel | None, row: DocRow, text: str) -> dict[str, Any]:
    """The vectors of one document under the current embed model: `state` embedded or
    pending, each chunk of its current content (`chunks`: seq, lines, state) and the chunks of
    earlier versions no document uses any more (`orphaned`)."""
    if embedder is None:
        return {"model": None, "state": "no embed model", "chunks": [], "orphaned": []}
    name = embedder.info.name
    if model is None:
        spans: list[tuple[int, int]] = []
    else:
        spans = backend.chunk_spans(model, [row.hash]).get(row.hash, [])
    state = "embedded" if spans else "pending"
    if not spans:  # cut as the next `qmd embed` would cut it
        from qmd.index.embedding import is_markdown, prepare

        spans = [(start, end) for _, start, end, _ in prepare(embedder, text, row.title, row.hash, markdown=is_markdown(row.path)).starts]
    chunks = [{"seq": i, "lines": _lines(text, s, e), "state": state} for i, (s, e) in enumerate(spans)]
    return {"model": name, "state": state, "chunks": chunks, "orphaned": [] if model is None else _orphans(backend, model, text)}


def _orphans(backend: IndexBackend, model: VectorModel, text: str) -> list[dict[str, Any]]:
    """Chunks of `model` whose content no document uses and shares most of its lines with
    `text`: an earlier version of this document (an edit leaves most lines as they were)."""
    mine = {line.strip() for line in text.splitlines() if line.strip()}
    out: list[dict[str, Any]] = []
    for h in backend.orphaned_hashes(model, ORPHANS_READ):
        old = backend.content(h)
        lines = {line.strip() for line in (old or "").splitlines() if line.strip()}
        if old is None or not lines or len(lines & mine) / len(lines) < SAME_VERSION:
            continue
        spans = backend.chunk_spans(model, [h]).get(h, [])
        out += [{"seq": i, "lines": _lines(old, s, e), "state": "orphaned", "version": h[:6]} for i, (s, e) in enumerate(spans)]
    return out


def _lines(text: str, start: int, end: int) -> str:
    return f"{text.count(chr(10), 0, start) + 1}-{text.count(chr(10), 0, max(start, end - 1)) + 1}"


def not_found(ref: str, error: QmdError) -> WhyTarget:
    return WhyTarget(ref, missing=error.message + (f" ({error.cli_hint})" if error.cli_hint else ""))


def explain_why(ctx: QueryContext, request: QueryRequest, target: WhyTarget, trace: Trace) -> dict[str, Any]:
    """The report of the module docstring for `target` after a query ran as `trace` says."""
    row = target.row
    report: dict[str, Any] = {"ref": target.ref, "document": None, "verdict": "", "missing": target.missing, "outside": target.outside,
                              "filtered": target.filtered, "vectors": target.chunks, "lists": [], "fused": None, "rerank": None,
                              "final": None, "shown": False, "confidence": None, "threshold": getattr(request, "min_confidence", None)}
    if row is None:
        report["verdict"] = f"not in the index: {target.missing}"
        return report
    report["document"] = {"uri": f"qmd://{row.collection}/{row.path}", "docid": row.hash[:6], "title": row.title}
    seen = not (target.outside or target.filtered)
    index = ctx.backend if seen or target.index is None else target.index
    scope = ctx.scope if seen or ctx.scope is None else [*ctx.scope, row.collection]
    report["lists"] = [_list_entry(index, scope, trace, name, kind, text, row.id) for name, kind, _, text in trace.lists]
    report["lists"] += [_entry(x.name, trace, x, row.id) or _absent(x.name, trace, "not among its hits") for x in trace.named if x.name not in {n for n, *_ in trace.lists}]
    verdict = _stages(report, request, trace, row.id)
    if target.outside:
        verdict = f"not searched: {target.outside}"
    elif target.filtered:
        verdict = f"left out by the filter: {target.filtered}"
    report["verdict"] = verdict
    return report


def _stages(report: dict[str, Any], request: QueryRequest, trace: Trace, doc: int) -> str:
    """Fused, rerank and final stages of `doc` into `report`; returns the verdict."""
    fused = next((c for c in trace.candidates if c.doc_id == doc), None)
    if fused is None:
        below = [f"{x['label']} rank {x['rank']}, {x['note']}" for x in report["lists"] if x.get("rank") is not None]
        if below:  # it matched, further down than any list keeps: not "no keyword match"
            return "in none of the query's lists as kept: " + "; ".join(below)
        return "in none of the query's lists: " + ("no keyword match, and its vectors are not near enough" if trace.vectors else "no keyword match")
    report["fused"] = {"rank": fused.rrf_rank, "of": len(trace.candidates), "rrf": round(fused.rrf_score, 6),
                       "lists": [{"list": n, "label": list_label(n, trace.typed), "rank": r, "rrf": round(v, 6)} for n, r, v in fused.contributions]}
    if fused.rerank is not None:
        report["rerank"] = {"score": round(fused.rerank, 6)}
    elif isinstance(trace.rerank, int):
        report["rerank"] = {"note": f"not read: fused rank {fused.rrf_rank} is outside the {request.candidates} candidates the reranker reads (-C)"}
    else:
        report["rerank"] = {"note": str(trace.rerank)}
    at = next((i for i, c in enumerate(trace.ranked, 1) if c.doc_id == doc), None)
    if at is None:
        return f"cut by the candidate limit: fused rank {fused.rrf_rank}, and only the top {request.candidates} are reranked and ranked (-C)"
    report["final"] = {"rank": at, "score": round(fused.score, 6)}
    hit = next((h for h, c in zip(trace.hits, [c for c in trace.ranked if c.score >= request.min_score]) if c.doc_id == doc), None)
    if hit is not None:
        report["shown"] = True
        report["confidence"] = getattr(hit, "confidence", None)
        shown = [h.uri for h in trace.hits].index(hit.uri) + 1
        return f"shown at rank {shown} of {len(trace.hits)}"
    if fused.score < request.min_score:
        return f"cut by --min-score: its score {fused.score:.2f} is below {request.min_score:g}"
    return f"ranked {at}, below the {request.limit} results asked for (-n)"


def _entry(name: str, trace: Trace, ranked: RankedList, doc: int) -> dict[str, Any] | None:
    if doc not in ranked.keys:
        return None
    i = list(ranked.keys).index(doc)
    score = round(ranked.scores[i], 4) if i < len(ranked.scores) else None
    return {"list": name, "label": list_label(name, trace.typed), "rank": i + 1, "score": score, "note": ""}


def _absent(name: str, trace: Trace, note: str, rank: int | None = None, score: float | None = None) -> dict[str, Any]:
    return {"list": name, "label": list_label(name, trace.typed), "rank": rank, "score": score, "note": note}


def _list_entry(index: Searchable, scope: list[str] | None, trace: Trace, name: str, kind: str, text: str, doc: int) -> dict[str, Any]:
    """Where `doc` stood in one planned list: its entry, else its place further down."""
    ranked = next((x for x in trace.named if x.name == name), None)
    found = None if ranked is None else _entry(name, trace, ranked, doc)
    if found is not None:
        return found
    if kind == "bm25":
        from qmd.search.fts import bm25_search
        from qmd.search.syntax import parse_query

        hits = bm25_search(index, parse_query(text), WHY_DEPTH, scope)
        place = next(((i, h.score) for i, h in enumerate(hits, 1) if h.doc_id == doc), None)
        if place is None:
            return _absent(name, trace, "the document has none of its words" if len(hits) < WHY_DEPTH else f"not in its top {WHY_DEPTH}")
        return _absent(name, trace, f"below the {len(ranked.keys) if ranked else 0} hits the list keeps", place[0], round(place[1], 4))
    if trace.vectors is None:
        return _absent(name, trace, "not searched: no vectors")
    if doc in trace.without_vectors:
        return _absent(name, trace, "no vectors for its current content: counted at its keyword rank")
    from qmd.search.vector import query_inputs

    side = trace.vectors
    qvec = side.embedder.embed(query_inputs(side.embedder, [(name, text)]))[0]
    near = index.nearest_documents(side.model, qvec, WHY_DEPTH, scope)
    place = next(((i, s) for i, (d, s, _) in enumerate(near, 1) if d == doc), None)
    if place is None:
        return _absent(name, trace, f"not in its top {WHY_DEPTH}" if len(near) >= WHY_DEPTH else "no vectors")
    return _absent(name, trace, f"below the {len(ranked.keys) if ranked else 0} nearest the list keeps", place[0], round(place[1], 4))


def why_lines(report: dict[str, Any]) -> list[str]:
    """The report for people: a heading with the verdict, then one line per stage."""
    doc = report.get("document")
    lines = [f"Why {doc['uri'] if doc else report['ref']}: {report['verdict']}"]
    if doc is None:
        return lines
    vectors = report.get("vectors")
    if vectors:
        chunks = vectors.get("chunks", [])
        state = vectors.get("state")
        lines.append(f"  vectors: {state} for {vectors.get('model')}" + (f" ({len(chunks)} chunk{'s' if len(chunks) != 1 else ''})" if chunks else ""))
        for c in [*chunks, *vectors.get("orphaned", [])]:
            extra = f", of earlier version {c['version']}" if c.get("version") else ""
            lines.append(f"    chunk {c['seq']}: lines {c['lines']}: {c['state']}{extra}")
    for x in report.get("lists", []):
        where = f"rank {x['rank']}" + (f" (score {x['score']})" if x.get("score") is not None else "") if x.get("rank") else "absent"
        lines.append(f"  {x['label']}: {where}" + (f" — {x['note']}" if x.get("note") else ""))
    fused = report.get("fused")
    if fused:
        lines.append(f"  fused: rank {fused['rank']} of {fused['of']} (rrf {fused['rrf']})")
    rerank = report.get("rerank")
    if rerank:
        lines.append("  rerank: " + (f"{rerank['score']}" if "score" in rerank else rerank["note"]))
    final = report.get("final")
    if final:
        lines.append(f"  final: rank {final['rank']} (score {final['score']})")
    if report.get("confidence") is not None:
        threshold = report.get("threshold")
        lines.append(f"  confidence: {report['confidence']}" + (f" (threshold {threshold})" if threshold is not None else ""))
    return lines
