"""Chunk vectors in pgvector: one table `vec_<model id>` of `vector(dims)` per embedding
fingerprint, with an HNSW index (cosine distance).

A search is exact whenever it can be cheap: over a table of at most EXACT_CHUNKS chunks, or
a collection scope / filter allowing at most SCOPED_EXACT_CHUNKS (when the planner's estimate
of its chunks says it may be that few, the exact scan lists them, up to the cap, and gives up
past it), the distance of every candidate is computed.
Past that, once `qmd embed` has measured the HNSW index's recall@10 against exact search at
RECALL_TARGET or better for its present size (qmd/backends/recall.py; under
QMD_VECTOR_INDEX=approx whatever it measured, under exact never: on a near-uniform set at 1M
it measured 0.575, and nothing approximate reached 0.95 there for less than the exact scan,
docs/performance.md), one pass through the HNSW index: the scope and filter are tested inside the
index-ordered query (nested loops from the HNSW scan to each chunk's documents, no sort),
pgvector's iterative scan keeps walking the graph while a cursor fetches rows, until the
page holds `limit` documents; ef_search is pgvector's widest (1000). Only a pass that runs
out of its tuple budget before `limit` documents falls back to the exact scan of the scope,
so a page is never short when the documents exist.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager

import numpy as np
import psycopg

from qmd.core.clock import now_iso
from qmd.backends.postgres.connection import ensure_vector_extension, marks, quote_ident
from qmd.backends.base import vector_index_mode
from qmd.backends.rows import ChunkVector, Nearest, VectorModel
from qmd.backends.sql import count, model_row

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter
    from qmd.backends.recall import Recall

EXACT_CHUNKS = 20_000  # up to this many chunks in the table, distances are computed for all (exact)
SCOPED_EXACT_CHUNKS = 10_000  # a scope or filter allowing up to this many: its exact scan (a key lookup per chunk)
# costs less than the HNSW pass at EF_SEARCH_MIN (100k hard set: 8k chunks 0.6 s exact vs 1.3 s; 19k 1.0 s vs 0.4 s, loaded)
HNSW_M = 16
HNSW_EF_CONSTRUCTION = 128  # scope_bench's hard 100k set (--noise 1.4), one run: recall@10 of a 19% scope 0.940 at 64 ->
# 0.967 at 128 (two collections 0.947 -> 0.960, unscoped 0.970 -> 0.973) for the same server CPU per query (ef_search
# is at pgvector's widest already: only a better graph finds more); the build costs about twice the graph steps
EF_SEARCH_MIN = 1000  # recall@10 on postgres_bench's hard 100k set (near-uniform 384-d): 0.86 at 200, 0.92 at 400,
# 0.96-0.97 at 800, 0.975 at 1000 (a larger page or strict order adds nothing: the graph search's width decides)
EF_SEARCH_MAX = 1000  # pgvector's limit


def ef_search(k: int, rows: int) -> int:
    """hnsw.ef_search for the `k` nearest of a table of `rows` vectors: EF_SEARCH_MIN, which
    already is pgvector's widest (recall on a larger graph only falls: a narrower search is
    never the better one), or the page when pgvector allows it."""
    return min(EF_SEARCH_MAX, max(EF_SEARCH_MIN, k))


BULK_DOCUMENTS = 1000  # an embed of at least this many documents (and a quarter of those embedded) builds HNSW once, after
BUILD_MEMORY_MIN_KB = 256 * 1024  # maintenance_work_mem of an HNSW build at least (the graph in memory: much faster than
# row-by-row inserts); a larger graph gets its size (graph_bytes), up to BUILD_MEMORY_SHARE of the machine and the server's limit
BUILD_MEMORY_SHARE = 4  # at most a quarter of this machine's memory (the server's own when it runs here, the usual case)
GRAPH_OVERHEAD = 160  # bytes a graph element holds besides its vector and layer-0 neighbours (header, upper layers' lists)


def graph_bytes(rows: int, dims: int) -> int:
    """pgvector's in-memory HNSW graph of `rows` vectors: each its float4 vector, its 2*m
    layer-0 neighbours (8-byte pointer + distance) and GRAPH_OVERHEAD (1M x 384: about 2 GB)."""
    return rows * (dims * 4 + HNSW_M * 2 * 8 + GRAPH_OVERHEAD)


def machine_memory() -> int | None:
    """This machine's physical memory in bytes (None where the OS does not say)."""
    import os

    try:
        return int(os.sysconf("SC_PAGE_SIZE")) * int(os.sysconf("SC_PHYS_PAGES"))
    except (AttributeError, ValueError, OSError):
        return None


def build_memory_kb(conn: psycopg.Connection, model_id: int, dims: int) -> int:
    """maintenance_work_mem (kB) for building the HNSW index of `model_id`'s table: its graph
    (graph_bytes, 10% slack) so the build never spills to the slow on-disk phase, at least
    BUILD_MEMORY_MIN_KB, at most a BUILD_MEMORY_SHARE of the machine's memory and the server's
    maximum; never below what the server is already set to (an administrator's larger value)."""
    rows = count(conn, f"SELECT count(*) FROM {table(model_id)}")
    want = max(BUILD_MEMORY_MIN_KB, graph_bytes(rows, dims) * 11 // 10 // 1024)
    got = conn.execute("SELECT setting::bigint, max_val::bigint FROM pg_settings WHERE name = 'maintenance_work_mem'").fetchone()
    current, ceiling = (int(got[0]), int(got[1])) if got else (0, want)
    machine = machine_memory()
    if machine:
        ceiling = min(ceiling, machine // BUILD_MEMORY_SHARE // 1024)
    return max(current, min(want, ceiling))


def table(model_id: int) -> str:
    return f"vec_{int(model_id)}"


def literal(vector: Sequence[float]) -> str:
    """A vector as pgvector's text input; a NaN or infinite component becomes 0 (pgvector refuses them)."""
    return "[" + ",".join(repr(float(x)) if math.isfinite(x) else "0" for x in vector) + "]"


def _create_hnsw(conn: psycopg.Connection, model_id: int) -> None:
    t = table(model_id)
    conn.execute(
        f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} USING hnsw (embedding vector_cosine_ops) WITH (m = {HNSW_M}, ef_construction = {HNSW_EF_CONSTRUCTION})"
    )


def create_table(conn: psycopg.Connection, model_id: int, dims: int) -> None:
    t = table(model_id)
    conn.execute(f"CREATE TABLE IF NOT EXISTS {t} (chunk_id BIGINT PRIMARY KEY, embedding vector({int(dims)}) NOT NULL)")
    if dims <= 2000:  # HNSW's limit for vector; past it the exact scan serves
        _create_hnsw(conn, model_id)


def hnsw_ready(conn: psycopg.Connection, model_id: int) -> bool:
    """Whether the model's HNSW index exists and is valid (a bulk embed drops it until its end)."""
    row = conn.execute("SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)", (f"{table(model_id)}_hnsw",)).fetchone()
    return bool(row and row[0])


def hnsw_ef_construction(conn: psycopg.Connection, model_id: int) -> int | None:
    """The ef_construction the model's HNSW index was built with (its reloptions: one catalog
    row, cheap); None without an index. An index of an earlier qmd (64) keeps it until rebuilt."""
    row = conn.execute("SELECT c.reloptions FROM pg_class c WHERE c.oid = to_regclass(%s)", (f"{table(model_id)}_hnsw",)).fetchone()
    if row is None:
        return None
    for option in row[0] or []:
        key, _, value = str(option).partition("=")
        if key == "ef_construction":
            return int(value)
    return 64  # pgvector's default


def outdated_hnsw(conn: psycopg.Connection, schema: str, url: str) -> list[dict[str, object]]:
    """For doctor (IndexBackend.vector_index_status): each vector space whose HNSW index was
    built at a smaller ef_construction than HNSW_EF_CONSTRUCTION, with `advice` (detail, fix):
    the fix rebuilds it in place, searches keep the old index meanwhile (REINDEX CONCURRENTLY);
    `url`: the database's, password redacted."""
    out: list[dict[str, object]] = []
    for model_id, name in conn.execute("SELECT id, model FROM embed_models ORDER BY id").fetchall():
        ef = hnsw_ef_construction(conn, int(model_id))
        if ef is None or ef >= HNSW_EF_CONSTRUCTION:
            continue
        index = f"{quote_ident(schema)}.{table(int(model_id))}_hnsw"
        rows = count(conn, "SELECT count(*) FROM chunks WHERE model_id = %s", (int(model_id),))
        detail = f"HNSW index built at ef_construction {ef} by an earlier qmd (now {HNSW_EF_CONSTRUCTION}: better recall); kept until a bulk embed rebuilds it"
        fix = (
            f"psql '{url}' -c 'ALTER INDEX {index} SET (ef_construction = {HNSW_EF_CONSTRUCTION})'"
            f" -c 'REINDEX INDEX CONCURRENTLY {index}'  # searches keep the old index meanwhile"
        )
        out.append({
            "model": str(name), "structure": f"hnsw (m {HNSW_M}, ef_construction {ef})", "state": "ready", "current": False,
            "chunks": rows, "floats": rows, "codes": rows, "lists": True, "retraining": None, "retrain_due": None, "due": False,
            "advice": (detail, fix),
        })
    return out


def _bulk_key(model_id: int) -> str:
    return f"qmd-hnsw-build:{model_id}"


def build_hnsw(conn: psycopg.Connection, model: VectorModel) -> bool:
    """(Re)build the HNSW index when it is missing or invalid (an interrupted bulk embed) and
    no other process is building it; True when it is ready after. The table's writers wait
    for the build (readers do not: searches are exact while there is no index)."""
    if model.dims > 2000 or hnsw_ready(conn, model.id):
        return True
    got = conn.execute("SELECT pg_try_advisory_lock(hashtext(current_schema() || %s))", (_bulk_key(model.id),)).fetchone()
    if not (got and got[0]):
        return False  # another process's bulk embed: it builds the index at its end
    try:
        _build(conn, model.id, model.dims)
    finally:
        conn.execute("SELECT pg_advisory_unlock(hashtext(current_schema() || %s))", (_bulk_key(model.id),))
    return True


def _build(conn: psycopg.Connection, model_id: int, dims: int) -> None:
    with conn.transaction():
        conn.execute(f"SET LOCAL maintenance_work_mem = '{build_memory_kb(conn, model_id, dims)}kB'")
        conn.execute(f"DROP INDEX IF EXISTS {table(model_id)}_hnsw")  # an invalid one, left by an interrupted build
        _create_hnsw(conn, model_id)


@contextmanager
def bulk_writes(connection: Callable[[], psycopg.Connection], model: VectorModel, documents: int) -> Iterator[None]:
    """Around one embed run of `documents` documents: when that is many (BULK_DOCUMENTS, and at
    least a quarter of the documents already embedded), drop the HNSW index, let the batches
    write plain rows, and build the index once at the end (also after an error or Ctrl-C:
    whatever was written is indexed). Meanwhile searches find no valid index and compute
    every distance: exact, slower, never wrong. One process at a time (an advisory lock);
    another embed running at once writes through the index as usual.

    `connection()` is asked again for the build: after a Ctrl-C between a query and its
    result, the backend hands out a fresh connection (the old one, and its advisory lock, go)."""
    conn = connection()
    embedded = count(conn, "SELECT count(*) FROM embedded WHERE model_id = %s", (model.id,))
    if model.dims > 2000 or documents < BULK_DOCUMENTS or documents * 4 < embedded:
        yield
        return
    got = conn.execute("SELECT pg_try_advisory_lock(hashtext(current_schema() || %s))", (_bulk_key(model.id),)).fetchone()
    if not (got and got[0]):
        yield
        return
    try:
        conn.execute(f"DROP INDEX IF EXISTS {table(model.id)}_hnsw")
        yield
    finally:
        after = connection()
        try:
            _build(after, model.id, model.dims)
        finally:
            if after is conn:  # a replaced connection took its session lock with it
                conn.execute("SELECT pg_advisory_unlock(hashtext(current_schema() || %s))", (_bulk_key(model.id),))


def ensure_model(conn: psycopg.Connection, fingerprint: str, model: str, dims: int) -> VectorModel:
    found = model_row(conn, fingerprint)
    if found is not None:
        build_hnsw(conn, found)  # left without one by a bulk embed that was killed
        return found
    ensure_vector_extension(conn)
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext('qmd-vector-model:' || current_schema()))")
        found = model_row(conn, fingerprint)
        if found is None:
            row = conn.execute(
                "INSERT INTO embed_models (fingerprint, model, dims, created_at) VALUES (%s, %s, %s, %s) RETURNING id", (fingerprint, model, dims, now_iso()),
            ).fetchone()
            assert row is not None
            create_table(conn, int(row[0]), dims)
            found = VectorModel(int(row[0]), fingerprint, model, dims)
    return found


def reset_model(conn: psycopg.Connection, model: VectorModel, dims: int) -> VectorModel:
    """Recreate a space's vector table with `dims`, dropping its vectors (see the SQLite one)."""
    with conn.transaction():
        conn.execute(f"DROP TABLE IF EXISTS {table(model.id)}")
        conn.execute("DELETE FROM chunks WHERE model_id = %s", (model.id,))
        conn.execute("DELETE FROM embedded WHERE model_id = %s", (model.id,))
        create_table(conn, model.id, dims)
        conn.execute("UPDATE embed_models SET dims = %s WHERE id = %s", (int(dims), model.id))
    return VectorModel(model.id, model.fingerprint, model.model, int(dims))


def _drop_hashes(conn: psycopg.Connection, model: VectorModel, hashes: list[str]) -> None:
    conn.execute(f"DELETE FROM {table(model.id)} WHERE chunk_id IN (SELECT id FROM chunks WHERE model_id = %s AND hash = ANY(%s))", (model.id, hashes))
    conn.execute("DELETE FROM chunks WHERE model_id = %s AND hash = ANY(%s)", (model.id, hashes))
    conn.execute("DELETE FROM embedded WHERE model_id = %s AND hash = ANY(%s)", (model.id, hashes))


_COPY_HEADER = b"PGCOPY\n\xff\r\n\x00" + b"\x00\x00\x00\x00" + b"\x00\x00\x00\x00"


def binary_copy(ids: Sequence[int], vectors: np.ndarray) -> bytes:
    """COPY ... (FORMAT BINARY) data of (chunk_id bigint, embedding vector) rows: per row 2
    fields, the id as int8, the vector in pgvector's binary form (int16 dims, int16 0, float4
    each, big-endian). A NaN or infinite component becomes 0 (pgvector refuses them)."""
    n, dims = vectors.shape
    row = np.dtype([("nf", ">i2"), ("l1", ">i4"), ("id", ">i8"), ("l2", ">i4"), ("dim", ">i2"), ("unused", ">i2"), ("v", ">f4", (dims,))])
    out = np.zeros(n, dtype=row)
    out["nf"], out["l1"], out["l2"], out["dim"] = 2, 8, 4 + 4 * dims, dims
    out["id"] = np.asarray(ids, dtype=np.int64)
    out["v"] = np.nan_to_num(vectors.astype(np.float32), nan=0.0, posinf=0.0, neginf=0.0)
    return _COPY_HEADER + out.tobytes() + b"\xff\xff"


def write_batch(conn: psycopg.Connection, model: VectorModel, batch: Sequence[tuple[str, Sequence[ChunkVector]]], chunkers: Mapping[str, str] | None = None) -> int:
    """Replace the chunks of every content hash in `batch` in one transaction, recording how
    each was cut (`chunkers`; `regex` when absent); returns chunks written.

    The chunk rows go in with one statement (unnest of arrays), the vectors by binary COPY
    built with numpy: text literals cost more than the database's own work."""
    if not batch:
        return 0
    now = now_iso()
    pairs = [(h, c) for h, cs in batch for c in cs]
    chunks = [c for _, c in pairs]
    with conn.transaction(), conn.cursor() as cur:
        _drop_hashes(conn, model, [h for h, _ in batch])
        if chunks:
            got = cur.execute(
                'INSERT INTO chunks (model_id, hash, seq, start, "end", tokens)'
                " SELECT %s, * FROM unnest(%s::text[], %s::int[], %s::int[], %s::int[], %s::int[]) RETURNING id, hash, seq",
                (model.id, [h for h, _ in pairs], [c.seq for c in chunks], [c.start for c in chunks], [c.end for c in chunks], [c.tokens for c in chunks]),
            ).fetchall()
            ids = {(str(h), int(q)): int(i) for i, h, q in got}
            data = binary_copy([ids[(h, c.seq)] for h, c in pairs], np.asarray([c.vector for c in chunks], dtype=np.float64))
            with cur.copy(f"COPY {table(model.id)} (chunk_id, embedding) FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(data)
        cur.execute(
            "INSERT INTO embedded (model_id, hash, chunks, embedded_at) SELECT %s, h, n, %s FROM unnest(%s::text[], %s::int[]) AS u(h, n)"
            " ON CONFLICT (model_id, hash) DO UPDATE SET chunks = excluded.chunks, embedded_at = excluded.embedded_at",
            (model.id, now, [h for h, _ in batch], [len(cs) for _, cs in batch]),
        )
        _record_chunkers(cur, model, {h: c for h, c in (chunkers or {}).items() if c != "regex"})
    return len(chunks)


def set_chunkers(conn: psycopg.Connection, model: VectorModel, chunkers: Mapping[str, str]) -> None:
    if chunkers:
        with conn.transaction(), conn.cursor() as cur:
            _record_chunkers(cur, model, chunkers)


def _record_chunkers(cur: psycopg.Cursor, model: VectorModel, chunkers: Mapping[str, str]) -> None:
    if chunkers:
        cur.executemany("UPDATE embedded SET chunker = %s WHERE model_id = %s AND hash = %s", [(c, model.id, h) for h, c in chunkers.items()])


def drop_all(conn: psycopg.Connection, model: VectorModel, hashes: Sequence[str] | None = None) -> None:
    with conn.transaction():
        if hashes is None:
            conn.execute(f"TRUNCATE {table(model.id)}")
            conn.execute("DELETE FROM chunks WHERE model_id = %s", (model.id,))
            conn.execute("DELETE FROM embedded WHERE model_id = %s", (model.id,))
        else:
            _drop_hashes(conn, model, list(hashes))


def drop_orphans(conn: psycopg.Connection) -> int:
    """Delete chunks and vectors of content no document uses (caller holds a transaction)."""
    dropped = 0
    unused = "NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = c.hash)"
    for (model_id,) in conn.execute("SELECT id FROM embed_models").fetchall():
        conn.execute(f"DELETE FROM {table(int(model_id))} WHERE chunk_id IN (SELECT id FROM chunks c WHERE c.model_id = %s AND {unused})", (model_id,))
        dropped += conn.execute(f"DELETE FROM chunks c WHERE c.model_id = %s AND {unused}", (model_id,)).rowcount
        conn.execute(f"DELETE FROM embedded c WHERE c.model_id = %s AND {unused}", (model_id,))
    return dropped


def chunk_spans(conn: psycopg.Connection, model: VectorModel, hashes: Sequence[str]) -> dict[str, list[tuple[int, int]]]:
    if not hashes:
        return {}
    out: dict[str, list[tuple[int, int]]] = {}
    sql = 'SELECT hash, start, "end" FROM chunks WHERE model_id = %s AND hash = ANY(%s) ORDER BY hash, seq'
    for h, start, end in conn.execute(sql, (model.id, list(hashes))):
        out.setdefault(str(h), []).append((int(start), int(end)))
    return out


def vector_sample(conn: psycopg.Connection, model: VectorModel, size: int) -> list[Sequence[float]]:
    """Up to `size` vectors of the model, spread evenly over its chunk ids (the same ones while
    the chunks are unchanged): one seek into the chunk ids each, never a scan of the chunks."""
    sql = (
        "WITH b AS (SELECT min(id) AS low, max(id) - min(id) + 1 AS span FROM chunks),"
        " picked AS (SELECT DISTINCT c.id FROM b, generate_series(0, least(%s, b.span) - 1) g(i)"
        " CROSS JOIN LATERAL (SELECT id FROM chunks WHERE id >= b.low + (g.i * b.span) / least(%s, b.span) AND model_id = %s ORDER BY id LIMIT 1) c)"
        f" SELECT v.embedding::text FROM picked JOIN {table(model.id)} v ON v.chunk_id = picked.id ORDER BY picked.id"
    )
    return [[float(x) for x in str(text).strip("[]").split(",")] for (text,) in conn.execute(sql, (size, size, model.id))]


def _allowed_docs(scope: list[str] | None, where: Filter | None) -> tuple[str, list[object]]:
    """The WHERE text (over documents d) of the documents a search may return, and its params."""
    sql = "d.active"
    params: list[object] = []
    if scope is not None:
        sql += " AND d.collection = ANY(%s)"  # an empty scope allows nothing
        params.append(list(scope))
    if where is not None:
        from qmd.backends.postgres.filters import id_set

        ids, more = id_set(where)
        sql += f" AND d.id IN ({ids})"
        params += more
    return sql, params


def _exact(conn: psycopg.Connection, model: VectorModel, q: str, limit: int | None, allowed: str, params: list[object], cap: int | None = None) -> list[Nearest] | None:
    """Every candidate chunk's distance computed (no index): each allowed document's nearest
    chunk. With `cap`: None, and no distance computed, when more than `cap` (document, chunk)
    pairs are allowed (they are listed once, up to cap + 1, then counted: no count query).

    Never a prepared statement (nor the other queries of a search): psycopg prepares one run
    five times, and PostgreSQL's generic plan, blind to the scope's and filter's values, made a
    collection + filter search 3.7x the unscoped one at 100k."""
    if cap is None and limit is not None and not params and allowed == "d.active":  # unscoped: nearest chunks first
        found = _exact_nearest_first(conn, model, q, limit)
        assert found is not None  # unbounded rounds: every chunk seen at worst
        return found
    if cap is None and limit is not None and _share(conn, model, allowed, params) >= NEAREST_FIRST_SHARE:
        found = _exact_nearest_first(conn, model, q, limit, allowed, params, rounds=NEAREST_FIRST_ROUNDS)  # a broad scope
        if found is not None:
            return found
    sql = exact_sql(model, limit, allowed, cap)
    rows = conn.execute(sql, (*params, model.id, q), prepare=False).fetchall()
    if cap is not None and rows and int(rows[0][0]) > cap:
        return None
    return [(int(i), float(s), (int(a), int(b))) for _, i, s, a, b in rows if i is not None]


NEAREST_FIRST = 64  # chunks an unscoped exact search ranks first, per document wanted (x4 while short)
NEAREST_FIRST_SHARE = 0.04  # a scope or filter passing this share of the chunks or more ranks them so too (its own join
# costs ~5x a plain scan per chunk it passes: at 1M x 384 a 19% collection took 1.45x the unscoped search, 80% 4.6x)
NEAREST_FIRST_ROUNDS = 2  # ... for at most this many scans (then its own join: the scope's nearest lie far from the query)


def _exact_nearest_first(
    conn: psycopg.Connection, model: VectorModel, q: str, limit: int, allowed: str = "d.active", params: Sequence[object] = (), rounds: int | None = None,
) -> list[Nearest] | None:
    """The `limit` allowed documents nearest to `q`, exactly, from the table's nearest chunks:
    one scan computing every distance and keeping the n nearest (PostgreSQL's parallel
    top-N sort, no index), then only those n looked up in their allowed documents. An allowed
    document none of the n chunks belongs to is no nearer than the n-th, so once they hold
    `limit` documents the page is the exact one; else n grows 4x (the nearest chunks mostly
    one long document's, inactive or out of scope) until the scan returns fewer than n: every
    chunk seen. After `rounds` scans still short: None (the caller's own join is cheaper).
    Joining every chunk to its documents first cost 4.8x a plain scan's time at 100k (313
    vs 65 ms on the hard set) and grew with the table."""
    n = max(limit * NEAREST_FIRST, KNN_PAGE)
    scans = 0
    while True:
        if rounds is not None and scans >= rounds:
            return None
        scans += 1
        with conn.transaction():
            conn.execute("SET LOCAL enable_indexscan = off")  # every distance: never the HNSW order (approximate)
            near = conn.execute(
                f"SELECT chunk_id, embedding <=> %s::vector AS distance FROM {table(model.id)} ORDER BY distance LIMIT {int(n)}", (q,), prepare=False,
            ).fetchall()
        distance = {int(i): float(dist) for i, dist in near if dist == dist}  # NaN: a broken vector stored by an older qmd
        best: dict[int, tuple[float, int, int]] = {}
        sql = f'SELECT c.id, d.id, c.start, c."end" FROM chunks c JOIN documents d ON d.hash = c.hash WHERE c.id = ANY(%s) AND {allowed}'
        for chunk_id, doc_id, start, end in conn.execute(sql, (list(distance), *params), prepare=False):
            d, dist = int(doc_id), distance[int(chunk_id)]
            if d not in best or dist < best[d][0]:
                best[d] = (dist, int(start), int(end))
        if len(best) >= limit or len(near) < n:
            break
        n *= 4
    ranked = sorted(((d, max(0.0, 1.0 - dist), (a, b)) for d, (dist, a, b) in best.items()), key=lambda item: (-item[1], item[0]))
    return ranked[:limit]


def exact_sql(model: VectorModel, limit: int | None, allowed: str, cap: int | None = None) -> str:
    """The statement of `_exact` (params: the allowed ones, the model id, the query vector); its
    first column is the number of (document, chunk) pairs listed."""
    # one row per (allowed document, chunk of its content): a plain join, no list of documents
    # kept and hashed first (that form cost 1.7x this one's server CPU on scope_bench's 8%)
    cand = f"SELECT d.id AS doc, c.id, c.start, c.\"end\" FROM documents d JOIN chunks c ON c.hash = d.hash WHERE {allowed} AND c.model_id = %s"
    ctes = ""
    if cap is None:  # any number of chunks: the planner joins them to their vectors as it likes (a scan of all: a hash join)
        dist = f"SELECT cand.doc, cand.start, cand.\"end\", v.embedding <=> %s::vector AS distance FROM cand JOIN {table(model.id)} v ON v.chunk_id = cand.id"
    else:  # a few: their vectors read by one index scan over the sorted array of their ids (a
        # join was planned as a hash join over a scan of every vector; a key lookup per chunk,
        # as a subquery, cost 1.7x this at 8k of 100k), and none unless they are at most `cap`.
        # Its own CTE, so the join to cand hashes (id, distance) pairs, not whole vectors.
        cand += f" LIMIT {int(cap) + 1}"
        ctes += (
            f", vec AS MATERIALIZED (SELECT v.chunk_id, v.embedding <=> %s::vector AS distance FROM {table(model.id)} v"
            f" WHERE v.chunk_id = ANY(ARRAY(SELECT id FROM cand WHERE (SELECT count(*) FROM cand) <= {int(cap)})))"
        )
        dist = "SELECT cand.doc, cand.start, cand.\"end\", vec.distance FROM cand JOIN vec ON vec.chunk_id = cand.id"
    return (
        f"WITH cand AS MATERIALIZED ({cand}){ctes},"
        f" dist AS MATERIALIZED ({dist}),"
        " best AS (SELECT DISTINCT ON (doc) doc, start, \"end\", distance FROM dist WHERE distance = distance ORDER BY doc, distance),"
        " ranked AS (SELECT doc, greatest(0, 1 - distance) AS score, start, \"end\" FROM best"
        " ORDER BY score DESC, doc"  # as the score is shown (clamped at 0), ties by id
        + (f" LIMIT {int(limit)}" if limit is not None else "")
        + ")"
        " SELECT n.total, r.doc, r.score, r.start, r.\"end\" FROM (SELECT count(*) AS total FROM cand) n LEFT JOIN ranked r ON true ORDER BY r.score DESC, r.doc"
    )


def _hnsw(conn: psycopg.Connection, model: VectorModel, q: str, want: int, allowed: str, params: list[object], size: int, share: float) -> list[Nearest]:
    """The `want` allowed documents nearest to `q` through the HNSW index of a table of about
    `size` vectors, in one pass: the scope and filter sit inside the index-ordered query (a
    nested loop from the HNSW scan to each chunk's documents, no sort), and pgvector's
    iterative scan keeps walking the graph while rows are fetched, so a narrow scope costs
    more graph steps, never a second query. Rows are fetched from a cursor until `want`
    distinct documents and at least KNN_PAGE rows are in hand (relaxed order: a later row
    may be nearer, so the page is sorted after). Short only when the scan ran out of its
    tuple budget (`share`: the estimated share of chunks allowed sizes it); the caller then
    computes the scope exactly."""
    k = max(want * 4, KNN_PAGE)
    best: dict[int, tuple[float, int, int]] = {}
    rows_seen = 0
    with conn.transaction():
        for setting in scan_settings(k, size, share):
            conn.execute(setting)
        sql = scan_sql(model, allowed)
        with conn.cursor(name="qmd_near") as cur:
            cur.execute(sql, (q, *params, q))
            while True:
                rows = cur.fetchmany(k)
                for doc_id, distance, start, end in rows:
                    if distance != distance:  # NaN: a broken vector stored by an older qmd
                        continue
                    d = int(doc_id)
                    if d not in best or distance < best[d][0]:
                        best[d] = (float(distance), int(start), int(end))
                rows_seen += len(rows)
                if len(rows) < k or (len(best) >= want and rows_seen >= k):
                    break
    ranked = sorted(((d, max(0.0, 1.0 - dist), (a, b)) for d, (dist, a, b) in best.items()), key=lambda item: (-item[1], item[0]))
    return ranked[:want]


def scan_settings(k: int, size: int, share: float) -> list[str]:
    """The session settings of one pass (SET LOCAL: its transaction only): ef_search for a page
    of `k` chunks of a table of `size`, the iterative scan, a tuple budget large enough for a
    scope passing `share` of the chunks to yield k of them (about 4k/share visited), and no
    sort plan (the index order or nothing: a full sort of the table is never cheaper here)."""
    budget = min(max(size, 1), max(SCAN_TUPLES_MIN, math.ceil(4 * k / max(share, 1e-6))))
    return [
        f"SET LOCAL hnsw.ef_search = {ef_search(k, size)}",
        "SET LOCAL hnsw.iterative_scan = relaxed_order",
        f"SET LOCAL hnsw.max_scan_tuples = {int(budget)}",
        "SET LOCAL enable_sort = off",
    ]


def scan_sql(model: VectorModel, allowed: str) -> str:
    """The one-pass query: chunks in HNSW order, each joined to its allowed documents."""
    return (
        f"SELECT d.id, v.embedding <=> %s::vector AS distance, c.start, c.\"end\" FROM {table(model.id)} v"
        " JOIN chunks c ON c.id = v.chunk_id JOIN documents d ON d.hash = c.hash"
        f" WHERE {allowed} ORDER BY v.embedding <=> %s::vector"
    )


KNN_PAGE = 40  # chunks fetched per cursor page at least: a relaxed-order scan's first rows are sorted among them
SCAN_TUPLES_MIN = 20_000  # pgvector's default hnsw.max_scan_tuples: the iterative scan's budget for a broad scope


def _share(conn: psycopg.Connection, model: VectorModel, allowed: str, params: list[object]) -> float:
    """The planner's estimate of the share of the model's chunks `allowed` passes (no rows read):
    of the chunks themselves, not of the documents (a scope's documents may be longer or
    shorter than most; the estimate of a semi-join counts each matching hash's chunks)."""
    def rows(sql: str, args: list[object]) -> float:
        plan = conn.execute(f"EXPLAIN (FORMAT JSON) {sql}", args, prepare=False).fetchone()
        assert plan is not None
        return float(plan[0][0]["Plan"]["Plan Rows"])
    chunks = "SELECT 1 FROM chunks c WHERE c.model_id = %s"
    return min(1.0, rows(f"{chunks} AND c.hash IN (SELECT d.hash FROM documents d WHERE {allowed})", [model.id, *params]) / max(1.0, rows(chunks, [model.id])))


class Space:
    """What a search of one vector space decides by, read in one statement: its size (the
    chunks counted up to EXACT_CHUNKS + 1 only, as a count of a million rows costs more than
    the search, and the table's size estimate), whether HNSW serves it (a bulk embed drops
    the index; small tables and wide vectors are exact) and that index's last recall
    measurement (qmd/backends/recall.py)."""

    def __init__(self, rows: int, identity: str | None, check: Recall | None) -> None:
        self.rows, self.identity, self.check = rows, identity, check

    @classmethod
    def read(cls, conn: psycopg.Connection, model: VectorModel) -> Space:
        from qmd.backends import recall

        index = f"{table(model.id)}_hnsw"
        row = conn.execute(
            "SELECT (SELECT count(*) FROM (SELECT 1 FROM chunks WHERE model_id = %s LIMIT %s) x),"
            " (SELECT reltuples FROM pg_class WHERE oid = to_regclass(%s)),"
            " coalesce((SELECT i.indisvalid FROM pg_index i WHERE i.indexrelid = to_regclass(%s)), false),"
            " (SELECT relfilenode::bigint FROM pg_class WHERE oid = to_regclass(%s)),"
            " (SELECT value FROM meta WHERE key = %s)",
            (model.id, EXACT_CHUNKS + 1, table(model.id), index, index, recall.key(model.id)),
        ).fetchone()
        assert row is not None
        rows = max(int(row[0]), int(row[1] or 0))
        identity = None
        if int(row[0]) > EXACT_CHUNKS and model.dims <= 2000 and bool(row[2]):
            identity = f"hnsw, ef_search {EF_SEARCH_MIN}, file {row[3]}"  # a rebuild (bulk embed, REINDEX) is a new file
        return cls(rows, identity, recall.parse(row[4]))

    def trusted(self) -> bool:
        return self.identity is not None and self.check is not None and self.check.trusted(self.rows, self.identity)


def nearest_documents(
    conn: psycopg.Connection, model: VectorModel, query: Sequence[float], limit: int | None, scope: list[str] | None, where: Filter | None = None,
) -> list[Nearest]:
    """The allowed documents whose best chunk is nearest to `query`, best first (see the module doc)."""
    q = literal(query)
    allowed, params = _allowed_docs(scope, where)
    space = Space.read(conn, model)
    mode = vector_index_mode()
    hnsw = space.identity is not None and mode != "exact" and (mode == "approx" or space.trusted())  # auto: HNSW's recall measured (recall.py)
    if limit is None or not hnsw:  # QMD_VECTOR_INDEX=exact, a small table, no valid HNSW: every distance
        return _exact(conn, model, q, limit, allowed, params) or []
    total = space.rows
    share = 1.0
    if scope is not None or where is not None:
        share = _share(conn, model, allowed, params)
        if share * total <= 1.5 * SCOPED_EXACT_CHUNKS:  # near or under the line (the estimate may be off): exact unless it has more
            exact = _exact(conn, model, q, limit, allowed, params, cap=SCOPED_EXACT_CHUNKS)
            if exact is not None:
                return exact
            share = max(share, SCOPED_EXACT_CHUNKS / max(total, 1))
    found = _hnsw(conn, model, q, limit, allowed, params, total, share)
    if len(found) < limit:  # the scan's tuple budget ran out before a narrow scope had `limit`
        return _exact(conn, model, q, limit, allowed, params) or []
    return found


def nearest_many(
    conn: psycopg.Connection, model: VectorModel, queries: Sequence[Sequence[float]], limit: int | None, scope: list[str] | None, where: Filter | None = None,
) -> list[list[Nearest]]:
    """`nearest_documents` of each query, one statement each: an HNSW search walks the graph
    from its own query, so nothing is shared to gain, and pgvector has no multi-query scan (a
    LATERAL join over the queries runs the same per-query scans, saving only round trips)."""
    return [nearest_documents(conn, model, q, limit, scope, where) for q in queries]


def chunk_vectors(conn: psycopg.Connection, model: VectorModel, hashes: Sequence[str]) -> dict[str, tuple[str, list[ChunkVector]]]:
    """Each embedded content hash's chunker and chunks with their vectors, in order (for `qmd export`)."""
    if not hashes:
        return {}
    out: dict[str, tuple[str, list[ChunkVector]]] = {
        str(h): (str(c or "regex"), []) for h, c in conn.execute("SELECT hash, chunker FROM embedded WHERE model_id = %s AND hash = ANY(%s)", (model.id, list(hashes)))
    }
    sql = (
        f'SELECT c.hash, c.seq, c.start, c."end", c.tokens, v.embedding::real[] FROM chunks c JOIN {table(model.id)} v ON v.chunk_id = c.id'
        " WHERE c.model_id = %s AND c.hash = ANY(%s) ORDER BY c.hash, c.seq"
    )
    for h, seq, start, end, tokens, vector in conn.execute(sql, (model.id, list(hashes))):
        if str(h) in out:
            out[str(h)][1].append(ChunkVector(str(h), int(seq), int(start), int(end), int(tokens), [float(x) for x in vector]))
    return out
