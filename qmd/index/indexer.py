"""Bring one collection's rows in line with its folder: scan → diff by stat/hash → upsert.

Unchanged files (same size and mtime) are never re-read. Changed files are re-hashed;
identical content shares one `content` row (and later its vectors). Files that vanish
are soft-deleted. All writes for a collection happen in one transaction, so a crash
mid-update leaves the previous index intact.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import dataclass, field

import apsw

from qmd.store.config import CollectionConfig
from qmd.store.sqlite.connection import now_iso, transaction
from qmd.core.errors import QmdError
from qmd.index.scan import FoundFile, SkippedFile, scan
from qmd.core.text import content_hash, extract_title, parse_front_matter, segment_cjk

MAX_FILE_BYTES = 10 * 1024 * 1024
_BINARY_PROBE = 8192

Progress = Callable[[str, int], None]


@dataclass
class CollectionReport:
    """What one collection's update did; skips and warnings name the file and the reason."""

    name: str
    new: int = 0
    updated: int = 0
    unchanged: int = 0
    removed: int = 0
    skipped: list[tuple[str, str]] = field(default_factory=list)
    warnings: list[tuple[str, str]] = field(default_factory=list)
    seconds: float = 0.0


@dataclass
class Prepared:
    """A file read from disk, ready to be written to the index."""

    text: str
    hash: str
    title: str
    tags: list[str]
    body: str
    body_line: int


def prepare(text: str, rel: str) -> Prepared:
    """Split front matter from the body and derive the title (front matter > heading > name)."""
    fm = parse_front_matter(text)
    body = text[fm.body_offset :]
    title = fm.title or extract_title(body, "")
    if not title:
        name = rel.rsplit("/", 1)[-1]
        title = name.rsplit(".", 1)[0] if "." in name[1:] else name
    return Prepared(text, content_hash(text), title, fm.tags, body, fm.body_line)


def fts_values(collection: str, rel: str, doc: Prepared) -> tuple[str, str, str]:
    """The (filepath, title, body) columns of a document's FTS row."""
    title = doc.title if not doc.tags else doc.title + " " + " ".join(doc.tags)
    return segment_cjk(f"{collection}/{rel}"), segment_cjk(title), segment_cjk(doc.body)


def read_text(path: str, size_hint: int) -> tuple[str | None, str | None, str | None]:
    """(text, skip_reason, warning) for one file; never raises for file-level problems."""
    if size_hint > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB ({size_hint} bytes)", None
    try:
        with open(path, "rb") as fh:
            # Read what stat said (+1 to notice growth), not a 10 MB buffer per file.
            data = fh.read(size_hint + 1)
            if len(data) > size_hint:
                data += fh.read(MAX_FILE_BYTES + 1 - len(data))
    except OSError as exc:
        return None, f"cannot read: {exc.strerror or exc}", None
    if len(data) > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB", None
    if b"\0" in data[:_BINARY_PROBE]:
        return None, "binary file (NUL bytes)", None
    warning = None
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as exc:
        text = data.decode("utf-8", "replace")
        warning = f"invalid UTF-8 at byte {exc.start}; indexed with replacement characters"
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None, "empty file", None
    return text, None, warning


def _write_document(conn: apsw.Connection, collection: str, found: FoundFile, doc: Prepared, row_id: int | None, now: str) -> None:
    conn.execute("INSERT OR IGNORE INTO content (hash, doc, created_at) VALUES (?, ?, ?)", (doc.hash, doc.text, now))
    modified = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(found.mtime_ns / 1e9))
    tags = json.dumps(doc.tags) if doc.tags else None
    if row_id is None:
        conn.execute(
            "INSERT INTO documents (collection, path, title, hash, size, mtime_ns, body_line, tags, created_at, modified_at, active)"
            " VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, 1)",
            (collection, found.rel, doc.title, doc.hash, found.size, found.mtime_ns, doc.body_line, tags, now, modified),
        )
        row_id = conn.last_insert_rowid()
    else:
        conn.execute(
            "UPDATE documents SET title = ?, hash = ?, size = ?, mtime_ns = ?, body_line = ?, tags = ?, modified_at = ?, active = 1"
            " WHERE id = ?",
            (doc.title, doc.hash, found.size, found.mtime_ns, doc.body_line, tags, modified, row_id),
        )
        conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (row_id,))
    conn.execute(
        "INSERT INTO documents_fts (rowid, filepath, title, body) VALUES (?, ?, ?, ?)",
        (row_id, *fts_values(collection, found.rel, doc)),
    )


def check_root(coll: CollectionConfig) -> None:
    """Raise a QmdError naming the fix when a collection's folder is missing or not a folder."""
    if not coll.path.exists():
        raise QmdError(
            f"collection '{coll.name}': folder {coll.path} does not exist",
            f"restore it, or remove the collection: qmd collection remove {coll.name}",
        )
    if not coll.path.is_dir():
        raise QmdError(f"collection '{coll.name}': {coll.path} is not a folder", "point the collection at a folder of markdown files")


def index_collection(conn: apsw.Connection, coll: CollectionConfig, progress: Progress | None = None) -> CollectionReport:
    """Scan `coll`'s folder and apply the difference to the index in one transaction."""
    started = time.perf_counter()
    check_root(coll)
    report = CollectionReport(coll.name)
    existing: dict[str, tuple[int, str, int, int, int]] = {
        row[0]: (row[1], row[2], row[3], row[4], row[5])
        for row in conn.execute(
            "SELECT path, id, hash, size, mtime_ns, active FROM documents WHERE collection = ?", (coll.name,)
        )
    }
    seen: set[str] = set()
    now = now_iso()
    with transaction(conn):
        for item in scan(coll.path, coll.pattern, coll.ignore):
            if isinstance(item, SkippedFile):
                report.skipped.append((item.rel, item.reason))
                continue
            seen.add(item.rel)
            row = existing.get(item.rel)
            if row is not None and row[4] and row[2] == item.size and row[3] == item.mtime_ns:
                report.unchanged += 1
                continue
            text, skip, warning = read_text(item.path, item.size)
            if text is None:
                report.skipped.append((item.rel, skip or "unreadable"))
                seen.discard(item.rel)
                continue
            if warning:
                report.warnings.append((item.rel, warning))
            doc = prepare(text, item.rel)
            if row is not None and row[4] and row[1] == doc.hash:
                # Touched but identical: remember the new stat so the next run skips it.
                conn.execute("UPDATE documents SET size = ?, mtime_ns = ? WHERE id = ?", (item.size, item.mtime_ns, row[0]))
                report.unchanged += 1
                continue
            _write_document(conn, coll.name, item, doc, row[0] if row else None, now)
            if row is not None and row[4]:
                report.updated += 1
            else:
                report.new += 1
            if progress is not None:
                progress(item.rel, report.new + report.updated)
        for rel, row in existing.items():
            if row[4] and rel not in seen:
                conn.execute("UPDATE documents SET active = 0 WHERE id = ?", (row[0],))
                conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (row[0],))
                report.removed += 1
        conn.execute("DELETE FROM file_issues WHERE collection = ?", (coll.name,))
        for severity, items in (("skipped", report.skipped), ("warning", report.warnings)):
            for rel, reason in items:
                conn.execute(
                    "INSERT OR REPLACE INTO file_issues (collection, path, severity, reason) VALUES (?, ?, ?, ?)",
                    (coll.name, rel, severity, reason),
                )
        conn.execute(
            "INSERT INTO collection_state (name, updated_at) VALUES (?, ?)"
            " ON CONFLICT (name) DO UPDATE SET updated_at = excluded.updated_at",
            (coll.name, now),
        )
    report.seconds = time.perf_counter() - started
    return report


def drop_collection(conn: apsw.Connection, name: str) -> int:
    """Delete every row of collection `name` (documents, FTS rows, state); returns documents dropped."""
    with transaction(conn):
        ids = [row[0] for row in conn.execute("SELECT id FROM documents WHERE collection = ?", (name,))]
        for doc_id in ids:
            conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
        conn.execute("DELETE FROM documents WHERE collection = ?", (name,))
        conn.execute("DELETE FROM collection_state WHERE name = ?", (name,))
        conn.execute("DELETE FROM file_issues WHERE collection = ?", (name,))
    return len(ids)


def rename_collection_rows(conn: apsw.Connection, old: str, new: str) -> None:
    """Move rows to a new collection name, rewriting FTS rows whose filepath column changes."""
    with transaction(conn):
        rows = list(
            conn.execute(
                "SELECT d.id, d.path, c.doc FROM documents d JOIN content c ON c.hash = d.hash"
                " WHERE d.collection = ? AND d.active = 1",
                (old,),
            )
        )
        conn.execute("UPDATE documents SET collection = ? WHERE collection = ?", (new, old))
        for doc_id, rel, text in rows:
            conn.execute("DELETE FROM documents_fts WHERE rowid = ?", (doc_id,))
            conn.execute(
                "INSERT INTO documents_fts (rowid, filepath, title, body) VALUES (?, ?, ?, ?)",
                (doc_id, *fts_values(new, rel, prepare(text, rel))),
            )
        conn.execute("UPDATE collection_state SET name = ? WHERE name = ?", (new, old))
        conn.execute("UPDATE file_issues SET collection = ? WHERE collection = ?", (new, old))
