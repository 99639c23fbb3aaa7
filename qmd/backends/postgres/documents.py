"""Documents, content, per-collection state and file issues in PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg

from qmd.backends.postgres import fulltext
from qmd.backends.rows import DocRow, DocumentWrite, FieldsFor
from qmd.backends.sql import DOC_COLUMNS, SqlCollectionWriter, collection_ids, count_in, doc_row, docid_length, forget_collection, move_collection, write_values

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

FLUSH_EVERY = 500  # documents buffered by a collection writer before one batch of statements


def documents(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
    if not ids:
        return {}
    columns = ", ".join(f"d.{c}" for c in DOC_COLUMNS)
    sql = f"SELECT {columns}, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.id = ANY(%s)"
    return {int(r[0]): (doc_row(r[:-1]), str(r[-1])) for r in conn.execute(sql, (list(ids),))}


def docid_lengths(conn: psycopg.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """Shortest unique prefix (≥ MIN_DOCID) of each hash: one digit past its nearest neighbours (one query)."""
    wanted = list(dict.fromkeys(hashes))
    if not wanted:
        return {}
    sql = (
        "SELECT h, (SELECT max(hash) FROM documents WHERE hash < h AND active), (SELECT min(hash) FROM documents WHERE hash > h AND active)"
        " FROM unnest(%s::text[]) AS h"
    )
    return {str(h): docid_length(str(h), a, b) for h, a, b in conn.execute(sql, (wanted,))}


def _meta_rows(doc_id: int, metadata: dict[str, object]) -> list[tuple[int, str, str, object, object]]:
    from qmd.core.filters import value_type
    from qmd.backends.postgres.filters import stored

    out: dict[tuple[int, str, str, object, object], None] = {}
    for key, value in metadata.items():
        for item in value if isinstance(value, list) else [value]:
            kind = value_type(item)
            if kind is not None:
                s, n = (item, None) if kind == "string" else (None, stored(item))
                out[(doc_id, key, kind, s, n)] = None
    return list(out)


class PostgresCollectionWriter(SqlCollectionWriter):
    """One collection's update inside one transaction; new and changed files are written in batches."""

    conn: psycopg.Connection

    def __init__(self, conn: psycopg.Connection, collection: str) -> None:
        super().__init__(conn, collection)
        self._pending: list[tuple[DocumentWrite, int | None]] = []
        self.written = 0  # documents whose full text this update wrote

    def put(self, doc: DocumentWrite, replaces: int | None) -> None:
        self._pending.append((doc, replaces))
        if len(self._pending) >= FLUSH_EVERY:
            self.flush()

    def flush(self) -> None:
        """Write the buffered files: content, document rows, metadata, full text."""
        if not self._pending:
            return
        pending, self._pending = self._pending, []
        conn = self.conn
        with conn.cursor() as cur:
            cur.executemany(
                "INSERT INTO content (hash, doc, created_at) VALUES (%s, %s, %s) ON CONFLICT (hash) DO NOTHING",
                list({d.hash: (d.hash, d.text, self.now) for d, _ in pending}.values()),
            )
            ids: list[int] = []
            new = [(d, r) for d, r in pending if r is None]
            changed = [(d, r) for d, r in pending if r is not None]
            if new:
                cur.executemany(
                    "INSERT INTO documents (collection, path, title, hash, size, mtime_ns, body_line, tags, created_at, modified_at, active,"
                    " metadata, dated_ns, when_ns, meta_version) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s, TRUE, %s, %s, %s, %s) RETURNING id",
                    [(self.collection, d.path, d.title, d.hash, d.size, d.mtime_ns, d.body_line, e[0], self.now, *e[1:]) for d, _ in new for e in [write_values(d)]],
                    returning=True,
                )
                while True:
                    row = cur.fetchone()
                    if row is not None:
                        ids.append(int(row[0]))
                    if not cur.nextset():
                        break
            if changed:
                cur.executemany(
                    "UPDATE documents SET title = %s, hash = %s, size = %s, mtime_ns = %s, body_line = %s, tags = %s, modified_at = %s, active = TRUE,"
                    " metadata = %s, dated_ns = %s, when_ns = %s, meta_version = %s WHERE id = %s",
                    [(d.title, d.hash, d.size, d.mtime_ns, d.body_line, *write_values(d), r) for d, r in changed],
                )
                old = [int(r) for _, r in changed if r is not None]
                fulltext.delete_rows(conn, old)
                cur.execute("DELETE FROM document_meta WHERE doc_id = ANY(%s)", (old,))
            written = list(zip(ids, (d for d, _ in new))) + [(int(r), d) for d, r in changed if r is not None]
            meta = [row for doc_id, d in written for row in _meta_rows(doc_id, d.metadata)]
            if meta:
                cur.executemany("INSERT INTO document_meta (doc_id, key, type, s, n) VALUES (%s, %s, %s, %s, %s) ON CONFLICT DO NOTHING", meta)
        fulltext.write_rows(conn, [(doc_id, d.fields.filepath, d.fields.title, d.fields.body) for doc_id, d in written])
        self.written += len(written)

    def _forget_text(self, row_id: int) -> None:
        fulltext.delete_rows(self.conn, [row_id])

    def _insert_issues(self, rows: list[tuple[str, str, str, str]]) -> None:
        with self.conn.cursor() as cur:
            cur.executemany("INSERT INTO file_issues (collection, path, severity, reason) VALUES (%s, %s, %s, %s)", rows)


@contextmanager
def collection_writer(conn: psycopg.Connection, collection: str) -> Iterator[PostgresCollectionWriter]:
    writer = PostgresCollectionWriter(conn, collection)
    with conn.transaction():
        yield writer
        writer.finish()
    if writer.written >= fulltext.OPTIMIZE_AFTER and conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE:  # VACUUM: never inside an import's transaction (after_atomic runs it)
        fulltext.optimize(conn)


def drop_collection(conn: psycopg.Connection, name: str) -> int:
    with conn.transaction():
        ids = collection_ids(conn, name)
        fulltext.delete_rows(conn, ids)
        forget_collection(conn, name)
    return len(ids)


def rename_collection(conn: psycopg.Connection, old: str, new: str, fields: FieldsFor) -> None:
    with conn.transaction():
        rows = move_collection(conn, old, new)
        fulltext.delete_rows(conn, [doc_id for doc_id, _, _ in rows])
        written = []
        for doc_id, rel, text in rows:
            f = fields(new, rel, text)
            written.append((doc_id, f.filepath, f.title, f.body))
        fulltext.write_rows(conn, written)


def count_matching(conn: psycopg.Connection, where: Filter, collections: list[str] | None, only: Sequence[int] | None = None) -> int:
    """Active documents in `collections` (None: all; among `only` when given) matching `where`."""
    from qmd.backends.postgres.filters import id_set

    return count_in(conn, *id_set(where), collections, only)
