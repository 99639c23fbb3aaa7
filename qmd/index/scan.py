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


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob to a regex over posix relative paths.

    `**/` matches zero or more folders, `**` anything, `*` and `?` stop at `/`, `[..]` and
    `{a,b}` as usual; a comma outside braces separates alternatives (`kafka.txt,*.rst`).
    """
    parts = split_patterns(pattern)
    if len(parts) > 1:
        return re.compile("(?:" + "|".join(_glob_body(p) for p in parts) + r")\Z", re.DOTALL)
    return re.compile(_glob_body(pattern) + r"\Z", re.DOTALL)


def _glob_body(pattern: str) -> str:
    out: list[str] = []
    i, n, depth = 0, len(pattern), 0
    while i < n:
        c = pattern[i]
        if pattern.startswith("**/", i):
            out.append("(?:.*/)?")
            i += 3
            continue
        if pattern.startswith("**", i):
            out.append(".*")
            i += 2
            continue
        if c == "*":
            out.append("[^/]*")
        elif c == "?":
            out.append("[^/]")
        elif c == "[":
            j = pattern.find("]", i + 2)
            if j == -1:
                out.append(re.escape(c))
            else:
                body = pattern[i + 1 : j].replace("\\", "\\\\")
                out.append("[" + ("^" + body[1:] if body.startswith("!") else body) + "]")
                i = j
        elif c == "{":
            out.append("(?:")
            depth += 1
        elif c == "}" and depth:
            out.append(")")
            depth -= 1
        elif c == "," and depth:
            out.append("|")
        else:
            out.append(re.escape(c))
        i += 1
    out.extend(")" * depth)
    return "".join(out)


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
            reason = item.reason if isinstance(item, SkippedFile) else "the file name is not valid UTF-8: rename it to index it"
            yield SkippedFile(shown, reason)
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
            yield SkippedFile(rel_folder or ".", f"cannot list folder: {exc.strerror or exc}")
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
                if regex.match(rel) or entry.is_symlink():
                    yield SkippedFile(rel, "symlink loop" if exc.errno == errno.ELOOP else f"cannot read: {exc.strerror or exc}")
                continue
            if is_link:
                target = os.path.realpath(entry.path)
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
                real = os.path.realpath(entry.path) if is_link else entry.path
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
                yield SkippedFile(rel, f"cannot stat: {exc.strerror or exc}")
                continue
            if not stat.S_ISREG(st.st_mode):
                yield SkippedFile(rel, f"not a regular file ({_kind(st.st_mode)})")
                continue
            yield FoundFile(rel, entry.path, st.st_size, st.st_mtime_ns)
        stack.extend(reversed(subdirs))
