"""Bring one collection's rows in line with its folder: scan → diff by stat/hash → upsert.

Unchanged files (same size and mtime) are never re-read. Changed files are re-hashed;
identical content shares one `content` row (and later its vectors). Files that vanish
are soft-deleted. All writes for a collection happen in one transaction, so a crash
mid-update leaves the previous index intact.
"""

from __future__ import annotations

import os
import re
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TypeVar

from qmd.core.errors import QmdError
from qmd.core.fileio import NotRegularFile, open_regular
from qmd.core.filters import document_date_ns
from qmd.core.text import content_hash, extract_title, parse_front_matter, segment_cjk
from qmd.index.scan import SkippedFile, scan
from qmd.backends.base import DocumentWrite, IndexBackend, SearchFields
from qmd.backends.rows import KnownFile
from qmd.core.config import CollectionConfig

MAX_FILE_BYTES = 10 * 1024 * 1024
_BINARY_PROBE = 8192  # a NUL byte in the first 8 KB: binary (as git decides)
# Characters no text is made of: C0 controls but tab, newline, CR, VT, FF, backspace (man-page
# overstrike), ESC and BEL (ANSI colours and links of terminal output), and DEL.
_CONTROL = re.compile("[\x00-\x06\x0e-\x1a\x1c-\x1f\x7f]")
_CONTROL_BYTES = bytes(range(0x00, 0x07)) + bytes(range(0x0E, 0x1B)) + bytes(range(0x1C, 0x20)) + b"\x7f"
_CONTROL_SHARE = 0.05  # random bytes hold about 10% of them; text next to none
# Legacy 8-bit text (Windows-1252, KOI8-R, Shift-JIS) is mostly invalid UTF-8 too, but holds no
# control character; random bytes hold some, of the C1 controls too (by chance valid UTF-8).
# (C1 controls alone are no sign: mojibake, UTF-8 read as Latin-1 and saved again, is full of them.)
_C1 = re.compile("[\x80-\x9f]")
_INVALID_SHARE, _INVALID_CONTROL_SHARE = 0.25, 0.002
_PRIVATE_USE = re.compile("[\ue000-\uf8ff]")
_PRIVATE_SHARE = 0.01
_BOMS = ((b"\xff\xfe\x00\x00", "utf-32-le"), (b"\x00\x00\xfe\xff", "utf-32-be"), (b"\xff\xfe", "utf-16-le"), (b"\xfe\xff", "utf-16-be"))

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
    matched_nothing: bool = False  # the pattern found no file at all (a typo, a wrong folder?)
    pattern: str = ""


@dataclass
class Prepared:
    """A file read from disk, ready to be written to the index."""

    text: str
    hash: str
    title: str
    tags: list[str]
    body: str
    body_line: int
    metadata: dict[str, object] = field(default_factory=dict)
    front_text: str = ""  # the front matter's keys and values as words


def prepare(text: str, rel: str) -> Prepared:
    """Split front matter from the body and derive the title (front matter > heading > name),
    the typed metadata (top-level keys, then the `qmd: metadata:` block) and its words."""
    fm = parse_front_matter(text)
    body = text[fm.body_offset :]
    title = fm.title or extract_title(body, "")
    if not title:
        name = rel.rsplit("/", 1)[-1]
        title = name.rsplit(".", 1)[0] if "." in name[1:] else name
    metadata: dict[str, object] = {}
    front = ""
    tags = fm.tags
    if fm.meta:
        from qmd.core.filters import extract_metadata, front_matter_text

        metadata, front = extract_metadata(fm.meta), front_matter_text(fm.meta)
    if "\x00" in title or "\x00" in front or any("\x00" in t for t in tags):
        # a YAML escape ("\0") in the front matter: the file holds no NUL, its values would
        # (PostgreSQL cannot store one; no filter can name one)
        title, front, tags = _no_nul(title), _no_nul(front), [_no_nul(t) for t in tags]
        metadata = {_no_nul(k): _no_nul(v) for k, v in metadata.items()}
    return Prepared(text, content_hash(text), title, tags, body, fm.body_line, metadata, front)


T = TypeVar("T")


def _no_nul(value: T) -> T:
    """`value` without NUL characters (strings, and the strings of lists)."""
    if isinstance(value, str):
        return value.replace("\x00", "")  # type: ignore[return-value]
    if isinstance(value, list):
        return [_no_nul(v) for v in value]  # type: ignore[return-value]
    return value


def fts_values(collection: str, rel: str, doc: Prepared) -> SearchFields:
    """The full-text fields of a document: collection/path, title (+ tags), body (after the
    front matter's words, so `owner: platform-team` is found by "platform-team").

    CJK runs are split into characters, so any word inside one is searchable.
    """
    title = doc.title if not doc.tags else doc.title + " " + " ".join(doc.tags)
    body = f"{doc.front_text}\n{doc.body}" if doc.front_text else doc.body
    return SearchFields(segment_cjk(f"{collection}/{rel}"), segment_cjk(title), segment_cjk(body))


def _opened_path(fd: int, path: str) -> str | None:
    """The real path of the file `fd` is open on, or None when it cannot be told.

    Linux names it in /proc; elsewhere the path is resolved again and must be the same
    file (device and inode) as the one opened.
    """
    try:
        return os.readlink(f"/proc/self/fd/{fd}")
    except OSError:
        pass
    real = os.path.realpath(path)
    try:
        here, there = os.fstat(fd), os.stat(real)
    except OSError:
        return None
    return real if (here.st_dev, here.st_ino) == (there.st_dev, there.st_ino) else None


CANNOT_READ = "cannot read: "  # read_text's reason when the file is there but could not be read (kept as indexed)


def read_text(path: str, size_hint: int, root: str | None = None) -> tuple[str | None, str | None, str | None]:
    """(text, skip_reason, warning) for one file; never raises for file-level problems.

    With `root` (the collection's real path), what was actually opened must lie inside it:
    a symlink flipped to a file outside between the scan and the read is refused, and a
    file replaced by a FIFO is not waited on.
    """
    if size_hint > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB ({size_hint} bytes)", None
    try:
        with open_regular(path) as fh:
            if root is not None:
                opened = _opened_path(fh.fileno(), path)
                if opened is None or not (opened == root or opened.startswith(root.rstrip(os.sep) + os.sep)):
                    return None, "symlink points outside the collection root", None
            # Read what stat said (+1 to notice growth), not a 10 MB buffer per file.
            data = fh.read(size_hint + 1)
            if len(data) > size_hint:
                data += fh.read(MAX_FILE_BYTES + 1 - len(data))
    except NotRegularFile:
        return None, "not a regular file", None
    except OSError as exc:
        return None, f"{CANNOT_READ}{exc.strerror or exc}", None
    if len(data) > MAX_FILE_BYTES:
        return None, f"larger than {MAX_FILE_BYTES // (1024 * 1024)} MB", None
    return decode_text(data)


def decode_text(data: bytes) -> tuple[str | None, str | None, str | None]:
    """(text, skip_reason, warning) of a file's bytes: UTF-8, or UTF-16/32 with a byte order mark.

    Binary, skipped: a NUL byte in the first 8 KB; more than 5% control characters (not tab,
    newline, CR, VT, FF, backspace, ESC or BEL); 25% invalid UTF-8 with 0.2% control characters
    (C1 too); a UTF-16/32 mark before anything but valid text. Text with a few invalid bytes
    (Windows-1252 in a UTF-8 file) is indexed with replacement characters and a warning.
    """
    warning = None
    encoding = next((name for bom, name in _BOMS if data.startswith(bom)), None)
    if encoding is not None:
        label = encoding[:6].upper()
        try:
            text = data.decode(encoding)  # the mark becomes U+FEFF, dropped below
        except UnicodeDecodeError as exc:
            return None, f"binary file (a {label} byte order mark, then invalid {label} at byte {exc.start})", None
        private = _PRIVATE_USE.subn("", text)[1]
        if private > len(text) * _PRIVATE_SHARE:  # random bytes read as UTF-16: 10% of them
            return None, f"binary file (a {label} byte order mark, then {_percent(private / len(text))} private-use characters)", None
        invalid = 0
    else:
        if b"\0" in data[:_BINARY_PROBE]:
            return None, "binary file (NUL bytes)", None
        try:
            text = data.decode("utf-8")
            invalid = 0
        except UnicodeDecodeError as exc:
            text = data.decode("utf-8", "replace")
            invalid = text.count("\ufffd") - data.count("\ufffd".encode())
            warning = f"invalid UTF-8 at byte {exc.start}; indexed with replacement characters"
    if text.startswith("\ufeff"):
        text = text[1:]
    if not text.strip():
        return None, "empty file", None
    # Valid UTF-8 without a control byte is text: told by a byte count, 4x faster than the regex.
    plain = encoding is None and not invalid and len(data.translate(None, _CONTROL_BYTES)) == len(data)
    reason = None if plain else binary_reason(text, invalid)
    if reason is not None:
        return None, reason, None
    if "\x00" in text:  # past the probe, or in UTF-16/32: a stray NUL no index should hold (PostgreSQL cannot)
        text = text.replace("\x00", "\ufffd")
        warning = (warning + "; " if warning else "") + "NUL characters read as U+FFFD"
    return text, None, warning


def binary_reason(text: str, invalid: int = 0) -> str | None:
    """Why decoded `text` (with `invalid` undecodable UTF-8 sequences) is binary, or None: it is text."""
    controls = _CONTROL.subn("", text)[1]
    if controls > len(text) * _CONTROL_SHARE:
        return f"binary file ({_percent(controls / len(text))} control characters)"
    if invalid >= len(text) * _INVALID_SHARE:
        controls += _C1.subn("", text)[1]
        if controls >= len(text) * _INVALID_CONTROL_SHARE:
            return f"binary file ({_percent(invalid / len(text))} invalid UTF-8, {_percent(controls / len(text))} control characters)"
    return None


def _percent(share: float) -> str:
    return f"{share:.0%}" if share >= 0.01 else f"{share:.1%}"


def check_root(coll: CollectionConfig) -> None:
    """Raise a QmdError naming the fix when a collection's folder is missing, not a folder, or not listable."""
    if not coll.path.exists():
        raise QmdError(
            f"collection '{coll.name}': folder {coll.path} does not exist",
            f"restore it, or remove the collection: qmd collection remove {coll.name}",
        )
    if not coll.path.is_dir():
        raise QmdError(f"collection '{coll.name}': {coll.path} is not a folder", "point the collection at a folder of markdown files")
    try:
        with os.scandir(coll.path):
            pass
    except OSError as exc:  # unlistable to this user: as a missing folder, refused (nothing indexed is dropped)
        raise QmdError(f"collection '{coll.name}': cannot list {coll.path}: {exc.strerror or exc}", f"make it readable to you (chmod u+rx {coll.path}), or run as its owner") from None


def search_fields(collection: str, rel: str, text: str) -> SearchFields:
    """The full-text fields of a stored document (what renames and FTS repairs rewrite)."""
    return fts_values(collection, rel, prepare(text, rel))


def _keep(existing: Mapping[str, KnownFile], seen: set[str], rel: str, folder: bool) -> str:
    """Keep the indexed document at `rel` (or, for a folder, every one below it; "." is the
    root) as it is: counted as seen, so not removed. Returns the words the skip reason gains."""
    if not folder:
        row = existing.get(rel)
        if row is None or not row.active:
            return ""
        seen.add(rel)
        return "; its indexed version is kept"
    below = [name for name, row in existing.items() if row.active and (rel == "." or name.startswith(rel + "/"))]
    seen.update(below)
    return f"; what is indexed below it ({len(below)} document{'s' if len(below) != 1 else ''}) is kept as it was" if below else ""


def index_collection(backend: IndexBackend, coll: CollectionConfig, progress: Progress | None = None) -> CollectionReport:
    """Scan `coll`'s folder and apply the difference to the index in one transaction."""
    started = time.perf_counter()
    check_root(coll)
    report = CollectionReport(coll.name, pattern=coll.pattern)
    root = os.path.realpath(coll.path)
    with backend.collection_writer(coll.name) as writer:
        existing = writer.known()
        previous = writer.issues()
        seen: set[str] = set()
        matched = 0
        for item in scan(coll.path, coll.pattern, coll.ignore):
            if isinstance(item, SkippedFile):
                report.skipped.append((item.rel, item.reason + _keep(existing, seen, item.rel, item.folder) if item.kept else item.reason))
                continue
            seen.add(item.rel)
            matched += 1
            row = existing.get(item.rel)
            if row is not None and row.active and row.current and row.size == item.size and row.mtime_ns == item.mtime_ns:
                report.unchanged += 1
                # Not read again, so a warning about it (invalid UTF-8) stands until the file changes.
                if previous.get(item.rel, ("", ""))[0] == "warning":
                    report.warnings.append((item.rel, previous[item.rel][1]))
                continue
            text, skip, warning = read_text(item.path, item.size, root)
            if text is None:
                if skip is not None and skip.startswith(CANNOT_READ):  # there, not readable now: its indexed version stands
                    seen.discard(item.rel)
                    report.skipped.append((item.rel, skip + _keep(existing, seen, item.rel, False)))
                    continue
                report.skipped.append((item.rel, skip or "unreadable"))
                seen.discard(item.rel)
                continue
            if warning:
                report.warnings.append((item.rel, warning))
            doc = prepare(text, item.rel)
            if row is not None and row.active and row.current and row.hash == doc.hash:
                # Touched but identical: remember the new stat so the next run skips it.
                writer.touch(row.id, item.size, item.mtime_ns)
                report.unchanged += 1
                continue
            writer.put(
                DocumentWrite(
                    item.rel, text, doc.hash, doc.title, doc.tags, doc.body_line, item.size, item.mtime_ns, fts_values(coll.name, item.rel, doc),
                    doc.metadata, document_date_ns(doc.metadata),
                ),
                row.id if row else None,
            )
            if row is not None and row.active and not row.current and row.hash == doc.hash:
                report.unchanged += 1  # read again for its metadata (an index from before metadata), not changed
            elif row is not None and row.active:
                report.updated += 1
            else:
                report.new += 1
            if progress is not None:
                progress(item.rel, report.new + report.updated)
        if matched == 0 and not report.skipped:
            report.matched_nothing = True
        for rel, known in existing.items():
            if known.active and rel not in seen:
                writer.deactivate(known.id)
                report.removed += 1
        writer.set_issues([(rel, "skipped", reason) for rel, reason in report.skipped] + [(rel, "warning", reason) for rel, reason in report.warnings])
    report.seconds = time.perf_counter() - started
    return report
