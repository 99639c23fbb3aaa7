"""Documents, content, per-collection state and file issues in SQLite."""

from __future__ import annotations

import json
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import apsw

from qmd.storage.backend import METADATA_VERSION, MIN_DOCID, DocRow, DocumentWrite, FieldsFor, FileRow, KnownFile, Totals
from qmd.storage.sqlite import fulltext
from qmd.storage.sqlite.connection import count, scalar, transaction, values_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

_COLUMNS = ("id", "collection", "path", "title", "hash", "body_line", "size", "mtime_ns", "metadata")


def _row(values: Sequence[object]) -> DocRow:
    i, c, p, t, h, b, s, m, meta = values
    return DocRow(int(i), str(c), str(p), str(t), str(h), int(b), int(s), int(m), json.loads(meta) if meta else None)  # type: ignore[call-overload, arg-type]


def find(conn: apsw.Connection, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
    """Active documents matching every given field, by collection then path."""
    where = ["active = 1"]
    params: list[object] = []
    if collection is not None:
        where.append("collection = ?")
        params.append(collection)
    if path is not None:
        where.append("path = ?")
        params.append(path)
    if hash_prefix is not None:
        where.append("hash >= ? AND hash < ?")
        params += [hash_prefix, hash_prefix + "g"]  # hex digits sort before "g"
    sql = f"SELECT {', '.join(_COLUMNS)} FROM documents WHERE {' AND '.join(where)} ORDER BY collection, path"
    return [_row(r) for r in conn.execute(sql, params)]


def documents(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
    """Rows and texts for `ids`, in one query (the search hot path)."""
    if not ids:
        return {}
    marks, params = values_in(ids)
    columns = ", ".join(f"d.{c}" for c in _COLUMNS)
    sql = f"SELECT {columns}, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.id IN ({marks})"
    return {int(r[0]): (_row(r[:-1]), str(r[-1])) for r in conn.execute(sql, params)}


def _shared(a: str, b: object) -> int:
    if not isinstance(b, str):
        return 0
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def docid_lengths(conn: apsw.Connection, hashes: Sequence[str]) -> dict[str, int]:
    """Shortest unique prefix (≥ MIN_DOCID) of each hash: one digit past its nearest neighbours."""
    wanted = list(dict.fromkeys(hashes))
    out: dict[str, int] = {}
    if len(wanted) > 64:  # many (ls of a big collection): one sorted read beats two seeks each
        import bisect

        every = [str(r[0]) for r in conn.execute("SELECT DISTINCT hash FROM documents WHERE active = 1 ORDER BY hash")]
        for h in wanted:
            i = bisect.bisect_left(every, h)
            j = i + 1 if i < len(every) and every[i] == h else i
            neighbours = (every[i - 1] if i > 0 else None, every[j] if j < len(every) else None)
            out[h] = max(MIN_DOCID, max(_shared(h, n) for n in neighbours) + 1)
        return out
    for h in wanted:
        before = scalar(conn, "SELECT max(hash) FROM documents WHERE hash < ? AND active = 1", (h,))
        after = scalar(conn, "SELECT min(hash) FROM documents WHERE hash > ? AND active = 1", (h,))
        out[h] = max(MIN_DOCID, max(_shared(h, before), _shared(h, after)) + 1)
    return out


def content(conn: apsw.Connection, content_hash: str) -> str | None:
    value = scalar(conn, "SELECT doc FROM content WHERE hash = ?", (content_hash,))
    return None if value is None else str(value)


def files(conn: apsw.Connection, collection: str, under: str) -> list[FileRow]:
    sql = "SELECT collection, path, size, mtime_ns, hash, title FROM documents WHERE active = 1 AND collection = ?"
    params: list[object] = [collection]
    if under:
        sql += " AND (path = ? OR substr(path, 1, ?) = ?)"
        params += [under, len(under) + 1, under + "/"]
    return [FileRow(str(c), str(p), int(s), int(m), str(h), str(t)) for c, p, s, m, h, t in conn.execute(sql + " ORDER BY path", params)]


def collection_counts(conn: apsw.Connection) -> dict[str, int]:
    return {str(c): int(n) for c, n in conn.execute("SELECT collection, count(*) FROM documents WHERE active = 1 GROUP BY collection")}


def collection_updated(conn: apsw.Connection) -> dict[str, str]:
    return {str(n): str(u) for n, u in conn.execute("SELECT name, updated_at FROM collection_state")}


def indexed_collections(conn: apsw.Connection) -> set[str]:
    sql = "SELECT collection FROM documents UNION SELECT name FROM collection_state UNION SELECT collection FROM file_issues"
    return {str(row[0]) for row in conn.execute(sql)}


def file_issues(conn: apsw.Connection) -> list[tuple[str, str, str, str]]:
    return [(str(c), str(p), str(s), str(r)) for c, p, s, r in conn.execute("SELECT collection, path, severity, reason FROM file_issues ORDER BY 1, 2")]


def totals(conn: apsw.Connection) -> Totals:
    return Totals(
        count(conn, "SELECT count(*) FROM documents WHERE active = 1"),
        count(conn, "SELECT count(*) FROM documents WHERE active = 0"),
        count(conn, "SELECT count(*) FROM content"),
    )


class SqliteCollectionWriter:
    """One collection's update inside one transaction (see `CollectionWriter`)."""

    def __init__(self, conn: apsw.Connection, collection: str) -> None:
        from qmd.core.clock import now_iso

        self.conn = conn
        self.collection = collection
        self.now = now_iso()

    def known(self) -> dict[str, KnownFile]:
        rows = self.conn.execute("SELECT path, id, hash, size, mtime_ns, active, meta_version FROM documents WHERE collection = ?", (self.collection,))
        return {str(p): KnownFile(int(i), str(h), int(s), int(m), bool(a), int(v) >= METADATA_VERSION) for p, i, h, s, m, a, v in rows}

    def put(self, doc: DocumentWrite, replaces: int | None) -> None:
        conn = self.conn
        conn.execute("INSERT OR IGNORE INTO content (hash, doc, created_at) VALUES (?, ?, ?)", (doc.hash, doc.text, self.now))
        modified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc.mtime_ns / 1e9))
        tags = json.dumps(doc.tags) if doc.tags else None
        meta = json.dumps(doc.metadata, ensure_ascii=False) if doc.metadata else None
        when = doc.dated_ns if doc.dated_ns is not None else doc.mtime_ns
        if replaces is None:
            conn.execute(
                "INSERT INTO documents (collection, path, title, hash, size, mtime_ns, body_line, tags, created_at, modified_at, active,"
                " metadata, dated_ns, when_ns, meta_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (self.collection, doc.path, doc.title, doc.hash, doc.size, doc.mtime_ns, doc.body_line, tags, self.now, modified,
                 meta, doc.dated_ns, when, METADATA_VERSION),
            )
            row_id = conn.last_insert_rowid()
        else:
            row_id = replaces
            conn.execute(
                "UPDATE documents SET title = ?, hash = ?, size = ?, mtime_ns = ?, body_line = ?, tags = ?, modified_at = ?, active = 1,"
                " metadata = ?, dated_ns = ?, when_ns = ?, meta_version = ? WHERE id = ?",
                (doc.title, doc.hash, doc.size, doc.mtime_ns, doc.body_line, tags, modified, meta, doc.dated_ns, when, METADATA_VERSION, row_id),
            )
            fulltext.delete_row(conn, row_id)
            conn.execute("DELETE FROM document_meta WHERE doc_id = ?", (row_id,))
        write_metadata(conn, row_id, doc.metadata)
        fulltext.write_row(conn, row_id, doc.fields.filepath, doc.fields.title, doc.fields.body)

    def touch(self, row_id: int, size: int, mtime_ns: int) -> None:
        self.conn.execute("UPDATE documents SET size = ?, mtime_ns = ?, when_ns = coalesce(dated_ns, ?) WHERE id = ?", (size, mtime_ns, mtime_ns, row_id))

    def deactivate(self, row_id: int) -> None:
        self.conn.execute("UPDATE documents SET active = 0 WHERE id = ?", (row_id,))
        fulltext.delete_row(self.conn, row_id)

    def issues(self) -> dict[str, tuple[str, str]]:
        rows = self.conn.execute("SELECT path, severity, reason FROM file_issues WHERE collection = ?", (self.collection,))
        return {str(p): (str(s), str(r)) for p, s, r in rows}

    def set_issues(self, issues: Sequence[tuple[str, str, str]]) -> None:
        self.conn.execute("DELETE FROM file_issues WHERE collection = ?", (self.collection,))
        for path, severity, reason in issues:
            self.conn.execute(
                "INSERT OR REPLACE INTO file_issues (collection, path, severity, reason) VALUES (?, ?, ?, ?)",
                (self.collection, path, severity, reason),
            )

    def _finish(self) -> None:
        self.conn.execute(
            "INSERT INTO collection_state (name, updated_at) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at",
            (self.collection, self.now),
        )


@contextmanager
def collection_writer(conn: apsw.Connection, collection: str) -> Iterator[SqliteCollectionWriter]:
    """All of one collection's writes in one transaction, stamped with its update time."""
    writer = SqliteCollectionWriter(conn, collection)
    with transaction(conn):
        yield writer
        writer._finish()


def drop_collection(conn: apsw.Connection, name: str) -> int:
    """Delete every row of collection `name` (documents, FTS rows, state); returns documents dropped."""
    with transaction(conn):
        ids = [int(row[0]) for row in conn.execute("SELECT id FROM documents WHERE collection = ?", (name,))]
        for doc_id in ids:
            fulltext.delete_row(conn, doc_id)
        conn.execute("DELETE FROM document_meta WHERE doc_id IN (SELECT id FROM documents WHERE collection = ?)", (name,))
        conn.execute("DELETE FROM documents WHERE collection = ?", (name,))
        conn.execute("DELETE FROM collection_state WHERE name = ?", (name,))
        conn.execute("DELETE FROM file_issues WHERE collection = ?", (name,))
    return len(ids)


def rename_collection(conn: apsw.Connection, old: str, new: str, fields: FieldsFor) -> None:
    """Move rows to a new collection name, rewriting FTS rows whose filepath column changes."""
    with transaction(conn):
        rows = list(
            conn.execute(
                "SELECT d.id, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.collection = ? AND d.active = 1",
                (old,),
            )
        )
        conn.execute("UPDATE documents SET collection = ? WHERE collection = ?", (new, old))
        for doc_id, rel, text in rows:
            fulltext.delete_row(conn, int(doc_id))
            f = fields(new, str(rel), str(text))
            fulltext.write_row(conn, int(doc_id), f.filepath, f.title, f.body)
        conn.execute("UPDATE collection_state SET name = ? WHERE name = ?", (new, old))
        conn.execute("UPDATE file_issues SET collection = ? WHERE collection = ?", (new, old))


def drop_inactive(conn: apsw.Connection) -> tuple[int, int]:
    """Delete soft-deleted documents and content nothing uses (caller holds a transaction)."""
    inactive = count(conn, "SELECT count(*) FROM documents WHERE active = 0")
    conn.execute("DELETE FROM document_meta WHERE doc_id IN (SELECT id FROM documents WHERE active = 0)")
    conn.execute("DELETE FROM documents WHERE active = 0")
    orphans = count(conn, "SELECT count(*) FROM content WHERE hash NOT IN (SELECT hash FROM documents)")
    conn.execute("DELETE FROM content WHERE hash NOT IN (SELECT hash FROM documents)")
    return inactive, orphans


def write_metadata(conn: apsw.Connection, doc_id: int, metadata: dict[str, object]) -> None:
    """One typed row per value (each element of an array); booleans as 1/0 with type boolean."""
    from qmd.core.filters import value_type

    for key, value in metadata.items():
        for item in value if isinstance(value, list) else [value]:
            kind = value_type(item)
            if kind is not None:
                stored = int(item) if isinstance(item, bool) else item
                conn.execute("INSERT OR IGNORE INTO document_meta (doc_id, key, type, value) VALUES (?, ?, ?, ?)", (doc_id, key, kind, stored))


def metadata_keys(conn: apsw.Connection, collection: str | None) -> list[tuple[str, str, int]]:
    """(key, type, active documents having a value of that type) by key, then type."""
    sql = (
        "SELECT m.key, m.type, count(DISTINCT m.doc_id) FROM document_meta m JOIN documents d ON d.id = m.doc_id"
        " WHERE d.active = 1" + (" AND d.collection = ?" if collection is not None else "") + " GROUP BY m.key, m.type ORDER BY m.key, m.type"
    )
    return [(str(k), str(t), int(n)) for k, t, n in conn.execute(sql, () if collection is None else (collection,))]


def count_matching(conn: apsw.Connection, where: Filter, collections: list[str] | None) -> int:
    """Active documents in `collections` (None: all) matching `where`."""
    from qmd.storage.sqlite.filters import id_set

    ids, params = id_set(where)
    sql = f"SELECT count(*) FROM documents WHERE active = 1 AND id IN ({ids})"
    if collections is not None:
        sql += f" AND collection IN ({','.join('?' * len(collections))})"
        params = [*params, *collections]
    return count(conn, sql, tuple(params))
