"""Plain data returned by the public API (the CLI and MCP server only format these)."""

from __future__ import annotations

from qmd.core.records import field, record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any


def uri(collection: str, path: str) -> str:
    """The virtual path of a document: qmd://collection/path."""
    return f"qmd://{collection}/{path}"


@record
class SearchHit:
    docid: str  # first 6 hex of the content hash
    collection: str
    path: str
    title: str
    score: float
    line: int
    snippet: str
    match: str  # "all": every query term present; "any": filled from the any-term query
    context: str | None = None
    body: str | None = None
    explain: dict[str, Any] | None = None  # hybrid query only, with --explain
    metadata: dict[str, Any] | None = None  # the document's typed front-matter metadata (None: none)
    confidence: float | None = None  # how likely it answers the question, in [0, 1] (qmd/search/confidence.py)
    evidence: dict[str, float] | None = None  # what the confidence was computed from (--explain)

    @property
    def uri(self) -> str:
        return uri(self.collection, self.path)

    def below(self, threshold: float) -> bool:
        """Whether the hit is a best guess rather than an answer at this confidence threshold
        (the confidence as printed, to 2 decimals: a hit shown at 0.37 is not below 0.37)."""
        return self.confidence is not None and round(self.confidence, 2) < threshold

    def to_json(self, *, file: str | None = None, mcp: bool = False, threshold: float | None = None, unmatched: list[str] | None = None) -> dict[str, Any]:
        """The hit as JSON, in the original's field order (`file` replaces the qmd:// URI).

        The CLI's `--json` shape (`mcp=False`): context only when set, `body` instead of
        the snippet for `--full`, and `match`. The MCP tools' and HTTP API's shape
        (`mcp=True`): always a context and a snippet, no `match`. Both end with ours:
        `confidence` and, given a `threshold`, `below_threshold`; `unmatched` (the CLI's:
        words of the question no document holds) when there are any.
        """
        name = file or self.uri
        if mcp:
            out: dict[str, Any] = {
                "docid": f"#{self.docid}", "file": name, "title": self.title, "score": round(self.score, 2),
                "context": self.context, "line": self.line, "snippet": self.snippet,
            }
            if self.metadata:
                out["metadata"] = self.metadata
            return self._judged(out, threshold, None)
        row: dict[str, Any] = {"docid": f"#{self.docid}", "score": round(self.score, 2), "file": name, "line": self.line, "title": self.title}
        if self.context:
            row["context"] = self.context
        if self.body is not None:
            row["body"] = self.body
        else:
            row["snippet"] = self.snippet
        row["match"] = self.match
        if self.metadata:
            row["metadata"] = self.metadata
        return self._judged(row, threshold, unmatched)

    def _judged(self, row: dict[str, Any], threshold: float | None, unmatched: list[str] | None) -> dict[str, Any]:
        if self.confidence is not None:
            row["confidence"] = round(self.confidence, 2)
            if threshold is not None:
                row["below_threshold"] = self.below(threshold)
        if unmatched:
            row["unmatched"] = list(unmatched)
        return row


def line_span(from_line: int, shown: int, total: int) -> str:
    """`10-14 of 50`: the lines shown; `0 of 50, from line 10` for a range of no lines (`-l 0`)."""
    if shown <= 0:
        return f"0 of {total}, from line {from_line}"
    return f"{from_line}-{from_line + shown - 1} of {total}"


@record
class Document:
    """A document, or a line range of one, as returned by get."""

    docid: str
    collection: str
    path: str
    title: str
    text: str  # the selected lines, joined with \n
    from_line: int  # 1-based number of the first selected line
    total_lines: int
    context: str | None = None
    abs_path: str | None = None
    shown: int | None = None  # the lines selected (0 for `-l 0`; one empty line is 1); None: counted from `text`

    @property
    def uri(self) -> str:
        return uri(self.collection, self.path)

    @property
    def lines_shown(self) -> int:
        if self.shown is not None:
            return self.shown
        return self.text.count("\n") + 1 if self.text else 0

    @property
    def line_span(self) -> str:
        return line_span(self.from_line, self.lines_shown, self.total_lines)


@record
class MultiGetItem:
    docid: str
    collection: str
    path: str
    title: str
    text: str | None  # None when skipped
    total_lines: int = 0
    truncated_lines: int = 0
    skipped: str | None = None  # the reason, when skipped
    context: str | None = None
    from_line: int = 1  # 1-based number of the first line of `text`
    ranged: bool = False  # the list named a line range for it (`notes/a.md:10:5`)
    shown: int | None = None  # the lines selected (one empty line is 1); None: counted from `text`

    @property
    def lines_shown(self) -> int:
        if self.shown is not None:
            return self.shown
        return self.text.count("\n") + 1 if self.text else 0

    @property
    def line_span(self) -> str:
        return line_span(self.from_line, self.lines_shown, self.total_lines)

    @property
    def uri(self) -> str:
        """qmd://collection/path; for an item of a list that named no document, the name as given."""
        return uri(self.collection, self.path) if self.collection else self.path

    @property
    def found(self) -> bool:
        """False for an item of a comma list that names no document (`skipped` says why)."""
        return bool(self.collection)


@record
class FileEntry:
    collection: str
    path: str
    size: int
    mtime_ns: int
    docid: str
    title: str

    @property
    def uri(self) -> str:
        return uri(self.collection, self.path)


@record
class CollectionInfo:
    name: str
    path: str
    pattern: str
    ignore: list[str]
    include_by_default: bool
    documents: int
    updated_at: str | None
    contexts: dict[str, str] = field(default_factory=dict)
    update_command: str | None = None
    embed: bool = True
    skipped: int = 0
    warnings: int = 0
    embedded_documents: int | None = None  # with vectors of the current embed model (None: no model)


@record
class Overlap:
    """Two collections over the same files: the same folder, or one inside the other. Each
    file indexed by both is a document in each, so a search shows it twice."""

    collection: str  # the inner folder's collection (the later one for the same folder)
    other: str  # the collection whose folder holds it
    files: int  # files indexed in both (0 before either is indexed)
    same_folder: bool


@record
class ContextInfo:
    target: str  # "/" for global, else qmd://collection/sub
    text: str


@record
class UpdateReport:
    collections: list  # list[indexer.CollectionReport]
    command_failures: list[tuple[str, str]] = field(default_factory=list)  # (collection, message)
    errors: list[tuple[str, str, str | None]] = field(default_factory=list)  # (collection, message, hint): not indexed
    dropped_collections: list[tuple[str, int]] = field(default_factory=list)  # (name, documents): no longer in the config
    kept_collections: list[tuple[str, str]] = field(default_factory=list)  # (name, the config that indexed it): not in this config, another's

    @property
    def totals(self) -> dict[str, int]:
        keys = ("new", "updated", "unchanged", "removed")
        out = {k: sum(getattr(c, k) for c in self.collections) for k in keys}
        out["skipped"] = sum(len(c.skipped) for c in self.collections)
        out["warnings"] = sum(len(c.warnings) for c in self.collections)
        return out


@record
class StatusInfo:
    index_path: str
    size_bytes: int
    documents: int
    inactive: int
    content_rows: int
    updated_at: str | None
    collections: list[CollectionInfo]
    issues: list[tuple[str, str, str, str]]  # (collection, path, severity, reason)
    global_context: str | None = None
    running: dict[str, object] | None = None  # an update or embed writing now: pid, command, done, total
    grammars: list[GrammarInfo] = field(default_factory=list)  # tree-sitter grammars for chunk strategy auto
    overlaps: list[Overlap] = field(default_factory=list)  # collections indexing the same files (every hit of them twice)


@record
class GrammarInfo:
    """One tree-sitter grammar `--chunk-strategy auto` uses: loads, or why not and how to get it."""

    language: str
    available: bool
    reason: str | None = None
    install: str | None = None


@record
class CleanupReport:
    inactive_removed: int
    orphaned_content_removed: int
    bytes_before: int
    bytes_after: int
    dropped_collections: list[tuple[str, int]] = field(default_factory=list)  # (name, documents): no longer in the config
    kept_collections: list[tuple[str, str]] = field(default_factory=list)  # (name, the config that indexed it): not in this config, another's


@record
class VectorSearch:
    """vsearch hits plus what the caller must say: which model, how many documents lack vectors."""

    hits: list[SearchHit]
    model: str
    pending: int


@record
class ModelStatus:
    role: str
    spec: str
    source: str  # config | env | installed | default
    path: str
    available: bool


@record
class VectorStatus:
    model: str | None
    fingerprint: str | None
    chunks: int
    embedded_documents: int
    pending_documents: int
    pending_never_embedded: int = 0  # of pending_documents: no vectors of this model under any settings
    pending_other_settings: int = 0  # of pending_documents: vectors cut with other chunk settings or another build of the model


@record
class Stages:
    """What each stage of a hybrid query did (None: the stage did not come up)."""

    strong_signal: bool | None = None  # the keyword probe found a clear winner (expansion skipped)
    expand: str | None = None  # "off", "N lines (M lex dropped)" or "skipped: why"
    vector: int | None = None  # vector lists searched
    bm25: int | None = None  # keyword lists searched
    feedback: int | None = None  # words the pseudo-relevance feedback added (0: none)
    rerank: int | str | None = None  # documents reranked, "off" or "skipped: why"

    def as_dict(self) -> dict[str, Any]:
        """The stages that came up, in order (what `--explain` and `--json` print)."""
        return {name: value for name, value in self.__dict__.items() if value is not None}


@record
class QueryResult:
    """Hybrid query hits, plus what ran: stages, the sub-queries searched, notices, timings."""

    hits: list[SearchHit]
    stages: Stages
    searches: list[dict[str, Any]]
    notices: list[str]
    timings_ms: dict[str, float]
    model: str = ""  # the embed model the vector lists searched ("" when none did)
    pending: int = 0  # documents in the searched collections whose current content it has no vectors for
    why: dict[str, Any] | None = None  # with `why`: where that document stood in each stage (qmd/search/why.py)
    unmatched: list[str] = field(default_factory=list)  # words of the question no searched document holds
    threshold: float = 0.0  # hits whose confidence is below it are best guesses (below_threshold)
