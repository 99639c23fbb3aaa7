"""Reading an index: keyword and vector search, hybrid query, get, multi-get, ls."""

from __future__ import annotations

import math
from collections.abc import Callable
TYPE_CHECKING = False  # typing.TYPE_CHECKING without importing typing (5 ms of every CLI call)

from qmd.core.errors import NotFoundError, QmdError
from qmd.search.confidence import THRESHOLD, Judged, VectorScale, judge_keyword, judge_vector, unmatched_words, vector_sample, vector_scale
from qmd.search.fts import bm25_search
from qmd.search.snippets import make_snippet
from qmd.search.syntax import parse_query
from qmd.backends.base import DocRow, FileRow
from qmd.core.contexts import normalise_subpath
from qmd.core.records import replace
from qmd.core.requests import MATCHES, Outcome, QueryRequest, SearchRequest
from qmd.core.results import Document, FileEntry, MultiGetItem, QueryResult, SearchHit, VectorSearch
from qmd.store.state import IndexState

if TYPE_CHECKING:
    from collections.abc import Sequence
    from typing import Any

    from qmd.backends.base import VectorModel
    from qmd.core.filters import Filter
    from qmd.llm.roles import EmbeddingModel
    from qmd.search.why import WhyTarget
    from qmd.store.models import Models

Wanted = tuple[DocRow, "int | None", "int | None"]  # multi-get: a document and the line range asked for (from, count)
MAX_LIMIT = 1_000_000  # more results than anyone reads; keeps a huge -n from overflowing SQL


def check_min_score(min_score: float) -> None:
    """A QmdError for a minimum score that is not a number from 0 to 1 (NaN included)."""
    if not (isinstance(min_score, (int, float)) and math.isfinite(min_score) and 0.0 <= min_score <= 1.0):
        raise QmdError(f"the minimum score must be a number from 0 to 1, not {min_score!r}", "e.g. --min-score 0.3 (scores rank results; 0 keeps everything)")


def clamp_limit(limit: int) -> int:
    """A result limit clamped to MAX_LIMIT; a QmdError below 1."""
    if limit < 1:
        raise QmdError(f"the number of results must be at least 1, not {limit}", "e.g. -n 10, or --all for every match")
    return min(limit, MAX_LIMIT)


def checked(limit: int | None, min_score: float) -> int | None:
    """Both checks for search and vsearch, whose `limit=None` means every match."""
    check_min_score(min_score)
    return None if limit is None else clamp_limit(limit)


class Reader:
    """Everything that reads documents; never writes, except the best-effort LLM cache."""

    def __init__(self, state: IndexState, models: Callable[[], Models]) -> None:
        self.state = state
        self._models = models  # built on first use: a keyword search never loads the model code
        self._pending: tuple[tuple[object, ...], int] | None = None
        self._sample: tuple[tuple[object, ...], Any] | None = None

    def hit(
        self,
        row: DocRow,
        text: str,
        score: float,
        match: str,
        words: list[str],
        snippet_chars: int,
        line_numbers: bool = False,
        chunk: tuple[int, int] | None = None,
        full: bool = False,
        lengths: dict[str, int] | None = None,
    ) -> SearchHit:
        """A result for `row`: snippet at the best line (within `chunk`, when given) and context;
        `lengths`: docid lengths fetched for a whole page at once (else one query per hit)."""
        region = None if chunk is None else (text.count("\n", 0, chunk[0]), text.count("\n", 0, chunk[1]) + 1)
        line, snippet = make_snippet(text, words, row.body_line, snippet_chars, line_numbers, region)
        return SearchHit(
            docid=row.hash[: lengths[row.hash]] if lengths and row.hash in lengths else self.docid(row.hash),
            collection=row.collection, path=row.path, title=row.title, score=score, line=line,
            snippet=snippet, match=match, context=self.state.context(row.collection, row.path), body=text if full else None,
            metadata=row.metadata,
        )

    def docid(self, content_hash: str) -> str:
        """The docid to print: 6 hex digits, more when another document shares them (so
        `get '#docid'` never finds it ambiguous)."""
        return content_hash[: self.state.db().docid_lengths([content_hash])[content_hash]]

    def search(self, request: SearchRequest, where: Filter | None = None) -> list[SearchHit]:
        return self._search(request, where)[0]

    def _search(self, request: SearchRequest, where: Filter | None = None) -> tuple[list[SearchHit], Judged]:
        """`search`'s hits, and what judging them learnt of the question (for `unmatched_words`)."""
        limit = checked(request.limit, request.min_score)
        parsed = parse_query(request.text)
        backend = self.state.db()
        if request.match not in MATCHES:
            raise QmdError(f"match must be one of {', '.join(MATCHES)}, not {request.match!r}", "--match all (every term) or any (then the best partial matches)")
        for attempt in (1, 2):
            # One hit more than the page: the last hit's lead over the next (its confidence) does not depend on -n.
            listed = bm25_search(backend, parsed, None if limit is None else limit + 1, self.state.search_scope(request.collections), 0.0, where)
            hits = [h for h in listed[:limit] if h.score >= request.min_score]
            if request.match == "all":  # the all-terms hits rank before any fill: dropping it leaves the exact top-k
                hits = [h for h in hits if h.match == "all"]
            found = backend.documents([h.doc_id for h in hits])
            if attempt == 2 or all(h.doc_id in found for h in hits):
                break
            # another process removed a listed document since the list was read (its row
            # missing crashed the search, exit 3): the list is read again, once
        hits = [h for h in hits if h.doc_id in found]
        words = parsed.words
        lengths = backend.docid_lengths([row.hash for row, _ in found.values()])  # one round trip for the page
        out = [
            self.hit(*found[h.doc_id], h.score, h.match, words, request.snippet_chars, request.line_numbers, full=request.full, lengths=lengths)
            for h in hits
        ]
        return out, judge_keyword(out, [found[h.doc_id] for h in hits], hits, listed, request.text)

    def vsearch(self, request: SearchRequest, where: Filter | None = None) -> VectorSearch:
        return self._vsearch(request, where)[0]

    def _vsearch(self, request: SearchRequest, where: Filter | None = None) -> tuple[VectorSearch, Judged]:
        """`vsearch`'s hits, and what judging them learnt of the question (for `unmatched_words`)."""
        limit = checked(request.limit, request.min_score)
        from qmd.search.vector import current_model

        backend = self.state.db()
        embedder = self._models().embedder()
        scope = self.state.search_scope(request.collections)
        wanted, _ = self.state.embeddable(scope)
        model = current_model(backend, embedder)
        query = embedder.embed_query(request.text)
        # One more than the page: the last hit's lead over the next (its confidence) does not depend on -n.
        listed = backend.nearest_documents(model, query, None if limit is None else limit + 1, scope, where)
        pending = self.pending(model, wanted)
        words = parse_query(request.text).words
        found = [n for n in listed[:limit] if n[1] >= request.min_score]
        rows = backend.documents([doc_id for doc_id, _, _ in found])
        found = [n for n in found if n[0] in rows]  # removed since the list was read: left out
        lengths = backend.docid_lengths([row.hash for row, _ in rows.values()])
        out = [
            self.hit(*rows[doc_id], similarity, "vector", words, request.snippet_chars, request.line_numbers, chunk, request.full, lengths)
            for doc_id, similarity, chunk in found
        ]
        judged = judge_vector(out, [rows[doc_id] for doc_id, _, _ in found], found, listed, request.text, self.scale(model, query))
        return VectorSearch(out, embedder.info.name, pending), judged

    def pending(self, model: VectorModel, wanted: list[str]) -> int:
        """Documents of the `wanted` collections whose current content has no vectors for
        `model` (vsearch and query say so). Counting costs ~5-9 ms on a large index: cached
        until another connection commits (the backend's change token) or this Store writes."""
        from qmd.search.vector import pending_count

        backend = self.state.db()
        key = (model.id, tuple(wanted), backend.change_token(), self.state.writes)
        if self._pending is None or self._pending[0] != key:
            self._pending = (key, pending_count(backend, model, wanted))
        return self._pending[1]

    def scale(self, model: VectorModel, query: Sequence[float]) -> VectorScale | None:
        """What a cosine means for `query` in this index (the confidence's). The sample of
        chunk vectors is read once (256 seeks and lookups) and kept until the index changes:
        another connection commits (the backend's change token), this Store writes, or the
        connection is another (a token is only comparable on one connection)."""
        backend = self.state.db()
        key = (backend.connection(), model.id, backend.change_token(), self.state.writes)
        if self._sample is None or self._sample[0] != key:
            self._sample = (key, vector_sample(backend, model))
        return vector_scale(self._sample[1], query)

    def query(self, request: QueryRequest, progress: Callable[[str], None] | None, where: Filter | None = None) -> QueryResult:
        check_min_score(request.min_score)
        if request.candidates < 1:
            raise QmdError(f"the number of rerank candidates must be at least 1, not {request.candidates}", "e.g. -C 40")
        request = replace(request, limit=clamp_limit(request.limit), candidates=min(request.candidates, MAX_LIMIT))
        from qmd.search.hybrid import QueryContext, run_query
        from qmd.search.narrowed import narrowed

        # The filter narrows every list the pipeline runs, before fusion and rerank.
        scope = self.state.search_scope(request.collections)
        wanted, _ = self.state.embeddable(scope)
        context = QueryContext(
            narrowed(self.state.db(), where), scope, self._models(), self.hit, lambda model: self.pending(model, wanted),
            None if request.why is None else self._why_target(request.why, scope, where), scale=self.scale,
        )
        result = run_query(context, request, progress)
        result.threshold = self.threshold(request)
        if result.why is not None and result.why.get("threshold") is None:
            result.why["threshold"] = result.threshold  # the threshold in force, not only one asked for
        if request.full:  # each hit's whole document
            for hit in result.hits:
                hit.body = self.get(hit.uri, None, None, None).text
        return result

    def _why_target(self, ref: str, scope: list[str] | None, where: Filter | None) -> WhyTarget:
        """The document `query --why` asks about: found, searched, matching the filter, its chunks."""
        from qmd.search.vector import current_model
        from qmd.search.why import WhyTarget, chunk_states, not_found
        from qmd.store import refs

        backend, colls = self.state.db(), self.state.collections()
        try:
            row = refs.resolve(backend, colls, refs.split_range(ref)[0], None, blind=self.state.blind)
        except NotFoundError as exc:
            return not_found(ref, exc)
        outside = filtered = ""
        if scope is not None and row.collection not in scope:
            default = colls[row.collection].include_by_default if row.collection in colls else True
            outside = (f"its collection '{row.collection}' is not among those searched ({', '.join(scope)})" if default else
                       f"its collection '{row.collection}' is left out of searches by default (includeByDefault: false)") + f"; add -c {row.collection}"
        if where is not None and not backend.count_matching(where, [row.collection], [row.id]):
            filtered = "its metadata or date does not match --filter / --since / --until"
        embedder: EmbeddingModel | None = None
        model: VectorModel | None = None
        try:
            embedder = self._models().embedder()
            model = current_model(backend, embedder)
        except QmdError:
            pass  # no embed model (chunk_states says so), or no vectors of it yet (every chunk pending)
        text = refs.read_content(backend, row.hash)
        return WhyTarget(ref, row, "", outside, filtered, backend, chunk_states(backend, embedder, model, row, text))

    def answer(self, request: SearchRequest | QueryRequest, progress: Callable[[str], None] | None, where: Filter | None = None) -> Outcome:
        """What a search command prints for `request` (Store.answer)."""
        if isinstance(request, QueryRequest):
            result = self.query(request, progress, where)
            outcome = Outcome(result.hits, {}, result.notices, result.stages.as_dict(), result.searches, result.timings_ms, result.model, result.pending, result.why, unmatched=result.unmatched)
        else:
            if request.vector:
                found, judged = self._vsearch(request, where)
                outcome = Outcome(found.hits, model=found.model, pending=found.pending)
            else:
                hits, judged = self._search(request, where)
                outcome = Outcome(hits)
            outcome.unmatched = unmatched_words(self.state.db(), judged.words, self.state.search_scope(request.collections), where, judged.held)
        outcome.threshold = self.threshold(request)
        wanted = {h.collection for h in outcome.hits}
        outcome.roots = {name: str(coll.path) for name, coll in self.state.collections().items() if name in wanted}
        return outcome

    def threshold(self, request: SearchRequest | QueryRequest) -> float:
        """The confidence below which a hit is a best guess: the request's, else the config's
        `search: {min_confidence}`, else qmd's measured default."""
        if request.min_confidence is not None:
            return float(request.min_confidence)
        configured = self.state.config.min_confidence
        return THRESHOLD if configured is None else configured

    def get(self, ref: str, from_line: int | None, max_lines: int | None, cwd: str | None) -> Document:
        from qmd.store import refs  # here: a search never reads a reference

        target, start, count = refs.split_range(ref)
        from_line = from_line or start
        max_lines = max_lines if max_lines is not None else count
        backend = self.state.db()
        colls = self.state.collections()
        try:
            row = refs.resolve(backend, colls, target, cwd, blind=self.state.blind)
        except NotFoundError as exc:
            typed = ref.strip()[len(target.strip()) :]  # the ":FROM[:COUNT]" the user typed, kept in the did-you-mean
            if not typed or not exc.message.startswith("document not found: "):
                raise
            raise refs.not_found(backend, target.strip(), colls, typed) from None
        lines = refs.read_content(backend, row.hash).split("\n")
        first = max((from_line or 1), 1)
        if first > len(lines):
            raise QmdError(f"{row.collection}/{row.path} has {len(lines)} lines; line {first} does not exist", "pick a line within the file")
        last = len(lines) if max_lines is None else min(len(lines), first - 1 + max(max_lines, 0))
        return Document(
            docid=self.docid(row.hash), collection=row.collection, path=row.path, title=row.title,
            text="\n".join(lines[first - 1 : last]), from_line=first, total_lines=len(lines),
            context=self.state.context(row.collection, row.path), abs_path=refs.abs_path(colls, row), shown=max(last - first + 1, 0),
        )

    def multi_get(self, pattern: str, max_lines: int | None, max_bytes: int, cwd: str | None) -> list[MultiGetItem]:
        from qmd.store import refs

        backend = self.state.db()
        colls = self.state.collections()
        wanted: list[Wanted] = []
        if any(ch in pattern for ch in "*?["):
            glob = pattern[len("qmd://") :] if pattern.startswith("qmd://") else pattern
            from qmd.index.scan import glob_regex

            regex = glob_regex(glob)  # `**/` is zero or more folders, `*` stops at `/`
            for row in backend.find():
                if row.collection in colls and (regex.match(f"{row.collection}/{row.path}") or regex.match(row.path)):
                    wanted.append((row, None, None))
            if not wanted:
                raise NotFoundError(f"no documents match {pattern}", "patterns match collection/path, e.g. 'notes/**/*.md'")
            return self._items(wanted, max_bytes, max_lines, [])
        missing: list[tuple[int, MultiGetItem]] = []  # the names that find no document, where they stood
        names = [p.strip() for p in pattern.split(",") if p.strip()]
        if not names:  # `,,,` (a script's empty join): an empty answer read as every document fetched
            raise QmdError(f"no document names in {pattern!r}", "name documents separated by commas, e.g. notes/a.md,notes/b.md, or a glob such as 'notes/*.md'")
        finder: refs.Finder = refs.Snapshot(backend) if len(names) > 1 else backend  # one read for every name
        for ref in names:
            target, start, count = refs.split_range(ref)  # `path:FROM[:COUNT]`: that item's lines
            try:
                wanted.append((refs.resolve(finder, colls, target, cwd, blind=self.state.blind), start, count))
            except NotFoundError as exc:
                if len(names) == 1:
                    raise
                reason = exc.message + (f" ({exc.cli_hint})" if exc.cli_hint else "")
                missing.append((len(wanted) + len(missing), MultiGetItem("", "", ref, "", None, skipped=reason)))
        if not wanted and missing:
            raise NotFoundError(f"none of the {len(names)} documents was found: {', '.join(n[:80] for n in names[:5])}", "list documents with: qmd ls")
        return self._items(wanted, max_bytes, max_lines, missing)

    def _items(self, wanted: list[Wanted], max_bytes: int, max_lines: int | None, missing: list[tuple[int, MultiGetItem]]) -> list[MultiGetItem]:
        """multi-get's items for `wanted` (each document and range once), with the `missing`
        names put back where they stood. A document over `max_bytes` is skipped, unless a
        line range was asked for: then the lines shown are what must fit."""
        from qmd.store import refs

        backend = self.state.db()
        out: list[MultiGetItem] = []
        unique = {(r.collection, r.path, start, count): (r, start, count) for r, start, count in wanted}  # in order (a row holding metadata is not hashable)
        for row, start, count in unique.values():
            ctx = self.state.context(row.collection, row.path)
            ranged = start is not None or count is not None
            name = f"{row.collection}/{row.path}"

            def skipped(reason: str) -> MultiGetItem:
                return MultiGetItem(self.docid(row.hash), row.collection, row.path, row.title, None, skipped=reason, context=ctx)  # noqa: B023 - used at once

            if row.size > max_bytes and not ranged:
                out.append(skipped(f"{row.size} bytes is over the {max_bytes}-byte limit; use qmd get {name}, or a line range: {name}:1:100"))
                continue
            lines = refs.read_content(backend, row.hash).split("\n")
            first = start or 1
            if first > len(lines):
                out.append(skipped(f"{name} has {len(lines)} lines; line {first} does not exist"))
                continue
            want = count if count is not None else max_lines
            shown = lines[first - 1 :] if want is None else lines[first - 1 : first - 1 + max(want, 0)]
            text = "\n".join(shown)
            if ranged and len(text.encode("utf-8")) > max_bytes:
                out.append(skipped(f"lines {first}-{first + len(shown) - 1} hold {len(text.encode('utf-8'))} bytes, over the {max_bytes}-byte limit; ask for fewer lines"))
                continue
            out.append(MultiGetItem(self.docid(row.hash), row.collection, row.path, row.title, text, total_lines=len(lines),
                                    truncated_lines=len(lines) - (first - 1) - len(shown), context=ctx, from_line=first, ranged=ranged, shown=len(shown)))
        for at, item in missing:
            out.insert(min(at, len(out)), item)
        return out

    def ls(self, target: str | None) -> list[FileEntry]:
        ref = (target or "").strip()
        if ref.startswith("qmd://"):
            ref = ref[len("qmd://") :]
        name, _, sub = ref.partition("/")
        self.state.collection(name)
        sub = normalise_subpath(sub).lstrip("/")
        files = self.state.db().files(name, sub)
        if sub and not files:
            files = self._by_prefix(name, sub)
        lengths = self.state.db().docid_lengths([f.hash for f in files])
        return [FileEntry(f.collection, f.path, f.size, f.mtime_ns, f.hash[: lengths[f.hash]], f.title) for f in files]

    def _by_prefix(self, name: str, sub: str) -> list[FileRow]:
        """A sub-path naming no folder or file: the files whose path starts with it (the
        original's rule: `ls notes/blue` lists bluegreen.md), else a NotFoundError naming
        the folders it is close to."""
        every = self.state.db().files(name, "")
        found = [f for f in every if f.path.startswith(sub)]
        if found:
            return found
        import difflib

        folders = sorted({f.path.rsplit("/", i)[0] for f in every for i in range(1, f.path.count("/") + 1)})
        close = difflib.get_close_matches(sub.rstrip("/"), folders, n=3, cutoff=0.6)
        by_name = [d for d in folders if d.rsplit("/", 1)[-1] == sub.rstrip("/").rsplit("/", 1)[-1] and d not in close]
        near = (close + by_name)[:3]
        if near:
            hint = "did you mean: " + ", ".join(f"qmd ls {name}/{d}" for d in near)
        elif every:
            hint = f"list the collection's files with: qmd ls {name}"
        else:
            hint = f"collection '{name}' has no indexed files yet: run qmd update"
        raise NotFoundError(f"no files under qmd://{name}/{sub}", hint)
