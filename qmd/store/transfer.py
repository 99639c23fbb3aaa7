"""`qmd export` / `qmd import`: carry a built index (documents, vectors, collections) to
another machine or HOME without embedding anything again.

Everything goes through the storage seam (`IndexBackend`), so any backend exports to any
other (SQLite ↔ PostgreSQL). The file format is qmd/store/bundle.py.

Import, in order: read and check the whole file (nothing written before); refuse a
different embed model, a collection name already here (unless `replace`); place each
collection (`places`, else `<root>/<its folder's name>`); compare every document with the
file at its place (match: its stat is taken, so the next `update` skips it; differs: kept as
exported but marked to be read again, so the next `update` and `embed` bring it in line;
missing: kept until the next `update` removes it); then write vectors, documents (one
transaction for every collection) and last the config, saved just before the commit. A failure
after the first write drops the collections it added and leaves the config as it was: after a
commit that fails (a full disk) the old config file is renamed back over the new one, which
needs no room on its file system. Once committed, a large import is followed by what a large
update is (`IndexBackend.after_atomic`: PostgreSQL's VACUUM and
ANALYZE, which no transaction may run; a Ctrl-C there stops it, and the import stands).
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path

from qmd.core.cancel import interrupts_deferred
from qmd.core.errors import QmdError
from qmd.core.fileio import FULL, KeptFile, denial
from qmd.core.version import __version__
from qmd.backends.base import ChunkVector, DocumentWrite, IndexBackend, VectorModel
from qmd.backends.owner import WRITER_PREFIX, writer_for
from qmd.core.config import CollectionConfig
from qmd.store.bundle import FORMAT, FORMAT_VERSION, Bundle, BundleWriter, CollectionEntry, read_bundle
from qmd.store.state import IndexState

BATCH = 256  # content hashes per read or write of vectors


@dataclass
class ExportReport:
    path: str
    collections: list[str]
    documents: int
    contents: int
    embedded: int  # contents with vectors
    chunks: int
    model: str | None
    fingerprint: str | None
    bytes: int
    seconds: float


@dataclass
class ImportedCollection:
    name: str
    path: str
    documents: int
    match: int = 0  # the local file has the exported content
    differ: int = 0  # it has other content: left for the next update/embed
    missing: int = 0  # no file there (the next update removes the document)
    folder_missing: bool = False
    replaced: bool = False
    contexts: dict[str, str] = field(default_factory=dict)  # folder ('/' or '/sub') → the file's text, shown to agents from now on


@dataclass
class ImportReport:
    path: str
    collections: list[ImportedCollection] = field(default_factory=list)
    documents: int = 0
    embedded: int = 0  # contents whose vectors came over
    chunks: int = 0
    model: str | None = None
    fingerprint: str | None = None
    model_forced: bool = False  # vectors of another model kept under their own fingerprint
    seconds: float = 0.0


# --- export ----------------------------------------------------------------------------


def export_index(
    state: IndexState, vector_model: VectorModel | None, path: Path, names: Sequence[str] | None, progress: Callable[[int, int], None] | None = None,
    model_dims: int | None = None,
) -> ExportReport:
    """Write the collections `names` (None: all) with the vectors of `vector_model` (the
    configured embed model's space; None: documents only) to `path`, atomically.

    `model_dims`: the dims the model's header says (None: unknown). A space stored with other
    dims (poisoned by an old import) is refused before anything is written: every importer
    of this model would refuse the file, and one without the model (--force-model) would be
    poisoned the same way. Dropping the vectors instead would hide that the index here is broken."""
    import time

    started = time.perf_counter()
    if vector_model is not None and model_dims is not None and vector_model.dims != model_dims:
        from qmd.search.vector import dims_mismatch

        raise QmdError(
            f"not exporting: {dims_mismatch(vector_model, model_dims)}; every importer would refuse them",
            "run: qmd embed (or qmd doctor --fix) to embed them again, then export (nothing was written)",
        )
    path = path.expanduser()
    if path.is_dir():
        raise QmdError(f"{path} is a folder", "give a file name, e.g. notes.qmd.gz")
    if not _regular_or_absent(path):  # renaming over /dev/null (as root) or a FIFO replaces what is not a file
        raise QmdError(f"{path} is not a regular file (a pipe or device): not replacing it", "give a file name, e.g. notes.qmd.gz")
    if not _replaceable(path):
        raise QmdError(f"{path} exists and is not a qmd export file: not overwriting it", "give a new file name (an earlier export is replaced), e.g. notes.qmd.gz")
    try:  # no lock: writers go on while an export reads
        chosen, counts = _export_once(state, vector_model, path, names, progress, settled=False)
    except _Changed:
        # Another process changed what was being read (a rename: its rows under the new name
        # before the config says it, or renamed away mid-read; an update's removals). The
        # second pass holds the writer lock: nothing changes while it reads.
        with state.db().writer_lock():
            state.read_config_again(force=True)
            try:
                chosen, counts = _export_once(state, vector_model, path, names, progress, settled=True)
            except _Changed as exc:  # not expected: nothing writes while the lock is held
                raise QmdError(f"the index changed while it was exported ({exc}); nothing was written", "run the export again") from None
    return ExportReport(
        str(path), chosen, counts["documents"], counts["contents"], counts["vectors"], counts["chunks"],
        None if vector_model is None else vector_model.model, None if vector_model is None else vector_model.fingerprint,
        path.stat().st_size, time.perf_counter() - started,
    )


class _Changed(Exception):
    """What an export read changed under it (`_export_once`): its file is dropped and read again."""


def _export_once(
    state: IndexState, vector_model: VectorModel | None, path: Path, names: Sequence[str] | None, progress: Callable[[int, int], None] | None, *, settled: bool,
) -> tuple[list[str], dict[str, int]]:
    """One pass of `export_index`: the collections written and the writer's counts. Raises
    _Changed (the file dropped) when the rows read do not match the counts the manifest
    gave, or, unless `settled` (the writer lock held), when the config and the index name
    different collections: a rename part way, whose collection the file would leave out."""
    colls = state.collections()
    backend = state.db()
    indexed = backend.collection_counts()
    if not settled and not names and set(colls) - set(indexed) and set(indexed) - set(colls):
        raise _Changed("the config and the index name different collections")
    chosen = [state.collection(n).name for n in dict.fromkeys(names)] if names else list(colls)
    missing = [n for n in chosen if n not in indexed]
    if missing and names:
        raise QmdError(f"collection '{missing[0]}' has no documents in the index", f"run: qmd update {missing[0]}, then export again")
    chosen = [n for n in chosen if n in indexed]
    if not chosen:
        raise QmdError("nothing to export: no collection has documents in the index", "run: qmd update")
    manifest = {
        "format": FORMAT,
        "version": FORMAT_VERSION,
        "qmd": __version__,
        "model": None if vector_model is None else {"fingerprint": vector_model.fingerprint, "name": vector_model.model, "dims": vector_model.dims},
        "collections": [_entry(colls[n], indexed.get(n, 0)) for n in chosen],
    }
    try:
        writer = BundleWriter(path, manifest)
    except OSError as exc:
        raise _unwritable(path, exc, "give a file in a folder that exists and that you can write") from None
    try:
        written: set[str] = set()
        total = sum(indexed[n] for n in chosen)
        done = 0
        for name in chosen:
            rows = backend.find(collection=name)
            if len(rows) != indexed[name]:
                raise _Changed(f"collection '{name}': {indexed[name]} documents counted, {len(rows)} read")
            for start in range(0, len(rows), BATCH):
                part = rows[start : start + BATCH]
                texts = backend.documents([r.id for r in part])
                gone = [row for row in part if row.id not in texts]
                if gone:
                    raise _Changed(f"'{name}/{gone[0].path}' went while it was read")
                for row in part:
                    if row.hash not in written:
                        writer.content(row.hash, texts[row.id][1])
                        written.add(row.hash)
                    writer.document(name, row.path, row.hash)
                done += len(part)
                if progress is not None:
                    progress(done, total)
        if vector_model is not None:
            hashes = sorted(written)
            for start in range(0, len(hashes), BATCH):
                for digest, (chunker, chunks) in sorted(backend.chunk_vectors(vector_model, hashes[start : start + BATCH]).items()):
                    writer.vectors(digest, chunker, chunks)
        writer.finish()
    except BaseException as exc:
        writer.abort()
        if isinstance(exc, OSError):
            raise _unwritable(path, exc, "pick another folder") from None
        raise
    return chosen, writer.counts


def _unwritable(path: Path, exc: OSError, fix: str) -> QmdError:
    """The one line an export file that could not be written gets (nothing was: the temporary
    file is gone): a full disk or a refusal names its file system or folder and the fix."""
    if not exc.filename or (exc.errno in FULL and os.path.basename(os.fsdecode(exc.filename)).startswith(f".{path.name}.")):
        exc.filename = str(path)  # a write or close says no name; a full disk's temporary file is not the one the user knows
    known = denial(exc, f"cannot export to {path}")
    if known is not None:
        return QmdError(f"{known[0]}; nothing was written", known[1])
    return QmdError(f"cannot write {path}: {exc.strerror or exc}; nothing was written", fix)


def _regular_or_absent(path: Path) -> bool:
    import stat

    try:
        return stat.S_ISREG(path.stat().st_mode)
    except FileNotFoundError:
        return True
    except OSError:
        return False


def _replaceable(path: Path) -> bool:
    """Whether an export may be written at `path`: nothing there (or an empty file), or an
    earlier export. Anything else (the index file itself, its config, a note) is someone's data."""
    import gzip

    try:
        if path.stat().st_size == 0:
            return True
        with gzip.open(path, "rb") as fh:
            return fh.read(len(_MAGIC)) == _MAGIC
    except FileNotFoundError:
        return True
    except (OSError, EOFError, ValueError):
        return False


_MAGIC = b'{"format":"' + FORMAT.encode() + b'"'  # how BundleWriter starts every file


def _entry(coll: CollectionConfig, documents: int) -> dict[str, object]:
    """A collection's manifest entry: no absolute path, no `update:` command (a command from a
    file someone sent must never run here)."""
    return {
        "name": coll.name, "folder": Path(coll.path).name or coll.name, "pattern": coll.pattern, "ignore": list(coll.ignore),
        "include_by_default": coll.include_by_default, "embed": coll.embed, "context": dict(coll.context), "chunk_strategy": coll.chunk_strategy,
        "documents": documents,
    }


# --- import ----------------------------------------------------------------------------


def parse_places(items: Sequence[str]) -> dict[str, Path]:
    """`NAME=PATH` pairs of `--collection` (a usage error names the form)."""
    out: dict[str, Path] = {}
    for item in items:
        name, sep, place = item.partition("=")
        if not sep or not name or not place:
            raise QmdError(f"--collection {item!r} is not NAME=PATH", "name the collection and its folder here: --collection notes=~/notes")
        out[name] = Path(place).expanduser()
    return out


def check_model(bundle: Bundle, here: tuple[str, str, int | None] | None, force: bool, source: Path) -> bool:
    """Refuse vectors of another embed model than this index's (`here`: (fingerprint, name,
    dims when its header says) of the configured one; None: none configured); True when
    `force` keeps them anyway. A file naming this model's fingerprint with other dims lies:
    its vectors would be this model's, and every vector search and embed after it failed."""
    if bundle.model is None or not bundle.vectors:
        return False
    if here is not None and here[0] == bundle.model.fingerprint:
        if here[2] is not None and here[2] != bundle.model.dims:
            raise QmdError(
                f"{source} says its vectors are of {here[1]} (fingerprint {here[0]}) but they have {bundle.model.dims} dims; that model makes {here[2]}",
                "export it again with qmd export on the machine that embedded it (nothing was imported)",
            )
        return False
    if force:
        return True
    theirs = f"{bundle.model.name} (fingerprint {bundle.model.fingerprint})"
    if here is None:
        raise QmdError(
            f"{source} holds vectors of the embed model {theirs}; this index has no embed model file here",
            "configure the same model (qmd models import … --set-default), or pass --force-model to import them unused and embed with yours later",
        )
    raise QmdError(
        f"{source} was embedded with {theirs}; this index embeds with {here[1]} (fingerprint {here[0]})",
        "configure the same embed model here, or pass --force-model to import the documents and embed them with yours (qmd embed)",
    )


def import_index(
    state: IndexState, source: Path, *, places: Mapping[str, Path], root: Path, here: tuple[str, str, int | None] | None, force_model: bool, replace: bool,
    progress: Callable[[str], None] | None = None,
) -> ImportReport:
    """Import `source` into this index (see the module's docstring); the caller holds the writer lock."""
    import time

    started = time.perf_counter()
    bundle = read_bundle(source.expanduser())
    names = [c.name for c in bundle.collections]
    unknown = [n for n in places if n not in names]
    if unknown:
        raise QmdError(f"--collection {unknown[0]}: the file holds no such collection", f"its collections: {', '.join(names) or 'none'}")
    forced = check_model(bundle, here, force_model, source)
    existing_config = state.config.collections()
    backend = state.backend
    indexed = backend.indexed_collections() if backend.exists() else set()
    clashes = [n for n in names if n in existing_config or n in indexed]
    _refuse_foreign(state, [n for n in clashes if n not in existing_config])
    if clashes and not replace:
        raise QmdError(
            f"this index already has a collection '{clashes[0]}'",
            f"pass --replace to replace it with the file's, or remove it first: qmd collection remove {clashes[0]}",
        )
    report = ImportReport(str(source))
    report.model_forced = forced
    if bundle.model is not None and bundle.vectors:
        report.model, report.fingerprint = bundle.model.name, bundle.model.fingerprint
    writes: list[tuple[CollectionEntry, Path, list[DocumentWrite]]] = []
    for entry in bundle.collections:
        place = Path(os.path.abspath(places.get(entry.name) or root / entry.folder))
        info = ImportedCollection(entry.name, str(place), entry.documents, folder_missing=not place.is_dir(), replaced=entry.name in clashes, contexts=dict(entry.context))
        if progress is not None:
            progress(f"checking {entry.name} against {place}")
        writes.append((entry, place, _documents(bundle, entry.name, place, info)))
        report.collections.append(info)
        report.documents += entry.documents
    added = [c.name for c in report.collections if not c.replaced]
    before = [existing_config[n] for n in clashes if n in existing_config]
    mine = writer_for(state.config_path)
    saved = done = False
    kept = KeptFile(state.config_path)  # put back without needing room: the disk that failed the commit may hold the config too
    try:
        backend.open(create=True)
        if bundle.model is not None and bundle.vectors:  # keyed by content: left unused by a failed import, cleanup drops them
            report.embedded, report.chunks = _write_vectors(backend, bundle)
        with ExitStack() as later:
            with backend.atomic():  # every collection, replaced or added, or none (a failure or Ctrl-C part way)
                for entry, place, docs in writes:
                    if progress is not None:
                        progress(f"writing {entry.name}")
                    with backend.collection_writer(entry.name) as writer:
                        known = writer.known()
                        for doc in docs:
                            row = known.pop(doc.path, None)
                            writer.put(doc, row.id if row is not None else None)
                        for row in known.values():
                            if row.active:
                                writer.deactivate(row.id)
                        writer.set_issues([])
                    backend.set_meta(WRITER_PREFIX + entry.name, mine)  # this config's: another config's update keeps it
                later.enter_context(interrupts_deferred())  # the config's save and the commit go together
                saved = True  # from here a failure puts the file back as it was (kept), whatever part of the save happened
                with state.editing_config() as config:  # the config as it is now: another process may have changed it meanwhile
                    for entry, place, _ in writes:
                        config.set_collection(
                            CollectionConfig(
                                entry.name, place, entry.pattern, list(entry.ignore), None, entry.include_by_default, entry.embed, dict(entry.context), entry.chunk_strategy,
                            )
                        )
            done = True
        try:
            backend.after_atomic(sum(len(docs) for _, _, docs in writes))  # committed: the planner's statistics, outside the deferred Ctrl-C
        except KeyboardInterrupt:  # it stops the VACUUM only: the import committed and stands (autovacuum catches up)
            pass
    except BaseException:
        if not done:  # the index rolled back: so does the config, to the collections it had
            for name in added:
                state.config.remove_collection(name)
            for old in before:
                state.config.set_collection(old)
            if saved:
                _put_back(state, kept)
        raise
    finally:
        kept.drop()
    report.seconds = time.perf_counter() - started
    return report


def _put_back(state: IndexState, kept: KeptFile) -> None:
    """The config file as it was before a failed import saved it (renamed back: a full disk
    left no room to write it again), and what is derived from it refreshed."""
    from qmd.index.folder_cache import refresh_quietly

    try:
        kept.restore()
    except OSError:  # no link was kept, or renaming it back failed: write the reverted config instead (best effort)
        try:
            state.save_config()
        except Exception:  # noqa: BLE001 - as above
            pass
        return
    refresh_quietly(state.config_path)


def _refuse_foreign(state: IndexState, names: Sequence[str]) -> None:
    """Refuse, even with --replace, a collection in the index that this config does not name
    and another config indexed (two configs over one index file or PostgreSQL schema):
    replacing it would take that config's documents (qmd/backends/owner.py)."""
    if not names:
        return
    from qmd.backends.owner import META_KEY, shown, writer_of

    db = state.db()
    records = db.meta_values(WRITER_PREFIX)
    owner = db.meta_values(META_KEY).get(META_KEY)
    me = writer_of(writer_for(state.config_path), None)
    for name in names:
        writer = writer_of(records.get(WRITER_PREFIX + name), owner)
        if writer is not None and writer != me:
            raise QmdError(
                f"collection '{name}' in this index belongs to another config ({shown(writer)}); --replace replaces only this config's collections",
                f"import into another index (qmd --index NAME import …), or remove it first with that config: qmd collection remove {name}",
            )


def _documents(bundle: Bundle, name: str, place: Path, info: ImportedCollection) -> list[DocumentWrite]:
    """The document writes of one collection, each compared with the file at `place`."""
    from qmd.core.filters import document_date_ns
    from qmd.core.text import content_hash
    from qmd.index.indexer import fts_values, prepare, read_text

    root = os.path.realpath(place) if not info.folder_missing else None
    out = []
    for rel, digest in bundle.documents[name]:
        text = bundle.texts[digest]
        doc = prepare(text, rel)
        size, mtime_ns = len(text.encode("utf-8", "surrogatepass")), 0  # mtime 0: the next update reads the file
        if root is None:
            info.missing += 1
        else:
            local = os.path.join(place, rel)
            try:
                st = os.stat(local)
            except OSError:
                info.missing += 1
            else:
                found, _, _ = read_text(local, st.st_size, root)
                if found is not None and content_hash(found) == digest:
                    info.match += 1
                    size, mtime_ns = st.st_size, st.st_mtime_ns
                else:
                    info.differ += 1
        out.append(
            DocumentWrite(rel, text, digest, doc.title, doc.tags, doc.body_line, size, mtime_ns, fts_values(name, rel, doc), doc.metadata, document_date_ns(doc.metadata))
        )
    return out


def _write_vectors(backend: IndexBackend, bundle: Bundle) -> tuple[int, int]:
    """Store the file's vectors under its fingerprint; (contents, chunks) written."""
    assert bundle.model is not None
    model = backend.ensure_vector_model(bundle.model.fingerprint, bundle.model.name, bundle.model.dims)
    if model.dims != bundle.model.dims:
        raise QmdError(
            f"this index holds vectors of {bundle.model.name} with {model.dims} dims; the file's have {bundle.model.dims}", "export it again with qmd export",
        )
    items = sorted(bundle.vectors.items())
    chunks = 0
    with backend.bulk_vectors(model, len(items)):
        for start in range(0, len(items), BATCH):
            part = items[start : start + BATCH]
            batch: list[tuple[str, Sequence[ChunkVector]]] = [(h, cs) for h, (_, cs) in part]
            chunks += backend.write_vectors(model, batch, {h: c for h, (c, _) in part})
    return len(items), chunks
