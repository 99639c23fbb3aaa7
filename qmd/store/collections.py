"""Collections and contexts: what is indexed, and what it is about (the config's side)."""

from __future__ import annotations

import os
import re
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path

from qmd.core.errors import NotFoundError, QmdError
from qmd.core.config import DEFAULT_PATTERN, CollectionConfig
from qmd.core.contexts import normalise_subpath
from qmd.core.results import CollectionInfo, ContextInfo, Overlap, UpdateReport
from qmd.store.activity import Activity, activity_path
from qmd.store.state import IndexState

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.index.indexer import Progress

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")
UPDATE_COMMAND_TIMEOUT_S = 900


def check_collection_name(name: str) -> str:
    if not _NAME.match(name):
        raise QmdError(f"invalid collection name {name!r}", "use letters, digits, '.', '_' or '-' (it appears in qmd:// paths)")
    return name


MAX_OVERLAPS = 1000  # overlapping pairs worked out and reported (20,000 collections on one folder are 2·10⁸ pairs)


class Collections:
    """Add, remove, rename and describe collections; re-index them (`update`)."""

    def __init__(self, state: IndexState) -> None:
        self.state = state

    def add(
        self,
        path: str | os.PathLike[str],
        name: str | None,
        pattern: str,
        ignore: list[str] | None,
        update_command: str | None,
        *,
        index: bool,
        progress: Progress | None,
        exist_ok: bool = False,
        on_saved: Callable[[], None] | None = None,
    ) -> UpdateReport | None:
        try:
            folder = Path(path).expanduser().resolve()
        except RuntimeError:  # pathlib's "Symlink loop": once exit 3
            raise QmdError(f"{path} is a symlink loop (a link that leads back to itself)", "give the real folder that holds the markdown files") from None
        name = check_collection_name(folder.name if name is None else name)
        if name not in self.state.collections():
            if not folder.exists():
                raise QmdError(f"{path} does not exist", "check the path of the folder to index")
            if not folder.is_dir():
                raise QmdError(f"{path} is not a folder", "give the folder that holds the markdown files")
        already = False
        with self.state.editing_config() as config:  # the check and the change on the config as it is now
            existing = self.state.collections()
            if name in existing:
                same = Path(existing[name].path).resolve() == folder
                if not (exist_ok and same):
                    raise QmdError(
                        f"collection '{name}' already exists (at {existing[name].path})", f"pick another --name, or: qmd collection remove {name}",
                        api_hint=f"pass another name=, or exist_ok=True when it is the same folder, or call store.remove_collection({name!r}) first",
                    )
                already = True
            else:
                config.set_collection(CollectionConfig(name, _as_written(self.state.config_path, folder), pattern or DEFAULT_PATTERN, list(ignore or []), update_command))
        if already:
            return self.update([name], progress=progress) if index else None
        if not index:
            if on_saved is not None:
                on_saved()
            return None
        try:
            if on_saved is not None:
                on_saved()
            return self.update([name], progress=progress)
        except BaseException:
            # Nothing half-done: a collection that could not be indexed is not left registered.
            with self.state.editing_config() as config:
                config.remove_collection(name)
            raise

    def set_update_command(self, name: str, command: str | None) -> None:
        with self.state.editing_config() as config:
            coll = self.state.editable(name)
            coll.update = command or None
            config.set_collection(coll)

    def remove(self, name: str) -> int:
        backend = self.state.backend
        if name not in self.state.collections() and name in self.orphaned():
            # only in the index (another config indexed it, and update keeps it): dropped on request
            with backend.writer_lock():
                return self._drop(name)
        self.state.collection(name)
        self.state.config.check_writable()  # before the rows go: an index emptied under a config that still lists it
        from qmd.core.cancel import interrupts_deferred

        with ExitStack() as held:
            dropped = 0
            exists = backend.exists()
            if exists:
                # The rows and the config go under one hold of the writer lock: an update that
                # got in between read the config still naming the collection and indexed it again.
                held.enter_context(backend.writer_lock())
            held.enter_context(interrupts_deferred())  # a Ctrl-C or SIGTERM waits until both are gone (it ended a remove between them)
            if exists:
                dropped = self._drop(name)
            with self.state.editing_config() as config:
                config.remove_collection(name)
        return dropped

    def _drop(self, name: str) -> int:
        """Delete a collection's rows and its writer record (the caller holds the writer lock)."""
        from qmd.backends.owner import WRITER_PREFIX

        db = self.state.db()
        dropped = db.drop_collection(name)
        db.set_meta(WRITER_PREFIX + name, None)
        return dropped

    def rename(self, old: str, new: str) -> None:
        self.state.collection(old)
        check_collection_name(new)
        if new in self.state.collections():
            raise QmdError(f"collection '{new}' already exists", "pick another name")
        # The index and the config name it together or not at all: one renamed without the
        # other serves nothing, and the next update drops the rows and re-adds them (vectors lost).
        from qmd.core.cancel import interrupts_deferred

        self.state.config.check_writable()
        backend = self.state.backend
        with ExitStack() as held:
            renamed = backend.exists()
            if renamed:
                # One hold of the writer lock over the rows and the config: an update that got
                # in between read the config's old name, dropped the renamed rows as "no longer
                # in the config" (their vectors with them) and indexed the old name again.
                held.enter_context(backend.writer_lock())  # waited for before signals are held: a Ctrl-C stops the wait
            held.enter_context(interrupts_deferred())  # a Ctrl-C or SIGTERM waits until both are renamed (or neither)
            if renamed:
                self._rename_rows(old, new)
            try:
                with self.state.editing_config() as config:
                    if old not in config.collections() or new in config.collections():  # another process changed it meanwhile
                        raise QmdError(f"the config changed while collection '{old}' was renamed", f"see qmd collection list, then try again: qmd collection rename {old} {new}")
                    config.rename_collection(old, new)
            except Exception:
                if renamed:
                    self._rename_rows(new, old)
                raise

    def _rename_rows(self, old: str, new: str) -> None:
        """Rename a collection's rows and writer record in the index (the caller holds the writer lock)."""
        from qmd.index.indexer import search_fields  # the indexer loads only for what writes

        from qmd.backends.owner import WRITER_PREFIX

        db = self.state.db()
        db.rename_collection(old, new, search_fields)
        writer = db.meta_values(WRITER_PREFIX + old).get(WRITER_PREFIX + old)
        db.set_meta(WRITER_PREFIX + old, None)
        db.set_meta(WRITER_PREFIX + new, writer)

    def set_include_by_default(self, name: str, include: bool) -> None:
        with self.state.editing_config() as config:
            coll = self.state.editable(name)
            coll.include_by_default = include
            config.set_collection(coll)

    def orphaned(self) -> list[str]:
        """Collections the index holds rows of that the config no longer names."""
        backend = self.state.backend
        if not backend.exists():
            return []
        return sorted(self.state.db().indexed_collections() - set(self.state.collections()))

    def drop_orphaned(self) -> tuple[list[tuple[str, int]], list[tuple[str, str]]]:
        """Delete the rows of collections no longer in the config that this config indexed
        (the caller holds the writer lock): (dropped: name and documents, kept: name and the
        config that indexed it). Another config's collection is kept (two team members'
        `team.yml` on one database, two config dirs over one index file): dropping it would
        lose that config's documents, so only `qmd collection remove NAME` does."""
        from qmd.backends.owner import META_KEY, WRITER_PREFIX, shown, writer_for, writer_of

        orphans = self.orphaned()
        if not orphans:
            return [], []
        db = self.state.db()
        records = db.meta_values(WRITER_PREFIX)
        owner = db.meta_values(META_KEY).get(META_KEY)
        mine = writer_of(writer_for(self.state.config_path), None)
        dropped: list[tuple[str, int]] = []
        kept: list[tuple[str, str]] = []
        for name in orphans:
            writer = writer_of(records.get(WRITER_PREFIX + name), owner)
            if writer is None or writer == mine:
                dropped.append((name, self._drop(name)))
            else:
                kept.append((name, shown(writer)))
        return dropped, kept

    def infos(self) -> list[CollectionInfo]:
        backend = self.state.backend
        counts: dict[str, int] = {}
        updated: dict[str, str] = {}
        issues: dict[tuple[str, str], int] = {}
        if backend.exists():
            db = self.state.db()
            counts = db.collection_counts()
            updated = db.collection_updated()
            for collection, _, severity, _ in db.file_issues():
                issues[(collection, severity)] = issues.get((collection, severity), 0) + 1
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
            for c in self.state.collections().values()
        ]

    def overlaps(self, only: str | None = None) -> list[Overlap]:
        """Pairs of collections whose folders are the same or one inside the other (`only`:
        the pairs with that one), with how many files are indexed by both; at most
        MAX_OVERLAPS of them. Each folder's ancestors are looked up among the roots (linear in
        collections × depth: comparing every pair took `status` 40 s at 2,000 collections),
        and each collection's file list is read once."""
        colls = self.state.collections()
        roots = {name: Path(coll.path).expanduser().resolve() for name, coll in colls.items()}
        db = self.state.db() if self.state.backend.exists() else None
        names = list(colls)
        order = {name: i for i, name in enumerate(names)}
        by_root: dict[tuple[str, ...], list[str]] = {}
        for name in names:
            by_root.setdefault(roots[name].parts, []).append(name)
        pairs: set[tuple[int, int]] = set()
        for name in names if only is None else [only] if only in roots else []:
            parts = roots[name].parts
            for depth in range(1, len(parts) + 1):  # the folder's ancestors, and the folder itself
                for other in by_root.get(parts[:depth], ()):
                    if other != name:
                        pairs.add((min(order[name], order[other]), max(order[name], order[other])))
            if only is None:  # the same folder later in the list is found from there; below it, from the inner one
                continue
            for other in names:  # `only` as the outer folder: the collections inside it
                if other != name and roots[name] in roots[other].parents:
                    pairs.add((min(order[name], order[other]), max(order[name], order[other])))
        files: dict[tuple[str, str], set[str]] = {}

        def listed(collection: str, under: str = "") -> set[str]:
            if (collection, under) not in files:
                files[collection, under] = {f.path for f in db.files(collection, under)} if db is not None else set()
            return files[collection, under]

        out: list[Overlap] = []
        for i, j in sorted(pairs)[:MAX_OVERLAPS]:
            a, b = names[i], names[j]
            if roots[b] == roots[a] or roots[a] in roots[b].parents:
                outer, inner = a, b
            else:
                outer, inner = b, a
            shared = 0
            if db is not None:
                under = roots[inner].relative_to(roots[outer]).as_posix()
                prefix = "" if under == "." else under + "/"
                held = listed(outer, under if prefix else "")
                shared = sum(1 for path in listed(inner) if prefix + path in held)
            out.append(Overlap(inner, outer, shared, roots[a] == roots[b]))
        return out

    # --- contexts -----------------------------------------------------------------

    def _context_target(self, target: str, cwd: str | None) -> tuple[str | None, str]:
        """(collection or None for global, sub-path) for a context target."""
        target = target.strip()
        if target in ("/", ""):
            return None, "/"
        colls = self.state.collections()
        if target.startswith("qmd://"):
            name, _, sub = target[len("qmd://") :].partition("/")
            self.state.collection(name)
            return name, normalise_subpath(sub)
        first, _, rest = target.partition("/")
        if first in colls and not os.path.isabs(target):
            return first, normalise_subpath(rest)
        located = self.state.fs_context_target(target, cwd)
        if located is None:
            raise QmdError(f"{target} is not inside any collection", "use qmd://COLLECTION/sub-path, or '/' for the global context")
        return located[0], normalise_subpath(located[1])

    def add_context(self, target: str, text: str, cwd: str | None) -> ContextInfo:
        text = text.strip()
        if not text:
            raise QmdError("a context needs some text", 'qmd context add qmd://notes/ "What these notes are about"')
        name, sub = self._context_target(target, cwd)
        with self.state.editing_config() as config:
            if name is None:
                config.global_context = text
            else:
                coll = self.state.editable(name)
                coll.context[sub] = text
                config.set_collection(coll)
        return ContextInfo("/" if name is None else f"qmd://{name}{sub if sub != '/' else '/'}", text)

    def contexts(self) -> list[ContextInfo]:
        config = self.state.config
        out = [ContextInfo("/", config.global_context)] if config.global_context else []
        for coll in self.state.collections().values():
            for sub, text in coll.context.items():
                sub = normalise_subpath(sub)
                out.append(ContextInfo(f"qmd://{coll.name}{sub if sub != '/' else '/'}", text))
        return out

    def remove_context(self, target: str, cwd: str | None) -> None:
        name, sub = self._context_target(target, cwd)
        with self.state.editing_config() as config:
            if name is None:
                if not config.global_context:
                    raise NotFoundError("there is no global context", "list contexts with: qmd context list")
                config.global_context = None
            else:
                coll = self.state.editable(name)
                key = next((k for k in coll.context if normalise_subpath(k) == sub), None)
                if key is None:
                    raise NotFoundError(f"no context at qmd://{name}{sub}", "list contexts with: qmd context list")
                del coll.context[key]
                config.set_collection(coll)

    # --- indexing -------------------------------------------------------------------

    def update(
        self,
        collections: list[str] | None = None,
        *,
        progress: Progress | None = None,
        run_commands: bool = True,
        on_command: Callable[[str, str], None] | None = None,
        on_wait: Callable[[], None] | None = None,
        wait: float | None = None,
    ) -> UpdateReport:
        from qmd.index.indexer import index_collection  # the indexer loads only for what writes

        colls = self.state.collections()
        names = list(colls) if collections is None else [self.state.collection(n).name for n in collections]
        report = UpdateReport([])
        self.state.writes += 1
        with self.state.backend.writer_lock(timeout=wait, on_wait=on_wait):
            # The config as it is now, not as it was before the wait: a `collection add` that
            # saved and indexed a collection meanwhile would see its documents dropped as "no
            # longer in the config", and a removed one indexed again. Read when its stat moved
            # (a collection added or removed changes the size): an update reads each config
            # once when nothing changed (tests/updater/test_updater_reads.py).
            if self.state.read_config_again():
                colls = self.state.collections()
                names = list(colls) if collections is None else [self.state.collection(n).name for n in collections]
            backend = self.state.db(create=True)
            # The config says what may be served: rows of a collection removed from it go.
            report.dropped_collections, report.kept_collections = self.drop_orphaned()
            from qmd.backends.owner import WRITER_PREFIX, writer_for

            writer = writer_for(self.state.config_path)
            activity = Activity(activity_path(backend.location), "update")
            done = 0

            def tracked(rel: str, n: int) -> None:
                activity.progress(done + n, None, "files")
                if progress is not None:
                    progress(rel, n)

            with activity:
                for name in names:
                    coll = colls[name]
                    try:
                        if run_commands and coll.update:
                            failure = run_update_command(coll, on_command)
                            if failure:
                                report.command_failures.append((name, failure))
                        indexed = index_collection(backend, coll, tracked)
                        backend.set_meta(WRITER_PREFIX + name, writer)
                        done += indexed.new + indexed.updated
                        report.collections.append(indexed)
                    except QmdError as exc:
                        if len(names) == 1:
                            raise
                        # One broken collection must not keep the others stale.
                        report.errors.append((name, exc.message, exc.hint))
        return report


def run_update_command(coll: CollectionConfig, on_command: Callable[[str, str], None] | None) -> str | None:
    """Run a collection's `update:` command in its folder; the failure as one line, or None."""
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


def _as_written(config_path: Path, folder: Path) -> Path:
    """A folder inside the project of a project-local config is written relative to the
    project root, so the config means the same in every clone; anything else absolute."""
    from qmd.core.paths import is_local_config

    if not is_local_config(config_path):
        return folder
    root = Path(os.path.abspath(config_path)).parent.parent.resolve()
    return Path(os.path.relpath(folder, root)) if folder == root or root in folder.parents else folder
