"""Walk a collection's folder: which files match its glob, which are skipped and why."""

from __future__ import annotations

import errno
import os
import re
import stat
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Protocol

# Folders never indexed, as the original: tooling output and dependency trees.
SKIP_DIRS = frozenset({"node_modules", "vendor", "dist", "build", "__pycache__"})


def split_patterns(pattern: str) -> list[str]:
    """`'kafka.txt,*.rst'` → `['kafka.txt', '*.rst']`: commas outside braces separate globs."""
    parts, depth, current = [], 0, ""
    for c in pattern:
        if c == "," and depth == 0:
            parts.append(current)
            current = ""
            continue
        depth += 1 if c == "{" else -1 if c == "}" and depth else 0
        current += c
    parts.append(current)
    return [p.strip() for p in parts if p.strip()]


class Matcher(Protocol):
    """What `glob_regex` returns: a compiled regex, or a `GlobMachine` for a pattern a regex would backtrack on."""

    def match(self, string: str, /) -> object: ...


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> Matcher:
    """Compile a glob to a matcher over posix relative paths.

    `**/` matches zero or more folders, `**` anything, `*` and `?` stop at `/`, `[..]` and
    `{a,b}` as usual; a comma outside braces separates alternatives (`kafka.txt,*.rst`).
    A part with more than two wildcards or any braces is a `GlobMachine`: a backtracking
    regex takes exponential time on `*a*a*a…x` or `{a,aa}{a,aa}…`, and one multi_get
    pattern held the whole server.
    """
    parts = split_patterns(pattern)
    tokens = [_glob_tokens(p) for p in (parts if len(parts) > 1 else [pattern])]
    try:
        if any(sum(kind in _CHOICES for kind, _ in part) > 2 for part in tokens):
            return GlobMachine(tokens)
        bodies = ["".join(text for _, text in part) for part in tokens]
        if len(bodies) > 1:
            return re.compile("(?:" + "|".join(bodies) + r")\Z", re.DOTALL)
        return re.compile(bodies[0] + r"\Z", re.DOTALL)
    except re.error as exc:  # a class such as [z-a]: once an internal error (exit 3)
        from qmd.core.errors import QmdError

        raise QmdError(f"'{pattern[:200]}' is not a valid glob: {exc.msg} in a [...] class", "write a class's ranges low to high, e.g. [a-z], or '[[]' for a literal '['") from None


_CHOICES = frozenset({"star", "any", "folders", "open"})  # where a regex backtracks


def _glob_tokens(pattern: str) -> list[tuple[str, str]]:
    """The glob as (kind, regex text): kinds lit, one (`?`), class, star (`*`), any (`**`),
    folders (`**/`), open/bar/close (`{a,b}`; an unclosed brace closes at the end)."""
    out: list[tuple[str, str]] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        last = out[-1][0] if out else ""
        if pattern.startswith("**/", i):
            if last not in ("any", "folders"):  # `.*` or `(?:.*/)?` before it already matches what it adds
                out.append(("folders", "(?:.*/)?"))
            i += 3
            continue
        if pattern.startswith("**", i):
            if last in ("star", "folders"):  # `[^/]*.*` and `(?:.*/)?.*` are `.*`
                out.pop()
            if last != "any":
                out.append(("any", ".*"))
            i += 2
            continue
        if c == "*":
            if last != "any":  # `.*[^/]*` is `.*`
                out.append(("star", "[^/]*"))
        elif c == "?":
            out.append(("one", "[^/]"))
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j == -1:
                out.append(("lit", re.escape(c)))
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                out.append(("class", "[" + ("^" + body[1:] if body.startswith("!") else body) + "]"))
                i = j
        elif c == "{":
            out.append(("open", "(?:"))
            depth += 1
        elif c == "}" and depth:
            out.append(("close", ")"))
            depth -= 1
        elif c == "," and depth:
            out.append(("bar", "|"))
        else:
            out.append(("lit", re.escape(c)))
        i += 1
    out.extend([("close", ")")] * depth)
    return out


class GlobMachine:
    """A glob run as a state machine (Thompson's construction): each character of the path
    moves a set of states forward once, so a match costs pattern × path steps at most."""

    def __init__(self, parts: list[list[tuple[str, str]]]) -> None:
        self.edges: list[list[tuple[re.Pattern[str] | None, int]]] = [[]]  # per state: (one character's test or None for a free move, target)
        self.accept = self._node()
        for tokens in parts:
            start = self._node()
            self.edges[0].append((None, start))
            self.edges[self._build(tokens, start)].append((None, self.accept))
        self.start = frozenset(self._closure({0}))
        self._moves: dict[tuple[frozenset[int], str], frozenset[int]] = {}

    def _node(self) -> int:
        self.edges.append([])
        return len(self.edges) - 1

    def _step(self, src: int, test: re.Pattern[str] | None) -> int:
        dst = self._node()
        self.edges[src].append((test, dst))
        return dst

    def _build(self, tokens: list[tuple[str, str]], cur: int) -> int:
        groups: list[tuple[int, list[int]]] = []  # per open brace: its start, the ends of its alternatives
        for kind, text in tokens:
            if kind in ("star", "any"):
                cur = self._step(cur, None)
                self.edges[cur].append((re.compile("[^/]" if kind == "star" else ".", re.DOTALL), cur))
            elif kind == "folders":
                loop = self._step(cur, None)
                self.edges[loop].append((re.compile(".", re.DOTALL), loop))
                after = self._step(loop, re.compile("/"))
                self.edges[cur].append((None, after))
                cur = after
            elif kind == "open":
                groups.append((cur, []))
                cur = self._step(cur, None)
            elif kind == "bar":
                groups[-1][1].append(cur)
                cur = self._step(groups[-1][0], None)
            elif kind == "close":
                _, ends = groups.pop()
                join = self._step(cur, None)
                for end in ends:
                    self.edges[end].append((None, join))
                cur = join
            else:
                cur = self._step(cur, re.compile(text, re.DOTALL))
        return cur

    def _closure(self, states: set[int]) -> set[int]:
        stack = list(states)
        while stack:
            for test, dst in self.edges[stack.pop()]:
                if test is None and dst not in states:
                    states.add(dst)
                    stack.append(dst)
        return states

    def match(self, string: str, /) -> bool:
        """Whether the whole of `string` matches (as `re.match` of the pattern and `\\Z`); each
        (set of states, character) step is computed once and kept, as a lazy DFA."""
        states = self.start
        for ch in string:
            key = (states, ch)
            after = self._moves.get(key)
            if after is None:
                if len(self._moves) > 100_000:
                    self._moves.clear()
                after = self._moves[key] = frozenset(self._closure({dst for src in states for test, dst in self.edges[src] if test is not None and test.match(ch)}))
            if not after:
                return False
            states = after
        return self.accept in states


def _kind(mode: int) -> str:
    for test, name in ((stat.S_ISFIFO, "a FIFO"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"), (stat.S_ISBLK, "a block device")):
        if test(mode):
            return name
    return "not a file"


def glob_match(pattern: str, rel: str) -> bool:
    return glob_regex(pattern).match(rel) is not None


@dataclass(frozen=True)
class FoundFile:
    rel: str  # posix path relative to the collection root
    path: str  # absolute path to open
    size: int
    mtime_ns: int


@dataclass(frozen=True)
class SkippedFile:
    rel: str
    reason: str
    # The file (or, for a folder, everything below it) may well still be there, only not
    # readable now (a permission, an I/O error): what the index holds for it stands, where a
    # file that is gone or no longer a document is dropped.
    kept: bool = False
    folder: bool = False


def _dir_ignored(rel: str, ignore: list[str]) -> bool:
    for pattern in ignore:
        if glob_match(pattern, rel):
            return True
        if pattern.endswith("/**") and glob_match(pattern[:-3], rel):
            return True
    return False


def scan(root: Path, pattern: str, ignore: list[str]) -> Iterator[FoundFile | SkippedFile]:
    """Yield every file under `root` matching `pattern` and no `ignore` glob.

    Dot-folders and SKIP_DIRS are pruned. Symlinks are followed only while their target
    stays inside the root; others are yielded as SkippedFile with the reason. A name that is
    not valid UTF-8 (a Latin-1 `café.md`) cannot be a document path: skipped, shown with
    U+FFFD in its place, never a crash of the whole update.
    """
    for item in _walk(root, pattern, ignore):
        try:
            item.rel.encode("utf-8")
        except UnicodeEncodeError:
            shown = item.rel.encode("utf-8", "surrogateescape").decode("utf-8", "replace")
            if isinstance(item, SkippedFile):
                yield SkippedFile(shown, item.reason, item.kept, item.folder)
            else:
                yield SkippedFile(shown, "the file name is not valid UTF-8: rename it to index it")
            continue
        yield item


def _walk(root: Path, pattern: str, ignore: list[str]) -> Iterator[FoundFile | SkippedFile]:
    real_root = os.path.realpath(root)
    prefix = real_root.rstrip(os.sep) + os.sep
    regex = glob_regex(pattern)
    seen_dirs = {real_root}
    stack: list[tuple[str, str]] = [(str(root), "")]
    while stack:
        folder, rel_folder = stack.pop()
        try:
            entries = sorted(os.scandir(folder), key=lambda e: e.name)
        except OSError as exc:
            yield SkippedFile(rel_folder or ".", f"cannot list folder: {exc.strerror or exc}", kept=True, folder=True)
            continue
        subdirs: list[tuple[str, str]] = []
        for entry in entries:
            name = entry.name
            if name.startswith("."):
                continue  # dot-folders and dot-files are never indexed
            rel = f"{rel_folder}/{name}" if rel_folder else name
            try:
                is_link = entry.is_symlink()
                is_dir = entry.is_dir()
            except OSError as exc:
                if regex.match(rel) or entry.is_symlink():  # a folder or a file: unless a loop, what is indexed at or below it stands
                    looped = exc.errno == errno.ELOOP
                    yield SkippedFile(rel, "symlink loop" if looped else f"cannot read: {exc.strerror or exc}", kept=not looped, folder=not looped)
                continue
            target = ""
            if is_link:
                try:
                    target = os.path.realpath(entry.path)
                except OSError as exc:  # a link the kernel cannot read back (a zombie's /proc/PID/exe): once exit 3
                    if is_dir or regex.match(rel):
                        yield SkippedFile(rel, f"cannot read the symlink: {exc.strerror or exc}")
                    continue
                if not (target + os.sep).startswith(prefix) and target != real_root:
                    if is_dir or regex.match(rel):
                        yield SkippedFile(rel, "symlink points outside the collection root")
                    continue
                if not os.path.exists(target):
                    if regex.match(rel):
                        yield SkippedFile(rel, "broken symlink")
                    continue
            if is_dir:
                if name in SKIP_DIRS or (ignore and _dir_ignored(rel, ignore)):
                    continue
                real = target if is_link else entry.path
                if is_link and real in seen_dirs:
                    yield SkippedFile(rel, "symlink to a folder already indexed (a loop, or a second way in)")
                    continue
                seen_dirs.add(real)
                subdirs.append((entry.path, rel))
                continue
            if not regex.match(rel) or (ignore and any(glob_match(p, rel) for p in ignore)):
                continue
            try:
                st = entry.stat()
            except OSError as exc:
                yield SkippedFile(rel, f"cannot stat: {exc.strerror or exc}", kept=True)
                continue
            if not stat.S_ISREG(st.st_mode):
                yield SkippedFile(rel, f"not a regular file ({_kind(st.st_mode)})")
                continue
            yield FoundFile(rel, entry.path, st.st_size, st.st_mtime_ns)
        stack.extend(reversed(subdirs))
