"""Documents, content, per-collection state and file issues in PostgreSQL."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import psycopg

from qmd.storage.backend import METADATA_VERSION, MIN_DOCID, DocRow, DocumentWrite, FieldsFor, FileRow, KnownFile, Totals
from qmd.storage.postgres import fulltext
from qmd.storage.postgres.connection import count, marks, scalar

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

_COLUMNS = ("id", "collection", "path", "title", "hash", "body_line", "size", "mtime_ns", "metadata")
FLUSH_EVERY = 500  # documents buffered by a collection writer before one batch of statements


def _row(values: Sequence[object]) -> DocRow:
    i, c, p, t, h, b, s, m, meta = values
    return DocRow(int(i), str(c), str(p), str(t), str(h), int(b), int(s), int(m), json.loads(meta) if meta else None)  # type: ignore[arg-type, call-overload]


def find(conn: psycopg.Connection, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
    where = ["active"]
    params: list[object] = []
    if collection is not None:
        where.append("collection = %s")
        params.append(collection)
    if path is not None:
        where.append("path = %s")
        params.append(path)
    if hash_prefix is not None:
        where.append("hash >= %s AND hash < %s")
        params += [hash_prefix, hash_prefix + "g"]
    sql = f"SELECT {', '.join(_COLUMNS)} FROM documents WHERE {' AND '.join(where)} ORDER BY collection COLLATE \"C\", path COLLATE \"C\""
    return [_row(r) for r in conn.execute(sql, params)]


def documents(conn: psycopg.Connection, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
    if not ids:
        return {}
    columns = ", ".join(f"d.{c}" for c in _COLUMNS)
    sql = f"SELECT {columns}, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.id = ANY(%s)"
    return {int(r[0]): (_row(r[:-1]), str(r[-1])) for r in conn.execute(sql, (list(ids),))}


def _shared(a: str, b: object) -> int:
    if not isinstance(b, str):
        return 0
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def docid_lengths(conn: psycopg.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """Shortest unique prefix (≥ MIN_DOCID) of each hash: one digit past its nearest neighbours (one query)."""
    wanted = list(dict.fromkeys(hashes))
    if not wanted:
        return {}
    sql = (
        "SELECT h, (SELECT max(hash) FROM documents WHERE hash < h AND active), (SELECT min(hash) FROM documents WHERE hash > h AND active)"
        " FROM unnest(%s::text[]) AS h"
    )
    return {str(h): max(MIN_DOCID, max(_shared(str(h), a), _shared(str(h), b)) + 1) for h, a, b in conn.execute(sql, (wanted,))}


def content(conn: psycopg.Connection, content_hash: str) -> str | None:
    value = scalar(conn, "SELECT doc FROM content WHERE hash = %s", (content_hash,))
    return None if value is None else str(value)


def files(conn: psycopg.Connection, collection: str, under: str) -> list[FileRow]:
    sql = "SELECT collection, path, size, mtime_ns, hash, title FROM documents WHERE active AND collection = %s"
    params: list[object] = [collection]
    if under:
        sql += " AND (path = %s OR left(path, %s) = %s)"
        params += [under, len(under) + 1, under + "/"]
    rows = conn.execute(sql + ' ORDER BY path COLLATE "C"', params)
    return [FileRow(str(c), str(p), int(s), int(m), str(h), str(t)) for c, p, s, m, h, t in rows]


def collection_counts(conn: psycopg.Connection) -> dict[str, int]:
    return {str(c): int(n) for c, n in conn.execute("SELECT collection, count(*) FROM documents WHERE active GROUP BY collection")}


def collection_updated(conn: psycopg.Connection) -> dict[str, str]:
    return {str(n): str(u) for n, u in conn.execute("SELECT name, updated_at FROM collection_state")}


def indexed_collections(conn: psycopg.Connection) -> set[str]:
    sql = "SELECT collection FROM documents UNION SELECT name FROM collection_state UNION SELECT collection FROM file_issues"
    return {str(row[0]) for row in conn.execute(sql)}


def file_issues(conn: psycopg.Connection) -> list[tuple[str, str, str, str]]:
    sql = 'SELECT collection, path, severity, reason FROM file_issues ORDER BY collection COLLATE "C", path COLLATE "C"'
    return [(str(c), str(p), str(s), str(r)) for c, p, s, r in conn.execute(sql)]


def totals(conn: psycopg.Connection) -> Totals:
    row = conn.execute(
        "SELECT count(*) FILTER (WHERE active), count(*) FILTER (WHERE NOT active), (SELECT count(*) FROM content) FROM documents"
    ).fetchone()
    return Totals(int(row[0]), int(row[1]), int(row[2])) if row else Totals(0, 0, 0)


def _meta_rows(doc_id: int, metadata: dict[str, object]) -> list[tuple[int, str, str, object, object]]:
    from qmd.core.filters import value_type
    from qmd.storage.postgres.filters import stored

    out: dict[tuple[int, str, str, object, object], None] = {}
    for key, value in metadata.items():
        for item in value if isinstance(value, list) else [value]:
            kind = value_type(item)
            if kind is not None:
                s, n = (item, None) if kind == "string" else (None, stored(item))
                out[(doc_id, key, kind, s, n)] = None
    return list(out)


class PostgresCollectionWriter:
    """One collection's update inside one transaction; new and changed files are written in batches."""

    def __init__(self, conn: psycopg.Connection, collection: str) -> None:
        from qmd.core.clock import now_iso

        self.conn = conn
        self.collection = collection
        self.now = now_iso()
        self._pending: list[tuple[DocumentWrite, int | None]] = []
        self.written = 0  # documents whose full text this update wrote

    def known(self) -> dict[str, KnownFile]:
        self.flush()
        rows = self.conn.execute("SELECT path, id, hash, size, mtime_ns, active, meta_version FROM documents WHERE collection = %s", (self.collection,))
        return {str(p): KnownFile(int(i), str(h), int(s), int(m), bool(a), int(v) >= METADATA_VERSION) for p, i, h, s, m, a, v in rows}

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
                    [(self.collection, d.path, d.title, d.hash, d.size, d.mtime_ns, d.body_line, e[0], self.now, *e[1:]) for d, _ in new for e in [self._extra(d)]],
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
                    [(d.title, d.hash, d.size, d.mtime_ns, d.body_line, *self._extra(d), r) for d, r in changed],
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

    def _extra(self, d: DocumentWrite) -> tuple[object, ...]:
        """(tags, modified_at, metadata, dated_ns, when_ns, meta_version) of a write."""
        modified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(d.mtime_ns / 1e9))
        tags = json.dumps(d.tags) if d.tags else None
        meta = json.dumps(d.metadata, ensure_ascii=False) if d.metadata else None
        when = d.dated_ns if d.dated_ns is not None else d.mtime_ns
        return (tags, modified, meta, d.dated_ns, when, METADATA_VERSION)

    def touch(self, row_id: int, size: int, mtime_ns: int) -> None:
        self.conn.execute("UPDATE documents SET size = %s, mtime_ns = %s, when_ns = coalesce(dated_ns, %s) WHERE id = %s", (size, mtime_ns, mtime_ns, row_id))

    def deactivate(self, row_id: int) -> None:
        self.conn.execute("UPDATE documents SET active = FALSE WHERE id = %s", (row_id,))
        fulltext.delete_rows(self.conn, [row_id])

    def issues(self) -> dict[str, tuple[str, str]]:
        rows = self.conn.execute("SELECT path, severity, reason FROM file_issues WHERE collection = %s", (self.collection,))
        return {str(p): (str(s), str(r)) for p, s, r in rows}

    def set_issues(self, issues: Sequence[tuple[str, str, str]]) -> None:
        self.conn.execute("DELETE FROM file_issues WHERE collection = %s", (self.collection,))
        rows = list({path: (self.collection, path, severity, reason) for path, severity, reason in issues}.values())
        if rows:
            with self.conn.cursor() as cur:
                cur.executemany("INSERT INTO file_issues (collection, path, severity, reason) VALUES (%s, %s, %s, %s)", rows)

    def _finish(self) -> None:
        self.flush()
        self.conn.execute(
            "INSERT INTO collection_state (name, updated_at) VALUES (%s, %s) ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at",
            (self.collection, self.now),
        )


@contextmanager
def collection_writer(conn: psycopg.Connection, collection: str) -> Iterator[PostgresCollectionWriter]:
    writer = PostgresCollectionWriter(conn, collection)
    with conn.transaction():
        yield writer
        writer._finish()
    if writer.written >= fulltext.OPTIMIZE_AFTER:
        fulltext.optimize(conn)


def drop_collection(conn: psycopg.Connection, name: str) -> int:
    with conn.transaction():
        ids = [int(r[0]) for r in conn.execute("SELECT id FROM documents WHERE collection = %s", (name,))]
        fulltext.delete_rows(conn, ids)
        conn.execute("DELETE FROM document_meta WHERE doc_id = ANY(%s)", (ids,))
        conn.execute("DELETE FROM documents WHERE collection = %s", (name,))
        conn.execute("DELETE FROM collection_state WHERE name = %s", (name,))
        conn.execute("DELETE FROM file_issues WHERE collection = %s", (name,))
    return len(ids)


def rename_collection(conn: psycopg.Connection, old: str, new: str, fields: FieldsFor) -> None:
    with conn.transaction():
        rows = conn.execute(
            "SELECT d.id, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.collection = %s AND d.active", (old,),
        ).fetchall()
        conn.execute("UPDATE documents SET collection = %s WHERE collection = %s", (new, old))
        fulltext.delete_rows(conn, [int(r[0]) for r in rows])
        written = []
        for doc_id, rel, text in rows:
            f = fields(new, str(rel), str(text))
            written.append((int(doc_id), f.filepath, f.title, f.body))
        fulltext.write_rows(conn, written)
        conn.execute("UPDATE collection_state SET name = %s WHERE name = %s", (new, old))
        conn.execute("UPDATE file_issues SET collection = %s WHERE collection = %s", (new, old))


def drop_inactive(conn: psycopg.Connection) -> tuple[int, int]:
    """Delete soft-deleted documents and content nothing uses (caller holds a transaction)."""
    inactive = count(conn, "SELECT count(*) FROM documents WHERE NOT active")
    conn.execute("DELETE FROM document_meta WHERE doc_id IN (SELECT id FROM documents WHERE NOT active)")
    conn.execute("DELETE FROM documents WHERE NOT active")
    orphans = count(conn, "SELECT count(*) FROM content c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = c.hash)")
    conn.execute("DELETE FROM content c WHERE NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = c.hash)")
    return inactive, orphans


def metadata_keys(conn: psycopg.Connection, collection: str | None) -> list[tuple[str, str, int]]:
    sql = (
        "SELECT m.key, m.type, count(DISTINCT m.doc_id) FROM document_meta m JOIN documents d ON d.id = m.doc_id WHERE d.active"
        + (" AND d.collection = %s" if collection is not None else "")
        + ' GROUP BY m.key, m.type ORDER BY m.key COLLATE "C", m.type'
    )
    return [(str(k), str(t), int(n)) for k, t, n in conn.execute(sql, () if collection is None else (collection,))]


def count_matching(conn: psycopg.Connection, where: Filter, collections: list[str] | None) -> int:
    from qmd.storage.postgres.filters import id_set

    ids, params = id_set(where)
    sql = f"SELECT count(*) FROM documents WHERE active AND id IN ({ids})"
    if collections is not None:
        sql += f" AND collection IN ({marks(len(collections))})"
        params = [*params, *collections]
    return count(conn, sql, params)
