"""Find documents by reference: qmd:// URI, collection/path, file path, or #docid prefix."""

from __future__ import annotations

import os
import posixpath
import re
from bisect import bisect_left
from collections.abc import Mapping, Sequence
from pathlib import Path

TYPE_CHECKING = False  # typing stays unimported on the lean search path (test_fast_path)

from qmd.core.errors import NotFoundError, QmdError
from qmd.backends.base import MIN_DOCID, DocRow, IndexBackend, Removed
from qmd.core.clock import ago
from qmd.core.config import CollectionConfig

# Patterns, compiled by `re` (and kept in its cache) when first used: a search never parses
# a reference, and compiling these four took 0.35 ms of every stdio server's first answer.
_RANGE = r"(?s)^(?P<ref>.+?)(?::(?P<start>[0-9]+)(?::(?P<count>[0-9]+))?)?$"  # ASCII digits only
_HEX = r"^[0-9a-fA-F]+$"
_NEGATIVE_RANGE = r":(?:-[0-9]+(?::-?[0-9]+)?|[0-9]+:-[0-9]+)$"  # `a.md:-1`, `a.md:3:-2`


_INDEXED = r"(?s)^(?P<ref>qmd://[^?]*)\?index=(?P<index>[^:?,]+)(?P<range>(?::-?[0-9]+){0,2})$"


def split_index(ref: str) -> tuple[str, str | None]:
    """A URI as qmd prints it for a named index, `qmd://c/p?index=NAME[:FROM[:COUNT]]` →
    (`qmd://c/p[:FROM[:COUNT]]`, NAME); any other reference → (ref, None)."""
    match = re.match(_INDEXED, ref.strip())
    if not match:
        return ref, None
    return match["ref"] + match["range"], match["index"]


def strip_indexes(pattern: str) -> tuple[str, set[str]]:
    """`pattern` (one reference or a comma list) with each `?index=NAME` taken out, and the names."""
    parts, names = [], set()
    for part in pattern.split(","):
        ref, index = split_index(part)
        parts.append(ref.strip() if index is not None else part)
        if index is not None:
            names.add(index)
    return ",".join(parts), names


def split_range(ref: str) -> tuple[str, int | None, int | None]:
    """`path:from:count` → (path, from, count); either number may be absent."""
    match = re.match(_RANGE, ref.strip())
    if not match:
        return ref, None, None
    if match["start"] is None and (negative := re.search(_NEGATIVE_RANGE, match["ref"])):
        raise QmdError(f"line numbers start at 1, and a count is 0 or more: '{negative.group()}' in {ref.strip()[:200]}",
                       "write FILE:FROM or FILE:FROM:COUNT, e.g. notes/a.md:1:20 (the first 20 lines)")
    start = _number(match["start"]) if match["start"] else None
    count = _number(match["count"]) if match["count"] else None
    return match["ref"], start, count


LINE_MAX = 10**18  # beyond any file's lines: a longer number means the same (and Python refuses
# to convert one of over 4,300 digits)


if TYPE_CHECKING:  # Finder is a type only
    from typing import Protocol

    class Finder(Protocol):
        """What resolving a reference reads: an IndexBackend, or a `Snapshot` of it."""

        def find(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]: ...

        def removed(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[Removed]: ...


SUGGESTED = 20  # names of one Snapshot that get did-you-mean suggestions (each compares with every document)


class Snapshot:
    """The active and removed documents, read once, answering `find` and `removed` as the
    backend does (same filters, same order): multi-get resolves thousands of names with two
    queries instead of several each, and a missing name no longer reads every document for
    its suggestions (87 ms a name with 1,000 documents). The first `SUGGESTED` missing names
    get suggestions; the rest the plain hint."""

    def __init__(self, backend: Finder) -> None:
        self._rows = backend.find()
        self._gone = backend.removed()
        self._keys: dict[tuple[str | None, str | None], list[int]] = {}
        for i, r in enumerate(self._rows):
            for key in ((r.collection, r.path), (None, r.path), (r.collection, None)):
                self._keys.setdefault(key, []).append(i)
        self._hashes = sorted((r.hash, i) for i, r in enumerate(self._rows))
        self._uris: tuple[int, list[str]] | None = None
        self.suggestions_left = SUGGESTED

    def find(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
        every = collection is None and path is None
        picked: Sequence[int] = range(len(self._rows)) if every else self._keys.get((collection, path), [])
        if hash_prefix is not None:
            low, high = bisect_left(self._hashes, (hash_prefix,)), bisect_left(self._hashes, (hash_prefix + "g",))
            wanted = {i for _, i in self._hashes[low:high]}
            picked = sorted(wanted) if every else [i for i in picked if i in wanted]
        return [self._rows[i] for i in picked]

    def removed(self, *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[Removed]:
        return [
            r for r in self._gone
            if (collection is None or r.collection == collection) and (path is None or r.path == path) and (hash_prefix is None or r.hash.startswith(hash_prefix))
        ]

    def uris(self, collections: Mapping[str, CollectionConfig]) -> list[str]:
        """`qmd://` URIs of the served documents (kept for the collections it was asked for)."""
        if self._uris is None or self._uris[0] != id(collections):
            self._uris = (id(collections), [f"qmd://{r.collection}/{r.path}" for r in served(self, collections)])
        return self._uris[1]


def _number(digits: str) -> int:
    """A line number or count as typed; any past LINE_MAX is LINE_MAX."""
    return LINE_MAX if len(digits) > 18 else int(digits)


def served(backend: Finder, collections: Mapping[str, CollectionConfig], *, collection: str | None = None, path: str | None = None, hash_prefix: str | None = None) -> list[DocRow]:
    """Active documents matching the fields, in configured collections only: rows of a
    collection removed from the config are never served."""
    return [r for r in backend.find(collection=collection, path=path, hash_prefix=hash_prefix) if r.collection in collections]


def by_docid(backend: Finder, prefix: str, collections: Mapping[str, CollectionConfig]) -> DocRow:
    """The document whose content hash starts with `prefix` (≥ 6 hex digits)."""
    prefix = prefix.lstrip("#").lower()
    if len(prefix) < MIN_DOCID or not re.match(_HEX, prefix):
        raise QmdError(f"'#{prefix}' is not a docid", f"a docid is at least {MIN_DOCID} hex digits, as printed by qmd search")
    rows = served(backend, collections, hash_prefix=prefix)
    if not rows:
        gone = [r for r in backend.removed(hash_prefix=prefix) if r.collection in collections]
        if len({r.hash for r in gone}) == 1 and len(gone) == 1:
            raise removed_error(gone[0], f"#{prefix} (qmd://{gone[0].collection}/{gone[0].path})")
        raise NotFoundError(f"no document with docid #{prefix}", "run qmd search to find current docids (a docid changes when the file changes)")
    hashes = sorted({r.hash for r in rows})
    if len(hashes) > 1:
        listing = ", ".join(f"#{h[:len(prefix) + 2]} {r.collection}/{r.path}" for h in hashes for r in rows if r.hash == h)
        raise QmdError(f"docid #{prefix} is ambiguous: {listing}", "give more hex digits")
    return rows[0]


def collection_of_path(collections: Mapping[str, CollectionConfig], path: str, *, real: bool = True) -> tuple[str, str] | None:
    """(collection, relative path) for a file-system path inside a collection's folder
    (`real=False`: by the spellings alone, the file system untouched)."""
    from qmd.core.paths import within  # not at import: qmd.core.paths compiles its name pattern (a get parses no path)

    resolved = os.path.realpath if real else os.path.normpath
    real_path = resolved(path)
    best: tuple[str, str] | None = None
    best_len = -1
    for name, coll in collections.items():
        root = resolved(str(coll.path))
        if within(real_path, root) and len(root) > best_len:
            rel = os.path.relpath(real_path, root).replace(os.sep, "/")
            best, best_len = (name, "" if rel == "." else rel), len(root)
    return best


def _clean_rel(rel: str, ref: str) -> str:
    norm = posixpath.normpath(rel.lstrip("/")) if rel else ""
    if norm == ".." or norm.startswith("../"):
        raise QmdError(f"'{ref}' leaves its collection", "use a path inside the collection")
    return "" if norm == "." else norm


def suggestions(backend: Finder, ref: str, collections: Mapping[str, CollectionConfig], limit: int = 5) -> list[str]:
    """Up to `limit` active document paths that look like `ref` (by file name, then path)."""
    import difflib

    uris = backend.uris(collections) if isinstance(backend, Snapshot) else [f"qmd://{r.collection}/{r.path}" for r in served(backend, collections)]
    tail = ref.rstrip("/").rsplit("/", 1)[-1].lower()
    stem = tail.rsplit(".", 1)[0]
    names = {u: u.rsplit("/", 1)[-1].lower() for u in uris}
    contains = [u for u in uris if len(stem) >= 3 and stem in names[u]]
    close_names = set(difflib.get_close_matches(tail, list(set(names.values())), n=limit, cutoff=0.75))
    close = [u for u in uris if names[u] in close_names]
    out: list[str] = []
    for u in contains + close:
        if u not in out:
            out.append(u)
    return out[:limit]


def not_found(backend: Finder, ref: str, collections: Mapping[str, CollectionConfig], suffix: str = "") -> NotFoundError:
    """"document not found", with up to 5 similar documents as the hint (each with `suffix`,
    the line range the user typed, so that the suggestion can be pasted back as it is); a
    document whose file was gone at an update is said to be removed instead."""
    gone = _removed_at(backend, ref, collections)
    if gone is not None:
        return gone
    similar: list[str] = []
    if not isinstance(backend, Snapshot):
        similar = suggestions(backend, ref, collections)
    elif backend.suggestions_left > 0:
        backend.suggestions_left -= 1
        similar = suggestions(backend, ref, collections)
    hint = ("did you mean: " + ", ".join(s + suffix for s in similar)) if similar else "list documents with: qmd ls"
    return NotFoundError(f"document not found: {ref}{suffix}", hint)


def _removed_at(backend: Finder, ref: str, collections: Mapping[str, CollectionConfig]) -> NotFoundError | None:
    """The error for a reference naming a document removed at an update (its file gone), or None."""
    name, rel = "", ref.strip()
    if rel.startswith("qmd://"):
        name, _, rel = rel[len("qmd://") :].partition("/")
    elif os.path.isabs(rel):
        located = collection_of_path(collections, os.path.normpath(rel), real=False)
        if located is None:
            return None
        name, rel = located
    elif rel.partition("/")[0] in collections and rel.partition("/")[2]:
        name, _, rel = rel.partition("/")
    try:
        path = _clean_rel(rel, ref)
    except QmdError:
        return None
    rows = [r for r in backend.removed(collection=name or None, path=path) if r.collection in collections] if path else []
    if len(rows) != 1:
        return None
    return removed_error(rows[0], f"qmd://{rows[0].collection}/{rows[0].path}")


def removed_error(row: Removed, named: str) -> NotFoundError:
    """"`named` was removed", with when, for a document whose file was gone at an update."""
    import shlex  # here: only this error quotes

    when = f" at the update of {row.removed_at.replace('T', ' ').replace('Z', ' UTC')} ({ago(row.removed_at)})" if row.removed_at else " at an update"
    return NotFoundError(
        f"{named} was removed from the index{when}: its file was gone",
        f"restore the file and run qmd update, or find where it went: qmd search {shlex.quote(re.sub(r'[-_.]+', ' ', Path(row.path).stem).strip())}",
        api_hint="restore the file and update the collection (store.update()), or search for where it went",
    )


def unseen(ref: str) -> NotFoundError:
    """The one answer a blind reader (a scoped token) gets for any reference that names no
    document it can read: whether the file exists elsewhere, in another collection or on
    the server's disk is not told."""
    return NotFoundError(f"no document you can read matches {ref[:200]!r}", "find documents with the query tool, then get the file or docid it returns")


def resolve(backend: Finder, collections: Mapping[str, CollectionConfig], ref: str, cwd: str | None = None, *, blind: bool = False) -> DocRow:
    """Find the active document `ref` names; refuse anything outside the collections.

    `blind` (a scoped token's view): the server's file system is never consulted (a path is
    mapped onto the visible collections by its spelling alone) and every reference that
    finds no visible document gets the same answer (`unseen`)."""
    if blind:
        try:
            return _resolve(backend, collections, ref, cwd, blind=True)
        except QmdError as exc:
            if "several collections" in exc.message or "is ambiguous" in exc.message:
                raise  # among visible documents only: nothing unseen is told
            raise unseen(ref.strip()) from None
    return _resolve(backend, collections, ref, cwd, blind=False)


def _resolve(backend: Finder, collections: Mapping[str, CollectionConfig], ref: str, cwd: str | None, *, blind: bool) -> DocRow:
    ref = ref.strip()
    if not ref:
        raise QmdError("empty document reference", "give a path, qmd://collection/path or #docid")
    if ref.startswith("#"):
        return by_docid(backend, ref, collections)
    if ref.startswith("qmd://"):
        if split_index(ref)[1] is not None:
            raise QmdError(f"{ref[:200]} names index '{split_index(ref)[1]}'", f"read it from that index: qmd --index {split_index(ref)[1]} get …")
        name, _, rel = ref[len("qmd://") :].partition("/")
        if name not in collections:
            raise unknown_collection(name, collections)
        rows = served(backend, collections, collection=name, path=_clean_rel(rel, ref))
        if rows:
            return rows[0]
        raise not_found(backend, ref, collections)
    first, _, rest = ref.partition("/")
    if first in collections and rest and not os.path.isabs(ref):
        rows = served(backend, collections, collection=first, path=_clean_rel(rest, ref))
        if rows:
            return rows[0]
    is_fs = os.path.isabs(ref) or ref.startswith(("./", "../", "~")) or ref in (".", "..")
    if not is_fs:
        rows = served(backend, collections, path=_clean_rel(ref, ref))
        if len(rows) == 1:
            return rows[0]
        if len(rows) > 1:
            listing = ", ".join(f"qmd://{r.collection}/{r.path}" for r in rows[:5])
            raise QmdError(f"'{ref}' is in several collections: {listing}", "use the qmd:// path")
        if re.match(_HEX, ref) and len(ref) >= MIN_DOCID:
            try:
                return by_docid(backend, ref, collections)
            except NotFoundError:
                pass
    if blind:
        if not os.path.isabs(ref):
            raise not_found(backend, ref, collections)
        located = collection_of_path(collections, os.path.normpath(ref), real=False)
        rows = served(backend, collections, collection=located[0], path=located[1]) if located else []
        if rows:
            return rows[0]
        raise not_found(backend, ref, collections)
    fs_path = os.path.expanduser(ref)
    if not os.path.isabs(fs_path):
        fs_path = os.path.join(cwd or os.getcwd(), fs_path)
    if is_fs or os.path.exists(fs_path):
        located = collection_of_path(collections, fs_path)
        if located is None:
            raise QmdError(
                f"{ref} is outside every collection", "qmd only serves indexed files; add its folder with: qmd collection add DIR",
                api_hint="only indexed files are served; add its folder with store.add_collection(path)",
            )
        rows = served(backend, collections, collection=located[0], path=located[1])
        if rows:
            return rows[0]
    raise not_found(backend, ref, collections)


def unknown_collection(name: str, collections: Mapping[str, CollectionConfig]) -> NotFoundError:
    import difflib

    close = difflib.get_close_matches(name, list(collections), n=5, cutoff=0.4)
    known = close or list(collections)[:5]
    hint = ("did you mean: " + ", ".join(known)) if close else ("collections: " + ", ".join(known) if known else "add one with: qmd collection add DIR --name NAME")
    return NotFoundError(f"unknown collection '{name}'", hint)


def read_content(backend: IndexBackend, content_hash: str) -> str:
    """The stored text of a content hash; a QmdError naming the fix when it is missing."""
    text = backend.content(content_hash)
    if text is not None:
        return text
    raise QmdError(f"content {content_hash[:6]} is missing from the index", "run qmd update (or qmd doctor --fix)")


def abs_path(collections: Mapping[str, CollectionConfig], row: DocRow) -> str | None:
    coll = collections.get(row.collection)
    return str(Path(coll.path) / row.path) if coll else None
