"""The approximate vector index of a SQLite index (issue 31): binary codes + float rescoring.

Beside a vector space's exact `vec_{id}` (sqlite-vec vec0, float) it keeps two tables:
`vecq_{id}`, a vec0 of `bit[dims]` codes (one sign bit a dimension, Hamming distance), the
coarse pass, which sqlite-vec scans ~10x faster than the floats; and `vecr_{id}`, a plain
table of the float vectors by chunk id, the rescoring: vec0 keeps its floats in blobs of
1024 vectors, so reading 400 of them one by one costs seconds, a rowid table microseconds.
A query takes the k × OVERSAMPLE nearest codes and ranks those by their exact cosine, so the
distances it returns are exact ones and only the candidate set is approximate.

The structure is recorded in `vector_index` (one row a vector space: structure, state,
rows); only `ready` ones are searched. Building copies, in short transactions, the chunks
not yet coded (so a killed build resumes where it stopped, and readers, in WAL, never
wait); once built, every chunk written or dropped updates it in the same transaction.
`QMD_VECTOR_INDEX=exact|approx|auto` (default auto: built and used from APPROX_MIN_CHUNKS).
"""

from __future__ import annotations

import os
from typing import Any
from collections.abc import Callable, Iterator, Sequence

import apsw

from qmd.core.clock import now_iso
from qmd.core.errors import QmdError
from qmd.backends.rows import VectorModel
from qmd.backends.sql import as_int, count
from qmd.backends.sqlite.connection import transaction

STRUCTURE = "bit+rescore"  # the one structure so far; recorded so a later one can be told apart
MODES = ("exact", "approx", "auto")
APPROX_MIN_CHUNKS = 50_000  # auto: from here exact scans of 768-d vectors pass ~100 ms on a quiet machine (docs/performance.md)
OVERSAMPLE = 10  # candidates coded-nearest per result wanted: recall@10 1.0 on clustered 768-d sets at 100k (bench/ann_bench.py)
KNN_MAX = 4096  # sqlite-vec's most rows a KNN returns
BATCH = 2000  # chunks coded per build transaction

ENV = "QMD_VECTOR_INDEX"
META = "CREATE TABLE IF NOT EXISTS vector_index (model_id INTEGER PRIMARY KEY, structure TEXT NOT NULL, state TEXT NOT NULL, rows INTEGER NOT NULL DEFAULT 0, built_at TEXT)"


def mode() -> str:
    """exact | approx | auto, from QMD_VECTOR_INDEX (a bad value: an error naming the choices)."""
    value = os.environ.get(ENV, "auto").strip().lower() or "auto"
    if value not in MODES:
        raise QmdError(f"{ENV}={value!r} is not one of {', '.join(MODES)}", f"set {ENV} to exact, approx or auto (the default), or unset it")
    return value


def codes(model_id: int) -> str:
    return f"vecq_{int(model_id)}"


def floats(model_id: int) -> str:
    return f"vecr_{int(model_id)}"


def recorded(conn: apsw.Connection, model_id: int) -> tuple[str, str, int] | None:
    """(structure, state, rows) recorded for the vector space, or None (exact only)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_index'").fetchall():
        return None
    rows = conn.execute("SELECT structure, state, rows FROM vector_index WHERE model_id = ?", (model_id,)).fetchall()
    return (str(rows[0][0]), str(rows[0][1]), as_int(rows[0][2])) if rows else None


def _tables(conn: apsw.Connection, model_id: int) -> set[str]:
    """Which of the space's two tables exist (the codes' by vec0's rowid table, which it counts)."""
    names = (floats(model_id), codes(model_id), f"{codes(model_id)}_rowids")
    found = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, ?)", names)}
    return {t for t in (floats(model_id), codes(model_id)) if t in found and (t != codes(model_id) or names[2] in found)}


def present(conn: apsw.Connection, model_id: int) -> bool:
    """Whether the space has both tables (so written and dropped chunks must update them). One
    without the other is a damaged structure: writes leave it alone, searches stay exact,
    and the next build starts it over (it is derived data: never a reason to rebuild the index)."""
    return len(_tables(conn, model_id)) == 2


def write(conn: apsw.Connection, model_id: int, chunk_id: int, blob: bytes) -> None:
    """Code one chunk written by the caller's transaction (when the structure exists)."""
    conn.execute(f"INSERT INTO {floats(model_id)} (chunk_id, embedding) VALUES (?, ?)", (chunk_id, blob))
    conn.execute(f"INSERT INTO {codes(model_id)} (chunk_id, embedding) VALUES (?, vec_quantize_binary(?))", (chunk_id, blob))


def drop(conn: apsw.Connection, model_id: int, chunk_ids: Sequence[int] | None) -> None:
    """Forget chunks (None: all) in the caller's transaction (when the structure exists)."""
    if chunk_ids is None:
        conn.execute(f"DELETE FROM {floats(model_id)}")
        conn.execute(f"DELETE FROM {codes(model_id)}")
        return
    for chunk_id in chunk_ids:
        conn.execute(f"DELETE FROM {floats(model_id)} WHERE chunk_id = ?", (chunk_id,))
        conn.execute(f"DELETE FROM {codes(model_id)} WHERE chunk_id = ?", (chunk_id,))


def chunks_of(conn: apsw.Connection, model_id: int) -> int:
    return count(conn, "SELECT count(*) FROM chunks WHERE model_id = ?", (model_id,))


def wanted(conn: apsw.Connection, model_id: int, total: int | None = None) -> bool:
    """Whether `qmd embed` should build (or finish) the structure for this space."""
    chosen = mode()
    if chosen == "exact":
        return False
    return chosen == "approx" or (chunks_of(conn, model_id) if total is None else total) >= APPROX_MIN_CHUNKS


def searchable(conn: apsw.Connection, model_id: int, total: int) -> bool:
    """Whether a query of this space takes the approximate pass: built and ready, and wanted."""
    chosen = mode()
    if chosen == "exact":
        return False
    found = recorded(conn, model_id)
    return found is not None and found[:2] == (STRUCTURE, "ready") and (chosen == "approx" or total >= APPROX_MIN_CHUNKS) and present(conn, model_id)


def build(conn: apsw.Connection, model: VectorModel, source: str, progress: Callable[[int, int], None] | None = None, batch: int = BATCH) -> int:
    """Create or finish the structure from the exact vec0 table `source` (sqlite-vec loaded):
    code every chunk of the space not yet coded, drop coded rows of chunks gone, in
    transactions of `batch` chunks; returns the chunks coded now. Resumable: a killed build
    leaves its committed batches, and the next one codes the rest."""
    found = status(conn, model.id)
    tables = _tables(conn, model.id)
    if (found["structure"] is not None or tables) and (len(tables) != 2 or found["floats"] != found["codes"]):
        reset(conn, model.id)  # a table missing, or the two disagree: start over
    with transaction(conn):
        conn.execute(META)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {floats(model.id)} (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL)")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {codes(model.id)} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding bit[{model.dims}])")
        conn.execute(
            "INSERT INTO vector_index (model_id, structure, state) VALUES (?, ?, 'building') ON CONFLICT (model_id) DO NOTHING", (model.id, STRUCTURE)
        )
        gone = [r[0] for r in conn.execute(f"SELECT chunk_id FROM {floats(model.id)} WHERE chunk_id NOT IN (SELECT id FROM chunks WHERE model_id = ?)", (model.id,))]
        drop(conn, model.id, gone)
    missing = {int(r[0]) for r in conn.execute(f"SELECT id FROM chunks WHERE model_id = ? AND id NOT IN (SELECT chunk_id FROM {floats(model.id)})", (model.id,))}
    done = 0
    pending: list[tuple[int, bytes]] = []
    if missing:  # one pass over the exact table: vec0 reads a row ~10 µs in order, ~ms by id
        for chunk_id, blob in _scan(conn, source):
            if chunk_id in missing:
                pending.append((chunk_id, blob))
            if len(pending) >= batch:
                done += _commit(conn, model.id, pending)
                if progress:
                    progress(done, len(missing))
        if pending:
            done += _commit(conn, model.id, pending)
            if progress:
                progress(done, len(missing))
    with transaction(conn):
        rows = count(conn, f"SELECT count(*) FROM {floats(model.id)}")
        ready = rows == chunks_of(conn, model.id)
        conn.execute("UPDATE vector_index SET state = ?, rows = ?, built_at = ? WHERE model_id = ?", ("ready" if ready else "building", rows, now_iso(), model.id))
    return done


def reset(conn: apsw.Connection, model_id: int) -> None:
    """Forget the structure (its tables and its row); the next build starts from nothing."""
    with transaction(conn):
        conn.execute(f"DROP TABLE IF EXISTS {codes(model_id)}")
        conn.execute(f"DROP TABLE IF EXISTS {floats(model_id)}")
        if recorded(conn, model_id) is not None:
            conn.execute("DELETE FROM vector_index WHERE model_id = ?", (model_id,))


def _scan(conn: apsw.Connection, source: str) -> Iterator[tuple[int, bytes]]:
    """(chunk id, float blob) of every vector in the exact table, in its order."""
    cursor = conn.cursor()
    yield from ((int(r[0]), bytes(r[1])) for r in cursor.execute(f"SELECT chunk_id, embedding FROM {source}"))


def _commit(conn: apsw.Connection, model_id: int, pending: list[tuple[int, bytes]]) -> int:
    """Code one batch in its own short transaction (readers never wait; a kill keeps it)."""
    n = len(pending)
    with transaction(conn):
        for chunk_id, blob in pending:
            if conn.execute("SELECT 1 FROM chunks WHERE id = ? AND model_id = ?", (chunk_id, model_id)).fetchall():
                conn.execute(f"INSERT OR REPLACE INTO {floats(model_id)} (chunk_id, embedding) VALUES (?, ?)", (chunk_id, blob))
                conn.execute(f"DELETE FROM {codes(model_id)} WHERE chunk_id = ?", (chunk_id,))
                conn.execute(f"INSERT INTO {codes(model_id)} (chunk_id, embedding) VALUES (?, vec_quantize_binary(?))", (chunk_id, blob))
    pending.clear()
    return n


def knn(conn: apsw.Connection, model_id: int, query: bytes, k: int, allowed: tuple[str, Sequence[object]] | None) -> list[tuple[int, float]] | None:
    """(chunk id, exact cosine distance) of the k nearest among the k × OVERSAMPLE whose codes
    are nearest (restricted to `allowed` as the exact KNN is), nearest first, ties by chunk id;
    None when the candidates would pass sqlite-vec's KNN limit (the caller then searches exactly)."""
    return knn_many(conn, model_id, [query], [k], allowed)[0]


def knn_many(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], ks: Sequence[int], allowed: tuple[str, Sequence[object]] | None,
    allowed_ids: Callable[[], Any] | None = None,
) -> list[list[tuple[int, float]] | None]:
    """`knn` of each query (float32 blobs) with its k, sharing the work: one Hamming pass over
    the codes for them all (`_nearest_codes`), then each query's candidates ranked by their
    exact distances (so each answer is the one its query alone gets). `allowed_ids`: the
    allowed chunk ids, sorted (the caller's copy, read once), instead of running `allowed` here."""
    out: list[list[tuple[int, float]] | None] = [None] * len(queries)
    todo = [i for i, k in enumerate(ks) if max(k * OVERSAMPLE, 32) <= KNN_MAX]
    if not todo:
        return out
    coarse = [max(ks[i] * OVERSAMPLE, 32) for i in todo]
    found = _nearest_codes(conn, model_id, [queries[i] for i in todo], coarse, allowed, allowed_ids)
    if found is None:  # the codes' layout is not the one _nearest_codes reads: sqlite-vec's own KNN
        found = []
        for i, c in zip(todo, coarse):
            sql = f"SELECT chunk_id FROM {codes(model_id)} WHERE embedding MATCH vec_quantize_binary(?) AND k = ?"
            params: list[object] = [queries[i], c]
            if allowed is not None:
                sql += f" AND chunk_id IN ({allowed[0]})"
                params += allowed[1]
            found.append([int(r[0]) for r in conn.execute(sql, params)])
    for j, i in enumerate(todo):  # each query's own candidates rescored (one read of the union, measured, cost more:
        # distinct candidates of Q queries are mostly disjoint, and every column is computed for every row)
        if not found[j]:
            out[i] = []
            continue
        marks = ",".join(map(str, found[j]))  # integers from the index itself
        rescored = f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d FROM {floats(model_id)} WHERE chunk_id IN ({marks}) ORDER BY d, chunk_id LIMIT ?"
        out[i] = [(int(r[0]), float(r[1])) for r in conn.execute(rescored, (queries[i], ks[i]))]
    return out


_MATRICES: dict[tuple[str, int], tuple[tuple[int, ...], Any, Any]] = {}
ROWS_A_STEP = 8192  # codes XORed with every query at once (Q × 8192 × dims/8 bytes of temporaries)


def _nearest_codes(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], coarse: Sequence[int], allowed: tuple[str, Sequence[object]] | None = None,
    allowed_ids: Callable[[], Any] | None = None,
) -> list[list[int]] | None:
    """For each query, the `coarse` chunk ids whose codes are nearest (Hamming) to its code, by
    numpy over every code at once, all the queries in one pass; None when the codes cannot be
    read so (sqlite-vec's own KNN then).

    `allowed` (a SELECT of chunk ids) keeps only those. sqlite-vec's KNN keeps its top k by insertion, so its cost grows with k (100k codes:
    100 ms at k=40, 440 ms at k=400 on a loaded machine), while numpy's XOR + popcount over
    the packed codes costs the same for any k. The codes are read from vec0's chunk tables
    (1024 codes a row, ~1 ms per 10k codes) once per connection and kept while its insert
    counters stand still; a chunk dropped since only costs a candidate (rescoring skips it)."""
    import numpy as np

    t = codes(model_id)
    key = (conn.db_filename("main"), model_id)
    try:
        stamp = (id(conn), *(as_int(r[0]) for r in conn.execute(
            "SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0) UNION ALL SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0)",
            (f"{t}_rowids", f"{t}_chunks"),
        )))
        cached = _MATRICES.get(key)
        if cached is None or cached[0] != stamp:
            all_ids, all_codes = [], []
            for size, validity, rowids, vectors in conn.execute(f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {t}_chunks c JOIN {t}_vector_chunks00 v ON v.rowid = c.chunk_id"):
                valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[: int(size)].astype(bool)
                all_ids.append(np.frombuffer(rowids, np.int64)[: int(size)][valid])
                all_codes.append(np.frombuffer(vectors, np.uint8).reshape(int(size), -1)[valid])
            if not all_ids:
                return None
            matrix = np.ascontiguousarray(np.concatenate(all_codes))
            cached = (stamp, np.concatenate(all_ids), matrix)  # bytes: numpy's 8-bit popcount is ~10x its 64-bit one here
            _MATRICES[key] = cached
    except (apsw.SQLError, ValueError):
        return None
    ids, matrix = cached[1], cached[2]
    if allowed is not None:  # a scope or filter: only its chunks (their ids from SQL, then one membership test)
        wanted_ids = allowed_ids() if allowed_ids is not None else np.fromiter((int(r[0]) for r in conn.execute(allowed[0], allowed[1])), np.int64)
        keep = np.flatnonzero(np.isin(ids, wanted_ids))
        ids, matrix = ids[keep], matrix[keep]
    packed = np.stack([np.packbits(np.frombuffer(q, np.float32) > 0, bitorder="little") for q in queries])
    distance = np.empty((len(queries), len(ids)), np.int32)
    for lo in range(0, len(ids), ROWS_A_STEP):
        diff = matrix[None, lo:lo + ROWS_A_STEP] ^ packed[:, None]
        if hasattr(np, "bitwise_count"):  # numpy >= 2
            distance[:, lo:lo + ROWS_A_STEP] = np.bitwise_count(diff).sum(axis=2, dtype=np.int32)
        else:
            global _POPCOUNT
            _POPCOUNT = _popcounts() if _POPCOUNT is None else _POPCOUNT
            distance[:, lo:lo + ROWS_A_STEP] = _POPCOUNT[diff].sum(axis=2, dtype=np.int32)
    out = []
    for row, c in zip(distance, coarse):
        nearest = np.argpartition(row, c)[:c] if c < len(ids) else np.arange(len(ids))
        out.append([int(i) for i in ids[nearest]])
    return out


_POPCOUNT: Any = None


def _popcounts() -> Any:
    import numpy as np

    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def status(conn: apsw.Connection, model_id: int) -> dict[str, object]:
    """What doctor checks: the recorded structure against the rows (chunks, floats, codes)."""
    found = recorded(conn, model_id)
    out: dict[str, object] = {"structure": None, "state": None, "recorded_rows": 0, "chunks": chunks_of(conn, model_id), "floats": 0, "codes": 0}
    if found is None:
        return out
    out.update(structure=found[0], state=found[1], recorded_rows=found[2])
    tables = _tables(conn, model_id)
    if floats(model_id) in tables:
        out["floats"] = count(conn, f"SELECT count(*) FROM {floats(model_id)}")
    if codes(model_id) in tables:
        out["codes"] = count(conn, f"SELECT count(*) FROM {codes(model_id)}_rowids")
    return out
