"""Knowledge folders: which paths the guard protects, read from qmd's cached `folders.json`.

A path is *protected* when it lies in a collection folder of any index, or it (or one of its
ancestors) matches a `guard.protect` glob, unless it (or an ancestor) matches a
`guard.allow` glob. Glob rules: `~` is expanded; a glob starting with `/` matches whole
absolute paths; any other glob matches at any depth (`wiki` protects every folder named
wiki); a trailing `/` or `/**` is ignored (a folder glob covers the folder and its content,
so `/**` is every path).

A project-local config's `guard.allow` globs (cached as `project_allow` entries, only once
that project is trusted) exempt paths inside that project only: `{"root": <project>, "glob":
<glob>}` applies to paths under `root`, and a relative glob there matches folders below
`root` only. `patterns` maps each collection folder to its collections' patterns
(`{"/x/manual": ["**/*.rst"]}`) so that file filters (`--include`, `-t`, `-g`) are tested
against the collection's own notes; a folder missing there (an older cache) has the sample
notes .md/.markdown/.mdx/.txt.

All paths given to this module are absolute and already `realpath`-ed by the caller.
"""

from __future__ import annotations

import os

from . import budget
from .fastjson import loads

_WILD = frozenset("*?[")
_WALK_BUDGET = 2000  # directories one Knowledge may visit looking for relative protect globs (the hook has 5 s)


class Folder:
    """One knowledge folder: a collection folder (with its index and collection) or a protect glob."""

    __slots__ = ("path", "index", "collection", "glob", "patterns")

    def __init__(self, path: str, index: str | None = None, collection: str | None = None, glob: str | None = None,
                 patterns: tuple[str, ...] | None = None) -> None:
        self.path = path
        self.index = index
        self.collection = collection
        self.glob = glob
        self.patterns = patterns  # the collection's note globs (`**/*.rst`); None: not known (sample names)

    def label(self) -> str:
        """`/x/notes (collection notes)`, `/x/notes (index work, collection notes)` or `/x/wiki (guard.protect wiki)`."""
        if self.glob is not None:
            return f"{self.path} (guard.protect {self.glob})"
        if self.index and self.index != "index":
            return f"{self.path} (index {self.index}, collection {self.collection})"
        return f"{self.path} (collection {self.collection})"


def is_under(path: str, root: str) -> bool:
    """True when `path` is `root` or inside it (plain string test on normalised absolute paths)."""
    if path == root:
        return True
    prefix = root if root.endswith("/") else root + "/"
    return path.startswith(prefix)


def _norm_glob(pattern: str) -> str:
    pattern = os.path.expanduser(pattern.strip())
    while pattern.endswith("/**") or (pattern.endswith("/") and len(pattern) > 1):
        pattern = (pattern[:-3] or "/") if pattern.endswith("/**") else pattern[:-1]
    return pattern


def _literal_prefix(pattern: str) -> str:
    """The directory part of an absolute glob before its first wildcard component."""
    parts: list[str] = []
    for part in pattern.split("/"):
        if _WILD & set(part):
            break
        parts.append(part)
    return "/".join(parts) or "/"


class Knowledge:
    """The protected folders and the protect/allow globs, with the questions the guard asks."""

    def __init__(self, folders: list[Folder], protect: list[str], allow: list[str], project_allow: list[tuple[str, str]] | None = None) -> None:
        self.folders = folders
        self.protect = [g for g in (_norm_glob(p) for p in protect) if g]
        self.allow = [g for g in (_norm_glob(p) for p in allow) if g]
        # (project root, glob): a trusted project's own exemptions, for paths inside it only
        self.project_allow = [(root, g) for root, g in ((r, _norm_glob(p)) for r, p in project_allow or []) if g]
        self._walk_budget = _WALK_BUDGET

    def __bool__(self) -> bool:
        return bool(self.folders or self.protect)

    @staticmethod
    def _match(path: str, pattern: str, floor: str | None = None) -> bool:
        """`path` or one of its ancestors matches `pattern` (relative globs match at any depth;
        with `floor`, a relative glob matches only `floor` and folders below it)."""
        from fnmatch import fnmatchcase

        relative = not pattern.startswith("/")
        full = "*/" + pattern if relative else pattern
        probe = path
        while True:
            if relative and floor is not None and not is_under(probe, floor):
                return False
            if fnmatchcase(probe, full):
                return True
            parent = os.path.dirname(probe)
            if parent == probe:
                return False
            probe = parent

    def allowed(self, path: str) -> bool:
        """True when a `guard.allow` glob exempts `path` (or one of its ancestors); a project's
        own globs count only for paths inside that project."""
        if any(self._match(path, g) for g in self.allow):
            return True
        return any(is_under(path, root) and self._match(path, g, root) for root, g in self.project_allow)

    @property
    def exemptions(self) -> bool:
        """True when any allow glob (global or a project's) is configured."""
        return bool(self.allow or self.project_allow)

    def folder_of(self, path: str) -> Folder | None:
        """The knowledge folder `path` lies in, or None (also None when `guard.allow` exempts it)."""
        hit: Folder | None = None
        for folder in self.folders:
            if is_under(path, folder.path) and (hit is None or len(folder.path) > len(hit.path)):
                hit = folder
        if hit is None:
            for pattern in self.protect:
                if self._match(path, pattern):
                    hit = Folder(self._matched_ancestor(path, pattern), glob=pattern)
                    break
        if hit is not None and self.exemptions and self.allowed(path):
            return None
        return hit

    def _matched_ancestor(self, path: str, pattern: str) -> str:
        from fnmatch import fnmatchcase

        probe = path
        full = pattern if pattern.startswith("/") else "*/" + pattern
        while not fnmatchcase(probe, full):
            parent = os.path.dirname(probe)
            if parent == probe:
                return path
            probe = parent
        return probe

    def inside(self, root: str, excluded: object = None) -> list[Folder]:
        """Knowledge folders strictly inside directory `root` that a recursive search would reach.

        `excluded(folder_path)` (optional) drops folders the search itself excludes
        (`--exclude-dir`, `-g '!notes'`, `-prune`, …); exempt (`guard.allow`) folders are dropped.
        """
        found = [f for f in self.folders if f.path != root and is_under(f.path, root)]
        for pattern in self.protect:
            found += [Folder(p, glob=pattern) for p in self._glob_below(root, pattern)]
        keep: list[Folder] = []
        seen: set[str] = set()
        for folder in sorted(found, key=lambda f: (f.glob is not None, f.path)):
            if folder.path in seen or (self.exemptions and self.allowed(folder.path)):
                continue
            if callable(excluded) and excluded(folder.path):
                continue
            seen.add(folder.path)
            keep.append(folder)
        return keep

    def _glob_below(self, root: str, pattern: str) -> list[str]:
        """Existing paths strictly below `root` that match protect glob `pattern` (bounded work)."""
        if pattern.startswith("/"):
            prefix = _literal_prefix(pattern)
            if not (is_under(prefix, root) or is_under(root, prefix)):
                return []
            if not (_WILD & set(pattern)):
                return [pattern] if pattern != root and is_under(pattern, root) and os.path.exists(pattern) else []
            out: list[str] = []
            try:
                for match in budget.iglob(pattern):
                    real = os.path.realpath(match)
                    if real != root and is_under(real, root):
                        out.append(real)
                    if len(out) >= 50:
                        break
            except budget.GlobSpent:  # not known: the folder (or the pattern's own start) may hold a match
                return out or [prefix if prefix != root and is_under(prefix, root) else root]
            return out
        return self._walk_for(root, pattern)

    def _walk_for(self, root: str, pattern: str) -> list[str]:
        from fnmatch import fnmatchcase

        full = "*/" + pattern
        out: list[str] = []
        for dirpath, dirnames, _files in os.walk(root):
            dirnames[:] = [d for d in dirnames if not d.startswith(".") and d != "node_modules"]
            for d in list(dirnames):
                child = os.path.join(dirpath, d)
                if fnmatchcase(child, full):
                    out.append(child)
                    dirnames.remove(d)
            self._walk_budget -= 1
            budget.check()
            if self._walk_budget <= 0 or len(out) >= 50:
                break
        return out

    def has_allow_inside(self, root: str) -> bool:
        """True when some `guard.allow` glob may exempt a path below `root` (narrowing recurses there)."""
        for pattern in self.allow:
            if not pattern.startswith("/"):
                return True
            prefix = _literal_prefix(pattern)
            if is_under(prefix, root) and prefix != root:
                return True
        for project, pattern in self.project_allow:
            if not (is_under(project, root) or is_under(root, project)):
                continue
            if not pattern.startswith("/"):
                return True
            prefix = _literal_prefix(pattern)
            if is_under(prefix, root) and prefix != root and (is_under(prefix, project) or is_under(project, prefix)):
                return True
        return False


def parse(data: object) -> Knowledge:
    """Build a Knowledge from the decoded `folders.json` (unknown or malformed entries are skipped)."""
    if not isinstance(data, dict):
        raise ValueError("folders.json: not a JSON object")
    folders: list[Folder] = []
    by_path = data.get("patterns")
    by_path = by_path if isinstance(by_path, dict) else {}
    for entry in data.get("folders") or []:
        if isinstance(entry, dict) and isinstance(entry.get("path"), str) and entry["path"].startswith("/"):
            path = os.path.normpath(entry["path"])
            raw = by_path.get(entry["path"])
            patterns = tuple(p for p in raw if isinstance(p, str) and p) if isinstance(raw, list) else ()
            folders.append(Folder(path, str(entry.get("index") or ""), str(entry.get("collection") or ""), patterns=patterns or None))
    protect = [g for g in data.get("protect") or [] if isinstance(g, str)]
    allow = [g for g in data.get("allow") or [] if isinstance(g, str)]
    scoped: list[tuple[str, str]] = []
    for entry in data.get("project_allow") or []:
        if isinstance(entry, dict) and isinstance(entry.get("root"), str) and entry["root"].startswith("/") and isinstance(entry.get("glob"), str):
            scoped.append((os.path.normpath(entry["root"]), entry["glob"]))
    return Knowledge(folders, protect, allow, scoped)


def load(path: str) -> Knowledge | None:
    """Read `folders.json` at `path`; None when it does not exist. Raises on a file that cannot be parsed.

    Only a regular file is read: a FIFO (opened without waiting for a writer) or a device such
    as /dev/zero raises at once, where open() or read() blocked until the agent's hook timeout
    on every shell call."""
    import stat

    try:
        fd = os.open(path, os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0))
    except FileNotFoundError:
        return None
    with open(fd, "rb") as fh:
        if not stat.S_ISREG(os.fstat(fd).st_mode):
            raise OSError(f"{path} is not a regular file (a pipe, device or folder): allowed; run `qmd guard refresh` after moving it away")
        os.set_blocking(fd, True)
        raw = fh.read()
    return parse(loads(raw.decode("utf-8")))
