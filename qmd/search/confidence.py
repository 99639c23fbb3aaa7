"""Confidence (issue 28): how likely a hit answers the question, in [0, 1].

`score` ranks hits and keeps the original's meaning; it does not say whether the first hit
answers anything (`query` without a reranker scores its first hit 1.0 whatever it is, and
`search` prints 75-84% for the any-term fill of a nonsense word). The confidence is an
estimate of the probability that the hit is the note that answers the question, the same
meaning for `search`, `vsearch` and `query`, whatever the embed model. It is a logistic
model over evidence the pipeline already has:

- coverage: the share of the question's content words (qmd's stop-words out, stemmed by
  FTS5's own porter tokenizer) that the document holds, each matched as the index matches a
  plain term (a stored stem starting with the word's stem);
- unmatched: the share of those words that match no document searched at all (a word a
  shown hit holds where the index holds it too is matched without asking: `Judged.held`);
- BM25: the hit's normalised score |s| / (1 + |s|), and whether it holds every term;
- vectors: the hit's cosine as a z-score against what a cosine means for this model in this
  index: the question's cosines with a fixed sample of the index's chunks (VectorScale), and
  its lead over the next document of the vector list;
- for `query`, whether both lists found it, and its fused rank.

The coefficients are fitted by bench/fit_confidence.py (the trust set's fit split, runs of
all-MiniLM-L6-v2 and EmbeddingGemma-300M pooled); see COEFFICIENTS. A reranker, when one
ran, is evidence of its own: its probability is averaged with the retrieval confidence in
log-odds (`with_rerank`).
"""

from __future__ import annotations

import math
from bisect import bisect_left

from qmd.core.records import field, record
from qmd.search.syntax import STOPWORDS, parse_query

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Collection, Iterable, Sequence
    from typing import Any

    from qmd.backends.base import DocRow, Nearest, VectorModel
    from qmd.core.filters import Filter
    from qmd.core.results import SearchHit
    from qmd.search.fts import FtsHit
    from qmd.search.fusion import RankedList
    from qmd.search.narrowed import Searchable

def stems(text: str) -> list[str]:
    """`text` as FTS5's `porter unicode61` tokenizer stores it (the index's own stems)."""
    from qmd.backends.sql import fts5_tokens

    return fts5_tokens(text)


@record(frozen=True)
class Word:
    """A content word of the question and its stems (a word like `foo_bar` has two)."""

    text: str
    stems: tuple[str, ...]
    # One stem, no CJK, and the index's prefix query for it reads that stem: a keyword search
    # for it matches exactly the documents holding a stem that starts with it (see `held`).
    plain: bool = False


# The word after "how" that asks for the kind of answer ("how many", "how long"): a note
# answers it with a number or a duration, not with the word itself.
ASKING = frozenset({"many", "much", "long", "often", "far", "big", "large", "old", "soon", "quickly", "fast", "frequently"})


def content_words(question: str) -> list[Word]:
    """The question's positive words that are not stop-words (nor an ASKING word after
    "how"), each once, with their stems."""
    out: list[Word] = []
    seen: set[tuple[str, ...]] = set()
    previous = ""
    for word in parse_query(question).words:
        previous, after_how = word, previous == "how"
        if word in STOPWORDS or (after_how and word in ASKING):
            continue
        key = tuple(stems(word))
        if key and key not in seen:
            seen.add(key)
            out.append(Word(word, key, _plain(word, key)))
    return out


def _plain(word: str, key: tuple[str, ...]) -> bool:
    from qmd.backends.sql import fts5_tokens
    from qmd.core.text import has_cjk

    return len(key) == 1 and not has_cjk(word) and tuple(fts5_tokens(word, query=True, prefix=True)) == key


class StemSet:
    """A document's stems, sorted, to ask whether any starts with a word's stem."""

    def __init__(self, text: str, found: Iterable[str] = ()) -> None:
        self.sorted = sorted(set(stems(text)).union(found))

    def has(self, stem: str) -> bool:
        i = bisect_left(self.sorted, stem)
        return i < len(self.sorted) and self.sorted[i].startswith(stem)

    def holds(self, word: Word) -> bool:
        return all(self.has(s) for s in word.stems)


def coverage(words: Sequence[Word], text: str) -> float:
    """Share of `words` that `text` holds as the index would match them (0 without words)."""
    if not words:
        return 0.0
    found = StemSet(text)
    return sum(1 for w in words if found.holds(w)) / len(words)


def read_document(words: Sequence[Word], row: DocRow, text: str) -> tuple[float, set[str]]:
    """The coverage of `words` in the document (`coverage` of its path, title and text), and
    the plain words it holds where the full-text index holds them as they are: its path, title
    and body after the front matter (the index has the front matter's values, not its YAML),
    none when those hold CJK (the index splits CJK runs into characters). A shown hit holding
    such a word is a document a keyword search for the word finds (`unmatched_words`)."""
    if not words:
        return 0.0, set()
    front, body = split_front(text, row.body_line)
    indexed = f"{row.path}\n{row.title}\n{body}"
    own = stems(indexed)  # the tokens of document_text are those of its lines: the two parts' union
    found = StemSet(front, own)
    held = sum(1 for w in words if found.holds(w)) / len(words)
    plain = [w for w in words if w.plain and found.holds(w)]
    if not plain:
        return held, set()
    from qmd.core.text import has_cjk

    if has_cjk(indexed):
        return held, set()
    sure = found if not front else StemSet("", own)
    return held, {w.text for w in plain if sure.holds(w)}


def split_front(text: str, body_line: int) -> tuple[str, str]:
    """(front matter, body) of a document's text, the body starting at line `body_line`."""
    at = 0
    for _ in range(body_line - 1):
        at = text.find("\n", at) + 1
        if not at:
            return text, ""
    return text[:at], text[at:]


def held_by_all(words: Sequence[Word], question: str) -> set[str]:
    """The plain words every document of a keyword search's all-terms list holds: a word whose
    stem starts a token of one of the question's terms (that document holds the token, or for
    a plain term's last token one starting with it)."""
    from qmd.backends.sql import fts5_tokens
    from qmd.core.text import has_cjk

    tokens = [t for term in parse_query(question).positive if not has_cjk(term.text) for t in fts5_tokens(term.text, query=True, prefix=not term.phrase)]
    return {w.text for w in words if w.plain and any(t.startswith(w.stems[0]) for t in tokens)}


def unmatched_words(
    backend: Searchable, words: Sequence[Word], scope: list[str] | None, where: Filter | None = None, held: Collection[str] = (),
) -> list[str]:
    """The words no searched document holds: one one-row keyword search each, but for the
    words `held` by a shown hit (`Judged.held`: a searched document a keyword search finds)."""
    from qmd.backends.base import Term, TextQuery

    out = []
    for w in words:
        if w.text not in held and not backend.bm25(TextQuery((Term(w.text),), (), True), 1, scope, set(), where):
            out.append(w.text)
    return out


@record
class Judged:
    """What judging a page of hits learnt of the question: its content words, and those a
    shown hit holds as the index does (`unmatched_words` need not search for them)."""

    words: list[Word]
    held: set[str] = field(default_factory=set)


# --- vectors ---------------------------------------------------------------------------

SAMPLE_CHUNKS = 256  # chunk vectors that tell what a cosine means in an index


@record(frozen=True)
class VectorScale:
    """The question's cosines with the sample of chunks: a hit's cosine as a z-score."""

    mean: float
    std: float

    def z(self, cosine: float) -> float:
        return (cosine - self.mean) / self.std


def vector_sample(backend: Searchable, model: VectorModel) -> Any:
    """The index's fixed sample of the model's chunk vectors, as a float32 matrix (no rows:
    shape (0, 0)). Read by `vector_scale`; a caller may keep it while the index is unchanged
    (`Reader.scale`: the same rows while the chunks are the same)."""
    import numpy as np

    rows = backend.vector_sample(model, SAMPLE_CHUNKS)
    return np.array(rows, dtype=np.float32) if rows else np.zeros((0, 0), dtype=np.float32)


def vector_scale(sample: Any, query: Sequence[float]) -> VectorScale | None:
    """How the question's vector meets the `sample` of the index's chunks (`vector_sample`;
    None: fewer than 8 chunks)."""
    import numpy as np

    if sample.ndim != 2 or sample.shape[0] < 8 or sample.shape[1] != len(query):
        return None
    q = np.asarray(query, dtype=np.float32)
    norms = np.linalg.norm(sample, axis=1) * max(float(np.linalg.norm(q)), 1e-9)
    cosines = (sample @ q) / np.maximum(norms, 1e-9)
    return VectorScale(float(cosines.mean()), max(float(cosines.std()), 1e-3))


# --- the model -------------------------------------------------------------------------


@record
class Evidence:
    """What the pipeline knows of one hit, for its confidence (and --explain)."""

    coverage: float  # share of the question's content words the document holds
    first: bool  # the method's first hit
    bm25: float = 0.0  # normalised BM25 score in the keyword list (0: not in it)
    bm25_lead: float = 0.0  # that score minus the best other document's in the list
    z: float = 0.0  # the cosine of its best chunk as a z-score (VectorScale)
    z_lead: float = 0.0  # that z minus the best other document's in the vector list
    rerank: float | None = None  # the reranker's probability, when one ran

    def as_dict(self) -> dict[str, float]:
        out = {k: round(float(v), 4) for k, v in self.__dict__.items() if v is not None}
        return out


# The features each method's model reads, in COEFFICIENTS' order (after the intercept).
FEATURES: dict[str, tuple[str, ...]] = {
    "search": ("coverage", "partial", "bm25", "bm25_lead", "first"),
    "vsearch": ("coverage", "partial", "z", "z_lead", "first"),
    "query": ("coverage", "partial", "bm25", "z", "z_lead", "first"),
}


def features(kind: str, ev: Evidence) -> list[float]:
    """The model's inputs for a hit of `kind` (search, vsearch, query). `partial`: the
    document holds some of the question's words but not all, the mark of a note about the
    system asked of that lacks the asked fact (measured: see bench/fit_confidence.py)."""
    values = {
        "coverage": ev.coverage, "partial": 1.0 if 0.0 < ev.coverage < 1.0 else 0.0, "bm25": ev.bm25, "bm25_lead": ev.bm25_lead,
        "z": min(max(ev.z, -10.0), 10.0), "z_lead": min(max(ev.z_lead, -10.0), 10.0), "first": 1.0 if ev.first else 0.0,
    }
    return [values[name] for name in FEATURES[kind]]


# Fitted by bench/fit_confidence.py on 2026-12-03 (intercept first, then FEATURES[kind]): the
# trust set's fit split, all-MiniLM-L6-v2 and EmbeddingGemma-300M (q8_0) pooled, 5 hits a question,
# on indexes with section units (the default since issue 29; `search`'s model is unchanged by them).
COEFFICIENTS: dict[str, tuple[float, ...]] = {
    "search": (-3.337, 2.8775, -2.5596, 0.714, 0.3889, 1.5868),
    "vsearch": (-0.7016, 1.1046, -2.6681, -0.2944, 0.9152, 1.1224),
    "query": (-0.9295, 1.6543, -2.4406, -0.7837, -0.253, 0.7632, 1.5746),
}


def _sigmoid(x: float) -> float:
    return 1.0 / (1.0 + math.exp(-x)) if x >= 0 else math.exp(x) / (1.0 + math.exp(x))


def _logit(p: float) -> float:
    p = min(max(p, 1e-4), 1.0 - 1e-4)
    return math.log(p / (1.0 - p))


def confidence(kind: str, ev: Evidence) -> float:
    """The probability that the hit answers the question, in [0, 1] (see the module doc)."""
    weights = COEFFICIENTS[kind]
    x = weights[0] + sum(w * f for w, f in zip(weights[1:], features(kind, ev)))
    p = _sigmoid(x)
    return p if ev.rerank is None else with_rerank(p, ev.rerank)


def with_rerank(p: float, rerank: float) -> float:
    """A reranker's probability joined to the retrieval confidence: the mean of their log-odds.
    Not measured (no reranker weights could be had where this was fitted): the reranker's
    yes/no probability is read as a calibrated estimate of the same event."""
    return _sigmoid((_logit(p) + _logit(rerank)) / 2.0)


def leads(scores: Sequence[float]) -> list[float]:
    """Each score minus the best other score of the list (0 for a list of one)."""
    if len(scores) < 2:
        return [0.0] * len(scores)
    ordered = sorted(scores, reverse=True)
    return [s - (ordered[1] if s >= ordered[0] else ordered[0]) for s in scores]


# Below it a hit is a best guess, not an answer: the highest `query` top-hit confidence that
# keeps at most 10% of the right-first answers below it on the fit split (bench/fit_confidence.py,
# 2026-12-03, section units: 0.358, catching 67% of the unanswerable questions there).
THRESHOLD = 0.36


def _judge(kind: str, hit: SearchHit, ev: Evidence) -> None:
    hit.confidence = round(confidence(kind, ev), 4)
    hit.evidence = ev.as_dict()


def judge_keyword(hits: Sequence[SearchHit], docs: Sequence[tuple[DocRow, str]], page: Sequence[FtsHit], listed: Sequence[FtsHit], question: str) -> Judged:
    """`search`'s confidence of each hit (`page`: their BM25 hits; `listed`: the list they
    were cut from, one longer than the page, for the leads)."""
    judged = Judged(content_words(question))
    words = judged.words
    lead = dict(zip((h.doc_id for h in listed), leads([h.score for h in listed])))
    first = listed[0].doc_id if listed else None
    every = False
    for hit, (row, text), fts in zip(hits, docs, page):
        if fts.match == "all" and words:
            cover, every = 1.0, True
        else:
            cover, held = read_document(words, row, text)
            judged.held |= held
        _judge("search", hit, Evidence(cover, fts.doc_id == first, fts.score, lead[fts.doc_id]))
    if every:
        judged.held |= held_by_all(words, question)
    return judged


def judge_vector(
    hits: Sequence[SearchHit], docs: Sequence[tuple[DocRow, str]], page: Sequence[Nearest], listed: Sequence[Nearest], question: str, scale: VectorScale | None,
) -> Judged:
    """`vsearch`'s confidence of each hit (`page`: their nearest rows; `listed`: the list they
    were cut from, one longer than the page, for the leads)."""
    judged = Judged(content_words(question))
    zs = [scale.z(s) if scale else 0.0 for _, s, _ in listed]
    lead = dict(zip((d for d, _, _ in listed), leads(zs)))
    z = dict(zip((d for d, _, _ in listed), zs))
    first = listed[0][0] if listed else None
    for hit, (row, text), (doc, _, _) in zip(hits, docs, page):
        cover, held = read_document(judged.words, row, text)
        judged.held |= held
        _judge("vsearch", hit, Evidence(cover, doc == first, z=z[doc], z_lead=lead[doc]))
    return judged


class QueryJudge:
    """`query`'s confidence of its hits from the question's own lists: the first keyword list
    (BM25 scores) and the first vector list (cosines, as z-scores on `scale`). Without a
    vector list the keyword model (search's) judges, without a keyword list the vector one."""

    def __init__(self, lists: Sequence[RankedList], scale: VectorScale | None, question: str, first: int | None) -> None:
        self.judged = Judged(content_words(question))  # its held words grow with each hit judged
        self.words = self.judged.words
        keyword = next((x for x in lists if x.kind == "bm25"), None)
        vector = next((x for x in lists if x.kind == "vector"), None)
        self.kind = "query" if keyword and vector else "vsearch" if vector else "search"
        self.bm25 = dict(zip(keyword.keys, keyword.scores)) if keyword else {}
        self.bm25_top = sorted(self.bm25.values(), reverse=True)[:2]
        zs = [scale.z(s) if scale else 0.0 for s in vector.scores] if vector else []
        self.z = dict(zip(vector.keys, zs)) if vector else {}
        self.z_top = sorted(self.z.values(), reverse=True)[:2]
        self.z_floor = min(zs) if zs else 0.0  # a document the vector list does not hold is at most this near
        self.first = first

    def __call__(self, hit: SearchHit, row: DocRow, text: str, rerank: float | None) -> None:
        """Judge `hit`, the document `row` whose text is `text`."""
        doc = row.id
        bm25 = self.bm25.get(doc, 0.0)
        z = self.z.get(doc, self.z_floor)
        cover, held = read_document(self.words, row, text)
        self.judged.held |= held
        ev = Evidence(
            cover, doc == self.first, bm25, bm25 - _best_other(self.bm25_top, doc in self.bm25, bm25),
            z, z - _best_other(self.z_top, doc in self.z, z), rerank,
        )
        _judge(self.kind, hit, ev)


def _best_other(top: list[float], listed: bool, own: float) -> float:
    """The best score of the list other than this document's (`top`: the list's best two)."""
    if not top:
        return own
    if listed and own >= top[0]:
        return top[1] if len(top) > 1 else own
    return top[0]
