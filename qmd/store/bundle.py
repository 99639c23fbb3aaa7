"""The export file of `qmd export` / `qmd import`: one gzip'd JSON-lines stream.

Why this shape: one portable file that any machine reads with the standard library, written
and read as a stream, whose gzip trailer (CRC and length) and closing `end` record make a
truncated or altered file fail as a whole; no SQL engine ever parses a file someone sent.

Line 1 is the manifest (`format`, `version`, the qmd version, the embed model's
fingerprint, name and dims, and the collections: name, the folder's last name, pattern,
ignore rules, contexts, chunk strategy; never an absolute path or an `update:` command).
Then, content-addressed: `{"c": hash, "text": …}` once per content (before the first
document using it), `{"d": [collection, path relative to its folder, hash]}` per document,
`{"v": hash, "chunker": …, "chunks": [[seq, start, end, tokens], …], "data": base64 of
little-endian float32}` per embedded content, and last `{"end": {counts}}`.

Reading checks everything before anything is written: every hash against its text, every
path for traversal, every field's type and size, the vectors' dims and values.
"""

from __future__ import annotations

import base64
import gzip
import json
import os
import re
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any

import numpy as np

from qmd.core.errors import QmdError
from qmd.core.fileio import NotRegularFile, open_regular, refuse_read_only, replace_file
from qmd.core.text import content_hash
from qmd.backends.base import ChunkVector

FORMAT = "qmd-export"
FORMAT_VERSION = 1
MAX_LINE = 64 * 1024 * 1024  # a 10 MB note with every character escaped fits
MAX_TOTAL = 4 * 1024 * 1024 * 1024  # decompressed bytes of a whole file (a gzip bomb stops here; 38k notes are ~0.2 GB)
BOMB_RATIO = 100  # notes gzip 3-5 times, vectors 1.3: only a crafted file unpacks 100 times its size...
BOMB_FLOOR = 256 * 1024 * 1024  # ...once past this many bytes (a small file of repeated lines is fine)
MAX_TEXT = 10 * 1024 * 1024  # characters of one document (update skips files over 10 MB)
MAX_SHORT = 4096  # a path, a pattern, a name, a model name
MAX_CONTEXT = 64 * 1024
MAX_LIST = 10_000  # ignore rules, contexts, collections
MAX_DIMS = 8192
MAX_CHUNKS = 100_000
CHUNKERS = ("regex", "ast", "ast!")
_HASH = re.compile(r"^[0-9a-f]{64}$")
_FINGERPRINT = re.compile(r"^[0-9a-f]{8,64}$")


@dataclass
class ModelStamp:
    """The vector space the file's vectors belong to."""

    fingerprint: str
    name: str
    dims: int


@dataclass
class CollectionEntry:
    """A collection as exported: everything of its config but where it lives."""

    name: str
    folder: str  # the last name of its folder on the exporting machine (the default place on import)
    pattern: str
    ignore: list[str]
    include_by_default: bool
    embed: bool
    context: dict[str, str]
    chunk_strategy: str
    documents: int = 0  # read: the manifest's count (-1 when it gave none), then what the file holds


@dataclass
class Bundle:
    """A whole export file, read and checked."""

    version: int
    qmd_version: str
    model: ModelStamp | None
    collections: list[CollectionEntry]
    texts: dict[str, str] = field(default_factory=dict)  # content hash → text
    documents: dict[str, list[tuple[str, str]]] = field(default_factory=dict)  # collection → [(path, hash)]
    vectors: dict[str, tuple[str, list[ChunkVector]]] = field(default_factory=dict)  # content hash → (chunker, chunks)


def bad(path: Path, why: str) -> QmdError:
    """The one line a file that is not a sound export gets."""
    return QmdError(f"{path} is not a usable qmd export file: {why}", "export it again with: qmd export FILE (nothing was imported)")


# --- writing ---------------------------------------------------------------------------


class BundleWriter:
    """Writes an export file to a temporary name beside `path`, renamed in by `finish`: an
    interrupted export leaves no file that looks whole."""

    def __init__(self, path: Path, manifest: dict[str, Any]) -> None:
        refuse_read_only(path)  # a file the user made read-only is not replaced by a rename
        self.path = path
        self.tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
        # never through a link planted at the temporary name (a shared folder such as /tmp)
        fd = os.open(self.tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | getattr(os, "O_NOFOLLOW", 0), 0o666)
        self._raw: IO[bytes] = os.fdopen(fd, "wb")  # closed by finish/abort
        self._gz = gzip.GzipFile(fileobj=self._raw, mode="wb", compresslevel=3, mtime=0)
        self.counts = {"contents": 0, "documents": 0, "vectors": 0, "chunks": 0}
        try:
            self._line(manifest)
        except BaseException:
            self.abort()
            raise

    def _line(self, record: dict[str, Any]) -> None:
        self._gz.write(json.dumps(record, ensure_ascii=False, separators=(",", ":")).encode("utf-8", "surrogatepass") + b"\n")

    def content(self, digest: str, text: str) -> None:
        self._line({"c": digest, "text": text})
        self.counts["contents"] += 1

    def document(self, collection: str, rel: str, digest: str) -> None:
        self._line({"d": [collection, rel, digest]})
        self.counts["documents"] += 1

    def vectors(self, digest: str, chunker: str, chunks: Sequence[ChunkVector]) -> None:
        data = np.asarray([c.vector for c in chunks], dtype="<f4").tobytes()
        spans = [[c.seq, c.start, c.end, c.tokens] for c in chunks]
        self._line({"v": digest, "chunker": chunker, "chunks": spans, "data": base64.b64encode(data).decode("ascii")})
        self.counts["vectors"] += 1
        self.counts["chunks"] += len(chunks)

    def finish(self) -> None:
        self._line({"end": dict(self.counts)})
        self._gz.close()
        self._raw.flush()
        os.fsync(self._raw.fileno())
        self._raw.close()
        replace_file(self.tmp, self.path)

    def abort(self) -> None:
        """Close and remove the temporary file; never raises: closing flushes what is
        buffered, which on a full disk fails again and hid the error that stopped the export."""
        for close in (self._gz.close, self._raw.close):  # each closes its file even when its flush fails
            try:
                close()
            except OSError:
                pass
        try:
            self.tmp.unlink(missing_ok=True)
        except OSError:
            pass


# --- reading ---------------------------------------------------------------------------


def _lines(path: Path) -> Iterator[tuple[int, dict[str, Any]]]:
    """(line number, record) of every line; one QmdError for a damaged, truncated or hostile stream."""
    try:
        with open_regular(path) as raw, gzip.GzipFile(fileobj=raw, mode="rb") as fh:
            number = total = 0
            while True:
                line = fh.readline(MAX_LINE + 1)
                if not line:
                    return
                number += 1
                total += len(line)
                if total > MAX_TOTAL:
                    raise bad(path, f"it holds over {MAX_TOTAL:,} bytes uncompressed")
                if total > BOMB_FLOOR and total > BOMB_RATIO * raw.tell():
                    raise bad(path, f"it unpacks to over {BOMB_RATIO} times its size (a decompression bomb)")
                if len(line) > MAX_LINE:
                    raise bad(path, f"line {number} is over {MAX_LINE // (1024 * 1024)} MB")
                if not line.endswith(b"\n"):
                    raise bad(path, f"line {number} is cut short (the file is truncated)")
                try:
                    record = json.loads(line)
                except (ValueError, RecursionError) as exc:
                    raise bad(path, f"line {number} is not JSON ({str(exc)[:80]})") from None
                if not isinstance(record, dict):
                    raise bad(path, f"line {number} is not a record")
                yield number, record
    except (EOFError, gzip.BadGzipFile, zlib.error) as exc:
        raise bad(path, f"damaged or truncated ({str(exc)[:80] or type(exc).__name__})") from None
    except OSError as exc:
        if isinstance(exc, FileNotFoundError):
            raise QmdError(f"{path} does not exist", "give the path of a file written by qmd export") from None
        if isinstance(exc, NotRegularFile):
            raise QmdError(f"{path} is not a regular file (a pipe, device or folder)", "save the export to a file first, then import that file (nothing was imported)") from None
        from qmd.core.fileio import denial

        refused = denial(exc, f"cannot import {path}")
        if refused is not None:  # a mode or an owner: the file may be sound
            raise QmdError(refused[0], f"{refused[1]} (nothing was imported)") from None
        raise bad(path, f"cannot be read: {exc.strerror or exc}") from None


_CONTROL = re.compile(r"[\x00-\x08\x0b\x0c\x0e-\x1f\x7f\x9b]")  # all but tab and line ends (terminal escapes start with ESC or CSI)


def _text(value: object, limit: int, what: str, path: Path, *, nul: bool = False, control: bool = True) -> str:
    """`value` as checked text: a string within `limit`, valid UTF-8 (no lone surrogate: no
    index stores one), without NUL unless `nul`, and without control characters unless
    `control` (a setting's text is shown on terminals and to agents: no escape sequences)."""
    if not isinstance(value, str):
        raise bad(path, f"{what} is not text")
    if len(value) > limit:
        raise bad(path, f"{what} is over {limit:,} characters")
    if not nul and "\x00" in value:
        raise bad(path, f"{what} holds a NUL character")
    if not control and _CONTROL.search(value):
        raise bad(path, f"{what} holds a control character")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise bad(path, f"{what} holds a character that is not UTF-8 (a lone surrogate)") from None
    return value


def _setting(value: object, limit: int, what: str, path: Path) -> str:
    """A setting's text (name, pattern, rule, context): `_text` without control characters."""
    return _text(value, limit, what, path, control=False)


def _int(value: object, low: int, high: int, what: str, path: Path) -> int:
    if not isinstance(value, int) or isinstance(value, bool) or not low <= value <= high:
        raise bad(path, f"{what} is not a number from {low} to {high}")
    return value


def safe_relative(rel: str) -> bool:
    """Whether `rel` is a plain path inside a folder: no root, drive, `..`, `.` or empty part,
    no backslash or control character (what an update could have stored)."""
    if not rel or rel.startswith("/") or "\\" in rel or any(ord(ch) < 32 for ch in rel):
        return False
    parts = rel.split("/")
    return all(p not in ("", ".", "..") for p in parts) and not re.match(r"^[A-Za-z]:", rel)


def _manifest(record: dict[str, Any], path: Path) -> Bundle:
    from qmd.store.collections import check_collection_name

    if record.get("format") != FORMAT:
        raise bad(path, "its first line is not a qmd export manifest")
    version = record.get("version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise bad(path, "its format version is missing")
    qmd_version = _setting(record.get("qmd", ""), MAX_SHORT, "the qmd version", path)
    if version > FORMAT_VERSION:
        raise QmdError(
            f"{path} was written by a newer qmd ({qmd_version or 'unknown'}, export format {version}; this qmd reads up to {FORMAT_VERSION})",
            "upgrade qmd here, or export it with this qmd's version",
        )
    model = None
    raw_model = record.get("model")
    if raw_model is not None:
        if not isinstance(raw_model, dict):
            raise bad(path, "its model is not a record")
        fp = _text(raw_model.get("fingerprint"), 64, "the model fingerprint", path)
        if not _FINGERPRINT.match(fp):
            raise bad(path, "the model fingerprint is not hex")
        model = ModelStamp(fp, _setting(raw_model.get("name"), MAX_SHORT, "the model name", path), _int(raw_model.get("dims"), 1, MAX_DIMS, "dims", path))
    raw = record.get("collections")
    if not isinstance(raw, list) or len(raw) > MAX_LIST:
        raise bad(path, "its collections are not a list")
    collections: list[CollectionEntry] = []
    for item in raw:
        if not isinstance(item, dict):
            raise bad(path, "a collection is not a record")
        name = _text(item.get("name"), 64, "a collection name", path)
        try:
            check_collection_name(name)
        except QmdError:
            raise bad(path, f"invalid collection name {name[:64]!r}") from None
        if any(c.name == name for c in collections):
            raise bad(path, f"collection '{name}' appears twice")
        folder = _text(item.get("folder", name), 255, "a folder name", path)
        if not safe_relative(folder) or "/" in folder:
            folder = name
        ignore = item.get("ignore", [])
        context = item.get("context", {})
        if not isinstance(ignore, list) or len(ignore) > MAX_LIST or not isinstance(context, dict) or len(context) > MAX_LIST:
            raise bad(path, f"collection '{name}': ignore rules or contexts are malformed")
        strategy = item.get("chunk_strategy", "regex")
        if strategy not in ("regex", "auto"):
            raise bad(path, f"collection '{name}': unknown chunk strategy")
        include, embed = item.get("include_by_default", True), item.get("embed", True)
        if not isinstance(include, bool) or not isinstance(embed, bool):
            raise bad(path, f"collection '{name}': includeByDefault or embed is not true/false")
        contexts = {}
        for key, value in context.items():
            key = _setting(key, MAX_SHORT, "a context's folder", path)
            if ".." in key.replace("\\", "/").split("/"):
                raise bad(path, f"collection '{name}': a context names a folder outside it")
            contexts[key] = _setting(value, MAX_CONTEXT, "a context", path)
        collections.append(
            CollectionEntry(
                name, folder, _setting(item.get("pattern", "**/*.md"), MAX_SHORT, "a pattern", path) or "**/*.md",
                [_setting(g, MAX_SHORT, "an ignore rule", path) for g in ignore], include, embed, contexts, str(strategy),
                listed if isinstance(listed := item.get("documents"), int) and not isinstance(listed, bool) and listed >= 0 else -1,
            )
        )
    return Bundle(version, qmd_version, model, collections)


def _vectors(record: dict[str, Any], bundle: Bundle, number: int, path: Path) -> None:
    where = f"line {number}"
    digest = record.get("v")
    if not isinstance(digest, str) or digest not in bundle.texts:
        raise bad(path, f"{where}: vectors of content the file does not hold")
    if digest in bundle.vectors:
        raise bad(path, f"{where}: vectors of the same content twice")
    if bundle.model is None:
        raise bad(path, f"{where}: vectors without a model in the manifest")
    chunker = record.get("chunker")
    if chunker not in CHUNKERS:
        raise bad(path, f"{where}: unknown chunker")
    spans = record.get("chunks")
    if not isinstance(spans, list) or len(spans) > MAX_CHUNKS:
        raise bad(path, f"{where}: chunks are not a list")
    length = len(bundle.texts[digest])
    try:
        data = base64.b64decode(_text(record.get("data"), MAX_LINE, "vector data", path), validate=True)
    except ValueError:
        raise bad(path, f"{where}: vector data is not base64") from None
    dims = bundle.model.dims
    if len(data) != len(spans) * dims * 4:
        raise bad(path, f"{where}: {len(data) // 4} numbers for {len(spans)} chunks of {dims} dims (wrong dims)")
    matrix = np.frombuffer(data, dtype="<f4").reshape(len(spans), dims) if spans else np.zeros((0, dims), dtype="<f4")
    if not np.isfinite(matrix).all():
        raise bad(path, f"{where}: a vector holds NaN or infinity")
    # 4 bytes a number, as in the file: lists of Python floats took 32 (a 100 KB file of
    # zeros held 750 MB; one at MAX_TOTAL, tens of GB)
    numbers = memoryview(matrix.astype("=f4").tobytes()).cast("f")
    chunks = []
    seqs: set[int] = set()
    for i, span in enumerate(spans):
        if not isinstance(span, list) or len(span) != 4:
            raise bad(path, f"{where}: a chunk is not [seq, start, end, tokens]")
        seq, start, end, tokens = (_int(v, 0, max(length, MAX_CHUNKS), f"{where}: a chunk's span", path) for v in span)
        if start > end or end > length:
            raise bad(path, f"{where}: a chunk lies outside its text")
        if seq in seqs:
            raise bad(path, f"{where}: chunk {seq} appears twice")
        seqs.add(seq)
        chunks.append(ChunkVector(digest, seq, start, end, tokens, numbers[i * dims : (i + 1) * dims]))
    bundle.vectors[digest] = (str(chunker), chunks)


def read_bundle(path: Path) -> Bundle:
    """The whole file, checked; a QmdError naming the first problem (nothing is written before)."""
    bundle: Bundle | None = None
    names: set[str] = set()
    seen: set[tuple[str, str]] = set()
    ended: dict[str, Any] | None = None
    for number, record in _lines(path):
        if bundle is None:
            bundle = _manifest(record, path)
            names = {c.name for c in bundle.collections}
            bundle.documents = {n: [] for n in names}
            continue
        if ended is not None:
            raise bad(path, f"line {number} comes after the end record")
        if "c" in record:
            digest = record["c"]
            if not isinstance(digest, str) or not _HASH.match(digest):
                raise bad(path, f"line {number}: a content hash is not 64 hex digits")
            text = _text(record.get("text"), MAX_TEXT, f"line {number}: the text", path)
            if content_hash(text) != digest:
                raise bad(path, f"line {number}: the text does not match its hash")
            bundle.texts[digest] = text
        elif "d" in record:
            item = record["d"]
            if not isinstance(item, list) or len(item) != 3:
                raise bad(path, f"line {number}: a document is not [collection, path, hash]")
            coll, rel, digest = item
            if not isinstance(coll, str) or coll not in names:
                raise bad(path, f"line {number}: a document of a collection the manifest does not list")
            rel = _text(rel, MAX_SHORT, f"line {number}: a path", path)
            if not safe_relative(rel):
                raise bad(path, f"line {number}: the path {rel[:80]!r} is not inside its collection")
            if not isinstance(digest, str) or digest not in bundle.texts:
                raise bad(path, f"line {number}: a document whose content the file does not hold")
            if (coll, rel) in seen:
                raise bad(path, f"line {number}: {coll}/{rel[:80]} appears twice")
            seen.add((coll, rel))
            bundle.documents[coll].append((rel, digest))
        elif "v" in record:
            _vectors(record, bundle, number, path)
        elif "end" in record and isinstance(record["end"], dict):
            ended = record["end"]
        else:
            raise bad(path, f"line {number} is of an unknown kind")
    if bundle is None:
        raise bad(path, "it is empty")
    if ended is None:
        raise bad(path, "it has no end record (the file is truncated)")
    got = {"contents": len(bundle.texts), "documents": len(seen), "vectors": len(bundle.vectors)}
    if any(ended.get(k) != v for k, v in got.items()):
        raise bad(path, "its counts do not match its end record")
    for coll in bundle.collections:
        held = len(bundle.documents[coll.name])
        if coll.documents not in (-1, held):  # -1: the manifest gave no count  # an export that read a collection renamed away under it wrote its entry and none of its documents
            raise bad(path, f"its collection '{coll.name}' has {held} documents where its manifest says {coll.documents} (an export the index changed under)")
        coll.documents = held
    return bundle
