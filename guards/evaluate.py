"""Evaluating one search: filters, exclusions, targets → allow or deny (reads the file system).

Deny when a content search would read a knowledge folder wholesale:
  1. a recursive search whose start folder lies in a knowledge folder → rule `<kind>`;
  2. one that starts from a folder *containing* a knowledge folder   → rule `<kind>-root`;
  3. a wildcard that expands to several notes (`grep foo notes/*.md`, `cat notes/* | grep`);
     a `**` wildcard is a recursive search of the folder before it (`grep foo **/*.md`).
Otherwise the allow rule says why: named files, folders holding no knowledge folder,
filters that exclude the notes, exempt paths, or paths the guard cannot know.

What counts as a note is each collection's own patterns (`**/*.rst`), so a search's file
filters (`--include`, `--exclude`, `-g`, `-t`/`-T` with ripgrep's type names, `-name`) are
tested against the notes of the folders it would read; a folder without patterns (a
`guard.protect` glob, an older folders.json) has the sample notes .md/.markdown/.mdx/.txt.

Wildcards are expanded within the decision's glob budget (`budget.iglob`, counted in folders
listed); one it cannot expand is judged as a search of the folder before its first wildcard
(narrowed to names matching its last part when the search does not recurse), which denies
whenever the expansion might have reached notes.
"""

from __future__ import annotations

import os
from fnmatch import fnmatchcase

from . import budget, producers, searches
from .knowledge import Folder, Knowledge
from .lexer import literal
from .model import DENY_RULES, Decision, Search, Target
from .shell import commands

SAMPLE_NOTES = ("*.md", "*.markdown", "*.mdx", "*.txt")  # notes of a folder whose patterns are not known
_MAX_GLOB = 2000
_FILLERS = ("note", "\x7f")  # what a `*` stands for in a sample name (two, so that `n*` cannot hide the rest)
_WILD = frozenset("*?[")


def _brace(pattern: str) -> list[str]:
    """Every alternative of `{a,b}` groups (nested and repeated ones too; at most 64)."""
    out: list[str] = []
    todo = [pattern]
    while todo and len(out) < 64:
        item = todo.pop()
        start = item.find("{")
        end = item.find("}", start + 1)
        if start < 0 or end < 0:
            out.append(item)
            continue
        inner = item[start + 1 : end]
        if "{" in inner:  # the innermost group first
            start = start + 1 + inner.rfind("{")
            inner = item[start + 1 : end]
        todo += [item[:start] + alt + item[end + 1 :] for alt in inner.split(",")]
    return out


def _tail(pattern: str) -> str:
    return pattern.rstrip("/").rsplit("/", 1)[-1].replace("**", "*")


def note_globs(patterns: tuple[str, ...] | None) -> list[str]:
    """File-name globs of a folder's notes: the last part of each pattern (`**/*.rst` → `*.rst`)."""
    if not patterns:
        return list(SAMPLE_NOTES)
    return [g for p in patterns for g in _brace(_tail(p) or "*")]


def _samples(glob: str) -> list[str]:
    """Names that `glob` matches, wildcards filled in (`*.md` → `note.md`)."""
    import re

    out = []
    for filler in _FILLERS:
        name = re.sub(r"\[(!?)([^\]])[^\]]*\]", lambda m: "~" if m.group(1) else m.group(2), glob)
        name = name.replace("*", filler).replace("?", "x")
        out.append(name)
    return out


def _halves(glob: str) -> tuple[str, str]:
    """The literal text of `glob` before its first and after its last wildcard."""
    first = min((glob.index(ch) for ch in _WILD if ch in glob), default=len(glob))
    last = max((glob.rindex(ch) for ch in "*?]" if ch in glob), default=-1)
    return glob[:first], glob[last + 1 :] if last >= first else ""


def _meeting(a: str, b: str) -> str | None:
    """A name both globs may match (a literal one, or the longer literal prefix + the longer
    literal suffix), or None when they cannot meet."""
    for glob in (a, b):
        if not _WILD & set(glob):
            return glob
    (pa, sa), (pb, sb) = _halves(a), _halves(b)
    prefix = pa if pa.startswith(pb) else (pb if pb.startswith(pa) else None)
    suffix = sa if sa.endswith(sb) else (sb if sb.endswith(sa) else None)
    if prefix is None or suffix is None:
        return None
    return prefix + suffix


def _name_matches(name: str, pattern: str, dir_only: bool) -> bool:
    """Could file `name` match `pattern`? A pattern naming only a folder (`src/`) answers `dir_only`."""
    tail = pattern.rsplit("/", 1)[-1]
    if not tail:
        return dir_only
    return any(fnmatchcase(name, p) for p in _brace(tail))


def _type_globs(search: Search, name: str) -> tuple[str, ...] | None:
    from .filetypes import type_globs

    return type_globs(name.lower(), search.type_defs)


def could_read_notes(search: Search, patterns: tuple[str, ...] | None = None, folder: str = "") -> bool:
    """False when the search's own file filters exclude every note of a folder with these
    collection `patterns` (None: the sample notes .md/.markdown/.mdx/.txt). Path regexes
    (`ag -G`, a `grep` between a file list and `xargs`) see the name and its path in `folder`."""
    import re

    notes = note_globs(patterns)
    types = [_type_globs(search, t) for t in search.types]
    if search.types and any(t is None for t in types):
        types = []  # a type the guard cannot know: it may match the notes
    type_globs = [g for t in types if t for g in t]
    excluded_types = [g for t in search.type_nots for g in (_type_globs(search, t) or ())]
    includes = [g for i in search.includes for g in _brace(i.rsplit("/", 1)[-1])]
    names: list[str] = []
    for note in notes:
        names += _samples(note)
        for other in includes + type_globs:
            meet = _meeting(note, other)
            if meet is not None:
                names.append(meet)
    for name in dict.fromkeys(names):
        budget.check()
        if not any(fnmatchcase(name, g) for g in notes):
            continue
        if types and not any(fnmatchcase(name, g) for g in type_globs):
            continue
        if any(fnmatchcase(name, g) for g in excluded_types):
            continue
        if search.includes and not any(_name_matches(name, g, True) for g in search.includes):
            continue
        if search.include_regexes and not any(re.search(r, name) or re.search(r, f"{folder}/{name}") for r in search.include_regexes if _valid(r)):
            continue
        if any(_name_matches(name, g, False) for g in search.file_excludes):
            continue
        return True
    return False


def could_read_any(kn: Knowledge, search: Search) -> bool:
    """False when the search's file filters exclude the notes of every knowledge folder."""
    if not (search.types or search.type_nots or search.includes or search.include_regexes or search.file_excludes):
        return True
    if search.include_regexes:  # they may name the folder: ask each one
        kinds = {(f.patterns, f.path) for f in kn.folders}
    else:
        kinds = {(f.patterns, "") for f in kn.folders}
    if kn.protect:
        kinds.add((None, ""))
    return any(could_read_notes(search, p, where) for p, where in kinds)


def _reads(search: Search, folder: Folder) -> bool:
    if not (search.types or search.type_nots or search.includes or search.include_regexes or search.file_excludes):
        return True
    return could_read_notes(search, folder.patterns, folder.path)


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
        for rule in ("unresolved", "filtered", "exempt", "named-file", "outside"):
            if rule in self.seen:
                return rule
        return "outside"


def _dir(kn: Knowledge, search: Search, target: Target, real: str, tally: _Tally) -> Decision | None:
    base = DENY_RULES[search.kind]
    folder = kn.folder_of(real)
    if folder is not None:
        if _reads(search, folder):
            return Decision(True, base, folder, search, target=target)
        tally.seen.add("filtered")
        return None
    reached = kn.inside(real, lambda path: excluded(search, target, real, path))
    inside = [f for f in reached if _reads(search, f)]
    if not inside and search.follows:
        inside = _linked(kn, search, target, real)
    if inside:
        return Decision(True, base + "-root", inside[0], search, root=real, target=target)
    tally.seen.add("filtered" if reached else ("exempt" if kn.exemptions and kn.allowed(real) else "outside"))
    return None


_MAX_LINK_WALK = 5000  # entries a symlink-following search's tree is walked for links into the notes


def _linked(kn: Knowledge, search: Search, target: Target, root: str) -> list[Folder]:
    """The knowledge folders a search that follows symlinks (grep -R, rg -L) reaches through a
    link below `root` (`docs -> ~/notes` in a code repository), found by a bounded walk that
    follows no link itself; past its budget it has found nothing (fail open)."""
    stack, seen = [root], 0
    while stack and seen < _MAX_LINK_WALK:
        budget.check()
        try:
            entries = list(os.scandir(stack.pop()))
        except OSError:
            continue
        for entry in entries:
            seen += 1
            if entry.name in (".git", "node_modules") or excluded(search, target, root, entry.path):
                continue
            if entry.is_symlink():
                real = os.path.realpath(entry.path)
                folder = kn.folder_of(real)
                found = [folder] if folder is not None else (kn.inside(real, lambda path: False) if os.path.isdir(real) else [])
                hits = [f for f in found if _reads(search, f)]
                if hits:
                    return hits
            elif entry.is_dir(follow_symlinks=False):
                stack.append(entry.path)
    return []


def _glob(kn: Knowledge, search: Search, target: Target, recursive: bool, tally: _Tally) -> Decision | None:
    notes = []
    try:
        matches = list(budget.iglob(target.pattern or ""))  # (`**` patterns go to _from_root)
    except budget.GlobSpent:
        return _from_root(kn, search, target, tally, narrow=not recursive)
    if len(matches) > _MAX_GLOB:
        return _from_root(kn, search, target, tally, narrow=not recursive)
    for match in matches:
        budget.check()
        real = os.path.realpath(match)
        if os.path.isdir(real):
            if recursive:
                found = _dir(kn, search, target, real, tally)
                if found is not None:
                    return found
            continue
        folder = kn.folder_of(real)
        if folder is not None and _is_note(real, folder) and _reads(search, folder):
            notes.append(folder)
    if len(notes) >= 2:
        return Decision(True, DENY_RULES[search.kind], notes[0], search, target=target)
    tally.seen.add("named-file" if notes else "outside")
    return None


def _is_note(path: str, folder: Folder) -> bool:
    """Does the file at `path` in `folder` match the collection's patterns (always, when unknown)?"""
    if folder.patterns is None:
        return True
    name = os.path.basename(path)
    return any(fnmatchcase(name, g) for g in note_globs(folder.patterns))


def _unescaped(part: str) -> str:
    import re

    return re.sub(r"\[([*?[])\]", r"\1", part)


def _from_root(kn: Knowledge, search: Search, target: Target, tally: _Tally, narrow: bool = True) -> Decision | None:
    """A wildcard judged without expanding it: a recursive search of the folder before the first
    wildcard, limited to names matching the last part when `narrow`. `grep foo **/*.md` is read
    so (bash expands `**` like `*` unless `globstar` is set, zsh recursively: either way it
    reads the folder's files wholesale), and so is a wildcard past the glob budget."""
    parts = (target.pattern or "").split("/")
    literal_parts: list[str] = []
    for part in parts[:-1]:
        if _WILD & set(part.replace("[*]", "").replace("[?]", "").replace("[[]", "")):  # an active wildcard
            break
        literal_parts.append(_unescaped(part))
    root = os.path.realpath("/".join(literal_parts) or "/")
    if not os.path.isdir(root):
        tally.seen.add("outside")
        return None
    tail = parts[-1]
    narrowed = search.copy()
    if narrow and tail.strip("*") and not search.includes:
        narrowed.includes = [tail]
    if not could_read_any(kn, narrowed):
        tally.seen.add("filtered")
        return None
    return _dir(kn, narrowed, target, root, tally)


def evaluate(kn: Knowledge, search: Search) -> Decision:
    """Allow or deny one search."""
    if search.listing:
        return Decision(False, "listing", search=search)
    if search.stdin:
        return Decision(False, "stdin", search=search)
    if not could_read_any(kn, search):
        return Decision(False, "filtered", search=search)
    tally = _Tally()
    for t in search.targets:
        recursive = search.recursive if t.recursive is None else t.recursive
        if t.path is None:
            tally.seen.add("unresolved")
            continue
        budget.check()
        if t.glob and t.pattern and "**" in t.pattern:
            found = _from_root(kn, search, t, tally)
        elif t.glob and t.pattern:
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
    """Every content search in a shell command line, in order (a plain command repeated with the
    same words and cwd, as a function called many times, once)."""
    out: list[Search] = []
    done: set[tuple[str | None, tuple[str, ...]]] = set()
    for cmd in commands(command, cwd):
        if cmd.producer is None and not cmd.subs and cmd.stdin_text is None and not cmd.stdin_redirect:
            key = (cmd.cwd, tuple(cmd.argv))
            if key in done:
                continue
            done.add(key)
        budget.charge(128 * len(cmd.argv) + 256)  # the searches' targets
        name = os.path.basename(literal(cmd.argv[0]))
        if name == "find" or name in ("fd", "fdfind"):
            out += producers.exec_searches(cmd)
        elif name == "xargs":
            out += producers.xargs_searches(cmd)
        elif name == "parallel":
            out += producers.parallel_searches(cmd)
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
