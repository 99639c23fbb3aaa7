"""Chunk vectors in sqlite-vec, one vec0 table per embedding fingerprint.

Vectors are keyed by content hash + chunk number, so identical documents share them and
a collection rename costs nothing. A fingerprint (model identity + input format + chunk
settings) names one vector space; a query only ever searches the current one.
"""

from __future__ import annotations

import functools
import math
import os
import struct
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

import apsw

from qmd.core.clock import now_iso
from qmd.core.errors import QmdError
from qmd.backends.rows import ChunkVector, Nearest, VectorModel
from qmd.backends.sql import as_int, count, model_row
from qmd.backends.sqlite import approx
from qmd.backends.sqlite.connection import transaction, values_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter


def ensure_vec(conn: apsw.Connection) -> None:
    """Load sqlite-vec into `conn` once (`QMD_SQLITE_VEC_PATH` overrides the file)."""
    try:
        conn.execute("SELECT vec_version()").fetchall()
        return
    except apsw.SQLError:
        pass
    override = os.environ.get("QMD_SQLITE_VEC_PATH")
    conn.enable_load_extension(True)
    try:
        if override:
            conn.load_extension(override)
        else:
            import sqlite_vec

            sqlite_vec.load(conn)
    except Exception as exc:  # noqa: BLE001 - any failure means "no vector search"
        where = f" from {override}" if override else ""
        raise QmdError(f"cannot load the sqlite-vec extension{where}: {exc}", "reinstall with ./install.sh, or fix/unset QMD_SQLITE_VEC_PATH") from exc
    finally:
        conn.enable_load_extension(False)


def pack(vector: Sequence[float]) -> bytes:
    return struct.pack(f"<{len(vector)}f", *vector)


def table(model_id: int) -> str:
    return f"vec_{int(model_id)}"


def ensure_model(conn: apsw.Connection, fingerprint: str, model: str, dims: int) -> VectorModel:
    """The row (and vec0 table) for a fingerprint, created on first use."""
    ensure_vec(conn)
    found = model_row(conn, fingerprint)
    if found is None:
        with conn:
            conn.execute(
                "INSERT INTO embed_models (fingerprint, model, dims, created_at) VALUES (?, ?, ?, ?)",
                (fingerprint, model, dims, now_iso()),
            )
            model_id = conn.last_insert_rowid()
            conn.execute(f"CREATE VIRTUAL TABLE {table(model_id)} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding float[{dims}] distance_metric=cosine)")
        found = VectorModel(model_id, fingerprint, model, dims)
    return found


def reset_model(conn: apsw.Connection, model: VectorModel, dims: int) -> VectorModel:
    """Recreate a space's vector table with `dims`, dropping its vectors: an index holding
    vectors of other dims than its model's (an import that lied about them, before it was
    refused) recovers by embedding again instead of failing every search and embed."""
    ensure_vec(conn)
    approx.reset(conn, model.id)
    with transaction(conn):
        conn.execute("DELETE FROM chunks WHERE model_id = ?", (model.id,))
        conn.execute("DELETE FROM embedded WHERE model_id = ?", (model.id,))
        conn.execute(f"DROP TABLE IF EXISTS {table(model.id)}")
        conn.execute(f"CREATE VIRTUAL TABLE {table(model.id)} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding float[{int(dims)}] distance_metric=cosine)")
        conn.execute("UPDATE embed_models SET dims = ? WHERE id = ?", (int(dims), model.id))
    return VectorModel(model.id, model.fingerprint, model.model, int(dims))


def write_document(conn: apsw.Connection, model: VectorModel, content_hash: str, chunks: Iterable[ChunkVector], chunker: str = "regex") -> int:
    """Replace the chunks of one content hash and mark it embedded (caller holds a transaction)."""
    drop_hash(conn, model, content_hash)
    coded = approx.present(conn, model.id)
    n = 0
    for c in chunks:
        conn.execute(
            "INSERT INTO chunks (model_id, hash, seq, start, end, tokens) VALUES (?, ?, ?, ?, ?, ?)",
            (model.id, content_hash, c.seq, c.start, c.end, c.tokens),
        )
        chunk_id, blob = conn.last_insert_rowid(), pack(c.vector)
        conn.execute(f"INSERT INTO {table(model.id)} (chunk_id, embedding) VALUES (?, ?)", (chunk_id, blob))
        if coded:
            approx.write(conn, model.id, chunk_id, blob)
        n += 1
    if coded and n:
        approx.lists_changed(conn, model.id)
    conn.execute(
        "INSERT OR REPLACE INTO embedded (model_id, hash, chunks, embedded_at, chunker) VALUES (?, ?, ?, ?, ?)",
        (model.id, content_hash, n, now_iso(), chunker),
    )
    return n


def drop_hash(conn: apsw.Connection, model: VectorModel, content_hash: str) -> None:
    ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE model_id = ? AND hash = ?", (model.id, content_hash))]
    for chunk_id in ids:
        conn.execute(f"DELETE FROM {table(model.id)} WHERE chunk_id = ?", (chunk_id,))
    if ids and approx.present(conn, model.id):
        approx.drop(conn, model.id, ids)
    conn.execute("DELETE FROM chunks WHERE model_id = ? AND hash = ?", (model.id, content_hash))
    conn.execute("DELETE FROM embedded WHERE model_id = ? AND hash = ?", (model.id, content_hash))


def drop_model_vectors(conn: apsw.Connection, model: VectorModel) -> None:
    """Forget every vector of one fingerprint (for `embed -f`)."""
    conn.execute(f"DELETE FROM {table(model.id)}")
    if approx.present(conn, model.id):
        approx.drop(conn, model.id, None)
    conn.execute("DELETE FROM chunks WHERE model_id = ?", (model.id,))
    conn.execute("DELETE FROM embedded WHERE model_id = ?", (model.id,))


def drop_orphans(conn: apsw.Connection) -> int:
    """Delete chunks and vectors whose content no document uses any more; returns chunks dropped."""
    models = [r[0] for r in conn.execute("SELECT id FROM embed_models")]
    dropped = 0
    for model_id in models:
        ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE model_id = ? AND hash NOT IN (SELECT hash FROM documents)", (model_id,))]
        for chunk_id in ids:
            conn.execute(f"DELETE FROM {table(model_id)} WHERE chunk_id = ?", (chunk_id,))
        if ids and approx.present(conn, model_id):
            approx.drop(conn, model_id, ids)
        conn.execute("DELETE FROM chunks WHERE model_id = ? AND hash NOT IN (SELECT hash FROM documents)", (model_id,))
        conn.execute("DELETE FROM embedded WHERE model_id = ? AND hash NOT IN (SELECT hash FROM documents)", (model_id,))
        dropped += len(ids)
    return dropped


KNN_MAX = 4096  # sqlite-vec refuses a KNN asking for more rows ("k value in knn query too large")


def knn(
    conn: apsw.Connection, model: VectorModel, query: Sequence[float], k: int, allowed: tuple[str, Sequence[object]] | None = None,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) of the k nearest chunks of one query: over the whole vector
    table, or over the chunk ids the SELECT `allowed` (SQL, parameters) returns. Searches take
    `float_pass` (or the approximate index, `_Pass`); this is its fallback when vec0's blocks
    cannot be read, and the scan past KNN_MAX.

    Up to KNN_MAX, sqlite-vec's own KNN; beyond (`vsearch --all`, a long `-n`), the same
    distances by a scan of every vector in order (exact, ~10 µs a row)."""
    ensure_vec(conn)
    scan = k > KNN_MAX
    if scan:
        sql = f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS distance FROM {table(model.id)} WHERE 1"
        params: list[object] = [pack(query)]
    else:
        sql = f"SELECT chunk_id, distance FROM {table(model.id)} WHERE embedding MATCH ? AND k = ?"
        params = [pack(query), k]
    if allowed is not None:
        sql += f" AND chunk_id IN ({allowed[0]})"
        params += allowed[1]
    sql += " ORDER BY distance IS NULL, distance, chunk_id" if scan else " ORDER BY distance"  # NULL: a broken vector, last
    if scan:
        sql += " LIMIT ?"
        params.append(k)
    return [(r[0], math.nan if r[1] is None else r[1]) for r in conn.execute(sql, params)]  # NULL (a NaN vector): NaN, as float_pass


def build_index(conn: apsw.Connection, model: VectorModel) -> int:
    """Build or finish the approximate index of a vector space (approx.py); chunks coded."""
    ensure_vec(conn)
    return approx.build(conn, model, table(model.id))


def chunk_rows(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, tuple[str, int, int, int]]:
    """chunk id → (hash, seq, start, end)."""
    if not ids:
        return {}
    sql, params = values_in(ids)
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(f"SELECT id, hash, seq, start, end FROM chunks WHERE id IN ({sql})", params)}


def write_batch(
    conn: apsw.Connection, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None,
) -> int:
    """Replace the chunks of every content hash in `batch` in one transaction; returns chunks written."""
    written = 0
    with transaction(conn):
        for content_hash, chunks in batch:
            written += write_document(conn, model, content_hash, chunks, (chunkers or {}).get(content_hash, "regex"))
    return written


def drop_all(conn: apsw.Connection, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
    """Drop a model's vectors (of `hashes` only, when given) in one transaction."""
    with transaction(conn):
        if hashes is None:
            drop_model_vectors(conn, model)
        else:
            for content_hash in hashes:
                drop_hash(conn, model, content_hash)


def set_chunkers(conn: apsw.Connection, model: VectorModel, chunkers: Mapping[str, str]) -> None:
    with transaction(conn):
        for content_hash, chunker in chunkers.items():
            conn.execute("UPDATE embedded SET chunker = ? WHERE model_id = ? AND hash = ?", (chunker, model.id, content_hash))


def vector_sample(conn: apsw.Connection, model: VectorModel, size: int) -> list[Sequence[float]]:
    """Up to `size` vectors of the model, spread evenly over its chunk ids (the same ones while
    the chunks are unchanged): `size` seeks into the chunk ids and as many key lookups, never
    a scan of the index's chunks."""
    ensure_vec(conn)
    bounds = id_bounds(conn, "chunks")
    if bounds is None or size < 1:
        return []
    low, span = bounds[0], bounds[1] - bounds[0] + 1
    ids: dict[int, None] = {}
    for i in range(min(size, span)):
        for (chunk_id,) in conn.execute("SELECT id FROM chunks WHERE id >= ? AND model_id = ? ORDER BY id LIMIT 1", (low + i * span // min(size, span), model.id)):
            ids[chunk_id] = None
    out: list[Sequence[float]] = []
    for chunk_id in ids:
        for (blob,) in conn.execute(f"SELECT embedding FROM {table(model.id)} WHERE chunk_id = ?", (chunk_id,)):
            out.append(memoryview(blob).cast("f"))
    return out


def chunk_spans(conn: apsw.Connection, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    """(start, end) of each content hash's chunks, in order."""
    if not hashes:
        return {}
    marks, params = values_in(hashes)
    out: dict[str, list[tuple[int, int]]] = {}
    sql = f"SELECT hash, start, end FROM chunks WHERE model_id = ? AND hash IN ({marks}) ORDER BY hash, seq"
    for h, start, end in conn.execute(sql, (model.id, *params)):
        out.setdefault(str(h), []).append((int(start), int(end)))
    return out


def nearest_documents(
    conn: apsw.Connection, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
) -> list[Nearest]:
    """The documents in `scope` (None: all) matching `where` whose best chunk is nearest to `query`.

    The nearest chunks are found (`_Pass`), and more of them (k × 4) until enough distinct
    active documents in scope are among them, or every chunk was returned. They are the true
    nearest chunks in order (ties by chunk id), so keeping those in scope gives exactly what
    a brute-force scan restricted to the scope would (vectors are shared across collections
    by content hash).

    A collection scope and a filter narrow the search alike, by one of two exact plans chosen
    by the share of a sample of documents that are in scope and pass the filter. A narrow one
    (under a fifth) restricts the pass itself to the chunks of those documents (`chunk_id IN
    (SELECT …)`, applied during the scan, so about as cheap as the unrestricted
    pass): a collection of 1% of the documents still returns `limit` of them, the nearest,
    never a short page, in one pass. A broad one asks the unrestricted KNN for about three
    times the chunks its share needs and tests each document found, so it costs one KNN
    instead of following the thousands of ids it matches; the loop above is then only the
    guard for an unlucky draw. Vectors are shared by content across collections, so the
    collection cannot live in the vector table itself (a partition key would copy them).

    With the approximate index built and chosen (approx.py, QMD_VECTOR_INDEX), each KNN above
    takes its candidates from the sign-bit codes instead (restricted alike) and ranks them by
    their exact distances: the same plans, approximate only in which chunks are candidates.
    """
    return nearest_many(conn, model, [query], limit, scope, where)[0]


def nearest_many(
    conn: apsw.Connection, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = None,
) -> list[list[Nearest]]:
    """`nearest_documents` of each query, sharing the work (issue 31: a hybrid query's question
    and vec/hyde lines): the scope's plan and chunk ids once, and one pass over the vectors
    (or the codes) for all the queries, each answer the one its query alone gets."""
    if not queries:
        return []
    cap = max(COUNT_CAP, approx.APPROX_MIN_CHUNKS, BROAD_FILTER_MIN)
    total = count(conn, "SELECT count(*) FROM (SELECT 1 FROM chunks WHERE model_id = ? LIMIT ?)", (model.id, cap))
    counted = total < cap  # else `total` is a lower bound, counted only when it matters (~0.1 s at 1M chunks)
    if limit is None and not counted:
        total, counted = _chunk_count(conn, model), True
    allowed: tuple[str, list[object]] | None = None
    widen = 4
    coded = approx.searchable(conn, model.id, total)
    want = total if limit is None else limit
    if scope is not None or where is not None:
        if total < BROAD_FILTER_MIN:
            share, scope_first = 0.0, where is None
        elif where is None:
            share, scope_first = approx.remembered(conn, ("scope share", *(scope or [])), lambda: _scope_share(conn, scope or [])), True
        else:
            share, scope_first = _sampled_share(conn, where, scope)
        if share < BROAD_SHARE:
            allowed = _chunks_matching(model, scope, where, scope_first)
        else:
            widen = max(4, math.ceil(3 / share))  # chunks enough for ~3x the documents needed
    first = max(want * widen, 32)
    search = _Pass(conn, model, queries, allowed, coded)
    out: list[list[Nearest]] = [[] for _ in queries]
    ks = {i: first for i in range(len(queries))}
    while ks:
        if not counted and any(k >= total for k in ks.values()):
            total, counted = _chunk_count(conn, model), True
        ks = {i: min(total, k) for i, k in ks.items() if min(total, k)}
        if not ks:
            break
        found = search.knn(ks)
        more: dict[int, int] = {}
        for i, k in ks.items():
            pairs = found[i]
            out[i] = _best_per_document(conn, pairs, want, scope, where)
            if not (len(out[i]) >= want or len(pairs) < k or k >= total):  # fewer than k: every allowed chunk was returned
                more[i] = k * 4
        ks = more
    return out


class _Pass:
    """The nearest chunks of several queries from one read of a vector space: the approximate
    index's codes (approx.knn_many) when chosen, else the floats (`float_pass`), each pass
    shared by every query asking; a query asking for more chunks than a pass kept (the
    widening above) takes another, shared alike."""

    def __init__(self, conn: apsw.Connection, model: VectorModel, queries: Sequence[Sequence[float]], allowed: tuple[str, list[object]] | None, coded: bool) -> None:
        import numpy as np

        ensure_vec(conn)
        self.conn, self.model, self.allowed, self.coded = conn, model, allowed, coded
        self.matrix = np.array([list(q) for q in queries], dtype=np.float32).reshape(len(queries), model.dims)
        self.blobs = [q.tobytes() for q in self.matrix]
        self.kept: dict[int, tuple[int, list[tuple[int, float]]]] = {}  # query → (chunks asked of its last float pass, its nearest)
        self._allowed_ids: object = None

    def allowed_ids(self) -> object:
        """The allowed chunk ids (sorted numpy array), read once for every pass; None: all."""
        if self.allowed is not None and self._allowed_ids is None:
            self._allowed_ids = approx.chunk_ids(self.conn, self.allowed)
        return self._allowed_ids

    def knn(self, ks: Mapping[int, int]) -> dict[int, list[tuple[int, float]]]:
        """(chunk id, cosine distance) of the k nearest chunks of each asked query, nearest first."""
        out: dict[int, list[tuple[int, float]]] = {}
        if self.coded:
            got = approx.knn_many(self.conn, self.model.id, [self.blobs[i] for i in ks], list(ks.values()), self.allowed, self.allowed_ids)
            out.update({i: g for i, g in zip(ks, got) if g is not None})
        rest = {i: k for i, k in ks.items() if i not in out}
        scan = {i: k for i, k in rest.items() if i not in self.kept or self.kept[i][0] < k}
        for i, k in list(scan.items()):
            if k > KNN_MAX:  # `vsearch --all`, a long -n: the SQL scan (keeping k vectors in memory would cost more)
                self.kept[i] = (k, knn(self.conn, self.model, self.matrix[i].tolist(), k, self.allowed))
                del scan[i]
        if scan:
            found = float_pass(self.conn, self.model, self.matrix[list(scan)], [self.blobs[i] for i in scan], list(scan.values()), self.allowed_ids())
            if found is None:  # the vectors' layout is not the one float_pass reads: sqlite-vec's KNN, query by query
                found = [knn(self.conn, self.model, self.matrix[i].tolist(), k, self.allowed) for i, k in scan.items()]
            self.kept.update({i: (k, f) for (i, k), f in zip(scan.items(), found)})
        out.update({i: self.kept[i][1][:k] for i, k in rest.items()})
        return out


FLOAT_SLACK = 8 * 2.0 ** -24  # per dimension: a float32 cosine's rounding error bound (twice, as margin), so
# numpy's distances choose a superset of the k nearest by sqlite-vec's distance, which then ranks them


def float_pass(
    conn: apsw.Connection, model: VectorModel, queries: Any, blobs: Sequence[bytes], ks: Sequence[int], allowed_ids: Any = None,
) -> list[list[tuple[int, float]]] | None:
    """(chunk id, cosine distance) of the k nearest chunks of each query (a row of `queries`),
    nearest first, ties by chunk id: one read of the vec0 table's float blocks (1024 vectors a
    blob) for them all, by incremental blob reads into one reused buffer (the read costs about
    half of sqlite-vec's own KNN of one query, and a query more only a matrix product).

    Each block's cosines (numpy, float32) keep, per query, the chunks within FLOAT_SLACK of its
    k-th nearest so far; those few are then ranked by sqlite-vec's own `vec_distance_cosine`,
    so distances and order are sqlite-vec's exactly. `allowed_ids` (sorted chunk ids) keeps
    only those, and a block without any is not read. None: the layout is not vec0's as read
    here (the caller then takes sqlite-vec's KNN)."""
    own = not conn.in_transaction  # one snapshot for every block read (a writer may commit between them otherwise)
    if own:
        conn.execute("BEGIN")
    try:
        return _scan_floats(conn, model, queries, blobs, ks, allowed_ids)
    finally:
        if own:
            conn.execute("COMMIT")


def _scan_floats(
    conn: apsw.Connection, model: VectorModel, queries: Any, blobs: Sequence[bytes], ks: Sequence[int], allowed_ids: Any,
) -> list[list[tuple[int, float]]] | None:
    """float_pass inside its read transaction."""
    import numpy as np

    t = table(model.id)
    try:
        blocks: list[tuple[int, int, bytes, bytes]] = [
            (as_int(b), as_int(n), bytes(v), bytes(r))
            for b, n, v, r in conn.execute(f"SELECT chunk_id, size, validity, rowids FROM {t}_chunks ORDER BY chunk_id")
        ]
    except apsw.SQLError:
        return None
    nq = len(ks)
    with np.errstate(invalid="ignore", divide="ignore"):  # a zero query: NaN cosines, ranked as sqlite-vec does
        qn = queries / np.linalg.norm(queries, axis=1, keepdims=True)
    slack = FLOAT_SLACK * model.dims
    keep_ids: list[Any] = [np.empty(0, np.int64) for _ in range(nq)]
    keep_d: list[Any] = [np.empty(0, np.float32) for _ in range(nq)]
    keep_v: list[Any] = [np.empty((0, model.dims), np.float32) for _ in range(nq)]

    def take(vecs: Any, ids: Any) -> None:
        """Fold a group of vectors (and their chunk ids) into each query's kept chunks."""
        with np.errstate(invalid="ignore", divide="ignore"):
            cos = _products(vecs, qn) / np.sqrt(np.einsum("ij,ij->i", vecs, vecs))[:, None]
        dist = np.nan_to_num(1.0 - cos, nan=np.inf, posinf=np.inf)
        for j, k in enumerate(ks):
            d = np.concatenate([keep_d[j], dist[:, j]])
            kth = d[np.argpartition(d, k - 1)[k - 1]] if len(d) > k else np.inf
            sel = np.flatnonzero(d <= kth + slack)
            if len(sel) > k and not np.isfinite(kth):  # under k finite (a zero or NaN query: none): those, and of the
                broken = sel[~np.isfinite(d[sel])]  # broken the k first by chunk id (their rank), never every vector
                every_id = np.concatenate([keep_ids[j], ids])
                sel = np.sort(np.concatenate([sel[np.isfinite(d[sel])], broken[np.argsort(every_id[broken], kind="stable")[:k]]]))
            held = len(keep_d[j])
            old, new = sel[sel < held], sel[sel >= held] - held
            if len(new) or len(old) < held:  # the kept chunks changed (after the first groups, rarely)
                keep_ids[j] = np.concatenate([keep_ids[j][old], ids[new]])
                keep_d[j] = d[sel]
                keep_v[j] = np.concatenate([keep_v[j][old], vecs[new]])

    buf: Any = None
    blob: Any = None
    filled, group_ids, group_valid = 0, list[Any](), list[Any]()
    try:
        for block, size, validity, rowids in blocks:
            rows = approx.block_rows(size, validity, rowids)
            if rows is None:
                return None  # a damaged block: sqlite-vec's KNN then names it, never fewer vectors silently
            ids, valid = rows
            if allowed_ids is not None:
                pos = np.minimum(np.searchsorted(allowed_ids, ids), max(len(allowed_ids) - 1, 0))
                valid &= (allowed_ids[pos] == ids) if len(allowed_ids) else False
            if not valid.any():
                continue  # nothing allowed in this block: never read
            if buf is None:
                buf = np.empty((max(size, GROUP_ROWS), model.dims), np.float32)
            if filled + size > len(buf):
                every = np.concatenate(group_valid)
                take(buf[:filled] if every.all() else buf[:filled][every], np.concatenate(group_ids)[every])
                filled, group_ids, group_valid = 0, [], []
            if blob is None:
                blob = conn.blob_open("main", f"{t}_vector_chunks00", "vectors", block, False)
            else:
                blob.reopen(block)
            target = buf[filled:filled + size]
            if blob.length() != target.nbytes:
                return None
            blob.read_into(target)
            filled += size
            group_ids.append(ids)
            group_valid.append(valid)
        if filled:
            every = np.concatenate(group_valid)
            take(buf[:filled] if every.all() else buf[:filled][every], np.concatenate(group_ids)[every])
    except (apsw.SQLError, ValueError):
        return None
    finally:
        if blob is not None:
            blob.close()
    out: list[list[tuple[int, float]]] = []
    for j, k in enumerate(ks):
        scored = [
            (int(i), _distance(conn, v.tobytes(), blobs[j]))
            for i, v in zip(keep_ids[j], keep_v[j])
        ]
        scored.sort(key=lambda p: (not math.isfinite(p[1]), p[1] if math.isfinite(p[1]) else 0.0, p[0]))
        out.append(scored[:k])
    return out


GROUP_ROWS = 8192  # vectors read (8 vec0 blocks) before each query's kept chunks are updated: fewer, larger numpy steps
UNTHREADED = 1 << 18  # OpenBLAS runs a product of m·n·k under this on one thread; above, its threads cost 5-30x the
# work on a busy machine (measured: 1024 x 768 by 5 queries, 31 ms wall in one product, 1.9 ms in 64-row slices)


def _products(vecs: Any, queries: Any) -> Any:
    """vecs · queriesᵀ (float32), in row slices small enough for OpenBLAS to stay on this thread."""
    import numpy as np

    out = np.empty((len(vecs), len(queries)), np.float32)
    step = max(16, UNTHREADED // (queries.shape[0] * queries.shape[1]))
    for lo in range(0, len(vecs), step):
        np.matmul(vecs[lo:lo + step], queries.T, out=out[lo:lo + step])
    return out


def _distance(conn: apsw.Connection, a: bytes, b: bytes) -> float:
    """sqlite-vec's cosine distance (NaN for a broken vector: SQLite returns it as NULL)."""
    d = conn.execute("SELECT vec_distance_cosine(?, ?)", (a, b)).fetchall()[0][0]
    return math.nan if d is None else float(d)


COUNT_CAP = 65_536  # chunks counted at most before a search (the count is a scan of the chunks index)


def _chunk_count(conn: apsw.Connection, model: VectorModel) -> int:
    return count(conn, "SELECT count(*) FROM chunks WHERE model_id = ?", (model.id,))


BROAD_FILTER_MIN = 2000  # chunks: below this a scope or filter always restricts the KNN (the sample would cost more)
BROAD_SHARE = 1 / 5  # a scope/filter passing this share of documents or more takes the widened unrestricted KNN (the
# crossover measured on tldr's 38k pages: restricting costs 0.99-1.24x the unfiltered KNN up to 19%, 1.4x at 25%)
SAMPLE = 512  # documents drawn (by id, evenly at random) to estimate a filter's share


def id_bounds(conn: apsw.Connection, table_name: str) -> tuple[int, int] | None:
    """(min id, max id) of a rowid table, or None when empty: two one-row seeks (a single
    `SELECT min(id), max(id)` is a full scan: SQLite's min/max shortcut takes one aggregate)."""
    low, high = conn.execute(f"SELECT (SELECT min(id) FROM {table_name}), (SELECT max(id) FROM {table_name})").fetchall()[0]
    return (low, high) if isinstance(low, int) and isinstance(high, int) else None


@functools.lru_cache(maxsize=8)
def _sample_ids(low: int, high: int, size: int) -> tuple[int, ...]:
    """`size` ids drawn evenly at random from [low, high], the same for the same span (kept: a
    draw of 512 costs about as much as the sample's query)."""
    import random

    return tuple(sorted(random.Random(0).sample(range(low, high + 1), min(size, high - low + 1))))


def _scope_share(conn: apsw.Connection, scope: list[str]) -> float:
    """The collections' share of the documents, counted on the (collection, path) index up to
    BROAD_SHARE of the id span (so a broad scope costs no more to count than a narrow one);
    the span over-counts documents removed for good, which only errs toward restricting."""
    bounds = id_bounds(conn, "documents")
    if bounds is None:
        return 0.0
    span = bounds[1] - bounds[0] + 1
    cap = math.ceil(span * BROAD_SHARE) + 1
    marks = ",".join("?" * len(scope))
    found = count(conn, f"SELECT count(*) FROM (SELECT 1 FROM documents WHERE collection IN ({marks}) LIMIT ?)", (*scope, cap))
    return found / span


def _sampled_share(conn: apsw.Connection, where: Filter | None, scope: list[str] | None) -> tuple[float, bool]:
    """(share of a random sample of active documents that are in `scope` and pass `where`,
    whether the scope is the narrower of the two: the side the restricted KNN's id set starts from)."""
    bounds = id_bounds(conn, "documents")
    if bounds is None:
        return 0.0, where is None
    ids = _sample_ids(bounds[0], bounds[1], SAMPLE)
    in_scope, passes, args = "1", "1", list[object]()
    if scope is not None:  # the parameters in the order of the SELECT list: scope, filter, sample
        in_scope = f"d.collection IN ({','.join('?' * len(scope))})"
        args += scope
    if where is not None:
        from qmd.backends.sqlite.filters import predicate

        passes, params = predicate(where, "d.id")
        args += params
    sql = (
        "SELECT count(*), coalesce(sum(CASE WHEN s THEN 1 ELSE 0 END), 0), coalesce(sum(CASE WHEN w THEN 1 ELSE 0 END), 0),"
        " coalesce(sum(CASE WHEN s AND w THEN 1 ELSE 0 END), 0)"
        f" FROM (SELECT ({in_scope}) AS s, ({passes}) AS w FROM documents d WHERE d.active = 1 AND d.id IN ({','.join('?' * len(ids))}) LIMIT -1)"
    )
    seen, in_s, in_w, both = conn.execute(sql, [*args, *ids]).fetchall()[0]
    if not seen:
        return 0.0, where is None
    return as_int(both) / as_int(seen), where is None or (scope is not None and as_int(in_s) <= as_int(in_w))


def _chunks_matching(model: VectorModel, scope: list[str] | None, where: Filter | None, scope_first: bool) -> tuple[str, list[object]]:
    """A SELECT (SQL, parameters) of the chunk ids (this vector space) of the active documents
    in `scope` matching `where`: from the narrower side's documents (the collections' through
    the (collection, path) index, or the filter's id set), each tested for the other, then to
    their chunks (index lookups all the way). Handed to the KNN as `chunk_id IN (…)`, so SQLite
    builds the set once inside sqlite-vec's scan (no round trip of the ids through Python)."""
    from qmd.backends.sqlite.filters import id_set, predicate

    join = " CROSS JOIN chunks c ON c.model_id = ? AND c.hash = d.hash WHERE d.active = 1"
    if scope is not None and scope_first:
        sql = f"SELECT c.id FROM documents d{join} AND d.collection IN ({','.join('?' * len(scope))})"
        args: list[object] = [model.id, *scope]
        if where is not None:
            test, params = predicate(where, "d.id")
            sql += f" AND {test}"
            args += params
        return sql, args
    assert where is not None
    ids, params = id_set(where)
    sql = f"SELECT c.id FROM ({ids}) s CROSS JOIN documents d ON d.id = s.doc_id{join}"
    args = [*params, model.id]
    if scope is not None:
        sql += f" AND d.collection IN ({','.join('?' * len(scope))})"
        args += scope
    return sql, args


def _best_per_document(conn: apsw.Connection, pairs: list[tuple[int, float]], want: int, scope: list[str] | None, where: Filter | None = None) -> list[Nearest]:
    """Collapse (chunk, distance) pairs to each active document's nearest chunk, best first."""
    chunk_info = chunk_rows(conn, [c for c, _ in pairs])
    by_hash: dict[str, tuple[float, tuple[int, int]]] = {}
    for chunk_id, distance in pairs:
        if not math.isfinite(distance):  # a broken vector stored by an older qmd: never a match
            continue
        content_hash, _, start, end = chunk_info[chunk_id]
        if content_hash not in by_hash or distance < by_hash[content_hash][0]:
            by_hash[content_hash] = (distance, (start, end))
    if not by_hash:
        return []
    marks, params = values_in(list(by_hash))
    sql = f"SELECT id, hash, collection FROM documents WHERE active = 1 AND hash IN ({marks})"
    if where is not None:  # documents sharing a matching one's content may differ in date or collection
        from qmd.backends.sqlite.filters import predicate

        test, more = predicate(where, "documents.id")
        sql += f" AND {test}"
        params += more
    out: list[Nearest] = [
        (int(doc_id), max(0.0, 1.0 - by_hash[h][0]), by_hash[h][1])
        for doc_id, h, coll in conn.execute(sql, params)
        if scope is None or coll in scope
    ]
    out.sort(key=lambda item: (-item[1], item[0]))
    return out[:want]


def copy_from(conn: apsw.Connection, old_index: Path) -> int:
    """Copy the vectors of `old_index` whose content the index of `conn` still holds.

    Vectors are keyed by content hash and fingerprint, so those of unchanged documents are
    valid in a rebuilt index. Returns the documents (content hashes) whose vectors came over.
    """
    conn.execute("ATTACH DATABASE ? AS old", (str(old_index),))
    try:
        if not conn.execute("SELECT 1 FROM old.sqlite_master WHERE type = 'table' AND name = 'embed_models'").fetchall():
            return 0
        ensure_vec(conn)
        wanted = "SELECT hash FROM main.documents WHERE active = 1"
        with transaction(conn):
            for old_id, fingerprint, model, dims in list(conn.execute("SELECT id, fingerprint, model, dims FROM old.embed_models ORDER BY id")):
                new = ensure_model(conn, str(fingerprint), str(model), int(dims))
                chunks = list(conn.execute(f"SELECT id, hash, seq, start, end, tokens FROM old.chunks WHERE model_id = ? AND hash IN ({wanted})", (old_id,)))
                for chunk_id, content_hash, seq, start, end, tokens in chunks:
                    conn.execute(
                        "INSERT INTO main.chunks (model_id, hash, seq, start, end, tokens) VALUES (?, ?, ?, ?, ?, ?)",
                        (new.id, content_hash, seq, start, end, tokens),
                    )
                    new_chunk = conn.last_insert_rowid()
                    blob = conn.execute(f"SELECT embedding FROM old.{table(int(old_id))} WHERE chunk_id = ?", (chunk_id,)).fetchall()
                    if blob:
                        conn.execute(f"INSERT INTO main.{table(new.id)} (chunk_id, embedding) VALUES (?, ?)", (new_chunk, blob[0][0]))
                conn.execute(
                    f"INSERT OR REPLACE INTO main.embedded (model_id, hash, chunks, embedded_at) SELECT ?, hash, chunks, embedded_at FROM old.embedded WHERE model_id = ? AND hash IN ({wanted})",
                    (new.id, old_id),
                )
        return count(conn, "SELECT count(DISTINCT hash) FROM main.embedded")
    finally:
        conn.execute("DETACH DATABASE old")


def chunk_vectors(conn: apsw.Connection, model: VectorModel, hashes: Sequence[str]) -> dict[str, tuple[str, list[ChunkVector]]]:
    """Each embedded content hash's chunker and chunks with their vectors, in order (for `qmd export`)."""
    ensure_vec(conn)
    if not hashes:
        return {}
    marks, params = values_in(hashes)
    out: dict[str, tuple[str, list[ChunkVector]]] = {
        str(h): (str(c or "regex"), []) for h, c in conn.execute(f"SELECT hash, chunker FROM embedded WHERE model_id = ? AND hash IN ({marks})", (model.id, *params))
    }
    sql = (
        f"SELECT c.hash, c.seq, c.start, c.end, c.tokens, v.embedding FROM chunks c JOIN {table(model.id)} v ON v.chunk_id = c.id"
        f" WHERE c.model_id = ? AND c.hash IN ({marks}) ORDER BY c.hash, c.seq"
    )
    for h, seq, start, end, tokens, blob in conn.execute(sql, (model.id, *params)):
        if str(h) in out:
            out[str(h)][1].append(ChunkVector(str(h), int(seq), int(start), int(end), int(tokens), memoryview(blob).cast("f").tolist()))
    return out
