"""The SQL both backends speak: statements whose text is the same in SQLite and PostgreSQL.

Written once, with `?` for each parameter (`run` gives psycopg's connections `%s`), over any
connection that runs a statement and returns its rows (`parts.Connection`: apsw's and
psycopg's). Boolean columns are tested as `d.active` / `NOT d.active` and written as
TRUE / FALSE, which both read (SQLite stores 1 / 0). What only one backend can say stays in
its own package (`sqlite/`, `postgres/`), and neither package imports the other.

The shared part of a collection's update is here too (`SqlCollectionWriter`): the rows a
collection's files, state and issues live in are the same tables in both.
"""

from __future__ import annotations

import abc
import functools
import json
import time
from collections.abc import Iterable, Mapping, Sequence

from qmd.backends.rows import METADATA_VERSION, MIN_DOCID, CollectionWriter, DocRow, DocumentWrite, FileRow, IndexCheck, KnownFile, Removed, Totals, VectorModel

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.backends.parts import Connection

@functools.lru_cache(maxsize=1)
def _fts5_tokenizer():  # type: ignore[no-untyped-def]
    import apsw  # SQLite's FTS5 tokenizer (apsw is installed with either backend)

    conn = apsw.Connection(":memory:")
    return conn, conn.fts5_tokenizer("porter", ["unicode61"])


def fts5_tokens(text: str, *, query: bool = False, prefix: bool = False) -> list[str]:
    """The tokens FTS5's `porter unicode61` makes of `text` (stemmed, folded, diacritics
    removed): the terms of the SQLite backend's table, the PostgreSQL backend's too, and the
    stems the confidence counts (qmd/search/confidence.py)."""
    import apsw

    _, tok = _fts5_tokenizer()
    flags = apsw.FTS5_TOKENIZE_QUERY | (apsw.FTS5_TOKENIZE_PREFIX if prefix else 0) if query else apsw.FTS5_TOKENIZE_DOCUMENT
    return [t if isinstance(t, str) else t[0] for t in tok(text.encode("utf-8", "replace"), flags, None, include_offsets=False, include_colocated=False)]


DOC_COLUMNS = ("id", "collection", "path", "title", "hash", "body_line", "size", "mtime_ns", "metadata")


def run(conn: Connection, sql: str, params: Sequence[object] = ()) -> Iterable[Sequence[Any]]:
    """Run a statement written with `?` marks on either driver's connection."""
    if type(conn).__module__.partition(".")[0] == "psycopg":
        sql = sql.replace("?", "%s")
    return conn.execute(sql, params)


def scalar(conn: Connection, sql: str, params: Sequence[object] = ()) -> Any:
    """The first column of the first row, or None."""
    for row in run(conn, sql, params):
        return row[0]
    return None


def as_int(value: object) -> int:
    """An integer column's value as an int (0 for NULL)."""
    return int(value) if isinstance(value, (int, float)) or (isinstance(value, str) and value.isdigit()) else 0


def count(conn: Connection, sql: str, params: Sequence[object] = ()) -> int:
    """An integer result (a count); 0 when the query returns nothing or NULL."""
    return as_int(scalar(conn, sql, params))


def marks(n: int) -> str:
    """`?` marks for `n` values (`x IN (…)`)."""
    return ",".join("?" * n)


# --- schema: the tables both backends create alike (their MIGRATIONS hold these) -------

CONTENT_TABLE = """
        CREATE TABLE content (
            hash TEXT PRIMARY KEY,
            doc TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
"""
STATE_TABLES = """
        CREATE TABLE collection_state (
            name TEXT PRIMARY KEY,
            updated_at TEXT NOT NULL
        );
        CREATE TABLE file_issues (
            collection TEXT NOT NULL,
            path TEXT NOT NULL,
            severity TEXT NOT NULL CHECK (severity IN ('skipped', 'warning')),
            reason TEXT NOT NULL,
            PRIMARY KEY (collection, path)
        );
        CREATE TABLE meta (
            key TEXT PRIMARY KEY,
            value TEXT NOT NULL
        );
"""
LLM_CACHE_TABLE = """
        CREATE TABLE llm_cache (
            key TEXT PRIMARY KEY,
            kind TEXT NOT NULL,
            value TEXT NOT NULL,
            created_at TEXT NOT NULL
        );
"""


# --- documents ------------------------------------------------------------------------


def doc_row(values: Sequence[object]) -> DocRow:
    """A `DocRow` from the DOC_COLUMNS of a row."""
    i, c, p, t, h, b, s, m, meta = values
    return DocRow(int(i), str(c), str(p), str(t), str(h), int(b), int(s), int(m), json.loads(meta) if meta else None)  # type: ignore[call-overload, arg-type]


def _shared_digits(a: str, b: object) -> int:
    if not isinstance(b, str):
        return 0
    n = 0
    for x, y in zip(a, b):
        if x != y:
            break
        n += 1
    return n


def docid_length(content_hash: str, before: object, after: object) -> int:
    """How many digits make `content_hash` unique beside its nearest neighbours in hash order
    (None where it has none): one past the longer shared prefix, at least MIN_DOCID."""
    return max(MIN_DOCID, max(_shared_digits(content_hash, before), _shared_digits(content_hash, after)) + 1)


def _matching(collection: str | None, path: str | None, hash_prefix: str | None) -> tuple[list[str], list[object]]:
    """The WHERE terms and parameters selecting documents by the given fields."""
    where: list[str] = []
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
    return where, params


def find(conn: Connection, collate: str, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
    """Active documents matching every given field, by collection then path (`collate`: the
    backend's byte order, see IndexBackend.BYTE_ORDER)."""
    where, params = _matching(collection, path, hash_prefix)
    sql = f"SELECT {', '.join(DOC_COLUMNS)} FROM documents WHERE {' AND '.join(['active', *where])} ORDER BY collection{collate}, path{collate}"
    return [doc_row(r) for r in run(conn, sql, params)]


def removed(conn: Connection, collate: str, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[Removed]:
    """Soft-deleted documents (their file was gone at an update) matching every given field,
    by collection then path, each with when that update ran: `modified_at` is stamped with it
    on removal; a row removed before that stamp (its `modified_at` still the file's time) has none."""
    where, params = _matching(collection, path, hash_prefix)
    sql = f"SELECT collection, path, hash, modified_at, mtime_ns FROM documents WHERE {' AND '.join(['NOT active', *where])} ORDER BY collection{collate}, path{collate}"
    out = []
    for c, p, h, at, mtime in run(conn, sql, params):
        stamped = at != time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(int(mtime) / 1e9))
        out.append(Removed(str(c), str(p), str(h), str(at) if stamped else None))
    return out


def files(conn: Connection, collate: str, collection: str, under: str) -> list[FileRow]:
    """Active files of a collection, optionally under a sub-path, by path."""
    sql = "SELECT collection, path, size, mtime_ns, hash, title FROM documents WHERE active AND collection = ?"
    params: list[object] = [collection]
    if under:
        sql += " AND (path = ? OR substr(path, 1, ?) = ?)"
        params += [under, len(under) + 1, under + "/"]
    return [FileRow(str(c), str(p), int(s), int(m), str(h), str(t)) for c, p, s, m, h, t in run(conn, f"{sql} ORDER BY path{collate}", params)]


def collection_counts(conn: Connection) -> dict[str, int]:
    return {str(c): int(n) for c, n in run(conn, "SELECT collection, count(*) FROM documents WHERE active GROUP BY collection")}


def file_issues(conn: Connection, collate: str) -> list[tuple[str, str, str, str]]:
    sql = f"SELECT collection, path, severity, reason FROM file_issues ORDER BY collection{collate}, path{collate}"
    return [(str(c), str(p), str(s), str(r)) for c, p, s, r in run(conn, sql)]


def totals(conn: Connection) -> Totals:
    sql = "SELECT count(*) FILTER (WHERE active), count(*) FILTER (WHERE NOT active), (SELECT count(*) FROM content) FROM documents"
    for active, inactive, content_rows in run(conn, sql):
        return Totals(as_int(active), as_int(inactive), as_int(content_rows))
    return Totals(0, 0, 0)


def metadata_keys(conn: Connection, collate: str, collection: str | None) -> list[tuple[str, str, int]]:
    """(key, type, active documents having a value of that type) by key, then type."""
    sql = (
        "SELECT m.key, m.type, count(DISTINCT m.doc_id) FROM document_meta m JOIN documents d ON d.id = m.doc_id WHERE d.active"
        + (" AND d.collection = ?" if collection is not None else "")
        + f" GROUP BY m.key, m.type ORDER BY m.key{collate}, m.type"
    )
    return [(str(k), str(t), int(n)) for k, t, n in run(conn, sql, () if collection is None else (collection,))]


def count_in(conn: Connection, ids: str, params: Sequence[object], collections: list[str] | None, only: Sequence[int] | None = None) -> int:
    """Active documents (in `collections`; None: all; among `only` when given) among the ids a
    backend's filter selects (`ids`, its SELECT, written in the backend's own marks, and `params`)."""
    sql = f"SELECT count(*) FROM documents WHERE active AND id IN ({ids})"
    if collections is not None:
        sql += f" AND collection IN ({marks(len(collections))})"
    if only is not None:
        sql += f" AND id IN ({marks(len(only))})" if only else " AND 1 = 0"
    return count(conn, sql, [*params, *(collections or []), *(only or [])])


def content(conn: Connection, content_hash: str) -> str | None:
    value = scalar(conn, "SELECT doc FROM content WHERE hash = ?", (content_hash,))
    return None if value is None else str(value)


def collection_updated(conn: Connection) -> dict[str, str]:
    return {str(n): str(u) for n, u in run(conn, "SELECT name, updated_at FROM collection_state")}


def indexed_collections(conn: Connection) -> set[str]:
    sql = "SELECT collection FROM documents UNION SELECT name FROM collection_state UNION SELECT collection FROM file_issues"
    return {str(row[0]) for row in run(conn, sql)}


def meta_values(conn: Connection, prefix: str) -> dict[str, str]:
    """The `meta` rows whose key starts with `prefix`."""
    return {str(k): str(v) for k, v in run(conn, "SELECT key, value FROM meta WHERE substr(key, 1, ?) = ?", (len(prefix), prefix))}


def set_meta(conn: Connection, key: str, value: str | None) -> None:
    if value is None:
        run(conn, "DELETE FROM meta WHERE key = ?", (key,))
    else:
        run(conn, "INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value = excluded.value", (key, value))


def collection_ids(conn: Connection, name: str) -> list[int]:
    """Every document id (active or not) of a collection."""
    return [int(row[0]) for row in run(conn, "SELECT id FROM documents WHERE collection = ?", (name,))]


def forget_collection(conn: Connection, name: str) -> None:
    """Delete a collection's documents, metadata, state and issues (the caller dropped their
    full text first and holds a transaction)."""
    run(conn, "DELETE FROM document_meta WHERE doc_id IN (SELECT id FROM documents WHERE collection = ?)", (name,))
    run(conn, "DELETE FROM documents WHERE collection = ?", (name,))
    run(conn, "DELETE FROM collection_state WHERE name = ?", (name,))
    run(conn, "DELETE FROM file_issues WHERE collection = ?", (name,))


def move_collection(conn: Connection, old: str, new: str) -> list[tuple[int, str, str]]:
    """Give a collection's rows the name `new`; returns (id, path, text) of its active
    documents, whose full text (its filepath column) the caller rewrites in the same transaction."""
    sql = "SELECT d.id, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.collection = ? AND d.active"
    rows = [(int(i), str(p), str(t)) for i, p, t in run(conn, sql, (old,))]
    run(conn, "UPDATE documents SET collection = ? WHERE collection = ?", (new, old))
    run(conn, "UPDATE collection_state SET name = ? WHERE name = ?", (new, old))
    run(conn, "UPDATE file_issues SET collection = ? WHERE collection = ?", (new, old))
    return rows


def active_texts(conn: Connection) -> list[tuple[int, str, str, str]]:
    """(id, collection, path, text) of every active document (to rewrite the full text)."""
    sql = "SELECT d.id, d.collection, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash WHERE d.active"
    return [(int(i), str(c), str(p), str(t)) for i, c, p, t in run(conn, sql)]


def drop_inactive(conn: Connection) -> tuple[int, int]:
    """Delete soft-deleted documents and content nothing uses (the caller holds a transaction);
    returns (documents, content rows) dropped."""
    unused = "NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = content.hash)"
    inactive = count(conn, "SELECT count(*) FROM documents WHERE NOT active")
    run(conn, "DELETE FROM document_meta WHERE doc_id IN (SELECT id FROM documents WHERE NOT active)")
    run(conn, "DELETE FROM documents WHERE NOT active")
    orphans = count(conn, f"SELECT count(*) FROM content WHERE {unused}")
    run(conn, f"DELETE FROM content WHERE {unused}")
    return inactive, orphans


def write_values(doc: DocumentWrite) -> tuple[str | None, str, str | None, int | None, int, int]:
    """(tags, modified_at, metadata, dated_ns, when_ns, meta_version) of a document row."""
    modified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(doc.mtime_ns / 1e9))
    tags = json.dumps(doc.tags) if doc.tags else None
    meta = json.dumps(doc.metadata, ensure_ascii=False) if doc.metadata else None
    when = doc.dated_ns if doc.dated_ns is not None else doc.mtime_ns
    return tags, modified, meta, doc.dated_ns, when, METADATA_VERSION


class SqlCollectionWriter(CollectionWriter):
    """What both backends' collection writers do the same way; each writes documents
    (`put`), their full text (`_forget_text`) and the issue rows (`_insert_issues`) its own way."""

    def __init__(self, conn: Connection, collection: str) -> None:
        from qmd.core.clock import now_iso

        self.conn = conn
        self.collection = collection
        self.now = now_iso()

    def flush(self) -> None:
        """Write what `put` buffered (nothing, unless a backend buffers)."""

    @abc.abstractmethod
    def _forget_text(self, row_id: int) -> None:
        """Delete a document's full-text row."""

    @abc.abstractmethod
    def _insert_issues(self, rows: list[tuple[str, str, str, str]]) -> None:
        """Insert (collection, path, severity, reason) rows, one per path."""

    def known(self) -> dict[str, KnownFile]:
        self.flush()
        rows = run(self.conn, "SELECT path, id, hash, size, mtime_ns, active, meta_version FROM documents WHERE collection = ?", (self.collection,))
        return {str(p): KnownFile(int(i), str(h), int(s), int(m), bool(a), int(v) >= METADATA_VERSION) for p, i, h, s, m, a, v in rows}

    def touch(self, row_id: int, size: int, mtime_ns: int) -> None:
        run(self.conn, "UPDATE documents SET size = ?, mtime_ns = ?, when_ns = coalesce(dated_ns, ?) WHERE id = ?", (size, mtime_ns, mtime_ns, row_id))

    def deactivate(self, row_id: int) -> None:
        # modified_at of a removed row: when it was removed (read back by `removed`)
        run(self.conn, "UPDATE documents SET active = FALSE, modified_at = ? WHERE id = ?", (self.now, row_id))
        self._forget_text(row_id)

    def issues(self) -> dict[str, tuple[str, str]]:
        rows = run(self.conn, "SELECT path, severity, reason FROM file_issues WHERE collection = ?", (self.collection,))
        return {str(p): (str(s), str(r)) for p, s, r in rows}

    def set_issues(self, issues: Sequence[tuple[str, str, str]]) -> None:
        run(self.conn, "DELETE FROM file_issues WHERE collection = ?", (self.collection,))
        rows = list({path: (self.collection, path, severity, reason) for path, severity, reason in issues}.values())
        if rows:
            self._insert_issues(rows)

    def finish(self) -> None:
        """Write what is buffered and stamp the collection's update time (last, in the transaction)."""
        self.flush()
        run(
            self.conn,
            "INSERT INTO collection_state (name, updated_at) VALUES (?, ?) ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at",
            (self.collection, self.now),
        )


# --- vectors --------------------------------------------------------------------------


def model_row(conn: Connection, fingerprint: str) -> VectorModel | None:
    for i, fp, model, dims in run(conn, "SELECT id, fingerprint, model, dims FROM embed_models WHERE fingerprint = ?", (fingerprint,)):
        return VectorModel(int(i), str(fp), str(model), int(dims))
    return None


def models_named(conn: Connection, name: str) -> list[VectorModel]:
    return [VectorModel(int(i), str(fp), str(model), int(dims)) for i, fp, model, dims in run(conn, "SELECT id, fingerprint, model, dims FROM embed_models WHERE model = ? ORDER BY id", (name,))]


def wanted_ast(ast: Mapping[str, Sequence[str]] | None) -> tuple[str, list[object]]:
    """SQL true for a document (`d`) whose collection chunks its extension by syntax, and its parameters."""
    terms: list[str] = []
    params: list[object] = []
    for collection, extensions in sorted((ast or {}).items()):
        if extensions:
            terms.append("(d.collection = ? AND (" + " OR ".join(["lower(d.path) LIKE ?"] * len(extensions)) + "))")
            params += [collection, *(f"%{e.lower()}" for e in extensions)]
    return (" OR ".join(terms) or "1 = 0"), params


def _pending(collections: list[str], ast: Mapping[str, Sequence[str]] | None, model_id: int | None) -> tuple[str, list[object]]:
    """The content pending for `model_id` in `collections` (see IndexBackend.pending_embeddings):
    a query of (h, t, first) rows — hash, a title, its first document's id — and its parameters."""
    wanted, params = wanted_ast(ast)
    sql = (
        f"SELECT h, t, first FROM (SELECT d.hash AS h, min(d.title) AS t, min(d.id) AS first, max(CASE WHEN {wanted} THEN 1 ELSE 0 END) AS ast"
        f" FROM documents d WHERE d.active AND d.collection IN ({marks(len(collections))}) GROUP BY d.hash) p"
        " WHERE NOT EXISTS (SELECT 1 FROM embedded e WHERE e.model_id = ? AND e.hash = p.h"
        " AND CASE WHEN p.ast = 1 THEN e.chunker IN ('ast', 'ast!') ELSE e.chunker IN ('regex', 'ast!') END)"
    )
    return sql, [*params, *collections, -1 if model_id is None else model_id]


def pending_hashes(conn: Connection, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> list[tuple[str, str]]:
    """(content hash, title) of active documents in `collections` without vectors for `model_id`,
    or cut otherwise than wanted (see IndexBackend.pending_embeddings)."""
    if not collections:
        return []
    pending, params = _pending(collections, ast, model_id)
    return [(str(h), str(t)) for h, t, _ in run(conn, pending + " ORDER BY first", params)]


def pending_per_collection(conn: Connection, model_id: int | None, collections: list[str], ast: Mapping[str, Sequence[str]] | None = None) -> dict[str, int]:
    """collection → its active documents whose content is pending (`pending_hashes`); a
    collection with none is left out."""
    if not collections:
        return {}
    pending, params = _pending(collections, ast, model_id)
    sql = (
        f"SELECT d.collection, count(*) FROM documents d WHERE d.active AND d.collection IN ({marks(len(collections))})"
        f" AND d.hash IN (SELECT h FROM ({pending}) q) GROUP BY d.collection"
    )
    return {str(c): int(n) for c, n in run(conn, sql, (*collections, *params))}


def without_vectors(conn: Connection, model_id: int, ids: Sequence[int]) -> set[int]:
    """The documents among `ids` whose current content has no vectors for `model_id`."""
    if not ids:
        return set()
    sql = (
        f"SELECT d.id FROM documents d WHERE d.id IN ({marks(len(ids))})"
        " AND NOT EXISTS (SELECT 1 FROM embedded e WHERE e.model_id = ? AND e.hash = d.hash)"
    )
    return {int(i) for (i,) in run(conn, sql, (*ids, model_id))}


def embedded_hashes(conn: Connection, model_ids: Sequence[int], hashes: Sequence[str]) -> set[str]:
    """The contents among `hashes` with vectors of any of `model_ids` (whatever their chunker):
    what `qmd status` counts as embedded with other settings rather than never embedded."""
    found: set[str] = set()
    if not model_ids:
        return found
    for at in range(0, len(hashes), 500):  # bounded parameter lists on either driver
        part = hashes[at : at + 500]
        sql = f"SELECT DISTINCT e.hash FROM embedded e WHERE e.model_id IN ({marks(len(model_ids))}) AND e.hash IN ({marks(len(part))})"
        found.update(str(h) for (h,) in run(conn, sql, (*model_ids, *part)))
    return found


def orphaned_hashes(conn: Connection, model_id: int, limit: int) -> list[str]:
    """Content hashes with chunks of `model_id` that no document uses any more (an earlier
    version of an edited file, until cleanup drops them), at most `limit`."""
    sql = "SELECT DISTINCT c.hash FROM chunks c WHERE c.model_id = ? AND NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = c.hash) ORDER BY c.hash LIMIT ?"
    return [str(h) for (h,) in run(conn, sql, (model_id, limit))]


def chunking_fallbacks(conn: Connection, model_id: int | None) -> list[tuple[str, str]]:
    if model_id is None:
        return []
    sql = (
        "SELECT d.collection, d.path FROM documents d JOIN embedded e ON e.hash = d.hash AND e.model_id = ?"
        " WHERE d.active AND e.chunker = 'ast!' ORDER BY 1, 2"
    )
    return [(str(c), str(p)) for c, p in run(conn, sql, (model_id,))]


def embedded_per_collection(conn: Connection, model_id: int) -> dict[str, int]:
    sql = (
        "SELECT d.collection, count(*) FROM documents d WHERE d.active"
        " AND EXISTS (SELECT 1 FROM embedded e WHERE e.model_id = ? AND e.hash = d.hash) GROUP BY d.collection"
    )
    return {str(c): int(n) for c, n in run(conn, sql, (model_id,))}


EMBEDDED_ACTIVE = "EXISTS (SELECT 1 FROM documents d WHERE d.hash = e.hash AND d.active)"  # over embedded e


def embedded_in(conn: Connection, model_id: int | None, collections: Sequence[str]) -> int:
    """Distinct content of the active documents of `collections` with vectors in one vector space."""
    if model_id is None or not collections:
        return 0
    sql = (
        f"SELECT count(DISTINCT d.hash) FROM documents d WHERE d.active AND d.collection IN ({marks(len(collections))})"
        " AND EXISTS (SELECT 1 FROM embedded e WHERE e.model_id = ? AND e.hash = d.hash)"
    )
    return count(conn, sql, [*collections, model_id])


def vector_counts(conn: Connection, model_id: int | None) -> tuple[int, int]:
    """(chunks, embedded content of active documents) of one vector space (zeros for None)."""
    if model_id is None:
        return 0, 0
    return (
        count(conn, "SELECT count(*) FROM chunks WHERE model_id = ?", (model_id,)),
        count(conn, f"SELECT count(*) FROM embedded e WHERE e.model_id = ? AND {EMBEDDED_ACTIVE}", (model_id,)),
    )


# --- integrity ------------------------------------------------------------------------


def survey(conn: Connection, check: IndexCheck, done: set[str], known: Sequence[str]) -> bool:
    """Fill `check` with the migrations pending and unknown (of the names `known`, against those
    `done`) and, once the core tables exist, the row counts of what every backend keeps
    (documents, content, chunks, vector spaces); False when there are no tables to count. The
    full text is each backend's own."""
    check.pending_migrations = [n for n in known if n not in done]
    check.unknown_migrations = sorted(done - set(known))
    if "0001_core" not in done:
        return False
    unused = "NOT EXISTS (SELECT 1 FROM documents d WHERE d.hash = {0}.hash)"
    check.collection_documents = collection_counts(conn)
    check.documents = sum(check.collection_documents.values())
    check.inactive = count(conn, "SELECT count(*) FROM documents WHERE NOT active")
    check.content_rows = count(conn, "SELECT count(*) FROM content")
    check.orphan_content = count(conn, "SELECT count(*) FROM content WHERE " + unused.format("content"))
    if "0002_vectors" in done:
        check.chunks = count(conn, "SELECT count(*) FROM chunks")
        check.orphan_chunks = count(conn, "SELECT count(*) FROM chunks WHERE " + unused.format("chunks"))
        sql = f"SELECT m.fingerprint, m.model, (SELECT count(*) FROM embedded e WHERE e.model_id = m.id AND {EMBEDDED_ACTIVE}) FROM embed_models m ORDER BY m.id"
        check.vector_models = [(str(fp), str(model), int(n)) for fp, model, n in run(conn, sql)]
    return True
