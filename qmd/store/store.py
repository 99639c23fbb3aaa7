"""The public entry point: one index (its SQLite file and its YAML config) and what it can do."""

from __future__ import annotations

import fnmatch
import os
import re
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

import apsw

from qmd.store import reading as docs
from qmd.store.config import DEFAULT_PATTERN, CollectionConfig, Config
from qmd.store.contexts import contexts_for, normalise_subpath
from qmd.store.sqlite.connection import connect, scalar, transaction
from qmd.core.errors import NotFoundError, QmdError
from qmd.core.locks import writer_lock
from qmd.store.results import (
    CleanupReport,
    CollectionInfo,
    ContextInfo,
    Document,
    FileEntry,
    ModelStatus,
    MultiGetItem,
    QueryResult,
    SearchHit,
    StatusInfo,
    UpdateReport,
    VectorSearch,
    VectorStatus,
)
from qmd.search.fts import bm25_search
from qmd.search.snippets import CLI_SNIPPET_CHARS, make_snippet
from qmd.search.syntax import parse_query

if TYPE_CHECKING:
    from qmd.index.embedding import EmbedProgress, EmbedReport
    from qmd.llm.generator import Generator
    from qmd.llm.reranker import CrossEncoder, YesNoReranker
    from qmd.search.typed import SubQuery
    from qmd.index.indexer import Progress
    from qmd.store.sqlite.integrity import IndexCheck, RebuildReport
    from qmd.llm.embedder import Embedder
    from qmd.llm.models import ModelRef

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
MULTI_GET_MAX_BYTES = 64 * 1024
UPDATE_COMMAND_TIMEOUT_S = 900


def _stat_key(path: Path) -> tuple[int, int, int] | None:
    try:
        st = path.stat()
    except OSError:
        return None
    return (st.st_mtime_ns, st.st_size, st.st_ino)


def _check_collection_name(name: str) -> str:
    if not _NAME.match(name):
        raise QmdError(f"invalid collection name {name!r}", "use letters, digits, '.', '_' or '-' (it appears in qmd:// paths)")
    return name


class Store:
    """One qmd index. Nothing is assumed: the caller names the index file and config file.

    Library code never prints: long operations report through optional callbacks.
    """

    def __init__(self, index_path: str | os.PathLike[str], config_path: str | os.PathLike[str] | None = None) -> None:
        self.index_path = Path(index_path)
        self.config_path = Path(config_path) if config_path else self.index_path.with_suffix(".yml")
        self.config = Config.load(self.config_path)
        self._config_stat = _stat_key(self.config_path)
        self._conn: apsw.Connection | None = None
        self._embedder: Embedder | None = None
        self._reranker: CrossEncoder | YesNoReranker | None = None
        self._generator: Generator | None = None
        self._colls: tuple[int, dict[str, CollectionConfig]] | None = None
        self._pending: tuple[tuple[object, ...], int] | None = None
        self._writes = 0  # bumped by this Store's own writes (data_version only sees others')

    # --- plumbing ------------------------------------------------------------------

    def _db(self, create: bool = False) -> apsw.Connection:
        if self._conn is None:
            if not create and not self.index_path.exists():
                if self.config.collections():
                    raise QmdError(f"the index {self.index_path} has not been built", "run: qmd update")
                raise QmdError("no collections yet", "add one with: qmd collection add DIR --name NAME")
            self._conn = connect(self.index_path, create=create)
        return self._conn

    def loaded_models(self) -> list[str]:
        """Roles (embed, rerank, generate) whose model is loaded in this process."""
        pairs = (("embed", self._embedder), ("rerank", self._reranker), ("generate", self._generator))
        return [role for role, model in pairs if model is not None]

    def release_models(self) -> list[str]:
        """Free every loaded model and return their roles; the connection stays open.

        The next search that needs a model loads it again (a long-running server calls
        this after an idle period).
        """
        released = self.loaded_models()
        for model in (self._embedder, self._reranker, self._generator):
            if model is not None:
                model.close()
        self._embedder = self._reranker = self._generator = None
        return released

    def refresh_config(self) -> bool:
        """Re-read the config file if it changed on disk since it was read; True if it did.

        For long-running processes (the MCP server): collections and contexts added with
        another `qmd` command are seen without a restart.
        """
        stat = _stat_key(self.config_path)
        if stat == self._config_stat:
            return False
        self.config = Config.load(self.config_path)
        self._config_stat = stat
        self._colls = None
        return True

    def close(self) -> None:
        self.release_models()
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _collections(self) -> dict[str, CollectionConfig]:
        if self._colls is None or self._colls[0] != self.config.version:
            self._colls = (self.config.version, self.config.collections())
        return self._colls[1]

    def _save_config(self) -> None:
        self._colls = None
        self.config.save()
        self._config_stat = _stat_key(self.config_path)

    def _collection(self, name: str) -> CollectionConfig:
        colls = self._collections()
        if name not in colls:
            raise docs.unknown_collection(name, colls)
        return colls[name]

    def _context(self, collection: str, path: str) -> str | None:
        colls = self._collections()
        coll = colls.get(collection)
        if coll is None or not coll.context:  # the common case: one answer per collection
            return self.config.global_context or None
        return contexts_for(self.config.global_context, coll, path)

    # --- collections ---------------------------------------------------------------

    def add_collection(
        self,
        path: str | os.PathLike[str],
        name: str | None = None,
        pattern: str = DEFAULT_PATTERN,
        ignore: list[str] | None = None,
        update_command: str | None = None,
        *,
        index: bool = True,
        progress: Progress | None = None,
    ) -> UpdateReport | None:
        """Add a folder as a collection and (by default) index it at once."""
        folder = Path(path).expanduser().resolve()
        name = _check_collection_name(folder.name if name is None else name)
        existing = self._collections()
        if name in existing:
            raise QmdError(f"collection '{name}' already exists (at {existing[name].path})", f"pick another --name, or: qmd collection remove {name}")
        if not folder.exists():
            raise QmdError(f"{path} does not exist", "check the path of the folder to index")
        if not folder.is_dir():
            raise QmdError(f"{path} is not a folder", "give the folder that holds the markdown files")
        coll = CollectionConfig(name, folder, pattern or DEFAULT_PATTERN, list(ignore or []), update_command)
        self.config.set_collection(coll)
        self._save_config()
        if not index:
            return None
        try:
            return self.update([name], progress=progress)
        except BaseException:
            # Nothing half-done: a collection that could not be indexed is not left registered.
            self.config.remove_collection(name)
            self._save_config()
            raise

    def remove_collection(self, name: str) -> int:
        """Forget a collection: its config entry and its rows. Files on disk are untouched."""
        self._collection(name)
        dropped = 0
        if self.index_path.exists():
            with writer_lock(self.index_path):
                from qmd.index.indexer import drop_collection

                dropped = drop_collection(self._db(), name)
        self.config.remove_collection(name)
        self._save_config()
        return dropped

    def rename_collection(self, old: str, new: str) -> None:
        self._collection(old)
        _check_collection_name(new)
        if new in self._collections():
            raise QmdError(f"collection '{new}' already exists", "pick another name")
        if self.index_path.exists():
            with writer_lock(self.index_path):
                from qmd.index.indexer import rename_collection_rows

                rename_collection_rows(self._db(), old, new)
        self.config.rename_collection(old, new)
        self._save_config()

    def set_include_by_default(self, name: str, include: bool) -> None:
        """`include`/`exclude`: whether searches without -c look in this collection."""
        coll = self._collection(name)
        coll.include_by_default = include
        self.config.set_collection(coll)
        self._save_config()

    def collections(self) -> list[CollectionInfo]:
        counts: dict[str, int] = {}
        updated: dict[str, str] = {}
        issues: dict[tuple[str, str], int] = {}
        if self.index_path.exists():
            conn = self._db()
            counts = dict(conn.execute("SELECT collection, count(*) FROM documents WHERE active = 1 GROUP BY collection"))
            updated = dict(conn.execute("SELECT name, updated_at FROM collection_state"))
            issues = {(c, s): n for c, s, n in conn.execute("SELECT collection, severity, count(*) FROM file_issues GROUP BY 1, 2")}
        return [
            CollectionInfo(
                name=c.name,
                path=str(c.path),
                pattern=c.pattern,
                ignore=c.ignore,
                include_by_default=c.include_by_default,
                documents=counts.get(c.name, 0),
                updated_at=updated.get(c.name),
                contexts=dict(c.context),
                update_command=c.update,
                embed=c.embed,
                skipped=issues.get((c.name, "skipped"), 0),
                warnings=issues.get((c.name, "warning"), 0),
            )
            for c in self._collections().values()
        ]

    def collection(self, name: str) -> CollectionInfo:
        self._collection(name)
        return next(c for c in self.collections() if c.name == name)

    # --- contexts ------------------------------------------------------------------

    def _context_target(self, target: str, cwd: str | None) -> tuple[str | None, str]:
        """(collection or None for global, sub-path) for a context target."""
        target = target.strip()
        if target in ("/", ""):
            return None, "/"
        colls = self._collections()
        if target.startswith("qmd://"):
            name, _, sub = target[len("qmd://") :].partition("/")
            self._collection(name)
            return name, normalise_subpath(sub)
        first, _, rest = target.partition("/")
        if first in colls and not os.path.isabs(target):
            return first, normalise_subpath(rest)
        fs = os.path.join(cwd or os.getcwd(), os.path.expanduser(target))
        located = docs.collection_of_path(colls, fs)
        if located is None:
            raise QmdError(f"{target} is not inside any collection", "use qmd://COLLECTION/sub-path, or '/' for the global context")
        return located[0], normalise_subpath(located[1])

    def add_context(self, target: str, text: str, cwd: str | None = None) -> ContextInfo:
        """Attach `text` to `/` (everything), a collection (qmd://name/) or a folder in one."""
        text = text.strip()
        if not text:
            raise QmdError("a context needs some text", 'qmd context add qmd://notes/ "What these notes are about"')
        name, sub = self._context_target(target, cwd)
        if name is None:
            self.config.global_context = text
        else:
            coll = self._collection(name)
            coll.context[sub] = text
            self.config.set_collection(coll)
        self._save_config()
        return ContextInfo("/" if name is None else f"qmd://{name}{sub if sub != '/' else '/'}", text)

    def contexts(self) -> list[ContextInfo]:
        out = [ContextInfo("/", self.config.global_context)] if self.config.global_context else []
        for coll in self._collections().values():
            for sub, text in coll.context.items():
                sub = normalise_subpath(sub)
                out.append(ContextInfo(f"qmd://{coll.name}{sub if sub != '/' else '/'}", text))
        return out

    def remove_context(self, target: str, cwd: str | None = None) -> None:
        name, sub = self._context_target(target, cwd)
        if name is None:
            if not self.config.global_context:
                raise NotFoundError("there is no global context", "list contexts with: qmd context list")
            self.config.global_context = None
        else:
            coll = self._collection(name)
            key = next((k for k in coll.context if normalise_subpath(k) == sub), None)
            if key is None:
                raise NotFoundError(f"no context at qmd://{name}{sub}", "list contexts with: qmd context list")
            del coll.context[key]
            self.config.set_collection(coll)
        self._save_config()

    # --- indexing ------------------------------------------------------------------

    def update(
        self,
        collections: list[str] | None = None,
        *,
        progress: Progress | None = None,
        run_commands: bool = True,
        on_command: Callable[[str, str], None] | None = None,
        on_wait: Callable[[], None] | None = None,
    ) -> UpdateReport:
        """Re-index collections (all by default) under the index's writer lock.

        A collection's `update:` command runs first, in its folder; its failure is
        reported and the folder is still indexed as it is on disk.
        """
        from qmd.index.indexer import index_collection

        colls = self._collections()
        names = list(colls) if collections is None else [self._collection(n).name for n in collections]
        report = UpdateReport([])
        self._writes += 1
        with writer_lock(self.index_path, on_wait=on_wait):
            conn = self._db(create=True)
            for name in names:
                coll = colls[name]
                try:
                    if run_commands and coll.update:
                        failure = self._run_update_command(coll, on_command)
                        if failure:
                            report.command_failures.append((name, failure))
                    report.collections.append(index_collection(conn, coll, progress))
                except QmdError as exc:
                    if len(names) == 1:
                        raise
                    # One broken collection must not keep the others stale.
                    report.errors.append((name, exc.message, exc.hint))
        return report

    @staticmethod
    def _run_update_command(coll: CollectionConfig, on_command: Callable[[str, str], None] | None) -> str | None:
        import subprocess

        from qmd.index.indexer import check_root

        check_root(coll)
        if on_command is not None:
            on_command(coll.name, coll.update or "")
        try:
            proc = subprocess.run(
                coll.update or "", shell=True, cwd=coll.path, capture_output=True, text=True,
                timeout=UPDATE_COMMAND_TIMEOUT_S, stdin=subprocess.DEVNULL,
            )
        except subprocess.TimeoutExpired:
            return f"update command timed out after {UPDATE_COMMAND_TIMEOUT_S}s: {coll.update}"
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [""]
            return f"update command exited {proc.returncode}: {coll.update} {tail[0]}".strip()
        return None

    def cleanup(self) -> CleanupReport:
        """Drop soft-deleted documents and content no document uses, then VACUUM."""
        before = self.index_path.stat().st_size if self.index_path.exists() else 0
        with writer_lock(self.index_path):
            conn = self._db()
            with transaction(conn):
                inactive = int(scalar(conn, "SELECT count(*) FROM documents WHERE active = 0") or 0)
                conn.execute("DELETE FROM documents WHERE active = 0")
                orphans = int(scalar(conn, "SELECT count(*) FROM content WHERE hash NOT IN (SELECT hash FROM documents)") or 0)
                conn.execute("DELETE FROM content WHERE hash NOT IN (SELECT hash FROM documents)")
                if scalar(conn, "SELECT count(*) FROM embed_models"):
                    from qmd.store.sqlite.vectors import drop_orphans, ensure_vec

                    ensure_vec(conn)
                    drop_orphans(conn)
            conn.execute("VACUUM")
            conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        return CleanupReport(inactive, orphans, before, self.index_path.stat().st_size)

    # --- integrity (qmd/integrity.py): what doctor inspects and repairs -------------

    def check(self, *, quick: bool = False) -> IndexCheck:
        """Read-only health of the index file: opens, quick_check (unless `quick`), schema,
        FTS rows against active documents, orphans, vector models. Never migrates."""
        from qmd.store.sqlite.integrity import inspect

        return inspect(self.index_path, quick=quick)

    def repair_fts(self) -> int:
        """Rewrite the full-text rows from the stored content (they drifted); returns rows written."""
        from qmd.store.sqlite.integrity import repair_fts

        self._writes += 1
        with writer_lock(self.index_path):
            conn = self._db()
            with transaction(conn):
                return repair_fts(conn)

    def backup(self) -> Path:
        """A verified copy of the index beside it (`<name>.backup-<time>`, quick_check passed)."""
        from qmd.store.sqlite.integrity import verified_backup

        with writer_lock(self.index_path):
            return verified_backup(self._db(), self.index_path)

    def rebuild(self, progress: Progress | None = None) -> RebuildReport:
        """Build the index anew from the config's collections into a new file and swap it in
        atomically; the old (broken) file is kept beside it. Vectors need `embed` again."""
        from qmd.store.sqlite.integrity import rebuild

        def build(tmp: Path) -> int:
            fresh = Store(tmp, self.config_path)
            try:
                report = fresh.update(progress=progress, run_commands=False)
                if report.errors:
                    name, message, _ = report.errors[0]
                    raise QmdError(f"rebuild stopped: collection '{name}': {message}", "fix that collection (or remove it), then: qmd rebuild")
                conn = fresh._db(create=True)
                conn.execute("PRAGMA journal_mode = DELETE")  # one self-contained file to swap in
                return int(scalar(conn, "SELECT count(*) FROM documents WHERE active = 1") or 0)
            finally:
                fresh.close()

        self.close()
        self._writes += 1
        with writer_lock(self.index_path):
            return rebuild(self.index_path, build)

    # --- reading -------------------------------------------------------------------

    def _search_scope(self, collections: list[str] | None) -> list[str] | None:
        """Collections to search; None means "everything in the index" (the fast path)."""
        colls = self._collections()
        if collections:
            return [self._collection(n).name for n in dict.fromkeys(collections)]
        wanted = [c.name for c in colls.values() if c.include_by_default]
        present = {row[0] for row in self._db().execute("SELECT name FROM collection_state")}
        return None if present <= set(wanted) else wanted

    def search(
        self,
        query: str,
        *,
        limit: int | None = 10,
        collections: list[str] | None = None,
        min_score: float = 0.0,
        full: bool = False,
        snippet_chars: int = CLI_SNIPPET_CHARS,
        line_numbers: bool = False,
    ) -> list[SearchHit]:
        """BM25 keyword search; `limit=None` returns every match. See search/fts.py."""
        parsed = parse_query(query)
        conn = self._db()
        hits = bm25_search(conn, parsed, limit, self._search_scope(collections), min_score)
        found = docs.rows_with_text(conn, [h.doc_id for h in hits])
        words = parsed.words
        return [self.hit(*found[h.doc_id], h.score, h.match, words, snippet_chars, line_numbers, full=full) for h in hits]

    def hit(
        self,
        row: docs.DocRow,
        text: str,
        score: float,
        match: str,
        words: list[str],
        snippet_chars: int,
        line_numbers: bool = False,
        chunk: tuple[int, int] | None = None,
        full: bool = False,
    ) -> SearchHit:
        """A result for `row`: snippet at the best line (within `chunk`, when given) and context."""
        region = None if chunk is None else (text.count("\n", 0, chunk[0]), text.count("\n", 0, chunk[1]) + 1)
        line, snippet = make_snippet(text, words, row.body_line, snippet_chars, line_numbers, region)
        return SearchHit(
            docid=row.docid, collection=row.collection, path=row.path, title=row.title, score=score, line=line,
            snippet=snippet, match=match, context=self._context(row.collection, row.path), body=text if full else None,
        )

    def get(self, ref: str, from_line: int | None = None, max_lines: int | None = None, cwd: str | None = None) -> Document:
        """One document (or `from_line`.. `max_lines` of it) by path, qmd:// URI or #docid.

        `path:from:count` in `ref` sets the range when the arguments do not.
        """
        target, start, count = docs.split_range(ref)
        from_line = from_line or start
        max_lines = max_lines if max_lines is not None else count
        conn = self._db()
        colls = self._collections()
        row = docs.resolve(conn, colls, target, cwd)
        lines = docs.read_content(conn, row.hash).split("\n")
        first = max((from_line or 1), 1)
        if first > len(lines):
            raise QmdError(f"{row.collection}/{row.path} has {len(lines)} lines; line {first} does not exist", "pick a line within the file")
        last = len(lines) if max_lines is None else min(len(lines), first - 1 + max(max_lines, 0))
        return Document(
            docid=row.docid, collection=row.collection, path=row.path, title=row.title,
            text="\n".join(lines[first - 1 : last]), from_line=first, total_lines=len(lines),
            context=self._context(row.collection, row.path), abs_path=docs.abs_path(colls, row),
        )

    def multi_get(self, pattern: str, max_lines: int | None = None, max_bytes: int = MULTI_GET_MAX_BYTES, cwd: str | None = None) -> list[MultiGetItem]:
        """Several documents: a glob over collection/path, a comma-separated list, or docids.

        Documents larger than `max_bytes` are listed as skipped with the reason.
        """
        conn = self._db()
        colls = self._collections()
        rows: list[docs.DocRow] = []
        if any(ch in pattern for ch in "*?["):
            glob = pattern[len("qmd://") :] if pattern.startswith("qmd://") else pattern
            regex = re.compile(fnmatch.translate(glob))
            for row in docs.active_rows(conn, "1", ()):
                if row.collection in colls and (regex.match(f"{row.collection}/{row.path}") or regex.match(row.path)):
                    rows.append(row)
            if not rows:
                raise NotFoundError(f"no documents match {pattern}", "patterns match collection/path, e.g. 'notes/**/*.md'")
        else:
            for ref in (p.strip() for p in pattern.split(",")):
                if ref:
                    rows.append(docs.resolve(conn, colls, ref, cwd))
        out: list[MultiGetItem] = []
        for row in dict.fromkeys(rows):
            ctx = self._context(row.collection, row.path)
            if row.size > max_bytes:
                out.append(MultiGetItem(row.docid, row.collection, row.path, row.title, None,
                                        skipped=f"{row.size} bytes is over the {max_bytes}-byte limit; use qmd get {row.collection}/{row.path}", context=ctx))
                continue
            lines = docs.read_content(conn, row.hash).split("\n")
            shown = lines if max_lines is None else lines[:max_lines]
            out.append(MultiGetItem(row.docid, row.collection, row.path, row.title, "\n".join(shown),
                                    total_lines=len(lines), truncated_lines=len(lines) - len(shown), context=ctx))
        return out

    def ls(self, target: str | None = None) -> list[FileEntry]:
        """Files of a collection (optionally under a sub-path): `name`, `name/sub`, `qmd://name/sub`."""
        ref = (target or "").strip()
        if ref.startswith("qmd://"):
            ref = ref[len("qmd://") :]
        name, _, sub = ref.partition("/")
        self._collection(name)
        sub = normalise_subpath(sub).lstrip("/")
        conn = self._db()
        sql = "SELECT collection, path, size, mtime_ns, hash, title FROM documents WHERE active = 1 AND collection = ?"
        params: list[object] = [name]
        if sub:
            sql += " AND (path = ? OR substr(path, 1, ?) = ?)"
            params += [sub, len(sub) + 1, sub + "/"]
        return [FileEntry(c, p, s, m, h[:6], t) for c, p, s, m, h, t in conn.execute(sql + " ORDER BY path", params)]

    # --- models and vectors (qmd/search/vector.py, qmd/embedding.py) ----------------

    def model(self, role: str) -> ModelRef:
        """The model serving `role` (embed, rerank, generate) and where the choice came from."""
        from qmd.llm.models import resolve_model

        models = self.config.raw.get("models")
        return resolve_model(role, models if isinstance(models, dict) else None)

    def models(self) -> list[ModelStatus]:
        from qmd.llm.models import ROLES

        return [ModelStatus(r.role, r.spec, r.source, str(r.path), r.available) for r in (self.model(role) for role in ROLES)]

    def embedder(self) -> Embedder:
        """The loaded embedding model (kept for the Store's lifetime). Never downloads."""
        from qmd.llm.embedder import Embedder
        from qmd.llm.models import require_local

        path = require_local(self.model("embed"))
        if self._embedder is None or self._embedder.info.path != path:
            self._embedder = Embedder(path)
        return self._embedder

    def reranker(self) -> CrossEncoder | YesNoReranker:
        """The loaded rerank model (cross-encoder or yes/no form). Never downloads."""
        from qmd.llm.models import require_local
        from qmd.llm.reranker import load_reranker

        path = require_local(self.model("rerank"))
        if self._reranker is None or self._reranker.info.path != path:
            self._reranker = load_reranker(path)
        return self._reranker

    def generator(self) -> Generator:
        """The loaded generate (query expansion) model. Never downloads."""
        from qmd.llm.generator import Generator
        from qmd.llm.models import require_local

        path = require_local(self.model("generate"))
        if self._generator is None or self._generator.info.path != path:
            self._generator = Generator(path)
        return self._generator

    def expand(self, question: str, generator: Generator | None = None) -> list[SubQuery]:
        """Typed expansion lines for `question`, from the index's cache when present."""
        from qmd.store.sqlite import cache as llm_cache
        from qmd.search.typed import SubQuery

        generator = generator or self.generator()
        key = llm_cache.cache_key("expand", generator.info.identity, question)
        conn = self._db()
        cached = llm_cache.get(conn, key)
        if cached is not None:
            return [SubQuery(t, q) for t, q in cached]
        lines = generator.expand(question)
        llm_cache.put_many(conn, "expand", {key: [[s.type, s.text] for s in lines]})
        return lines

    def rerank(self, query: str, texts: list[str], reranker: CrossEncoder | YesNoReranker | None = None) -> list[float]:
        """Relevance in [0, 1] of each text to `query`, cached per (model, query, text)."""
        from qmd.store.sqlite import cache as llm_cache

        reranker = reranker or self.reranker()
        conn = self._db()
        keys = [llm_cache.cache_key("rerank", reranker.info.identity, query, t) for t in texts]
        known = llm_cache.get_many(conn, keys)
        missing = [i for i, k in enumerate(keys) if k not in known]
        if missing:
            fresh = reranker.scores(query, [texts[i] for i in missing])
            new = {keys[i]: float(score) for i, score in zip(missing, fresh)}
            llm_cache.put_many(conn, "rerank", new)
            known.update(new)
        return [float(known[k]) for k in keys]

    def chunks_for(self, hashes: list[str]) -> dict[str, list[tuple[int, int]]]:
        """(start, end) of each document's chunks under the current embed model ({} if none)."""
        from qmd.index.embedding import fingerprint
        from qmd.store.sqlite.vectors import model_row

        if self._embedder is None or not hashes:
            return {}
        model = model_row(self._db(), fingerprint(self._embedder))
        if model is None:
            return {}
        marks = ",".join("?" * len(hashes))
        out: dict[str, list[tuple[int, int]]] = {}
        sql = f"SELECT hash, start, end FROM chunks WHERE model_id = ? AND hash IN ({marks}) ORDER BY hash, seq"
        for h, start, end in self._db().execute(sql, (model.id, *hashes)):
            out.setdefault(h, []).append((start, end))
        return out

    def query(
        self,
        text: str,
        *,
        limit: int = 10,
        candidates: int = 40,
        min_score: float = 0.0,
        collections: list[str] | None = None,
        intent: str | None = None,
        rerank: bool = True,
        expand: bool | None = None,
        explain: bool = False,
        snippet_chars: int = CLI_SNIPPET_CHARS,
        progress: Callable[[str], None] | None = None,
        keyword: bool = True,
    ) -> QueryResult:
        """Hybrid search: expansion, BM25 + vector lists, RRF, rerank, blend (search/hybrid.py).

        Missing models skip their stage; the result's `stages` and `notices` say which.
        `expand=None` expands only with a model trained for it (Generator.tuned); True with
        any generate model; False never.
        `keyword=False` searches vectors only (vsearch --expand).
        """
        from qmd.search.hybrid import QueryOptions, run_query

        opts = QueryOptions(limit, candidates, min_score, collections, intent, rerank, expand, snippet_chars, keyword)
        return run_query(self, text, opts, progress, explain)

    def embed_collections(self, collections: list[str] | None = None) -> tuple[list[str], list[str]]:
        """(collections to embed, collections skipped because of `embed: false`)."""
        colls = self._collections()
        names = list(colls) if not collections else [self._collection(n).name for n in collections]
        return [n for n in names if colls[n].embed], [n for n in names if not colls[n].embed]

    def embed(self, *, force: bool = False, collections: list[str] | None = None, progress: EmbedProgress | None = None, on_wait: Callable[[], None] | None = None) -> EmbedReport:
        """Embed every document without vectors for the current embed model (writer lock held).

        `force` drops this model's vectors first; `embed: false` collections are skipped.
        """
        from qmd.index.embedding import run_embed

        embedder = self.embedder()
        wanted, skipped = self.embed_collections(collections)
        self._writes += 1
        with writer_lock(self.index_path, on_wait=on_wait):
            return run_embed(self._db(), embedder, wanted, skipped, force=force, progress=progress)

    def vector_status(self, collections: list[str] | None = None) -> VectorStatus:
        """Vectors of the current embed model and documents still needing `qmd embed`.

        Reads the model file's header only: never loads llama.cpp.
        """
        from qmd.search.vector import vector_status

        ref = self.model("embed")
        wanted, _ = self.embed_collections(collections)
        loaded = self._embedder if self._embedder is not None and self._embedder.info.path == ref.path else None
        return vector_status(self._db(), ref.path if ref.available else None, loaded, wanted)

    def vsearch(
        self,
        query: str,
        *,
        limit: int | None = 10,
        collections: list[str] | None = None,
        min_score: float = 0.0,
        full: bool = False,
        snippet_chars: int = CLI_SNIPPET_CHARS,
        line_numbers: bool = False,
    ) -> VectorSearch:
        """Nearest documents by meaning (cosine similarity of each document's best chunk)."""
        from qmd.search.vector import current_model, nearest_documents, pending_count

        conn = self._db()
        embedder = self.embedder()
        scope = self._search_scope(collections)
        wanted, _ = self.embed_collections(scope)
        model = current_model(conn, embedder)
        found = nearest_documents(conn, model, embedder.embed_query(query), limit, scope)
        # Counting what still needs embedding costs ~5-9 ms on a large index: cache it until
        # another connection commits (PRAGMA data_version) or this Store writes.
        key = (model.id, tuple(wanted), scalar(conn, "PRAGMA data_version"), self._writes)
        if self._pending is None or self._pending[0] != key:
            self._pending = (key, pending_count(conn, model, wanted))
        pending = self._pending[1]
        words = parse_query(query).words
        rows = docs.rows_with_text(conn, [doc_id for doc_id, _, _ in found])
        out = [
            self.hit(*rows[doc_id], similarity, "vector", words, snippet_chars, line_numbers, chunk, full)
            for doc_id, similarity, chunk in found
            if similarity >= min_score
        ]
        return VectorSearch(out, embedder.info.name, pending)

    def last_updated(self) -> str | None:
        """When a collection was last indexed (ISO-8601 UTC), or None if never: one cheap query."""
        if not self.index_path.exists():
            return None
        value = scalar(self._db(), "SELECT max(updated_at) FROM collection_state")
        return str(value) if value else None

    def document_count(self) -> int:
        """Active documents in the index (0 if it was never built)."""
        if not self.index_path.exists():
            return 0
        return int(scalar(self._db(), "SELECT count(*) FROM documents WHERE active = 1") or 0)

    def status(self) -> StatusInfo:
        exists = self.index_path.exists()
        conn = self._db() if exists else None
        def count(sql: str) -> int:
            return int(scalar(conn, sql) or 0) if conn is not None else 0
        issues = list(conn.execute("SELECT collection, path, severity, reason FROM file_issues ORDER BY 1, 2")) if conn else []
        updated = scalar(conn, "SELECT max(updated_at) FROM collection_state") if conn else None
        size = sum(p.stat().st_size for p in (self.index_path, Path(str(self.index_path) + "-wal")) if p.exists())
        return StatusInfo(
            index_path=str(self.index_path), size_bytes=size,
            documents=count("SELECT count(*) FROM documents WHERE active = 1"),
            inactive=count("SELECT count(*) FROM documents WHERE active = 0"),
            content_rows=count("SELECT count(*) FROM content"),
            updated_at=str(updated) if updated else None,
            collections=self.collections(), issues=issues, global_context=self.config.global_context,
        )


def open_index(name: str | None = None) -> Store:
    """The Store of the named index (default `index`) at its default paths (see `resolve_index`)."""
    from qmd.core.paths import resolve_index

    paths = resolve_index(name)
    return Store(paths.index_path, paths.config_path)
