"""Read-only inspection of a PostgreSQL index, and its rebuild into a fresh schema swapped in atomically."""

from __future__ import annotations

import psycopg

from qmd.core.clock import now_iso
from qmd.backends.postgres import fulltext
from qmd.backends.postgres.connection import MIGRATIONS, applied_migrations, quote_ident
from qmd.backends.rows import FieldsFor, IndexCheck
from qmd.backends.sql import active_texts, count, survey


def inspect(conn: psycopg.Connection, schema: str, location: str, *, quick: bool = False) -> IndexCheck:
    """What the index holds and whether its full-text statistics agree with its rows (never migrates)."""
    done = applied_migrations(conn, schema)
    check = IndexCheck(location, bool(done))
    if not done:
        return check
    try:
        if not survey(conn, check, done, [name for name, _ in MIGRATIONS]):
            return check
        check.fts_rows = count(conn, "SELECT count(*) FROM fts_docs")
        check.fts_missing = count(conn, "SELECT count(*) FROM documents d WHERE d.active AND NOT EXISTS (SELECT 1 FROM fts_docs f WHERE f.doc_id = d.id)")
        check.fts_extra = count(conn, "SELECT count(*) FROM fts_docs f WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.id = f.doc_id AND d.active)")
        if not quick:
            problems = []
            row = conn.execute("SELECT s.docs, s.tokens, (SELECT count(*) FROM fts_docs), (SELECT coalesce(sum(len), 0) FROM fts_docs) FROM fts_stats s WHERE id = 1").fetchone()
            if row is None or int(row[0]) != int(row[2]) or int(row[1]) != int(row[3]):
                problems.append(f"full-text totals {row[:2] if row else None} disagree with the rows {row[2:] if row else None}")
            check.quick_check = problems or ["ok"]
    except psycopg.Error as exc:
        check.error = f"{type(exc).__name__}: {str(exc).strip()}"
    return check


def repair_fts(conn: psycopg.Connection, fields: FieldsFor) -> int:
    """Rewrite every full-text row from the stored content (caller holds the lock and a transaction)."""
    fulltext.delete_all(conn)
    written = []
    for doc_id, collection, rel, text in active_texts(conn):
        f = fields(collection, rel, text)
        written.append((doc_id, f.filepath, f.title, f.body))
    fulltext.write_rows(conn, written)
    return len(written)


def copy_vectors(conn: psycopg.Connection, old: str, new: str) -> int:
    """Copy the vectors of schema `old` whose content schema `new` still holds (caller's transaction).

    Vectors are keyed by content hash and fingerprint, so those of unchanged documents are valid
    in the rebuilt index. Returns the content hashes whose vectors came over.
    """
    from qmd.backends.postgres.vectors import create_table, table

    o, n = quote_ident(old), quote_ident(new)
    if not conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{o}.embed_models",)).fetchone()[0]:  # type: ignore[index]
        return 0
    wanted = f"SELECT hash FROM {n}.documents WHERE active"
    for old_id, fingerprint, model, dims in conn.execute(f"SELECT id, fingerprint, model, dims FROM {o}.embed_models ORDER BY id").fetchall():
        row = conn.execute(
            f"INSERT INTO {n}.embed_models (fingerprint, model, dims, created_at) VALUES (%s, %s, %s, %s)"
            " ON CONFLICT (fingerprint) DO UPDATE SET model = excluded.model RETURNING id",
            (fingerprint, model, dims, now_iso()),
        ).fetchone()
        new_id = int(row[0])  # type: ignore[index]
        conn.execute(f"SET LOCAL search_path TO {n}, public")
        create_table(conn, new_id, int(dims))
        conn.execute(
            f'INSERT INTO {n}.chunks (model_id, hash, seq, start, "end", tokens) SELECT %s, hash, seq, start, "end", tokens FROM {o}.chunks'
            f" WHERE model_id = %s AND hash IN ({wanted})", (new_id, old_id),
        )
        conn.execute(
            f"INSERT INTO {n}.{table(new_id)} (chunk_id, embedding) SELECT nc.id, ov.embedding FROM {o}.chunks oc"
            f" JOIN {o}.{table(int(old_id))} ov ON ov.chunk_id = oc.id JOIN {n}.chunks nc ON nc.model_id = %s AND nc.hash = oc.hash AND nc.seq = oc.seq"
            " WHERE oc.model_id = %s", (new_id, old_id),
        )
        conn.execute(
            f"INSERT INTO {n}.embedded (model_id, hash, chunks, embedded_at) SELECT %s, hash, chunks, embedded_at FROM {o}.embedded"
            f" WHERE model_id = %s AND hash IN ({wanted})", (new_id, old_id),
        )
    return count(conn, f"SELECT count(DISTINCT hash) FROM {n}.embedded")
