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
    conn: apsw.Connection, model: VectorModel, query: Sequence[float], k: int, allowed: tuple[str, Sequence[object]] | None = None, coded: bool = False,
) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) of the k nearest chunks: over the whole vector table, or
    over the chunk ids the SELECT `allowed` (SQL, parameters) returns. `coded`: through the
    approximate index (approx.py: exact distances of the candidates its codes find).

    Up to KNN_MAX, sqlite-vec's own KNN; beyond (`vsearch --all`, a long `-n`), the same
    distances by a scan of every vector in order (exact, ~10 µs a row)."""
    ensure_vec(conn)
    if coded:
        found = approx.knn(conn, model.id, pack(query), k, allowed)
        if found is not None:
            return found
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
    sql += " ORDER BY distance"
    if scan:
        sql += " LIMIT ?"
        params.append(k)
    return [(r[0], r[1]) for r in conn.execute(sql, params)]


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

    sqlite-vec's KNN finds the nearest chunks, and is asked for more (k × 4) until enough
    distinct active documents in scope are among them, or every chunk was returned. KNN
    returns the true nearest chunks in order, so keeping those in scope gives exactly what
    a brute-force scan restricted to the scope would (vectors are shared across collections
    by content hash). A scan reading each vector through SQL is used only past the rows
    sqlite-vec's KNN may return (KNN_MAX): vec0 returns a column ~10 µs a row, 100+ ms on
    9k chunks, against ~15 ms for its own KNN over all.

    A collection scope and a filter narrow the search alike, by one of two exact plans chosen
    by the share of a sample of documents that are in scope and pass the filter. A narrow one
    (under a fifth) restricts the KNN itself to the chunks of those documents (`chunk_id IN
    (SELECT …)`, applied by sqlite-vec during its scan, so about as cheap as the unrestricted
    KNN): a collection of 1% of the documents still returns `limit` of them, the nearest,
    never a short page, in one pass. A broad one asks the unrestricted KNN for about three
    times the chunks its share needs and tests each document found, so it costs one KNN
    instead of following the thousands of ids it matches; the loop above is then only the
    guard for an unlucky draw. Vectors are shared by content across collections, so the
    collection cannot live in the vector table itself (a partition key would copy them).

    With the approximate index built and chosen (approx.py, QMD_VECTOR_INDEX), each KNN above
    takes its candidates from the sign-bit codes instead (restricted alike) and ranks them by
    their exact distances: the same plans, approximate only in which chunks are candidates.
    """
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
            share, scope_first = _scope_share(conn, scope or []), True
        else:
            share, scope_first = _sampled_share(conn, where, scope)
        if share < BROAD_SHARE:
            allowed = _chunks_matching(model, scope, where, scope_first)
        else:
            widen = max(4, math.ceil(3 / share))  # chunks enough for ~3x the documents needed
    k = max(want * widen, 32)
    while True:
        if k >= total and not counted:
            total, counted = _chunk_count(conn, model), True
        k = min(total, k)
        pairs = knn(conn, model, query, k, allowed, coded) if k else []
        found = _best_per_document(conn, pairs, want, scope, where)
        if len(found) >= want or len(pairs) < k or k >= total:  # fewer than k: every allowed chunk was returned
            return found
        k *= 4


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
