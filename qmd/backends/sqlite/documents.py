"""Documents, content, per-collection state and file issues in SQLite."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager

import apsw

from qmd.backends.rows import DocRow, DocumentWrite, FieldsFor
from qmd.backends.sql import DOC_COLUMNS, SqlCollectionWriter, collection_ids, count_in, doc_row, docid_length, forget_collection, move_collection, scalar, write_values
from qmd.backends.sqlite import fulltext
from qmd.backends.sqlite.connection import transaction, values_in

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter



def documents(conn: apsw.Connection, ids: Sequence[int]) -> dict[int, tuple[DocRow, str]]:
    """Rows and texts for `ids`, in one query (the search hot path)."""
    if not ids:
        return {}
    marks, params = values_in(ids)
    columns = ", ".join(f"d.{c}" for c in DOC_COLUMNS)
    sql = f"SELECT {columns}, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.id IN ({marks})"
    return {int(r[0]): (doc_row(r[:-1]), str(r[-1])) for r in conn.execute(sql, params)}


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
            out[h] = docid_length(h, *neighbours)
        return out
    for h in wanted:
        before = scalar(conn, "SELECT max(hash) FROM documents WHERE hash < ? AND active = 1", (h,))
        after = scalar(conn, "SELECT min(hash) FROM documents WHERE hash > ? AND active = 1", (h,))
        out[h] = docid_length(h, before, after)
    return out


class SqliteCollectionWriter(SqlCollectionWriter):
    """One collection's update inside one transaction (see `CollectionWriter`)."""

    conn: apsw.Connection

    def put(self, doc: DocumentWrite, replaces: int | None) -> None:
        conn = self.conn
        conn.execute("INSERT OR IGNORE INTO content (hash, doc, created_at) VALUES (?, ?, ?)", (doc.hash, doc.text, self.now))
        tags, modified, meta, dated, when, version = write_values(doc)
        if replaces is None:
            conn.execute(
                "INSERT INTO documents (collection, path, title, hash, size, mtime_ns, body_line, tags, created_at, modified_at, active,"
                " metadata, dated_ns, when_ns, meta_version) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1, ?, ?, ?, ?)",
                (self.collection, doc.path, doc.title, doc.hash, doc.size, doc.mtime_ns, doc.body_line, tags, self.now, modified,
                 meta, dated, when, version),
            )
            row_id = conn.last_insert_rowid()
        else:
            row_id = replaces
            conn.execute(
                "UPDATE documents SET title = ?, hash = ?, size = ?, mtime_ns = ?, body_line = ?, tags = ?, modified_at = ?, active = 1,"
                " metadata = ?, dated_ns = ?, when_ns = ?, meta_version = ? WHERE id = ?",
                (doc.title, doc.hash, doc.size, doc.mtime_ns, doc.body_line, tags, modified, meta, dated, when, version, row_id),
            )
            fulltext.delete_row(conn, row_id)
            conn.execute("DELETE FROM document_meta WHERE doc_id = ?", (row_id,))
        write_metadata(conn, row_id, doc.metadata)
        fulltext.write_row(conn, row_id, doc.fields.filepath, doc.fields.title, doc.fields.body)

    def _forget_text(self, row_id: int) -> None:
        fulltext.delete_row(self.conn, row_id)

    def _insert_issues(self, rows: list[tuple[str, str, str, str]]) -> None:
        self.conn.executemany("INSERT INTO file_issues (collection, path, severity, reason) VALUES (?, ?, ?, ?)", rows)


@contextmanager
def collection_writer(conn: apsw.Connection, collection: str) -> Iterator[SqliteCollectionWriter]:
    """All of one collection's writes in one transaction, stamped with its update time."""
    writer = SqliteCollectionWriter(conn, collection)
    with transaction(conn):
        yield writer
        writer.finish()


def drop_collection(conn: apsw.Connection, name: str) -> int:
    """Delete every row of collection `name` (documents, FTS rows, state); returns documents dropped."""
    with transaction(conn):
        ids = collection_ids(conn, name)
        for doc_id in ids:
            fulltext.delete_row(conn, doc_id)
        forget_collection(conn, name)
    return len(ids)


def rename_collection(conn: apsw.Connection, old: str, new: str, fields: FieldsFor) -> None:
    """Move rows to a new collection name, rewriting FTS rows whose filepath column changes."""
    with transaction(conn):
        for doc_id, rel, text in move_collection(conn, old, new):
            fulltext.delete_row(conn, doc_id)
            f = fields(new, rel, text)
            fulltext.write_row(conn, doc_id, f.filepath, f.title, f.body)


def write_metadata(conn: apsw.Connection, doc_id: int, metadata: dict[str, object]) -> None:
    """One typed row per value (each element of an array); booleans as 1/0 with type boolean."""
    from qmd.core.filters import value_type

    for key, value in metadata.items():
        for item in value if isinstance(value, list) else [value]:
            kind = value_type(item)
            if kind is not None:
                stored = int(item) if isinstance(item, bool) else item
                conn.execute("INSERT OR IGNORE INTO document_meta (doc_id, key, type, value) VALUES (?, ?, ?, ?)", (doc_id, key, kind, stored))


def count_matching(conn: apsw.Connection, where: Filter, collections: list[str] | None, only: Sequence[int] | None = None) -> int:
    """Active documents in `collections` (None: all; among `only` when given) matching `where`."""
    from qmd.backends.sqlite.filters import id_set

    return count_in(conn, *id_set(where), collections, only)
