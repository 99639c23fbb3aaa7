"""Chunk vectors in sqlite-vec, one vec0 table per embedding fingerprint.

Vectors are keyed by content hash + chunk number, so identical documents share them and
a collection rename costs nothing. A fingerprint (model identity + input format + chunk
settings) names one vector space; a query only ever searches the current one.
"""

from __future__ import annotations

import os
import struct
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

import apsw

from qmd.store.sqlite.connection import now_iso, scalar
from qmd.core.errors import QmdError


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


@dataclass(frozen=True)
class VectorModel:
    id: int
    fingerprint: str
    model: str
    dims: int


def model_row(conn: apsw.Connection, fingerprint: str) -> VectorModel | None:
    for row in conn.execute("SELECT id, fingerprint, model, dims FROM embed_models WHERE fingerprint = ?", (fingerprint,)):
        return VectorModel(*row)
    return None


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


@dataclass(frozen=True)
class ChunkVector:
    hash: str
    seq: int
    start: int
    end: int
    tokens: int
    vector: Sequence[float]


def write_document(conn: apsw.Connection, model: VectorModel, content_hash: str, chunks: Iterable[ChunkVector]) -> int:
    """Replace the chunks of one content hash and mark it embedded (caller holds a transaction)."""
    drop_hash(conn, model, content_hash)
    n = 0
    for c in chunks:
        conn.execute(
            "INSERT INTO chunks (model_id, hash, seq, start, end, tokens) VALUES (?, ?, ?, ?, ?, ?)",
            (model.id, content_hash, c.seq, c.start, c.end, c.tokens),
        )
        conn.execute(f"INSERT INTO {table(model.id)} (chunk_id, embedding) VALUES (?, ?)", (conn.last_insert_rowid(), pack(c.vector)))
        n += 1
    conn.execute(
        "INSERT OR REPLACE INTO embedded (model_id, hash, chunks, embedded_at) VALUES (?, ?, ?, ?)",
        (model.id, content_hash, n, now_iso()),
    )
    return n


def drop_hash(conn: apsw.Connection, model: VectorModel, content_hash: str) -> None:
    ids = [r[0] for r in conn.execute("SELECT id FROM chunks WHERE model_id = ? AND hash = ?", (model.id, content_hash))]
    for chunk_id in ids:
        conn.execute(f"DELETE FROM {table(model.id)} WHERE chunk_id = ?", (chunk_id,))
    conn.execute("DELETE FROM chunks WHERE model_id = ? AND hash = ?", (model.id, content_hash))
    conn.execute("DELETE FROM embedded WHERE model_id = ? AND hash = ?", (model.id, content_hash))


def drop_model_vectors(conn: apsw.Connection, model: VectorModel) -> None:
    """Forget every vector of one fingerprint (for `embed -f`)."""
    conn.execute(f"DELETE FROM {table(model.id)}")
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
        conn.execute("DELETE FROM chunks WHERE model_id = ? AND hash NOT IN (SELECT hash FROM documents)", (model_id,))
        conn.execute("DELETE FROM embedded WHERE model_id = ? AND hash NOT IN (SELECT hash FROM documents)", (model_id,))
        dropped += len(ids)
    return dropped


def knn(conn: apsw.Connection, model: VectorModel, query: Sequence[float], k: int) -> list[tuple[int, float]]:
    """(chunk id, cosine distance) of the k nearest chunks, over the whole vector table."""
    ensure_vec(conn)
    sql = f"SELECT chunk_id, distance FROM {table(model.id)} WHERE embedding MATCH ? AND k = ? ORDER BY distance"
    return [(r[0], r[1]) for r in conn.execute(sql, (pack(query), k))]


def chunk_rows(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, tuple[str, int, int, int]]:
    """chunk id → (hash, seq, start, end)."""
    if not ids:
        return {}
    marks = ",".join("?" * len(ids))
    return {r[0]: (r[1], r[2], r[3], r[4]) for r in conn.execute(f"SELECT id, hash, seq, start, end FROM chunks WHERE id IN ({marks})", list(ids))}


def counts(conn: apsw.Connection, model_id: int | None) -> tuple[int, int]:
    """(chunks, embedded content of active documents) for one vector model (zeros when none)."""
    if model_id is None:
        return 0, 0
    return (
        int(scalar(conn, "SELECT count(*) FROM chunks WHERE model_id = ?", (model_id,)) or 0),
        int(
            scalar(
                conn,
                "SELECT count(*) FROM embedded e WHERE e.model_id = ? AND EXISTS (SELECT 1 FROM documents d WHERE d.hash = e.hash AND d.active = 1)",
                (model_id,),
            )
            or 0
        ),
    )
