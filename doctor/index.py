"""The index files: open, quick_check, schema, FTS rows against documents, orphans; each
collection's chunk strategy can run (auto: the grammars of its source files load). The
project-local index in use is reported first (doctor/local.py)."""

from __future__ import annotations

import re
import shlex
from pathlib import Path

import qmd
from qmd import harness

from .context import Context, home_path, qmd_command
from .results import CheckResult, Clock, fail, ok, warn

ORPHAN_WARN_SHARE = 0.2  # a fifth of the rows serve nothing: cleanup is worth it
ORPHAN_WARN_MIN = 50


def _rebuild(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        report = store.rebuild()
        line = f"rebuilt from the config: {report.documents} documents in {report.seconds:.1f}s"
        if report.kept:
            line += f"; the broken file is kept at {home_path(report.kept)}"
        if store.model("embed").available:
            line += f"; re-embedded {store.embed().documents} documents"
        return line
    finally:
        store.close()


def _migrate(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        store.status()  # opening for writing applies pending migrations
        return "applied the pending migrations"
    finally:
        store.close()


def _repair_fts(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        return f"rewrote {store.repair_fts()} full-text rows from the stored content"
    finally:
        store.close()


def _cleanup(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        backup = store.backup()
        report = store.cleanup()
        how = "pg_restore --list ok" if backup.suffix == ".dump" else "quick_check ok"  # a PostgreSQL index: pg_dump of its schema
        return (
            f"verified backup at {home_path(backup)} ({how}), then cleanup: {report.inactive_removed} inactive documents and "
            f"{report.orphaned_content_removed} orphaned contents removed"
        )
    finally:
        store.close()


_UNKNOWN = re.compile(r"(?:collection '(?P<coll>[^']*)': )?(?:models: )?unknown (?:key|role) '(?P<key>[^']*)'")


def _config_warnings(store: qmd.Store, index: str) -> list[CheckResult]:
    """Each unknown key of the config (a typo qmd ignores) as a warning with its did-you-mean."""
    path = Path(store.config.path)
    out: list[CheckResult] = []
    for n, text in enumerate(store.config_warnings(), 1):
        detail = text.removeprefix(f"{path}: ")
        m = _UNKNOWN.search(detail)
        what = (f"{m['coll']}." if m and m["coll"] else "") + (m["key"] if m else str(n))
        out.append(warn(f"config key {what} [{index}]", f"{home_path(path)}: {detail} (qmd ignores it)", f"edit {home_path(path)}: rename or remove that key"))
    return out


def _readable(found: qmd.IndexCheck) -> bool:
    """The index can be opened through the Store without changing it (opening migrates)."""
    return found.exists and not found.corrupted and not found.unknown_migrations and not found.pending_migrations


def _folders(store: qmd.Store, index: str, found: qmd.IndexCheck | None) -> list[CheckResult]:
    """Every configured collection's folder is still a folder (else update fails for it and
    search serves notes that are gone). `found` is None when the index could not be looked at;
    its counts come from the same read-only look (no second connection)."""
    counts = found.collection_documents if found is not None and _readable(found) else {}
    out: list[CheckResult] = []
    for name, folder in store.collection_folders().items():
        held = f"; the index still holds its {counts[name]} documents" if counts.get(name) else ""
        if folder.is_dir():
            out.append(ok(f"collection {name} [{index}]", f"folder {home_path(folder)}"))
            continue
        why = "is not a folder" if folder.exists() else "is gone"
        fix = f"restore the folder {shlex.quote(str(folder))}, or stop indexing it: {qmd_command('collection', 'remove', name, index=index)}"
        out.append(fail(f"collection {name} [{index}]", f"its folder {folder} {why}: update fails for it{held}", fix))
    return out


def _orphaned(ctx: Context, store: qmd.Store, index: str) -> CheckResult:
    """Rows of collections the config no longer names: never served, but still on disk."""
    name = f"orphaned collections [{index}]"
    gone = store.orphaned_collections()
    if not gone:
        return ok(name, "every collection in the index is in the config")
    listed = ", ".join(f"'{g}'" for g in gone)
    return warn(
        name,
        f"the index still holds rows of {listed}, no longer in {home_path(store.config.path)} (never served; cleanup drops them)",
        qmd_command("cleanup", index=index),
        repair=lambda: _drop_orphaned(ctx, index),
    )


def _overlaps(store: qmd.Store, index: str) -> list[CheckResult]:
    """Collections over the same files (the same folder, or one inside another): each file in
    both is a document twice, so every search shows it twice. Nothing to say when there are none."""
    out: list[CheckResult] = []
    for o in store.overlapping_collections():
        if not o.files:
            continue
        where = "the same folder as" if o.same_folder else "a folder inside"
        out.append(warn(
            f"collections {o.collection}, {o.other} [{index}]",
            f"'{o.collection}' indexes {where} '{o.other}': {o.files} files are in both, and every search shows them twice",
            qmd_command("collection", "remove", o.collection, index=index),
        ))
    return out


def _chunking(store: qmd.Store, index: str) -> list[CheckResult]:
    """Each `chunk_strategy: auto` collection: the tree-sitter grammar of every source language
    it holds loads (else those files are cut by regex: a warning with the install command)."""
    auto = [name for name, coll in store.config.collections().items() if coll.chunk_strategy == "auto"]
    if not auto:
        return []
    from qmd.harness import GRAMMARS_INSTALL, grammar_status, language_of

    status = grammar_status()
    out: list[CheckResult] = []
    for name in auto:
        present: dict[str, int] = {}
        for entry in store.ls(name):
            language = language_of(entry.path)
            if language is not None:
                present[language] = present.get(language, 0) + 1
        label = f"chunk strategy {name} [{index}]"
        counts = ", ".join(f"{lang} ({n})" for lang, n in sorted(present.items()))
        missing = {lang: status[lang] for lang in present if status.get(lang)}
        if missing:
            why = str(next(iter(missing.values()))).removesuffix(f": {GRAMMARS_INSTALL}") if len(missing) == 1 else f"no grammar for {', '.join(sorted(missing))}"
            out.append(warn(label, f"auto, but {why}: {sum(present[lang] for lang in missing)} source files are cut by regex (of {counts})", GRAMMARS_INSTALL))
        elif present:
            out.append(ok(label, f"auto: source files cut at their definitions: {counts}"))
        else:
            out.append(ok(label, "auto: no source files of a language it parses (.py .js .jsx .ts .tsx .go .rs); all cut by regex"))
    return out


def _vector_dims(ctx: Context, store: qmd.Store, index: str) -> list[CheckResult]:
    """The current embed model's vectors stored with other dims than it makes (an earlier
    import's lie): every vsearch said so and query ranked by keywords until `qmd embed`."""
    mismatch = store.vector_dims_mismatch()
    if mismatch is None:
        return []
    fix = f"{qmd_command('embed', index=index)}  # recreates the vector table and embeds every document again"
    return [fail(f"vector dims [{index}]", f"{mismatch}: vector search is off until they are embedded again", fix, repair=lambda: _reembed(ctx, index))]


def _reembed(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        return f"recreated the vector table and embedded {store.embed().documents} documents"
    finally:
        store.close()


def _vector_index(store: qmd.Store, index: str) -> list[CheckResult]:
    """The approximate vector index (issue 31) of each vector space that has one or wants one:
    its recorded structure is this qmd's, has its centroids and covers every chunk (as many
    float rows and codes as chunks)."""
    out: list[CheckResult] = []
    fix = qmd_command("embed", index=index)
    for space in store.vector_index_status():
        label = f"vector index {space['model']} [{index}]"
        chunks, floats, codes = space["chunks"], space["floats"], space["codes"]
        advice = space.get("advice")
        if isinstance(advice, tuple):  # the backend's own words (PostgreSQL: an HNSW index built at an older setting)
            out.append(warn(label, str(advice[0]), str(advice[1])))
            continue
        if space["structure"] is None:
            if space["due"]:
                out.append(warn(label, f"exact scan of {chunks} chunks: the approximate index is due but not built", f"{fix}  # builds it (resumable); QMD_VECTOR_INDEX=exact keeps exact scans"))
            continue
        if not space["current"]:
            out.append(warn(label, f"{space['structure']} is an earlier structure: searches stay exact until it is rebuilt", f"{fix}  # rebuilds it (resumable)"))
        elif space["retraining"] is not None:
            meanwhile = "searches rank every code, lists aside" if floats == codes == chunks else f"{floats} of {chunks} chunks coded, so searches stay exact"
            out.append(warn(label, f"{space['structure']}: retraining its centroids (chunks moving to their new lists); meanwhile {meanwhile}", f"{fix}  # resumes the retrain"))
        elif space["state"] != "ready":
            out.append(warn(label, f"{space['structure']}: building, {floats} of {chunks} chunks coded; searches stay exact meanwhile", f"{fix}  # resumes the build"))
        elif not space["lists"]:
            out.append(fail(label, f"{space['structure']} recorded, but its centroids are missing or damaged", f"{fix}  # rebuilds it (resumable)"))
        elif floats != chunks or codes != chunks:
            out.append(fail(label, f"{space['structure']} recorded, but {floats} float rows and {codes} codes for {chunks} chunks", f"{fix}  # rebuilds it (resumable)"))
        elif not space.get("by_list", True):
            out.append(warn(label, f"{space['structure']}: its codes are not indexed by list (built by an earlier qmd), so each new process reads every code before its first search", f"{fix}  # indexes them (one pass over the float rows)"))
        elif space["retrain_due"]:
            out.append(warn(label, f"{space['structure']}: its centroids no longer fit: {space['retrain_due']}; searches read more codes or miss more", f"{fix}  # retrains them (resumable; meanwhile searches rank every code)"))
        else:
            out.append(_recall_check(label, space, fix))
    return out


def _recall_check(label: str, space: dict[str, object], fix: str) -> CheckResult:
    """A built approximate index is searched (under QMD_VECTOR_INDEX=auto) only once `qmd embed`
    has measured its recall@10 against exact search at the target (0.95) or better for what it holds now."""
    held = f"{space['structure']}: {space['chunks']} chunks coded"
    if space.get("vector_mode") == "exact":
        return ok(label, f"{held}; QMD_VECTOR_INDEX=exact: searches compute every distance")
    if space.get("recall_due"):
        before = f" (last: {space['recall_words']})" if space.get("recall_words") else ""
        return warn(label, f"{held}; its recall against exact search is not measured for what it holds now{before}, so searches compute every distance (slower) until it is", f"{fix}  # measures it")
    if space.get("recall_words") is None:  # nothing the searches would take (its recall is not due)
        return ok(label, held)
    if space.get("recall_trusted"):
        taken = "" if space.get("vector_mode") != "approx" else " (QMD_VECTOR_INDEX=approx: searched whatever it measured)"
        return ok(label, f"{held}; {space['recall_words']}{taken}")
    return ok(label, f"{held}; {space['recall_words']}: not shown to reach {space['recall_target']}, so searches compute every distance (exact, slower; QMD_VECTOR_INDEX=approx searches the index anyway)")


def _drop_orphaned(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        report = store.cleanup()
        dropped = ", ".join(f"'{n}' ({docs} documents)" for n, docs in report.dropped_collections) or "nothing"
        return f"cleanup dropped the rows of {dropped}"
    finally:
        store.close()


def _one(ctx: Context, index: str) -> list[CheckResult]:
    tag = f"[{index}]"
    with Clock() as c:
        store = ctx.store(index)
        try:
            config = _config_warnings(store, index)
            if not store.config.collections():
                return [*config, ok(f"index {tag}", "no collections yet", fix=qmd_command("collection", "add", "DIR", "--name", "NAME", index=index), ms=c.ms)]
            try:
                found = store.check(quick=ctx.quick)
            except qmd.IndexAccessError as exc:  # a sound file this user may not use: never "corrupted", never rebuilt
                return [*config, _denied(index, exc, c.ms), *_folders(store, index, None)]
            except qmd.IndexBusyError as exc:  # another process's lock: no damage, so no rebuild offered
                return [*config, fail(f"index {tag}", f"{exc.message}: every command that reads it waits, then stops", exc.cli_hint, ms=c.ms), *_folders(store, index, None)]
            folders = _folders(store, index, found)
        finally:
            store.close()
    out = _index(ctx, index, found, c.ms)
    if _readable(found):
        store = ctx.store(index)
        try:
            out.append(_orphaned(ctx, store, index))
            out += _overlaps(store, index)
            out += _chunking(store, index)
            out += _vector_dims(ctx, store, index)
            out += _vector_index(store, index)
        finally:
            store.close()
    return [*config, *out, *folders]


def _denied(index: str, exc: qmd.IndexAccessError, ms: float) -> CheckResult:
    """The index's files refuse this user (a mode, an owner, a read-only mount): the chmod is the
    fix; --fix gives a -wal/-shm of this user's the index file's mode when that is safe
    (access.py), and never moves the file aside or rebuilds it."""
    fix = exc.command + ("  # or: qmd doctor --fix" if exc.repair else "")
    return fail(f"index [{index}]", exc.message, fix, ms=ms, repair=exc.repair)


def _index(ctx: Context, index: str, found: qmd.IndexCheck, ms: float) -> list[CheckResult]:
    """The index file itself: built, sound, schema current, full-text rows, orphaned rows."""
    tag = f"[{index}]"
    where = home_path(found.path)
    if not found.exists and found.error:  # a database that does not answer is not an index never built
        detail = found.error if found.error.startswith("cannot connect") else f"cannot connect: {found.error}"
        return [fail(f"index {tag}", detail, "start the database server, or fix `database:` in the index config (or QMD_DATABASE_URL)", ms=ms)]
    if not found.exists:
        return [warn(f"index {tag}", f"{where} has not been built", qmd_command("update", index=index), ms=ms, repair=lambda: _update(ctx, index))]
    rebuild = qmd_command("rebuild", index=index)
    if found.corrupted:
        why = found.error or "; ".join(found.quick_check or [])[:400]
        return [fail(f"index {tag}", f"{where} is corrupted: {why}", rebuild, ms=ms, repair=lambda: _rebuild(ctx, index))]
    integrity = "quick_check skipped (--quick)" if found.quick_check is None else "quick_check ok"
    out = [ok(f"index {tag}", f"{where}: {found.documents} documents, {integrity}", ms=ms)]
    if found.unknown_migrations:
        out.append(fail(f"schema {tag}", f"written by a newer qmd (migrations {', '.join(found.unknown_migrations)})", "upgrade qmd: ./install.sh"))
        return out
    if found.pending_migrations:
        out.append(warn(f"schema {tag}", f"behind: pending {', '.join(found.pending_migrations)}", qmd_command("update", index=index), repair=lambda: _migrate(ctx, index)))
        return out  # the counts below need the current schema
    out.append(ok(f"schema {tag}", "current"))
    if found.fts_drift:
        out.append(
            fail(
                f"full-text rows {tag}",
                f"{found.fts_rows} rows for {found.documents} active documents ({found.fts_missing} documents unsearchable, {found.fts_extra} rows of no document)",
                "qmd doctor --fix  # rewrites the rows from the stored content",
                repair=lambda: _repair_fts(ctx, index),
            )
        )
    else:
        out.append(ok(f"full-text rows {tag}", f"{found.fts_rows} rows match {found.documents} active documents"))
    share_content = found.orphan_content / found.content_rows if found.content_rows else 0.0
    share_chunks = found.orphan_chunks / found.chunks if found.chunks else 0.0
    detail = (
        f"{found.orphan_content} of {found.content_rows} contents ({share_content:.0%}) and {found.orphan_chunks} of {found.chunks} "
        f"vector chunks ({share_chunks:.0%}) serve no document; {found.inactive} deleted documents kept"
    )
    wasteful = max(share_content, share_chunks) >= ORPHAN_WARN_SHARE and found.orphan_content + found.orphan_chunks + found.inactive >= ORPHAN_WARN_MIN
    if wasteful:
        out.append(warn(f"orphans {tag}", detail, qmd_command("cleanup", index=index), repair=lambda: _cleanup(ctx, index)))
    else:
        out.append(ok(f"orphans {tag}", detail))
    return out


def _update(ctx: Context, index: str) -> str:
    store = ctx.store(index)
    try:
        totals = store.update().totals
        return f"built the index: {totals['new']} documents"
    finally:
        store.close()


def check(ctx: Context) -> list[CheckResult]:
    from . import local

    if not ctx.indexes:
        return [warn("index", f"no index is configured in {home_path(harness.config_dir())}", qmd_command("collection", "add", "DIR", "--name", "NAME"))]
    results: list[CheckResult] = local.check(ctx)  # the project-local index in use, first
    for index in ctx.indexes:
        try:
            results += _one(ctx, index)
        except qmd.QmdError as exc:
            results.append(fail(f"index [{index}]", exc.message, exc.cli_hint))
    return results
