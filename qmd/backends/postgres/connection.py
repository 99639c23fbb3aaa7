"""The PostgreSQL connection (psycopg 3), the index's schema, and its named migrations.

An index is one schema in a database (`schema_for`: one per index name and per
project-local config, unless the config's URL names one with `?schema=NAME`), so one
database holds several indexes. Reads run in autocommit: each
statement sees the last committed state and never waits for a writer (MVCC); writes run in
explicit transactions under the index's writer lock (an advisory lock, locks.py).
"""

from __future__ import annotations

import hashlib
import os
import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import logging

import psycopg

from qmd.core.clock import now_iso
from qmd.core.errors import IndexAccessError, QmdError
from qmd.backends.sql import CONTENT_TABLE, LLM_CACHE_TABLE, STATE_TABLES

# psycopg logs "error ignored terminating <Pipeline>" when the server vanished mid-batch;
# the error itself reaches the user as one line (base.py): nothing more on stderr.
logging.getLogger("psycopg").addHandler(logging.NullHandler())
logging.getLogger("psycopg").propagate = False

# Applied once each, in order, in one transaction, recorded by name in schema_migrations
# (the same names as the SQLite backend's where the content matches, so doctor's
# "schema behind" reads alike). The full text is a term-statistics table (`fts_postings`:
# per document, column and stemmed term, the token positions) with each row's length in
# `fts_docs` and the totals in `fts_stats`; BM25 is computed over them in SQL (fulltext.py).
MIGRATIONS: list[tuple[str, str]] = [
    (
        "0001_core",
        CONTENT_TABLE
        + """
        CREATE TABLE documents (
            id BIGSERIAL PRIMARY KEY,
            collection TEXT NOT NULL,
            path TEXT NOT NULL,
            title TEXT NOT NULL,
            hash TEXT COLLATE "C" NOT NULL,
            size BIGINT NOT NULL,
            mtime_ns BIGINT NOT NULL,
            body_line INTEGER NOT NULL DEFAULT 1,
            tags TEXT,
            created_at TEXT NOT NULL,
            modified_at TEXT NOT NULL,
            active BOOLEAN NOT NULL DEFAULT TRUE,
            UNIQUE (collection, path)
        );
        CREATE INDEX documents_hash ON documents (hash);
        CREATE TABLE fts_docs (
            doc_id BIGINT PRIMARY KEY,
            len INTEGER NOT NULL
        );
        CREATE TABLE fts_postings (
            term TEXT COLLATE "C" NOT NULL,
            doc_id BIGINT NOT NULL,
            col SMALLINT NOT NULL,
            tf INTEGER NOT NULL,
            pos INTEGER[] NOT NULL,
            PRIMARY KEY (term, doc_id, col)
        );
        CREATE INDEX fts_postings_doc ON fts_postings (doc_id);
        CREATE TABLE fts_stats (
            id INTEGER PRIMARY KEY CHECK (id = 1),
            docs BIGINT NOT NULL,
            tokens BIGINT NOT NULL
        );
        INSERT INTO fts_stats VALUES (1, 0, 0);
        """
        + STATE_TABLES,
    ),
    (
        "0002_vectors",
        """
        CREATE TABLE embed_models (
            id BIGSERIAL PRIMARY KEY,
            fingerprint TEXT NOT NULL UNIQUE,
            model TEXT NOT NULL,
            dims INTEGER NOT NULL,
            created_at TEXT NOT NULL
        );
        CREATE TABLE chunks (
            id BIGSERIAL PRIMARY KEY,
            model_id BIGINT NOT NULL,
            hash TEXT COLLATE "C" NOT NULL,
            seq INTEGER NOT NULL,
            start INTEGER NOT NULL,
            "end" INTEGER NOT NULL,
            tokens INTEGER NOT NULL,
            UNIQUE (model_id, hash, seq)
        );
        CREATE INDEX chunks_hash ON chunks (hash);
        CREATE TABLE embedded (
            model_id BIGINT NOT NULL,
            hash TEXT COLLATE "C" NOT NULL,
            chunks INTEGER NOT NULL,
            embedded_at TEXT NOT NULL,
            PRIMARY KEY (model_id, hash)
        );
        """,
    ),
    ("0003_llm_cache", LLM_CACHE_TABLE),
    (
        # Typed front-matter metadata, one row per value: strings in `s` (byte order, as
        # SQLite compares them), numbers and booleans (1/0) in `n`; the type column keeps
        # 3 apart from '3' and true apart from 1.
        "0004_metadata",
        """
        ALTER TABLE documents ADD COLUMN metadata TEXT;
        ALTER TABLE documents ADD COLUMN dated_ns BIGINT;
        ALTER TABLE documents ADD COLUMN when_ns BIGINT;
        ALTER TABLE documents ADD COLUMN meta_version INTEGER NOT NULL DEFAULT 0;
        UPDATE documents SET when_ns = mtime_ns;
        CREATE INDEX documents_when ON documents (when_ns);
        CREATE TABLE document_meta (
            doc_id BIGINT NOT NULL,
            key TEXT NOT NULL,
            type TEXT NOT NULL CHECK (type IN ('string', 'number', 'boolean')),
            s TEXT COLLATE "C",
            n DOUBLE PRECISION
        );
        CREATE UNIQUE INDEX document_meta_row ON document_meta (doc_id, key, type, coalesce(s, ''), coalesce(n, 0));
        CREATE INDEX document_meta_s ON document_meta (key, type, s);
        CREATE INDEX document_meta_n ON document_meta (key, type, n);
        """,
    ),
    (
        # Keyword search without positions: per (term, document) the weighted frequency over
        # the columns and the row's length, all in the primary key's leaves (INCLUDE), so a
        # term or a prefix's terms is one index range; positions stay in fts_postings, read
        # only by phrases (fulltext.py). Filled from the postings of an existing index.
        "0005_fts_terms",
        """
        CREATE TABLE fts_terms (
            term TEXT COLLATE "C" NOT NULL,
            doc_id BIGINT NOT NULL,
            f DOUBLE PRECISION NOT NULL,
            len INTEGER NOT NULL,
            PRIMARY KEY (term, doc_id) INCLUDE (f, len)
        );
        INSERT INTO fts_terms (term, doc_id, f, len)
            SELECT p.term, p.doc_id, sum((CASE p.col WHEN 0 THEN 1.5 WHEN 1 THEN 4.0 ELSE 1.0 END) * p.tf), min(d.len)
            FROM fts_postings p JOIN fts_docs d ON d.doc_id = p.doc_id GROUP BY p.term, p.doc_id;
        CREATE INDEX fts_terms_doc ON fts_terms (doc_id);
        """,
    ),
    (
        # content.hash in byte order like documents.hash and chunks.hash: a join of two
        # collations cannot use the primary key (fetching 10 hits' text scanned all content).
        "0006_content_hash_c",
        """
        ALTER TABLE content ALTER COLUMN hash TYPE TEXT COLLATE "C";
        """,
    ),
    (
        # How each content's chunks were cut: `regex`, `ast` (by syntax tree), `ast!` (meant
        # by syntax, did not parse: cut by regex). As SQLite's 0005_embedded_chunker.
        "0007_embedded_chunker",
        """
        ALTER TABLE embedded ADD COLUMN chunker TEXT NOT NULL DEFAULT 'regex';
        """,
    ),
]

_SCHEMA_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,62}$")
_PLAIN_NAME = re.compile(r"^[a-z0-9_]{1,58}$")  # an index name that is already a schema-name tail
_HASHED_TAIL = re.compile(r"(^|_)[0-9a-f]{12}$")  # what a hashed tail (or the long-name fallback) ends with: plain names never do
CONNECT_HINT = "check `database:` in the index config (or QMD_DATABASE_URL) and that the server is running"


def split_url(url: str) -> tuple[str, str | None]:
    """(connection URL for libpq, the schema its `?schema=NAME` names, or None): `schema`
    is qmd's parameter, taken out before libpq sees the URL."""
    parts = urlsplit(url)
    query = parse_qsl(parts.query, keep_blank_values=True)
    schema = next((v for k, v in query if k == "schema"), None) or None
    rest = [(k, v) for k, v in query if k != "schema"]
    if schema is not None and not _SCHEMA_NAME.match(schema):
        raise QmdError(f"invalid schema name {schema!r} in the database URL", "use letters, digits and _ (at most 63), starting with a letter")
    return urlunsplit(parts._replace(query=urlencode(rest))), schema


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]


def _letters(text: str, limit: int) -> str:
    return re.sub(r"[^a-z0-9]+", "_", text.lower()).strip("_")[:limit] or "x"


def schema_for(index_name: str, *, project: str | None = None, base: str = "qmd") -> str:
    """The schema of an index whose own URL names none: `<base>_<tail>`, one per index and
    per project-local config, never shared by two of them.

    - a named index whose name is already a schema-name tail (`[a-z0-9_]`, as `index`,
      `work_notes`): that name, as qmd always named it (`qmd_index`);
    - any other name (`work-notes`, `Work_Notes`, `a.b`): its letters and digits, then `_` and
      12 hex of sha256 of the exact name, so names that differ only in `-`, `.`, `_` or case
      get schemas of their own;
    - a project-local config (`project`: the real path of its `.qmd/index.yml`): `p_`, the
      project folder's name, `_` and 12 hex of sha256 of that path.

    A plain name never ends like a hashed tail (12 hex, alone or after `_`: such names are
    hashed too), so the kinds cannot meet. Longer than PostgreSQL's 63 bytes, the whole is
    hashed (`<base[:36]>_<12 hex>`, which no plain name gives either).
    """
    if project is not None:
        folder = os.path.basename(os.path.dirname(os.path.dirname(project)))
        tail = f"p_{_letters(folder, 24)}_{_digest('project:' + project)}"
    elif _PLAIN_NAME.match(index_name) and not _HASHED_TAIL.search(index_name):
        tail = index_name
    else:
        tail = f"{_letters(index_name, 30)}_{_digest('index:' + index_name)}"
    schema = f"{base}_{tail}"
    return schema if len(schema) <= 63 else f"{base[:36]}_{_digest(schema)}"


def legacy_schema(index_name: str) -> str:
    """The schema qmd gave a named index before `schema_for` (non-identifier characters
    became `_`, lowercased: `work-notes` and `Work_Notes` both `qmd_work_notes`)."""
    return "qmd_" + re.sub(r"[^A-Za-z0-9_]", "_", index_name).lower()


def adopt_schema(conn: psycopg.Connection, old: str, new: str, collections: frozenset[str]) -> bool:
    """Rename the schema `old` (an older qmd's name for this index) to `new`, before the
    first write of `new`, when the evidence says it is this index's: `new` does not exist,
    no config has claimed `old` (no owner record), and every collection `old` holds is one of
    this config's `collections` (another team member's index of the same older name, with
    collections of its own, is left alone). True if renamed."""
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"qmd-migrate:{new}",))
        if schema_exists(conn, new) or not schema_exists(conn, old):
            return False
        if conn.execute(f"SELECT 1 FROM {quote_ident(old)}.meta WHERE key = 'owner'").fetchone():
            return False
        held = {str(r[0]) for r in conn.execute(f"SELECT DISTINCT collection FROM {quote_ident(old)}.documents")}
        if not held or not held <= collections:
            return False
        conn.execute(f"ALTER SCHEMA {quote_ident(old)} RENAME TO {quote_ident(new)}")
    return True


def redact(url: str) -> str:
    """The URL without its password, for messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return urlunsplit(parts._replace(netloc=netloc))
    return url


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def disk_full(said: str, location: str, dropped: bool) -> IndexAccessError:
    """The server could not write a file on its disk (SQLSTATE 53100). It rolled the transaction
    back (an ERROR), or PANICked when its write-ahead log could not grow and dropped every
    connection: then it recovers to the last commit, or stops when it has no room to finish
    recovery; or it refused a new connection whose start-up files it could not write. Either way
    the index is as it was. The disk is the server's, maybe another machine's: no `df` here can
    see it, so the fix names the server's disk, not a mount point."""
    gone = " and the database server dropped the connection" if dropped else ""
    fix = "free space on the database server's disk" + (" (and start the database server again if it stopped)" if dropped else "")
    return IndexAccessError(
        f"the disk of the database server at {location} is full{gone} (PostgreSQL says: {said}); the index is not damaged and this change was not written",
        fix, "", owner=False, hint=f"{fix}, then run the command again",
    )


def connect(url: str, schema: str, *, application: str = "qmd") -> psycopg.Connection:
    """A connection in autocommit whose search_path is the index's schema (then public, for pgvector)."""
    try:
        conn = psycopg.connect(url, autocommit=True, application_name=application[:63], connect_timeout=10)
    except psycopg.Error as exc:
        said = " ".join(str(exc).split())  # libpq's lines (a DETAIL, "Is the server running…?") as one
        if isinstance(exc, psycopg.errors.DiskFull) or getattr(exc, "sqlstate", None) == "53100" or "No space left on device" in said:
            # a running server refusing the connection: "FATAL: could not write init file: No space left on device"
            raise disk_full(said, redact(url), False) from exc
        raise QmdError(f"cannot connect to the database {redact(url)}: {said}", CONNECT_HINT) from exc
    conn.execute(f"SET search_path TO {quote_ident(schema)}, public")
    return conn


def schema_exists(conn: psycopg.Connection, schema: str) -> bool:
    row = conn.execute("SELECT to_regclass(%s) IS NOT NULL", (f"{quote_ident(schema)}.schema_migrations",)).fetchone()
    return bool(row and row[0])


def applied_migrations(conn: psycopg.Connection, schema: str) -> set[str]:
    if not schema_exists(conn, schema):
        return set()
    return {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}


def pending_migrations(conn: psycopg.Connection, schema: str) -> list[str]:
    done = applied_migrations(conn, schema)
    return [name for name, _ in MIGRATIONS if name not in done]


def migrate(conn: psycopg.Connection, schema: str) -> list[str]:
    """Create the schema (and pgvector) when missing and apply pending migrations; returns
    the names applied. Two processes creating one index at once serialize on an advisory lock."""
    if not pending_migrations(conn, schema):
        return []
    with conn.transaction():
        conn.execute("SELECT pg_advisory_xact_lock(hashtext(%s))", (f"qmd-migrate:{schema}",))
        conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
        conn.execute("CREATE TABLE IF NOT EXISTS schema_migrations (name TEXT PRIMARY KEY, applied_at TEXT NOT NULL)")
        done = {str(r[0]) for r in conn.execute("SELECT name FROM schema_migrations")}
        applied = []
        for name, sql in MIGRATIONS:
            if name in done:
                continue
            conn.execute(sql)  # trusted DDL of this module
            conn.execute("INSERT INTO schema_migrations (name, applied_at) VALUES (%s, %s)", (name, now_iso()))
            applied.append(name)
    return applied


def ensure_vector_extension(conn: psycopg.Connection) -> None:
    """pgvector in the public schema (created once per database; needs the privilege)."""
    row = conn.execute("SELECT 1 FROM pg_extension WHERE extname = 'vector'").fetchone()
    if row:
        return
    try:
        with conn.transaction():
            conn.execute("SELECT pg_advisory_xact_lock(hashtext('qmd-create-extension-vector'))")
            conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")
    except psycopg.errors.DiskFull:
        raise  # the server's disk, not pgvector: the backend names it (PostgresBackend._failure)
    except psycopg.Error as exc:
        raise QmdError(f"the database has no pgvector extension and it cannot be created: {str(exc).strip()}",
                       "install pgvector on the server, or have an administrator run: CREATE EXTENSION vector") from exc


def marks(n: int) -> str:
    return ",".join(["%s"] * n)
