"""Walk a collection's folder: which files match its glob, which are skipped and why."""

from __future__ import annotations

import os
import re
from collections.abc import Iterator
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

# Folders never indexed, as the original: tooling output and dependency trees.
SKIP_DIRS = frozenset({"node_modules", "vendor", "dist", "build", "__pycache__"})


@lru_cache(maxsize=256)
def glob_regex(pattern: str) -> re.Pattern[str]:
    """Compile a glob (`**`, `*`, `?`, `[..]`, `{a,b}`) to a regex over posix relative paths."""
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
    return re.compile("".join(out) + r"\Z", re.DOTALL)


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
    stays inside the root; others are yielded as SkippedFile with the reason.
    """
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
            except OSError:
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
            if not entry.is_file():
                continue
            yield FoundFile(rel, entry.path, st.st_size, st.st_mtime_ns)
        stack.extend(reversed(subdirs))
