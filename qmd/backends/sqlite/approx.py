"""The approximate vector index of a SQLite index (issue 31): inverted lists of binary codes + float rescoring.

Beside a vector space's exact `vec_{id}` (sqlite-vec vec0, float) it keeps three tables:
`vecq_{id}`, a vec0 of `bit[dims]` codes (one sign bit a dimension, Hamming distance), the
coarse pass, which sqlite-vec scans ~10x faster than the floats; and `vecr_{id}`, a plain
table of the float vectors by chunk id and list, the rescoring: vec0 keeps its floats in blobs of
1024 vectors, so reading 400 of them one by one costs seconds, a rowid table microseconds;
and `vecc_{id}`, k-means centroids (about √chunks of them, trained on a sample at build):
each chunk's list is its nearest centroid. A query ranks by Hamming distance only the codes
of the lists whose centroids are nearest (PROBE_SHARE of them: ~6% of the codes at 1M, where
reading all was ~0.3-0.5 s), takes the k × OVERSAMPLE nearest and ranks those by their exact
cosine, so the distances it returns are exact ones and only the candidate set is approximate.
An expression index on the floats table, `vecr_{id}_codes` (list, vec_quantize_binary(embedding)),
holds every chunk's code grouped by list, so an unscoped query reads only the lists it probes
(`_probe_lists`: a new process's first query, a CLI search, reads ~6% of the codes, where
reading all of them from vec0 first took ~1 s at 1M); a narrow scope reads only its own
chunks' codes, by chunk id (`_probe_scope`); wider ones read every code once per connection
from vec0's blocks (`_load_codes`).

The structure is recorded in `vector_index` (one row a vector space: structure, state,
rows); only `ready` ones are searched. Building copies, in short transactions, the chunks
not yet coded (so a killed build resumes where it stopped, and readers, in WAL, never
wait); once built, every chunk written or dropped updates it in the same transaction.
`QMD_VECTOR_INDEX=exact|approx|auto` (`vector_index_mode`; default auto: built and used from APPROX_MIN_CHUNKS).
"""

from __future__ import annotations

import math
import os
import weakref
from typing import Any, TypeVar, cast
from collections.abc import Callable, Iterator, Mapping, Sequence

import apsw

from qmd.core.clock import now_iso
from qmd.backends.base import vector_index_mode
from qmd.backends.rows import VectorModel
from qmd.backends.sql import as_int, count
from qmd.backends.sqlite.connection import data_changes, side_writes, transaction

STRUCTURE = "ivf+bit+rescore"  # recorded so another can be told apart (the earlier `bit+rescore`, no lists: rebuilt by `qmd embed`)
APPROX_MIN_CHUNKS = 50_000  # auto: from here exact scans of 768-d vectors pass ~100 ms on a quiet machine (docs/performance.md)
OVERSAMPLE = 10  # candidates coded-nearest per result wanted: recall@10 1.0 on clustered 768-d sets at 100k (bench/ann_bench.py)
KNN_MAX = 4096  # sqlite-vec's most rows a KNN returns
BATCH = 2000  # chunks coded per build transaction
IVF_MIN_CHUNKS = 20_000  # below, one list (every code read: ~2 ms per 10k); from here about √chunks lists
MAX_LISTS = 4096
PROBE_SHARE = 1 / 16  # of the lists probed per query, at least MIN_PROBE: recall@10 at 1M x 768 clustered, 1000 lists
# (numpy replay of this pipeline, 50 queries): 16 lists 0.934, 32 0.972 (ann_bench: 0.94), 64 0.982, 96 0.992
MIN_PROBE = 8
PROBE_MIN_CODES = 16_384  # ... and the nearest lists until they hold this many codes: real text is not clustered as the
# synthetic sets are (the tldr pages' 51k MiniLM chunks, 227 lists: a question's nearest are spread over languages' lists).
# Held-out page descriptions (77), recall@10: 1/16 of the lists 0.874; 16k codes 0.925, with the asymmetric pass
# (HAMMING_OVERSAMPLE) 0.975; ranking 16k codes costs ~1 ms, and from 262k chunks 1/16 of the lists holds more anyway
REGROW = 3  # retrain once the chunks reach REGROW x those the lists fit (lists²; one list: from IVF_MIN_CHUNKS):
# content that drifted while the index grew 4x lost recall@10 0.80 vs 1.00 retrained (docs/performance.md)
SKEW = 8  # ... or once the largest list holds more than SKEW x the mean (content drifted away from the centroids)
SAMPLE_PER_LIST = 32  # training vectors per centroid (a strided sample of the exact table)
KMEANS_ROUNDS = 8

T = TypeVar("T")
META = "CREATE TABLE IF NOT EXISTS vector_index (model_id INTEGER PRIMARY KEY, structure TEXT NOT NULL, state TEXT NOT NULL, rows INTEGER NOT NULL DEFAULT 0, built_at TEXT)"
RETRAIN = "CREATE TABLE IF NOT EXISTS vector_retrain (model_id INTEGER PRIMARY KEY, after_chunk INTEGER NOT NULL)"  # a retrain under way: lists reassigned up to this chunk id


def codes(model_id: int) -> str:
    return f"vecq_{int(model_id)}"


def floats(model_id: int) -> str:
    return f"vecr_{int(model_id)}"


def centres(model_id: int) -> str:
    return f"vecc_{int(model_id)}"


def by_list(model_id: int) -> str:
    """The expression index of the codes by list on the floats table (SQLite keeps it with every write)."""
    return f"{floats(model_id)}_codes"


def _has_by_list(conn: apsw.Connection, model_id: int) -> bool:
    return bool(conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'index' AND name = ?", (by_list(model_id),)).fetchall())


def lists_for(chunks: int) -> int:
    """How many lists a space of `chunks` chunks gets when built: √chunks (so a probe reads
    ~√chunks codes a list), one below IVF_MIN_CHUNKS."""
    return 1 if chunks < IVF_MIN_CHUNKS else min(MAX_LISTS, round(chunks ** 0.5))


def recorded(conn: apsw.Connection, model_id: int) -> tuple[str, str, int] | None:
    """(structure, state, rows) recorded for the vector space, or None (exact only)."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_index'").fetchall():
        return None
    rows = conn.execute("SELECT structure, state, rows FROM vector_index WHERE model_id = ?", (model_id,)).fetchall()
    return (str(rows[0][0]), str(rows[0][1]), as_int(rows[0][2])) if rows else None


def _tables(conn: apsw.Connection, model_id: int) -> set[str]:
    """Which of the space's three tables exist (the codes' by vec0's rowid table, which it counts)."""
    names = (floats(model_id), codes(model_id), f"{codes(model_id)}_rowids", centres(model_id))
    found = {str(r[0]) for r in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table' AND name IN (?, ?, ?, ?)", names)}
    return {t for t in (floats(model_id), codes(model_id), centres(model_id)) if t in found and (t != codes(model_id) or names[2] in found)}


def present(conn: apsw.Connection, model_id: int) -> bool:
    """Whether the space has all three tables (so written and dropped chunks must update them).
    Fewer is a damaged structure, or the earlier `bit+rescore` (no centroids): writes leave it
    alone, searches stay exact, and the next build starts it over (it is derived data: never
    a reason to rebuild the index)."""
    return len(_tables(conn, model_id)) == 3


def centres_fit(conn: apsw.Connection, model_id: int, dims: int, coded: bool = True) -> bool:
    """Whether the centroids are lists 0..n-1 of `dims` floats and every coded chunk's list is
    one of them (`coded`: the floats table exists): else (a table emptied or edited) the lists are damaged, so `status` counts
    none (doctor and `qmd embed` see it due) and the build starts over."""
    n, top, low, high = conn.execute(f"SELECT count(*), max(list), min(length(centroid)), max(length(centroid)) FROM {centres(model_id)}").fetchall()[0]
    used = conn.execute(f"SELECT max(list) FROM {floats(model_id)}").fetchall()[0][0] if coded else None
    return as_int(n) > 0 and top == as_int(n) - 1 and low == high == 4 * dims and (used is None or as_int(used) < as_int(n))


def write(conn: apsw.Connection, model_id: int, chunk_id: int, blob: bytes) -> None:
    """Code one chunk written by the caller's transaction (when the structure exists): its list
    is its nearest centroid's."""
    conn.execute(f"INSERT INTO {floats(model_id)} (chunk_id, embedding, list) VALUES (?, ?, ?)", (chunk_id, blob, _lists_of(conn, model_id, [blob])[0]))
    conn.execute(f"INSERT INTO {codes(model_id)} (chunk_id, embedding) VALUES (?, vec_quantize_binary(?))", (chunk_id, blob))


def lists_changed(conn: apsw.Connection, model_id: int) -> None:
    """Forget that the skew rule found the lists even (`due`), in the caller's transaction: a
    chunk was coded or dropped (a chunk id can come back with the same count of codes)."""
    conn.execute("DELETE FROM meta WHERE key = ?", (_quiet_key(model_id),))


def drop(conn: apsw.Connection, model_id: int, chunk_ids: Sequence[int] | None) -> None:
    """Forget chunks (None: all) in the caller's transaction (when the structure exists)."""
    if chunk_ids is None or chunk_ids:
        lists_changed(conn, model_id)
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
    chosen = vector_index_mode()
    if chosen == "exact":
        return False
    return chosen == "approx" or (chunks_of(conn, model_id) if total is None else total) >= APPROX_MIN_CHUNKS


def searchable(conn: apsw.Connection, model_id: int, total: int, measured: bool = True) -> bool:
    """Whether a query of this space takes the approximate pass: built and ready, wanted, and
    under auto (`measured`) its recall measured at RECALL_TARGET for what it holds now
    (qmd/backends/recall.py: else every distance is computed, slower and never wrong)."""
    chosen = vector_index_mode()
    if chosen == "exact":
        return False
    found = recorded(conn, model_id)
    if found is None or found[0] != STRUCTURE or not (chosen == "approx" or total >= APPROX_MIN_CHUNKS) or not present(conn, model_id):
        return False
    if found[1] != "ready" and not (found[1] == "building" and retraining(conn, model_id) is not None and _all_coded(conn, model_id)):
        return False  # a retrain under way is searched: every code ranked (_nearest_codes)
    return not measured or chosen == "approx" or _trusted(conn, model_id)


def identity(conn: apsw.Connection, model_id: int) -> tuple[str, int]:
    """(identity, rows) of the space's structure for its recall measurement: the structure and
    its centroids' training (a retrain is another index), and the codes ever inserted
    (sqlite_sequence: one key lookup, where counting the codes reads ~1M rows)."""
    row = conn.execute(
        f"SELECT (SELECT trained FROM {centres(model_id)} WHERE list = 0), (SELECT count(*) FROM {centres(model_id)}),"
        " coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0)",
        (f"{codes(model_id)}_rowids",),
    ).fetchall()[0]
    return f"{STRUCTURE}, {as_int(row[1])} lists trained {row[0]}", as_int(row[2])


def _trusted(conn: apsw.Connection, model_id: int) -> bool:
    from qmd.backends import recall

    stored = conn.execute("SELECT value FROM meta WHERE key = ?", (recall.key(model_id),)).fetchall()
    check = recall.parse(stored[0][0]) if stored else None
    if check is None:
        return False
    name, rows = identity(conn, model_id)
    return check.trusted(rows, name)


def _all_coded(conn: apsw.Connection, model_id: int) -> bool:
    """Whether every chunk of the space (its three tables present) has its code and float row:
    a retrain can start on a first build killed part way (it codes the rest after moving the
    chunks), whose codes then lack chunks, so ranking every code would lose them. Three counts
    in one statement, so one snapshot (~40 ms at 1M, warm: a scan of the chunks), only while a
    retrain is under way, and counted again only once something in the file changed (`remembered`)."""

    def counted() -> bool:
        n_floats, n_chunks, n_codes = conn.execute(
            f"SELECT (SELECT count(*) FROM {floats(model_id)}), (SELECT count(*) FROM chunks WHERE model_id = ?), (SELECT count(*) FROM {codes(model_id)}_rowids)",
            (model_id,),
        ).fetchall()[0]
        return as_int(n_floats) == as_int(n_chunks) == as_int(n_codes)

    return remembered(conn, ("all coded", model_id), counted)


def build(
    conn: apsw.Connection, model: VectorModel, source: str, progress: Callable[[int, int], None] | None = None, batch: int = BATCH, retrain: bool = True,
) -> int:
    """Create or finish the structure from the exact vec0 table `source` (sqlite-vec loaded):
    train the centroids (once, on a strided sample), code every chunk of the space not yet
    coded, drop coded rows of chunks gone, in transactions of `batch` chunks; returns the
    chunks coded now. Resumable: a killed build leaves its centroids and committed batches,
    and the next one codes the rest. `retrain`: when the centroids no longer fit the chunks
    (`retrain_due`), train new ones and move every chunk to its new list first (`_reassign`,
    resumable too; meanwhile searches rank every code, lists aside: the codes do not change). Each batch is read by short
    statements and checkpointed (PASSIVE: never waits on a reader), so the WAL stays about a
    batch, not the whole build (a scan held open across the commits pinned it: 5.5 GB at 1M)."""
    found = status(conn, model.id)
    tables = _tables(conn, model.id)
    if (found["structure"] is not None or tables) and (found["structure"] != STRUCTURE or len(tables) != 3 or found["floats"] != found["codes"] or not found["lists"]):
        reset(conn, model.id)  # a table missing, the two disagree, or another structure: start over
        tables = set()
    after = retraining(conn, model.id) if tables else None
    if after is None and tables and retrain and found["retrain_due"]:
        fresh = _train(conn, source, max(as_int(found["lists"]), lists_for(as_int(found["chunks"]))))
        with transaction(conn):
            conn.execute(RETRAIN)
            conn.execute(f"DELETE FROM {centres(model.id)}")
            _store_centres(conn, model.id, fresh)
            conn.execute("INSERT OR REPLACE INTO vector_retrain (model_id, after_chunk) VALUES (?, ?)", (model.id, -1))
            conn.execute("UPDATE vector_index SET state = 'building' WHERE model_id = ?", (model.id,))
        after = -1
    if after is not None:
        _reassign(conn, model.id, after, batch)
    trained = None if centres(model.id) in tables else _train(conn, source, lists_for(chunks_of(conn, model.id)))
    with transaction(conn):
        conn.execute(META)
        conn.execute(f"CREATE TABLE IF NOT EXISTS {floats(model.id)} (chunk_id INTEGER PRIMARY KEY, embedding BLOB NOT NULL, list INTEGER NOT NULL)")
        conn.execute(f"CREATE INDEX IF NOT EXISTS {floats(model.id)}_list ON {floats(model.id)} (list)")
        # the codes by list (an index built by an earlier qmd gets it here: one pass over the float rows)
        conn.execute(f"CREATE INDEX IF NOT EXISTS {by_list(model.id)} ON {floats(model.id)} (list, vec_quantize_binary(embedding))")
        conn.execute(f"CREATE VIRTUAL TABLE IF NOT EXISTS {codes(model.id)} USING vec0(chunk_id INTEGER PRIMARY KEY, embedding bit[{model.dims}])")
        conn.execute(f"CREATE TABLE IF NOT EXISTS {centres(model.id)} (list INTEGER PRIMARY KEY, centroid BLOB NOT NULL, trained TEXT NOT NULL)")
        if trained is not None:
            _store_centres(conn, model.id, trained)
        conn.execute(
            "INSERT INTO vector_index (model_id, structure, state) VALUES (?, ?, 'building') ON CONFLICT (model_id) DO NOTHING", (model.id, STRUCTURE)
        )
        gone = [r[0] for r in conn.execute(f"SELECT chunk_id FROM {floats(model.id)} WHERE chunk_id NOT IN (SELECT id FROM chunks WHERE model_id = ?)", (model.id,))]
        drop(conn, model.id, gone)
    missing = {int(r[0]) for r in conn.execute(f"SELECT id FROM chunks WHERE model_id = ? AND id NOT IN (SELECT chunk_id FROM {floats(model.id)})", (model.id,))}
    wanted_n = len(missing)
    done = 0
    pending: list[tuple[int, bytes]] = []
    if missing:  # one pass over the exact table, a block at a time (vec0 reads a row ~10 µs in order, ~ms by id)
        for chunk_id, blob in _blocks(conn, source):
            if chunk_id in missing:
                missing.discard(chunk_id)
                pending.append((chunk_id, blob))
            if len(pending) >= batch:
                done += _commit(conn, model.id, pending)
                if progress:
                    progress(done, wanted_n)
        if pending:
            done += _commit(conn, model.id, pending)
            if progress:
                progress(done, wanted_n)
    with transaction(conn):
        rows = count(conn, f"SELECT count(*) FROM {floats(model.id)}")
        ready = rows == chunks_of(conn, model.id)
        conn.execute("UPDATE vector_index SET state = ?, rows = ?, built_at = ? WHERE model_id = ?", ("ready" if ready else "building", rows, now_iso(), model.id))
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    return done


def _store_centres(conn: apsw.Connection, model_id: int, trained: Any) -> None:
    token = f"{now_iso()} {os.urandom(4).hex()}"  # tells a cached copy from the centroids of a later build
    conn.executemany(f"INSERT INTO {centres(model_id)} (list, centroid, trained) VALUES (?, ?, ?)", ((i, c.tobytes(), token) for i, c in enumerate(trained)))


def retraining(conn: apsw.Connection, model_id: int) -> int | None:
    """The chunk id up to which a retrain under way has moved chunks to their new lists (-1:
    none yet), or None when no retrain is under way."""
    if not conn.execute("SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'vector_retrain'").fetchall():
        return None
    rows = conn.execute("SELECT after_chunk FROM vector_retrain WHERE model_id = ?", (model_id,)).fetchall()
    return as_int(rows[0][0]) if rows else None


def retrain_due(conn: apsw.Connection, model_id: int, n_lists: int, chunks: int) -> str | None:
    """Why the `n_lists` centroids no longer fit the space (None: they do). Either the chunks
    grew to REGROW x those √chunks lists fit (an index trained below IVF_MIN_CHUNKS, one list:
    from IVF_MIN_CHUNKS, where each query would rank every code), or
    the largest list holds over SKEW x the mean (chunks written later crowd a few lists)."""
    return _outgrown(n_lists, chunks) or _skewed(conn, model_id, n_lists)


def _outgrown(n_lists: int, chunks: int) -> str | None:
    """retrain_due's count rule (no query)."""
    if n_lists < 1:
        return None
    fit = lists_for(chunks)
    if fit > n_lists and (chunks >= IVF_MIN_CHUNKS if n_lists == 1 else chunks >= REGROW * n_lists ** 2):
        return f"{n_lists} list{'s' if n_lists > 1 else ''} for {chunks} chunks ({fit} fit them)"
    return None


def _skewed(conn: apsw.Connection, model_id: int, n_lists: int) -> str | None:
    """retrain_due's skew rule: a GROUP BY over every code's list (~8 ms at 200k, loaded more)."""
    if n_lists > 1:
        largest, coded = conn.execute(f"SELECT max(n), sum(n) FROM (SELECT count(*) AS n FROM {floats(model_id)} GROUP BY list)").fetchall()[0]
        if largest is not None and as_int(largest) > SKEW * as_int(coded) / n_lists:
            return f"its largest list holds {as_int(largest)} chunks, {as_int(largest) * n_lists / as_int(coded):.0f}x the mean"
    return None


def _quiet_key(model_id: int) -> str:
    return f"approx_skew_quiet:{int(model_id)}"


def _codes_stamp(conn: apsw.Connection, model_id: int) -> str:
    """What changes whenever a chunk's list may have, besides the writers' `lists_changed`: the
    codes' rowid sequence, their count and the float rows' (a writer of an earlier qmd, a
    damaged table), and the centroids' count and token (a
    build or retrain writes new ones, each a fresh random token), a retrain under way. Key lookups
    and small counts."""
    seq = conn.execute("SELECT seq FROM sqlite_sequence WHERE name = ?", (f"{codes(model_id)}_rowids",)).fetchall()
    n = count(conn, f"SELECT count(*) FROM {codes(model_id)}_rowids")
    n_floats = count(conn, f"SELECT count(*) FROM {floats(model_id)}")
    lists = count(conn, f"SELECT count(*) FROM {centres(model_id)}")
    token = conn.execute(f"SELECT trained FROM {centres(model_id)} WHERE list = 0").fetchall()
    retrain = retraining(conn, model_id)
    return f"{seq[0][0] if seq else 0}:{n}:{n_floats}:{lists}:{token[0][0] if token else ''}:{retrain}"


def due(conn: apsw.Connection, model_id: int, dims: int) -> bool:
    """`status`'s verdict for `qmd embed` (anything to build, finish or retrain), cheaply: it runs
    on every embed, also one with nothing to do. A full check that finds nothing to do is
    remembered in `meta` with `_codes_stamp` (best effort: a busy or read-only index just checks
    again next time); until a writer codes or drops a chunk (`lists_changed`) or new centroids
    come, the next check is a few key lookups, without counting the chunks or the skew rule's
    GROUP BY over every code. The full check: the cheap rules first, the GROUP BY last."""
    found = recorded(conn, model_id)
    if found is None or found[0] != STRUCTURE or found[1] != "ready":
        return True
    if len(_tables(conn, model_id)) < 3:
        return due_of(status(conn, model_id))  # a damaged structure: status's own reading of it
    if not centres_fit(conn, model_id, dims):
        return True  # status counts no lists: due
    if not _has_by_list(conn, model_id):
        return True  # built by an earlier qmd: the build adds it
    stamp = _codes_stamp(conn, model_id)
    held = conn.execute("SELECT value FROM meta WHERE key = ?", (_quiet_key(model_id),)).fetchall()
    if held and held[0][0] == stamp:
        return False
    chunks = chunks_of(conn, model_id)
    if count(conn, f"SELECT count(*) FROM {floats(model_id)}") != chunks or count(conn, f"SELECT count(*) FROM {codes(model_id)}_rowids") != chunks:
        return True
    if retraining(conn, model_id) is not None:
        return True
    n_lists = count(conn, f"SELECT count(*) FROM {centres(model_id)}")
    if _outgrown(n_lists, chunks) or _skewed(conn, model_id, n_lists):
        return True
    _remember(conn, _quiet_key(model_id), stamp)
    return False


def due_of(found: Mapping[str, object]) -> bool:
    """Whether `status`'s reading of a space leaves anything for `qmd embed` to do."""
    return (
        not found["current"] or not found["lists"] or found["state"] != "ready" or found["floats"] != found["chunks"] or found["codes"] != found["chunks"]
        or found["retraining"] is not None or bool(found["retrain_due"]) or not found.get("by_list", True)
    )


def _remember(conn: apsw.Connection, key: str, value: str) -> None:
    """Write one `meta` row if the index is free now (never waits on another writer)."""
    from qmd.backends.sqlite.connection import busy_timeout_ms

    conn.set_busy_timeout(50)
    try:
        with side_writes(conn), conn:
            conn.execute("INSERT OR REPLACE INTO meta (key, value) VALUES (?, ?)", (key, value))
    except (apsw.BusyError, apsw.LockedError, apsw.ReadOnlyError):
        pass
    finally:
        conn.set_busy_timeout(busy_timeout_ms())


def _reassign(conn: apsw.Connection, model_id: int, after: int, batch: int) -> None:
    """Move every coded chunk past `after` to its nearest new centroid's list, in chunk id
    order, `batch` a transaction that also records how far it got (a kill resumes there)."""
    t = floats(model_id)
    while True:
        rows = cast(list[tuple[int, bytes, int]], conn.execute(f"SELECT chunk_id, embedding, list FROM {t} WHERE chunk_id > ? ORDER BY chunk_id LIMIT ?", (after, batch)).fetchall())
        if not rows:
            break
        lists = _lists_of(conn, model_id, [bytes(r[1]) for r in rows])
        after = int(rows[-1][0])
        with transaction(conn):
            conn.executemany(f"UPDATE {t} SET list = ? WHERE chunk_id = ?", ((new, int(r[0])) for r, new in zip(rows, lists) if new != as_int(r[2])))
            conn.execute("UPDATE vector_retrain SET after_chunk = ? WHERE model_id = ?", (after, model_id))
        conn.execute("PRAGMA wal_checkpoint(PASSIVE)")
    with transaction(conn):
        conn.execute("DELETE FROM vector_retrain WHERE model_id = ?", (model_id,))


def reset(conn: apsw.Connection, model_id: int) -> None:
    """Forget the structure (its tables and its row); the next build starts from nothing."""
    with transaction(conn):
        conn.execute(f"DROP TABLE IF EXISTS {codes(model_id)}")
        conn.execute(f"DROP TABLE IF EXISTS {floats(model_id)}")
        conn.execute(f"DROP TABLE IF EXISTS {centres(model_id)}")
        if recorded(conn, model_id) is not None:
            conn.execute("DELETE FROM vector_index WHERE model_id = ?", (model_id,))
        if retraining(conn, model_id) is not None:
            conn.execute("DELETE FROM vector_retrain WHERE model_id = ?", (model_id,))


def _scan(conn: apsw.Connection, source: str) -> Iterator[tuple[int, bytes]]:
    """(chunk id, float blob) of every vector in the exact table, in its order."""
    cursor = conn.cursor()
    yield from ((int(r[0]), bytes(r[1])) for r in cursor.execute(f"SELECT chunk_id, embedding FROM {source}"))


def _blocks(conn: apsw.Connection, source: str) -> Iterator[tuple[int, bytes]]:
    """(chunk id, float blob) of every vector in the exact table, read a vec0 block (1024
    vectors) at a time by statements that end before the next block, so the caller's commits
    in between leave no read snapshot open (one pins the WAL: no checkpoint can pass it). A
    layout it cannot read (a damaged block): the rest by `_scan` (ids already given again)."""
    import numpy as np

    after = -1
    try:
        while True:
            head = conn.execute(f"SELECT chunk_id, size, validity, rowids FROM {source}_chunks WHERE chunk_id > ? ORDER BY chunk_id LIMIT 1", (after,)).fetchall()
            if not head:
                return
            block, size, validity, rowids = cast(tuple[int, int, bytes, bytes], head[0])
            after = int(block)
            rows = block_rows(int(size), bytes(validity), bytes(rowids))
            data = conn.execute(f"SELECT vectors FROM {source}_vector_chunks00 WHERE rowid = ?", (block,)).fetchall()
            blob = bytes(cast(bytes, data[0][0])) if data else b""
            if rows is None or not size or not blob or len(blob) % int(size):
                break
            width = len(blob) // int(size)
            for i in np.flatnonzero(rows[1]):
                yield int(rows[0][i]), blob[i * width:(i + 1) * width]
    except apsw.SQLError:  # no shadow tables of this layout
        pass
    yield from _scan(conn, source)


def _train(conn: apsw.Connection, source: str, n_lists: int) -> Any:
    """`n_lists` unit centroids by spherical k-means (KMEANS_ROUNDS rounds) over about one
    vector in n of the exact table (SAMPLE_PER_LIST a list; one pass, no writes). At 1M x
    768: 1000 lists, 32k vectors. The sample is chosen and ordered by the vectors' own bytes
    (their CRC-32), not by the table's order, so two indexes of the same vectors (an export
    and its import, whose chunk ids follow another order) train the same centroids and put
    each chunk in the same list: the 38k tldr round trip answered 18 of 20 questions alike
    with centroids of their own, against 20 with exact search."""
    import zlib

    import numpy as np

    total = count(conn, f"SELECT count(*) FROM {source}")
    step = max(1, total // max(1, n_lists * SAMPLE_PER_LIST))
    keyed: list[tuple[int, bytes]] = []  # (CRC-32, vector) of about one vector in `step`
    for _, blob in _scan(conn, source):
        key = zlib.crc32(blob)
        if key % step == 0:
            keyed.append((key, blob))
    keyed.sort()  # by CRC (equal ones by their bytes): the table's order plays no part
    rows = [blob for _, blob in keyed]
    if not rows:
        return np.zeros((0, 0), np.float32)
    sample = _unit(np.frombuffer(b"".join(rows), np.float32).reshape(len(rows), -1))
    n_lists = min(n_lists, len(sample))
    rng = np.random.default_rng(0)
    centroids = sample[rng.choice(len(sample), n_lists, replace=False)].copy()
    for _ in range(KMEANS_ROUNDS if n_lists > 1 else 1):
        near = np.concatenate([np.argmax(sample[lo:lo + 8192] @ centroids.T, axis=1) for lo in range(0, len(sample), 8192)])
        order = np.argsort(near, kind="stable")
        used, starts = np.unique(near[order], return_index=True)
        sums = centroids.copy()  # a list left empty keeps its centroid
        sums[used] = np.add.reduceat(sample[order], starts, axis=0)
        centroids = _unit(sums)
    return np.ascontiguousarray(centroids, np.float32)


def _unit(x: Any) -> Any:
    import numpy as np

    norms = np.linalg.norm(x, axis=-1, keepdims=True)
    return (x / np.where(norms > 0, norms, 1)).astype(np.float32)


_CENTRES: dict[tuple[str, int], tuple[str, Any]] = {}


def _centroids(conn: apsw.Connection, model_id: int) -> Any:
    """The space's centroids (lists x dims), read once and kept while their build token stands."""
    import numpy as np

    key = (conn.db_filename("main"), model_id)
    token = conn.execute(f"SELECT trained FROM {centres(model_id)} WHERE list = 0").fetchall()
    stamp = str(token[0][0]) if token else ""
    cached = _CENTRES.get(key)
    if cached is None or cached[0] != stamp:
        blobs = [bytes(r[0]) for r in conn.execute(f"SELECT centroid FROM {centres(model_id)} ORDER BY list")]
        cached = (stamp, np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1) if blobs else np.zeros((0, 0), np.float32))
        _CENTRES[key] = cached
    return cached[1]


def _lists_of(conn: apsw.Connection, model_id: int, blobs: Sequence[bytes]) -> list[int]:
    """The list (nearest centroid) of each float vector."""
    import numpy as np

    centroids = _centroids(conn, model_id)
    vectors = np.frombuffer(b"".join(blobs), np.float32).reshape(len(blobs), -1)
    if len(centroids) <= 1 or not blobs or centroids.shape[1] != vectors.shape[1]:  # damaged centroids: list 0 until rebuilt
        return [0] * len(blobs)
    return [int(i) for i in np.argmax(vectors @ centroids.T, axis=1)]


def _commit(conn: apsw.Connection, model_id: int, pending: list[tuple[int, bytes]]) -> int:
    """Code one batch in its own short transaction (readers never wait; a kill keeps it)."""
    n = len(pending)
    lists = _lists_of(conn, model_id, [blob for _, blob in pending])
    with transaction(conn):
        lists_changed(conn, model_id)
        for (chunk_id, blob), list_id in zip(pending, lists):
            if conn.execute("SELECT 1 FROM chunks WHERE id = ? AND model_id = ?", (chunk_id, model_id)).fetchall():
                conn.execute(f"INSERT OR REPLACE INTO {floats(model_id)} (chunk_id, embedding, list) VALUES (?, ?, ?)", (chunk_id, blob, list_id))
                conn.execute(f"DELETE FROM {codes(model_id)} WHERE chunk_id = ?", (chunk_id,))
                conn.execute(f"INSERT INTO {codes(model_id)} (chunk_id, embedding) VALUES (?, vec_quantize_binary(?))", (chunk_id, blob))
    conn.execute("PRAGMA wal_checkpoint(PASSIVE)")  # the batch into the file now (never waits on a reader): the next commit restarts the WAL
    pending.clear()
    return n


def knn_many(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], ks: Sequence[int], allowed: tuple[str, Sequence[object]] | None,
    allowed_ids: Callable[[], Any] | None = None,
) -> list[list[tuple[int, float]] | None]:
    """(chunk id, exact cosine distance) of the k nearest of each query (float32 blobs, each
    with its k) among the k × OVERSAMPLE whose codes are nearest (restricted to `allowed` as
    the exact KNN is), nearest first, ties by chunk id; None for a query whose candidates would
    pass sqlite-vec's KNN limit (the caller then searches exactly). Sharing the work: one read of the codes
    and of the scope's ids for them all (`_nearest_codes`), then each query's candidates ranked by their
    exact distances (so each answer is the one its query alone gets). `allowed_ids`: the
    allowed chunk ids, sorted (the caller's copy, read once), instead of running `allowed` here.
    Tables dropped since the caller's `searchable()` (another process rebuilding, resetting or
    retraining them): every query None, so the caller scans exactly (never "no such table")."""
    try:
        return _knn_many(conn, model_id, queries, ks, allowed, allowed_ids)
    except _Unsearchable:  # a build begun since (the tables dropped and made anew): its codes lack chunks
        return [None] * len(queries)
    except apsw.SQLError:
        if present(conn, model_id):
            raise  # the tables are there: a real error (a damaged block names itself)
        return [None] * len(queries)


class _Unsearchable(Exception):
    """The structure is no longer one `searchable()` takes (a build under way that is no retrain)."""


def _knn_many(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], ks: Sequence[int], allowed: tuple[str, Sequence[object]] | None,
    allowed_ids: Callable[[], Any] | None,
) -> list[list[tuple[int, float]] | None]:
    """knn_many while the tables stand."""
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
        rescored = f"SELECT chunk_id, vec_distance_cosine(embedding, ?) AS d FROM {floats(model_id)} WHERE chunk_id IN ({marks}) ORDER BY d IS NULL, d, chunk_id LIMIT ?"
        out[i] = [(int(r[0]), math.nan if r[1] is None else float(r[1])) for r in conn.execute(rescored, (queries[i], ks[i]))]  # NULL: a NaN vector, last
    return out


def chunk_ids(conn: apsw.Connection, allowed: tuple[str, Sequence[object]]) -> Any:
    """The chunk ids a SELECT (SQL, parameters) returns, sorted and distinct (numpy int64), read
    as one `group_concat` string: ~8x faster than a Python step a row at 1M ids."""
    import numpy as np

    joined = conn.execute(f"WITH s(x) AS ({allowed[0]}) SELECT group_concat(x) FROM s", allowed[1]).fetchall()[0][0]
    return np.unique(np.fromstring(str(joined), dtype=np.int64, sep=",")) if joined else np.zeros(0, np.int64)


def block_rows(size: int, validity: bytes, rowids: bytes) -> tuple[Any, Any] | None:
    """A vec0 block's (chunk ids, which slots hold a vector) from its `_chunks` row: `size`
    slots, a validity bitmap and 8-byte rowids (read by both the codes' and the floats' pass);
    None when the lengths disagree (a damaged block: sqlite-vec's own KNN then names it, never
    fewer vectors read silently)."""
    import numpy as np

    if len(validity) * 8 < size or len(rowids) != size * 8:
        return None
    valid = np.unpackbits(np.frombuffer(validity, np.uint8), bitorder="little")[:size].astype(bool)
    return np.frombuffer(rowids, np.int64), valid


class _Lists:
    """Codes grouped by list: list l's are `matrix[starts[l]:starts[l+1]]`, their chunk ids `ids[…]` alike."""

    def __init__(self, ids: Any, matrix: Any, starts: Any) -> None:
        self.ids, self.matrix, self.starts = ids, matrix, starts


class _Codes(_Lists):
    """One space's codes as read for queries, their chunk ids sorted (`sorted_ids`, `where`:
    positions) for a scope's membership, and the scopes cut from them (`scopes`, see _scoped)."""

    def __init__(self, stamp: tuple[object, ...], ids: Any, matrix: Any, starts: Any) -> None:
        import numpy as np

        super().__init__(ids, matrix, starts)
        self.stamp = stamp
        self.damaged = False  # a float row's list is past the centroids (see _nearest_codes)
        self.where = np.argsort(ids, kind="stable")
        self.sorted_ids = ids[self.where]
        self.scopes: dict[tuple[object, ...], tuple[tuple[int, int], _Lists]] = {}


SCOPES_KEPT = 8  # scopes (a SELECT and its parameters) kept per space's codes, the last used first
SCOPE_WIDEN = 1.0  # a scope's in-scope codes ranked, per code an unscoped query ranks
SCOPE_NARROW = 2  # a scope within one query's budget (every code of it ranked, so a cheaper pass: 1% at 1M) but
# past what Hamming keeps has twice the candidates rescored: 1M x 768, 1% collection (10k chunks), recall@10 0.945 ->
# 0.995; one Hamming keeps whole (1% at 100k) is ranked whole by the asymmetric score, and doubling cost 1.38x there
HAMMING_OVERSAMPLE = 8  # codes Hamming keeps per candidate rescored, for every query (first for scopes; unscoped too since real text showed they need it:
# tldr 51k, 16k codes ranked, held-out recall@10 0.925 -> 0.975): a scope's in-scope nearest are farther than an
# unscoped query's, where sign bits tell neighbours apart less well, so Hamming picks 8x and the asymmetric score
# (_asymmetric: the query's floats against the codes' signs) keeps the k x OVERSAMPLE rescored. 1M x 768, 10% / 1%
# collection, recall@10 against exact: Hamming alone 0.920 / 0.730; 1600 rescored 0.960 / 0.955 (but rescoring
# reads a row each, ~4x the time); Hamming 3200 then asymmetric 400: 0.955 / 0.945 (docs/performance.md)


def _data_stamp(conn: apsw.Connection) -> tuple[int, int] | None:
    """What changes whenever the file's rows may have: this connection's writes (data_changes:
    its cache writes aside) and any other's commits (data_version). A scope's chunk ids stand while it stands. None inside
    an open transaction: what it read may roll back, leaving both counters where they were."""
    if not conn.getautocommit():
        return None
    return data_changes(conn), as_int(conn.execute("PRAGMA data_version").fetchall()[0][0])


_REMEMBERED: weakref.WeakKeyDictionary[apsw.Connection, tuple[tuple[int, int], dict[tuple[object, ...], object]]] = weakref.WeakKeyDictionary()


def remembered(conn: apsw.Connection, key: tuple[object, ...], compute: Callable[[], T]) -> T:
    """compute()'s value, kept per connection (gone with it) while nothing in the file changes
    (_data_stamp): a scope's share of the documents is counted once, not per query (~10 ms
    for a 10% collection at 1M)."""
    stamp = _data_stamp(conn)
    if stamp is None:
        return compute()
    held = _REMEMBERED.get(conn)
    if held is None or held[0] != stamp:
        held = _REMEMBERED[conn] = (stamp, {})
    if key not in held[1]:
        held[1][key] = compute()
    return cast(T, held[1][key])


def _scoped(conn: apsw.Connection, cached: _Codes, allowed: tuple[str, Sequence[object]], allowed_ids: Callable[[], Any] | None) -> _Lists:
    """The codes of the chunks `allowed` selects, grouped by list as `cached`'s are (their own
    contiguous copy: a 10% scope at 1M x 768 is ~10 MB), kept with `cached` while nothing in the
    file changed (_data_stamp): reading a scope's ids (a collection's documents, then their
    chunks) took 0.9–2.6 s for 100k at 1M (loaded), where probing its lists takes milliseconds.
    Ids are chunk ids, so a chunk shared by documents of several collections is in each one's scope."""
    import numpy as np

    key = (allowed[0], *allowed[1])
    stamp = _data_stamp(conn)
    hit = cached.scopes.pop(key, None)
    if hit is not None and stamp is not None and hit[0] == stamp:
        view = hit[1]
    else:
        wanted_ids = allowed_ids() if allowed_ids is not None else chunk_ids(conn, allowed)
        total = len(cached.ids)
        at = np.clip(np.searchsorted(cached.sorted_ids, wanted_ids), 0, max(0, total - 1))
        positions = np.sort(cached.where[at[cached.sorted_ids[at] == wanted_ids]]) if total else np.zeros(0, np.int64)
        view = _Lists(cached.ids[positions], np.ascontiguousarray(cached.matrix[positions]), np.searchsorted(positions, cached.starts))
    if stamp is None:  # inside a transaction: cut for this query only
        return view
    cached.scopes[key] = (stamp, view)  # last: the most recently used
    while len(cached.scopes) > SCOPES_KEPT:
        del cached.scopes[next(iter(cached.scopes))]
    return view


_MATRICES: weakref.WeakKeyDictionary[apsw.Connection, dict[int, _Codes]] = weakref.WeakKeyDictionary()
"""Each connection's codes by model, gone with it: keyed by the object, not its id() or the file's name, since a
connection opened after another closed (a replaced file followed, a Store reopened) has the closed one's fresh stamps
(total_changes, data_version) and may get its id() (a freed address), and its scopes would answer for the new file."""


class _ListCodes:
    """The lists an unscoped query has read through the by-list index (`_probe_lists`), each
    (chunk ids ascending, their codes), kept per connection while `stamp` stands."""

    def __init__(self, stamp: tuple[object, ...], total: int) -> None:
        self.stamp = stamp
        self.total = total  # float rows (each a code by list)
        self.lists: dict[int, tuple[Any, Any]] = {}


_PROBED: weakref.WeakKeyDictionary[apsw.Connection, dict[int, _ListCodes]] = weakref.WeakKeyDictionary()


def forget_codes() -> None:
    """Drop every connection's codes read so far, as a new process starts (tests, benches)."""
    _MATRICES.clear()
    _PROBED.clear()


def _load_codes(conn: apsw.Connection, model_id: int, stamp: tuple[object, ...]) -> _Codes | None:
    """Every code from vec0's chunk tables (1024 codes a row), grouped by list from the
    floats' (list) index: at 1M x 768 ~100 MB of codes, read once per connection."""
    import numpy as np

    t = codes(model_id)
    all_ids, all_codes = [], []
    for size, validity, rowids, vectors in conn.execute(f"SELECT c.size, c.validity, c.rowids, v.vectors FROM {t}_chunks c JOIN {t}_vector_chunks00 v ON v.rowid = c.chunk_id"):
        rows = block_rows(int(size), bytes(validity), bytes(rowids))
        if rows is None:
            return None
        all_ids.append(rows[0][rows[1]])
        all_codes.append(np.frombuffer(vectors, np.uint8).reshape(int(size), -1)[rows[1]])
    if not all_ids:
        return None
    ids, matrix = np.concatenate(all_ids), np.concatenate(all_codes)
    n_lists = max(1, len(_centroids(conn, model_id)))
    list_ids, members = [], []
    for list_id, joined in conn.execute(f"SELECT list, group_concat(chunk_id) FROM {floats(model_id)} GROUP BY list"):
        chunk_ids = np.fromstring(str(joined), dtype=np.int64, sep=",")  # ~8x faster than split at 1M ids
        list_ids.append(np.full(len(chunk_ids), int(list_id), np.int64))
        members.append(chunk_ids)
    lists = np.zeros(len(ids), np.int64)  # a code without a float row (none, but) goes to list 0
    damaged = False
    if members:
        by_id, of = np.concatenate(members), np.concatenate(list_ids)
        order = np.argsort(by_id)
        by_id, of = by_id[order], of[order]
        at = np.clip(np.searchsorted(by_id, ids), 0, len(by_id) - 1)
        damaged = bool(of.max() >= n_lists)
        lists = np.where(by_id[at] == ids, np.clip(of[at], 0, n_lists - 1), 0)
    order = np.lexsort((ids, lists))  # by list, then chunk id: the order `_probe_lists` ranks a list's codes in
    starts = np.searchsorted(lists[order], np.arange(n_lists + 1))
    found = _Codes(stamp, ids[order], np.ascontiguousarray(matrix[order]), starts)  # bytes: numpy's 8-bit popcount is ~10x its 64-bit one here
    found.damaged = damaged
    return found


def _nearest_codes(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], coarse: Sequence[int], allowed: tuple[str, Sequence[object]] | None = None,
    allowed_ids: Callable[[], Any] | None = None,
) -> list[list[int]] | None:
    """For each query, the `coarse` chunk ids whose codes are nearest (Hamming) to its code
    among the lists it probes, by numpy; None when the codes cannot be read so (sqlite-vec's
    own KNN then); _Unsearchable when a build began since the caller's `searchable()`. The
    queries share the codes' read and the scope's ids (`allowed_ids`: the caller's sorted
    copy, read once; else `allowed` is run here); each ranks its own lists.

    Probed: the lists whose centroids are nearest the query, until they hold PROBE_SHARE of the
    codes (as many as that share of the lists does, at least MIN_PROBE lists' worth, and at
    least PROBE_MIN_CODES). `allowed` (a SELECT of chunk ids, a scope or filter) ranks only those codes
    (`_scoped`: cut once and kept), from the nearest lists on until they hold as many as an
    unscoped query ranks (every list for a narrow scope), so a scope costs about what an
    unscoped query does, wherever its chunks lie. sqlite-vec's KNN keeps its top k by insertion, so its
    cost grows with k, while numpy's XOR + popcount costs the same for any k. The codes are
    kept per connection while their insert counters, centroids and build state stand still; a chunk dropped since
    only costs a candidate (rescoring skips it)."""
    import numpy as np

    t = codes(model_id)
    try:
        counters = conn.execute(
            f"SELECT coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0), coalesce((SELECT seq FROM sqlite_sequence WHERE name = ?), 0),"
            f" (SELECT trained FROM {centres(model_id)} WHERE list = 0),"
            f" (SELECT state || ' ' || coalesce(built_at, '') FROM vector_index WHERE model_id = ?),"  # a retrain moving chunks
            # between lists is 'building' until it ends: codes read meanwhile are read again
            " (SELECT count(*) FROM sqlite_master WHERE type = 'index' AND name = ?),"
            f" (SELECT min(list) FROM {floats(model_id)}), (SELECT max(list) FROM {floats(model_id)})",  # two seeks of the list index
            (f"{t}_rowids", f"{t}_chunks", model_id, by_list(model_id)),
        ).fetchall()[0]
        stamp = (as_int(counters[0]), as_int(counters[1]), str(counters[2]), str(counters[3]))
        state = stamp[3].split(" ")[0]
        if state != "ready" and not (state == "building" and retraining(conn, model_id) is not None and _all_coded(conn, model_id)):
            raise _Unsearchable  # searchable()'s rule, read again: no statement more while 'ready'
        spaces = _MATRICES.setdefault(conn, {})
        cached = spaces.get(model_id)
        if state == "ready" and as_int(counters[4]) and (cached is None or cached.stamp != stamp):  # no codes read yet: by list
            bounds = (counters[5], counters[6])
            if allowed is None:
                probed = _probe_lists(conn, model_id, queries, coarse, stamp, bounds)
            else:
                probed = _probe_scope(conn, model_id, queries, coarse, stamp, bounds, allowed, allowed_ids)
            if probed is not None:
                return probed
        if cached is None or cached.stamp != stamp:
            spaces.pop(model_id, None)  # the old codes freed before the new are read
            loaded = _load_codes(conn, model_id, stamp)
            if loaded is None:
                return None
            cached = spaces[model_id] = loaded
        centroids = _centroids(conn, model_id)
    except (apsw.SQLError, ValueError):
        return None
    moving = stamp[3].startswith("building")  # searchable() lets a query here mid-build only during a retrain
    if len(centroids) and centroids.shape[1] * 4 != len(queries[0]) or cached.damaged and not moving:
        return None  # centroids of other dims, or lists past them: not probed (sqlite-vec's KNN reads every code)
    n_lists = len(cached.starts) - 1
    view: _Lists = cached
    # the codes each query ranks, its nearest lists first: PROBE_SHARE of them on average (`share`), at least
    # PROBE_MIN_CODES; a scope or filter ranks as many of its own (only its chunks' codes, cut once: _scoped), wherever
    # its lists lie. Only a scope within `share` is narrow (SCOPE_NARROW), not one the floor takes whole: a 10% scope at
    # 100k x 768 then rescored twice the candidates, 1.26-1.31x unscoped against 1.15-1.17x
    share, budget = _budget(len(cached.ids), n_lists)
    if allowed is not None:
        view = _scoped(conn, cached, allowed, allowed_ids)
    # A retrain under way moves chunks between old and new lists, so none can be trusted: every code is ranked, as
    # before lists (1M x 768: 0.109x of the exact scan, recall@10 1.000), until it ends ('ready' anew: read again)
    every = budget >= len(view.ids) or len(centroids) != n_lists or moving
    if every:  # all the lists: one set of positions, shared by every query
        shared = np.arange(len(view.ids))
    sizes = np.diff(view.starts)
    out = []
    for query, c in zip(queries, coarse):
        vector = np.frombuffer(query, np.float32)
        if every:
            positions = shared
        else:  # the nearest lists until they hold `budget` codes (in scope: a collection need not be spread evenly)
            order = np.argsort(-(centroids @ vector), kind="stable")
            nearest_lists = order[:int(np.searchsorted(np.cumsum(sizes[order]), budget)) + 1]
            lens = sizes[nearest_lists]
            positions = np.repeat(view.starts[nearest_lists] - (np.cumsum(lens) - lens), lens) + np.arange(int(lens.sum()))
        # Hamming keeps HAMMING_OVERSAMPLE x, the asymmetric score the rescored (a narrow scope: twice as many, SCOPE_NARROW)
        kept = c * (SCOPE_NARROW if allowed is not None and share >= len(view.ids) > c * HAMMING_OVERSAMPLE else 1)
        out.append(_rank(vector, view.matrix[positions], view.ids[positions], kept))
    return out


def _budget(total: int, n_lists: int) -> tuple[int, int]:
    """(share, budget) of a space of `total` codes in `n_lists` lists: the codes PROBE_SHARE of
    the lists hold on average (at least MIN_PROBE lists' worth), and the codes a query ranks,
    nearest lists first (at least PROBE_MIN_CODES). One rule for both passes, so they probe alike."""
    probes = min(n_lists, max(MIN_PROBE, math.ceil(n_lists * PROBE_SHARE)))
    share = math.ceil(total * probes / max(1, n_lists) * SCOPE_WIDEN)
    return share, max(PROBE_MIN_CODES, share)


def _rank(vector: Any, matrix: Any, ids: Any, kept: int) -> list[int]:
    """The `kept` chunk ids of `ids` (their codes the rows of `matrix`) nearest the query
    `vector`: HAMMING_OVERSAMPLE x `kept` by Hamming distance to its code, then `kept` of those
    by the asymmetric score (its floats against their signs)."""
    import numpy as np

    code = np.packbits(vector > 0, bitorder="little")
    diff = matrix ^ code
    if hasattr(np, "bitwise_count"):  # numpy >= 2
        distance = np.bitwise_count(diff).sum(axis=1, dtype=np.int32)
    else:
        global _POPCOUNT
        _POPCOUNT = _popcounts() if _POPCOUNT is None else _POPCOUNT
        distance = _POPCOUNT[diff].sum(axis=1, dtype=np.int32)
    positions = np.arange(len(ids))
    if kept * HAMMING_OVERSAMPLE < len(positions):
        positions = positions[np.argpartition(distance, kept * HAMMING_OVERSAMPLE)[:kept * HAMMING_OVERSAMPLE]]
    if kept < len(positions):
        positions = positions[np.argpartition(-_asymmetric(vector, matrix[positions]), kept)[:kept]]
    return [int(i) for i in ids[positions]]


SCOPE_BY_ROWS = 1 / 32  # a scope up to this share of the codes is read by its chunks' float rows (their lists and codes,
# ~3 KB a row at 768 dims), not every code from vec0: 300k x 768, a new connection's first query of a 1% scope
# 155-390 -> 54 ms (docs/performance.md)


def _probe_scope(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], coarse: Sequence[int], stamp: tuple[object, ...], bounds: tuple[object, object],
    allowed: tuple[str, Sequence[object]], allowed_ids: Callable[[], Any] | None,
) -> list[list[int]] | None:
    """`_nearest_codes` of queries in a narrow scope (at most SCOPE_BY_ROWS of the codes) on a
    connection that has not read every code: the scope's own chunks' lists and codes read by
    chunk id (`_scope_rows`, once while the file stands), every one of them ranked as the pass
    over every code ranks a scope within a query's budget, so the same answers. None for a wider
    scope (the pass over every code reads it, once for the connection: probing the lists of a
    10% scope cost as much for a first query and ~7x for each later one, which reads new lists)
    or for lists that cannot be probed (as `_probe_lists`)."""
    import numpy as np

    held = _held_lists(conn, model_id, stamp, bounds, len(queries[0]))
    if held is None:
        return None
    centroids = _centroids(conn, model_id)
    key = (allowed[0], *allowed[1])
    wanted = remembered(conn, ("scope ids", key), lambda: allowed_ids() if allowed_ids is not None else chunk_ids(conn, allowed))
    share, budget = _budget(held.total, len(centroids))
    if len(wanted) > min(budget, held.total * SCOPE_BY_ROWS):
        return None
    view = remembered(conn, ("scope codes", model_id, stamp, key), lambda: _scope_rows(conn, model_id, wanted, len(centroids), centroids.shape[1] // 8))
    if view is None:
        return None
    return [  # kept as the full pass keeps them: a scope within one query's share has twice the candidates rescored
        _rank(np.frombuffer(q, np.float32), view.matrix, view.ids, c * (SCOPE_NARROW if share >= len(view.ids) > c * HAMMING_OVERSAMPLE else 1))
        for q, c in zip(queries, coarse)
    ]


def _scope_rows(conn: apsw.Connection, model_id: int, wanted: Any, n_lists: int, width: int) -> _Lists | None:
    """The codes of the chunks `wanted` (sorted ids), read by chunk id from the float rows (their
    list, their code), grouped by list as `_load_codes` groups them: by list, then chunk id.
    None when a row names a list past the centroids (the full pass finds it damaged)."""
    import numpy as np

    ids_, lists_, codes_ = [], [], []
    step = 4096
    for lo in range(0, len(wanted), step):
        marks = ",".join(map(str, wanted[lo:lo + step].tolist()))  # integers from the index itself
        for chunk_id, list_id, code in conn.execute(f"SELECT chunk_id, list, vec_quantize_binary(embedding) FROM {floats(model_id)} WHERE chunk_id IN ({marks})"):
            ids_.append(int(chunk_id))
            lists_.append(int(list_id))
            codes_.append(cast(bytes, code))
    ids = np.asarray(ids_, np.int64)
    lists = np.asarray(lists_, np.int64)
    if len(lists) and (lists.min() < 0 or lists.max() >= n_lists):
        return None
    order = np.lexsort((ids, lists))
    matrix = np.frombuffer(b"".join(codes_), np.uint8).reshape(len(ids_), width) if ids_ else np.zeros((0, width), np.uint8)
    return _Lists(ids[order], np.ascontiguousarray(matrix[order]), np.searchsorted(lists[order], np.arange(n_lists + 1)))


def _held_lists(conn: apsw.Connection, model_id: int, stamp: tuple[object, ...], bounds: tuple[object, object], query_bytes: int) -> _ListCodes | None:
    """This connection's lists read by list while `stamp` stands (with the codes' count), or None
    when they cannot be probed so: no centroids, centroids of other dims than the queries, or a
    float row's list past them (the full pass then finds it damaged and leaves it to sqlite-vec)."""
    centroids = _centroids(conn, model_id)
    n_lists = len(centroids)
    low, high = bounds
    if not n_lists or centroids.shape[1] * 4 != query_bytes or low is None or as_int(low) < 0 or as_int(high) >= n_lists:
        return None
    spaces = _PROBED.setdefault(conn, {})
    held = spaces.get(model_id)
    if held is None or held.stamp != stamp:  # the codes counted once while they stand (~2 ms at 300k, warm): the
        # budget the full pass takes from them, so an index and its imported copy (other insert counters) answer alike
        held = spaces[model_id] = _ListCodes(stamp, count(conn, f"SELECT count(*) FROM {floats(model_id)}"))
    return held


def _list_codes(conn: apsw.Connection, model_id: int, held: _ListCodes, list_id: int, width: int) -> tuple[Any, Any]:
    """List `list_id`'s (chunk ids ascending, codes), read through the codes by list once while `held` stands."""
    import numpy as np

    part = held.lists.get(list_id)
    if part is None:
        rows = conn.execute(f"SELECT chunk_id, vec_quantize_binary(embedding) FROM {floats(model_id)} INDEXED BY {by_list(model_id)} WHERE list = ?", (list_id,)).fetchall()
        ids = np.fromiter((r[0] for r in rows), np.int64, len(rows))
        matrix = np.frombuffer(b"".join(cast(bytes, r[1]) for r in rows), np.uint8).reshape(len(rows), width)
        order = np.argsort(ids, kind="stable")
        part = held.lists[list_id] = (ids[order], matrix[order])
    return part


def _probe_lists(
    conn: apsw.Connection, model_id: int, queries: Sequence[bytes], coarse: Sequence[int], stamp: tuple[object, ...], bounds: tuple[object, object],
) -> list[list[int]] | None:
    """`_nearest_codes` of unscoped queries, reading through the by-list index only the lists
    they probe (kept per connection while `stamp` stands, so later queries read only lists not
    yet read); the same lists and ranking as the pass over every code, so the same answers.
    None when that pass must run instead: every list is probed anyway (a small index), or the
    lists are not the centroids' (centroids of other dims or fewer than the lists the float rows
    name: the full pass finds it damaged and leaves the search to sqlite-vec)."""
    import numpy as np

    held = _held_lists(conn, model_id, stamp, bounds, len(queries[0]))
    if held is None:
        return None
    centroids = _centroids(conn, model_id)
    budget = _budget(held.total, len(centroids))[1]
    if budget >= held.total:
        return None
    width = centroids.shape[1] // 8
    out = []
    for query, c in zip(queries, coarse):
        vector = np.frombuffer(query, np.float32)
        parts, have = [], 0
        for list_id in np.argsort(-(centroids @ vector), kind="stable"):
            part = _list_codes(conn, model_id, held, int(list_id), width)
            parts.append(part)
            have += len(part[0])
            if have >= budget:  # the nearest lists until they hold `budget` codes, as the full pass takes them
                break
        out.append(_rank(vector, np.concatenate([m for _, m in parts]), np.concatenate([i for i, _ in parts]), c))
    return out


_POPCOUNT: Any = None
_BITS: Any = None


def _asymmetric(vector: Any, codes_: Any) -> Any:
    """Σ of the query's components where each code's sign bit is set (its dot product with
    the code's ±1 signs, up to a constant): a finer estimate of the cosine than Hamming
    distance, from a table of 256 sums a code byte (a gather per byte, ~2-3 µs a code
    loaded, so only for the few thousand Hamming keeps)."""
    import numpy as np

    global _BITS
    if _BITS is None:
        _BITS = ((np.arange(256)[:, None] >> np.arange(8)[None, :]) & 1).astype(np.float32)  # little bit order, as packbits
    padded = np.zeros(codes_.shape[1] * 8, np.float32)
    padded[:len(vector)] = vector
    table = (_BITS @ padded.reshape(-1, 8).T).T  # byte position x byte value
    return table.ravel()[codes_ + np.arange(0, table.size, 256, dtype=np.int32)].sum(axis=1)  # one flat gather: ~1.5x a 2-d one


def _popcounts() -> Any:
    import numpy as np

    return np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


def status(conn: apsw.Connection, model_id: int) -> dict[str, object]:
    """What doctor checks: the recorded structure against the rows (chunks, floats, codes,
    lists: its centroids);
    `current`: whether it is this qmd's structure (an older one is searched exactly until
    `qmd embed` rebuilds it)."""
    found = recorded(conn, model_id)
    out: dict[str, object] = {
        "structure": None, "state": None, "recorded_rows": 0, "chunks": chunks_of(conn, model_id), "floats": 0, "codes": 0, "lists": 0, "current": False,
        "retraining": None, "retrain_due": None, "by_list": False,
    }
    if found is None:
        return out
    out.update(structure=found[0], state=found[1], recorded_rows=found[2], current=found[0] == STRUCTURE)
    tables = _tables(conn, model_id)
    if floats(model_id) in tables:
        out["floats"] = count(conn, f"SELECT count(*) FROM {floats(model_id)}")
        out["by_list"] = _has_by_list(conn, model_id)
    if codes(model_id) in tables:
        out["codes"] = count(conn, f"SELECT count(*) FROM {codes(model_id)}_rowids")
    dims = conn.execute("SELECT dims FROM embed_models WHERE id = ?", (model_id,)).fetchall()
    if centres(model_id) in tables and dims and centres_fit(conn, model_id, as_int(dims[0][0]), floats(model_id) in tables):
        out["lists"] = count(conn, f"SELECT count(*) FROM {centres(model_id)}")
        out["retraining"] = retraining(conn, model_id)
        if out["retraining"] is None and found[0] == STRUCTURE:
            out["retrain_due"] = retrain_due(conn, model_id, as_int(out["lists"]), as_int(out["chunks"]))
    return out
