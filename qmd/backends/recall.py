"""The measured recall of an approximate vector index (issue 31): an approximate search is
taken only once it has been shown to find what the exact one finds.

Neither SQLite's inverted lists of codes nor PostgreSQL's HNSW graph is right by
construction: on text-like vectors both find 0.95-1.0 of the true 10 nearest, on a
near-uniform set at 1M HNSW found 0.575 (docs/performance.md). So after `qmd embed` builds
or grows a space's approximate index it measures it: RECALL_QUERIES queries are searched
exactly and through the index, and recall@10 is the share of the exact 10 the index also
returned, averaged over the queries; the index is trusted when that mean, less 1.645 of its
standard errors (a one-sided 95% lower bound), reaches RECALL_TARGET. The queries are the
space's own chunk vectors (spread over its ids), each moved in a random direction to the
cosine at which, in this index, a chunk's nearest other document lies (the median over the
sampled chunks, found through the index itself, at most QUERY_COSINE_MAX): a question lies
about as far from the passage that answers it as that passage lies from its neighbours, and
what a cosine means differs by model and by corpus. A fixed cosine (QUERY_COSINE, the first
method) was too far for text: on the tldr pages (51k MiniLM chunks; real questions' best
cosine 0.62-0.71, a chunk's nearest other document 0.83-0.86) it measured 0.930-0.962, lower
bound 0.906-0.945 (four samples), where three sets of real questions (72, 77, 77) found
0.981-0.987, so auto never took the index. This method measured 0.982 there (lower bound
0.968: taken), and agreed with the bench's synthetic sets too: clustered 300k x 768, 0.990
(0.979) against 1.000 held out; near-uniform 100k x 384, queries at cosine 0.43, 0.692
(0.638) against 0.71, not taken, as it must not be. A stored chunk
itself is no test of a graph (HNSW links each to its neighbours: on the near-uniform 300k
set stored chunks measured 1.000). The result is kept in `meta` (`vector_recall:<model id>`)
with what it measured: the index's identity (its structure and build), its size, the cosine
and the method.

Under QMD_VECTOR_INDEX=auto (the default) a search takes the approximate index only while
that measurement stands (the same identity, the size within REGROWTH of it) and reached
RECALL_TARGET; otherwise it computes every distance: slower, never wrong. `approx` takes the
index whatever it measured (the user's choice); `exact` never does.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass

RECALL_TARGET = 0.95  # recall@10 against exact an approximate index must measure to be searched under auto
RECALL_QUERIES = 60  # queries searched both ways per measurement (1M x 384 on PostgreSQL: ~45 s)
CONFIDENCE_Z = 1.645  # trusted when the one-sided 95% lower bound of the per-query mean reaches RECALL_TARGET
RECALL_K = 10
QUERY_COSINE = 0.45  # a query's cosine to its chunk where the index finds no neighbour to go by (and method 1's, always)
QUERY_COSINE_MAX = 0.8  # never nearer: a corpus of near-copies would measure queries that are copies
METHOD = 2  # 2: the cosine of a chunk's nearest other document; 1: QUERY_COSINE (an untrusted method 1 result is measured again)
REGROWTH = 1.25  # a measurement stands while the index holds within this factor of the rows it was measured at


def key(model_id: int) -> str:
    return f"vector_recall:{int(model_id)}"


@dataclass(frozen=True)
class Recall:
    """One measurement: recall@RECALL_K over `queries` chunk vectors, of the index `identity`
    (a backend's words for its structure and build) holding `rows` vectors."""

    recall: float
    queries: int
    rows: int
    identity: str
    measured_at: str
    low: float = 0.0  # the one-sided 95% lower bound of `recall` over its queries (CONFIDENCE_Z)
    cosine: float = QUERY_COSINE  # each query's cosine to the chunk it was drawn from
    method: int = 1  # how the queries were drawn (METHOD)

    def to_text(self) -> str:
        return json.dumps(asdict(self), sort_keys=True)

    def stands(self, rows: int, identity: str) -> bool:
        """Whether it still describes the index: the same build, not grown or shrunk past
        REGROWTH, and (an earlier method's, harsher) not a refusal the current method may lift."""
        if self.method != METHOD and self.low < RECALL_TARGET:
            return False
        return self.identity == identity and self.rows / REGROWTH <= rows <= self.rows * REGROWTH

    def trusted(self, rows: int, identity: str) -> bool:
        """Whether a search under auto may take the approximate index."""
        return self.stands(rows, identity) and self.low >= RECALL_TARGET

    def words(self) -> str:
        """For doctor and status: what was measured."""
        return f"recall@{RECALL_K} {self.recall:.3f} (at least {self.low:.3f} at 95% confidence) against exact search, {self.queries} queries drawn at cosine {self.cosine:.2f} from its chunks (measured {self.measured_at[:10]})"


def parse(text: object) -> Recall | None:
    """A stored measurement, or None (none, or written by something else)."""
    if not isinstance(text, str):
        return None
    try:
        raw = json.loads(text)
        return Recall(
            float(raw["recall"]), int(raw["queries"]), int(raw["rows"]), str(raw["identity"]), str(raw["measured_at"]), float(raw.get("low", 0.0)),
            float(raw.get("cosine", QUERY_COSINE)), int(raw.get("method", 1)),
        )
    except (ValueError, KeyError, TypeError):
        return None


def query_cosine(neighbours: Sequence[Sequence[float]]) -> float:
    """The cosine to draw queries at: the median, over the sampled chunks, of each one's
    similarity to its nearest other document (`neighbours`: each sample's document
    similarities, best first, its own document first), at most QUERY_COSINE_MAX; QUERY_COSINE
    where no sample has another document."""
    import statistics

    found = [float(hits[1]) for hits in neighbours if len(hits) > 1]
    return min(statistics.median(found), QUERY_COSINE_MAX) if found else QUERY_COSINE


def queries_near(samples: Sequence[Sequence[float]], seed: int, cosine: float = QUERY_COSINE) -> list[list[float]]:
    """Each sample (a unit chunk vector) moved to `cosine` from itself along a random direction
    orthogonal to it (seeded: the same queries while the samples stand). A sample with a NaN or
    infinite component, or all zeros (a broken vector an older qmd stored), is left out."""
    import numpy as np

    if not samples:
        return []
    vectors = np.asarray([list(v) for v in samples], dtype=np.float64)
    norms = np.linalg.norm(vectors, axis=1)
    vectors = vectors[np.isfinite(norms) & (norms > 0)]
    vectors /= np.linalg.norm(vectors, axis=1, keepdims=True)
    noise = np.random.default_rng(seed).standard_normal(vectors.shape)
    noise -= np.sum(noise * vectors, axis=1, keepdims=True) * vectors  # orthogonal to its chunk
    noise /= np.maximum(np.linalg.norm(noise, axis=1, keepdims=True), 1e-12)
    moved = cosine * vectors + (1 - cosine ** 2) ** 0.5 * noise
    return [[float(x) for x in row] for row in moved]


def overlap(exact: Sequence[Sequence[int]], approx: Sequence[Sequence[int]]) -> tuple[float, float, int]:
    """(recall@RECALL_K, its one-sided 95% lower bound, queries counted) of approximate answers
    against exact ones, each a list of document ids for one query: the mean over the queries
    of the share of the exact RECALL_K each found, and that mean less CONFIDENCE_Z standard
    errors (a query's misses come together: the queries, not the hits, are the samples). A
    query the exact search finds nothing for counts for nothing; none counted is (0, 0, 0)."""
    shares = []
    for truth, got in zip(exact, approx):
        best = set(truth[:RECALL_K])
        if best:
            shares.append(len(best & set(got[:RECALL_K])) / len(best))
    if not shares:  # nothing measured shows nothing: not trusted
        return 0.0, 0.0, 0
    mean = sum(shares) / len(shares)
    spread = (sum((x - mean) ** 2 for x in shares) / (len(shares) - 1)) ** 0.5 if len(shares) > 1 else 1.0
    return mean, max(0.0, mean - CONFIDENCE_Z * spread / len(shares) ** 0.5), len(shares)
