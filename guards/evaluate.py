"""Evaluating one search: filters, exclusions, targets → allow or deny (reads the file system).

Deny when a content search would read a knowledge folder wholesale:
  1. a recursive search whose start folder lies in a knowledge folder → rule `<kind>`;
  2. one that starts from a folder *containing* a knowledge folder   → rule `<kind>-root`;
  3. a wildcard that expands to several notes (`grep foo notes/*.md`, `cat notes/* | grep`).
Otherwise the allow rule says why: named files, folders holding no knowledge folder,
filters that exclude the notes, exempt paths, or paths the guard cannot know.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from . import producers, searches
from .knowledge import Knowledge
from .lexer import literal
from .model import DENY_RULES, Decision, Search, Target
from .shell import commands

_NOTE_SAMPLES = ("note.md", "note.markdown", "note.mdx", "note.txt")
_NOTE_TYPES = {"md": ("note.md", "note.markdown", "note.mdx"), "markdown": ("note.md", "note.markdown", "note.mdx"),
               "txt": ("note.txt",), "text": ("note.txt",), "all": _NOTE_SAMPLES, "mdx": ("note.mdx",)}
_MAX_GLOB = 2000


def _brace(pattern: str) -> list[str]:
    start = pattern.find("{")
    end = pattern.find("}", start + 1)
    if start < 0 or end < 0:
        return [pattern]
    return [pattern[:start] + alt + pattern[end + 1 :] for alt in pattern[start + 1 : end].split(",")]


def _name_matches(name: str, pattern: str, dir_only: bool) -> bool:
    """Could file `name` match `pattern`? A pattern naming only a folder (`src/`) answers `dir_only`."""
    tail = pattern.rsplit("/", 1)[-1]
    if not tail:
        return dir_only
    return any(fnmatchcase(name, p) for p in _brace(tail))


def could_read_notes(search: Search) -> bool:
    """False when the search's own file filters exclude every kind of note file."""
    import re

    names = list(_NOTE_SAMPLES)
    if search.types:
        allowed = {n for t in search.types for n in _NOTE_TYPES.get(t.lower(), ())}
        names = [n for n in names if n in allowed]
    for t in search.type_nots:
        names = [n for n in names if n not in _NOTE_TYPES.get(t.lower(), ())]
    if search.includes:
        names = [n for n in names if any(_name_matches(n, g, True) for g in search.includes)]
    if search.include_regexes:
        names = [n for n in names if any(re.search(r, n) for r in search.include_regexes if _valid(r))]
    if search.file_excludes:
        names = [n for n in names if not any(_name_matches(n, g, False) for g in search.file_excludes)]
    return bool(names)


def _valid(regex: str) -> bool:
    import re

    try:
        re.compile(regex)
        return True
    except re.error:
        return False


def excluded(search: Search, target: Target, root: str, folder: str) -> bool:
    """True when the search's own exclusions (`--exclude-dir`, `-g '!x'`, `-prune`, `:!x`) skip `folder`."""
    rel = os.path.relpath(folder, root)
    parts = rel.split("/")
    prefixes = ["/".join(parts[: k + 1]) for k in range(len(parts))]
    for glob in search.excludes:
        if "/" not in glob:
            if any(fnmatchcase(p, glob) for p in parts):
                return True
        else:
            rooted = glob[3:] if glob.startswith("**/") else glob.lstrip("/")
            if any(fnmatchcase(p, rooted) for p in prefixes):
                return True
    if search.path_excludes:
        base = literal(target.word) if target.word else "."
        for glob in search.path_excludes:
            if any(fnmatchcase(os.path.join(base, p), glob) for p in prefixes):
                return True
    return False


class _Tally:
    """What the targets of one search looked like, for the allow rule."""

    def __init__(self) -> None:
        self.seen: set[str] = set()

    def rule(self) -> str:
        for rule in ("unresolved", "exempt", "named-file", "outside"):
            if rule in self.seen:
                return rule
        return "outside"


def _dir(kn: Knowledge, search: Search, target: Target, real: str, tally: _Tally) -> Decision | None:
    base = DENY_RULES[search.kind]
    folder = kn.folder_of(real)
    if folder is not None:
        return Decision(True, base, folder, search, target=target)
    inside = kn.inside(real, lambda path: excluded(search, target, real, path))
    if inside:
        return Decision(True, base + "-root", inside[0], search, root=real, target=target)
    tally.seen.add("exempt" if kn.allow and kn.allowed(real) else "outside")
    return None


def _glob(kn: Knowledge, search: Search, target: Target, recursive: bool, tally: _Tally) -> Decision | None:
    import glob as globmod

    notes = []
    word = target.pattern or ""
    for k, match in enumerate(globmod.iglob(word, recursive=recursive)):
        if k >= _MAX_GLOB:
            break
        real = os.path.realpath(match)
        if os.path.isdir(real):
            if recursive:
                found = _dir(kn, search, target, real, tally)
                if found is not None:
                    return found
            continue
        folder = kn.folder_of(real)
        if folder is not None:
            notes.append(folder)
    if len(notes) >= 2:
        return Decision(True, DENY_RULES[search.kind], notes[0], search, target=target)
    tally.seen.add("named-file" if notes else "outside")
    return None


def evaluate(kn: Knowledge, search: Search) -> Decision:
    """Allow or deny one search."""
    if search.listing:
        return Decision(False, "listing", search=search)
    if search.stdin:
        return Decision(False, "stdin", search=search)
    if not could_read_notes(search):
        return Decision(False, "filtered", search=search)
    tally = _Tally()
    for t in search.targets:
        recursive = search.recursive if t.recursive is None else t.recursive
        if t.path is None:
            tally.seen.add("unresolved")
            continue
        if t.glob and t.pattern:
            found = _glob(kn, search, t, recursive, tally)
        else:
            real = os.path.realpath(t.path)
            if os.path.isdir(real):
                found = _dir(kn, search, t, real, tally) if recursive else None
                if not recursive:
                    tally.seen.add("outside")
            else:
                tally.seen.add("named-file")
                found = None
        if found is not None:
            return found
    return Decision(False, tally.rule(), search=search)


def shell_searches(command: str, cwd: str | None) -> list[Search]:
    """Every content search in a shell command line, in order."""
    out: list[Search] = []
    for cmd in commands(command, cwd):
        name = os.path.basename(literal(cmd.argv[0]))
        if name == "find" or name in ("fd", "fdfind"):
            out += producers.exec_searches(cmd)
        elif name == "xargs":
            out += producers.xargs_searches(cmd)
        else:
            search = searches.parse(cmd)
            if search is None:
                continue
            out.append(search)
            out += producers.substituted(cmd, search)
            fed = producers.cat_pipe(cmd, search)
            if fed is not None:
                out.append(fed)
    return out
