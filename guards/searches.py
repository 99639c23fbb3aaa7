"""Recognise content searches in simple commands: grep/egrep/fgrep/rgrep, rg, ag, ack, git grep,
and awk/sed/perl programs that select lines by a pattern (`scripted.py`).

Each tool's options are parsed the way its getopt would (options that take a value, option
permutation, `--`), so the pattern, the paths, the recursion flags and the file filters
are known. `find -exec grep`, `xargs grep` and `grep … $(find …)` live in `producers.py`.
"""

from __future__ import annotations

import os

from .lexer import glob_pattern, has_glob, literal
from .model import Search, Target
from .scripted import TOOLS as PROGRAMS, is_perl, program_search
from .shell import Command, git_root, resolve


class Spec:
    """How one search tool reads its command line."""

    __slots__ = ("short_args", "long_args", "recursive", "listing", "norecurse")

    def __init__(self, short_args: str, long_args: set[str], recursive: bool, listing: set[str], norecurse: set[str] | None = None) -> None:
        self.short_args = short_args
        self.long_args = long_args
        self.recursive = recursive
        self.listing = listing
        self.norecurse = norecurse or set()


GREP = Spec(
    "efmABCdD",
    {"--regexp", "--file", "--max-count", "--after-context", "--before-context", "--context", "--directories", "--devices",
     "--include", "--exclude", "--exclude-dir", "--exclude-from", "--label", "--binary-files", "--group-separator"},
    False, {"-V", "--version", "--help"},
)
RG = Spec(
    "ABCEMTdefgjmrt",
    {"--after-context", "--before-context", "--context", "--color", "--colors", "--context-separator", "--dfa-size-limit",
     "--encoding", "--engine", "--field-context-separator", "--field-match-separator", "--file", "--glob", "--iglob",
     "--ignore-file", "--max-columns", "--max-count", "--max-depth", "--maxdepth", "--max-filesize", "--path-separator", "--pre",
     "--pre-glob", "--regex-size-limit", "--regexp", "--replace", "--sort", "--sortr", "--threads", "--type", "--type-not",
     "--type-add", "--type-clear", "--hostname-bin", "--hyperlink-format", "--generate"},
    True, {"--files", "--type-list", "-h", "--help", "-V", "--version", "--generate"},
)
AG = Spec(
    "ABCGgmpW",
    {"--after", "--before", "--context", "--depth", "--ignore", "--ignore-dir", "--file-search-regex", "--max-count",
     "--pager", "--path-to-ignore", "--workers", "--width"},
    True, {"-g", "--list-file-types", "--help", "--version", "-V"}, {"-n", "--norecurse"},
)
ACK = Spec(
    "ABCmtg",
    {"--after-context", "--before-context", "--context", "--max-count", "--type", "--ignore-dir", "--noignore-dir",
     "--ignore-file", "--match", "--output", "--pager", "--type-add", "--type-set", "--type-del", "--range-start", "--range-end"},
    True, {"-f", "-g", "--help", "--version", "--help-types"}, {"-n", "--no-recurse"},
)
GIT_GREP = Spec(
    "efmABC",
    {"--max-depth", "--threads", "--max-count", "--after-context", "--before-context", "--context", "--file", "--regexp"},
    True, {"--help", "-h"},
)
TOOLS: dict[str, Spec] = {
    "grep": GREP, "egrep": GREP, "fgrep": GREP, "ggrep": GREP, "zgrep": GREP, "zegrep": GREP, "zfgrep": GREP,
    "xzgrep": GREP, "xzegrep": GREP, "xzfgrep": GREP, "bzgrep": GREP, "bzegrep": GREP, "bzfgrep": GREP,
    "lzgrep": GREP, "lzegrep": GREP, "lzfgrep": GREP, "lzmagrep": GREP, "zstdgrep": GREP,
    "rgrep": GREP, "pcregrep": GREP, "pcre2grep": GREP, "ugrep": GREP, "ug": GREP,
    "rg": RG, "ripgrep": RG, "rga": RG, "ag": AG, "ack": ACK, "ack-grep": ACK,  # rga: ripgrep-all, rg's options (its own --rga-* take =values)
}
_AG_ACK_TYPES = {"python", "py", "js", "ts", "go", "rust", "java", "ruby", "cc", "cpp", "shell", "sh", "html", "css", "yaml",
                 "json", "markdown", "md", "text", "txt", "perl", "php", "csharp", "kotlin", "swift", "sql", "xml", "make",
                 "rst", "restructuredtext", "org", "tex", "asciidoc", "adoc"}


def getopt(argv: list[str], start: int, spec: Spec) -> tuple[list[tuple[str, str | None]], list[tuple[int, str]]]:
    """(options with values, positional (index, raw word)) of `argv[start:]`, GNU-style permutation."""
    opts: list[tuple[str, str | None]] = []
    pos: list[tuple[int, str]] = []
    i, n = start, len(argv)
    while i < n:
        raw = argv[i]
        arg = literal(raw)
        if arg == "--":
            pos.extend((j, argv[j]) for j in range(i + 1, n))
            break
        if arg.startswith("--"):
            name, eq, value = arg.partition("=")
            if eq:
                opts.append((name, value))
            elif name in spec.long_args and i + 1 < n:
                opts.append((name, literal(argv[i + 1])))
                i += 1
            else:
                opts.append((name, None))
        elif arg.startswith("-") and len(arg) > 1:
            body = arg[1:]
            if body.isdigit():
                opts.append(("-NUM", body))
            else:
                for k, ch in enumerate(body):
                    if ch in spec.short_args:
                        attached = body[k + 1 :]
                        if not attached and i + 1 < n:
                            attached = literal(argv[i + 1])
                            i += 1
                        opts.append(("-" + ch, attached))
                        break
                    opts.append(("-" + ch, None))
        else:
            pos.append((i, raw))
        i += 1
    return opts, pos


def target(index: int | None, word: str, cwd: str | None, recursive: bool | None = None) -> Target:
    """A Target for a path word: resolved against `cwd`, flagged when it holds an unquoted wildcard."""
    path = resolve(word, cwd)
    if path is None or not has_glob(word):
        return Target(word, index, path, False, recursive)
    pattern = glob_pattern(word)
    if not os.path.isabs(pattern):
        from glob import escape  # not at import time: glob pulls in contextlib

        pattern = os.path.join(escape(cwd or ""), pattern)
    return Target(word, index, path, True, recursive, pattern)


def _dir_excludes(values: list[str]) -> list[str]:
    out = []
    for value in values:
        value = value.lstrip("!")
        while value.startswith("./"):
            value = value[2:]
        for tail in ("/**", "/*", "/"):
            if value.endswith(tail) and len(value) > len(tail):
                value = value[: -len(tail)]
        if value:
            out.append(value)
    return out


def _type_add(search: Search, value: str) -> None:
    """`--type-add 'doc:*.rst'` or `--type-add 'doc:include:md,rst'`: the globs of a type."""
    name, _, globs = value.partition(":")
    if globs.startswith("include:"):
        from .filetypes import type_globs

        found = [type_globs(t, search.type_defs) for t in globs[len("include:") :].split(",")]
        search.type_defs.setdefault(name, []).extend(["*"] if None in found else [g for f in found if f for g in f])
    else:
        search.type_defs.setdefault(name, []).append(globs)


def grep_family(cmd: Command, name: str, start: int = 1) -> Search:
    """Parse a grep/rg/ag/ack command line (from `argv[start]`) into a Search."""
    spec = TOOLS[name]
    search = Search("grep", name, cmd)
    opts, pos = getopt(cmd.argv, start, spec)
    names = {o for o, _ in opts}
    search.listing = bool(names & spec.listing)
    search.recursive = spec.recursive or name == "rgrep"
    if names & spec.norecurse:
        search.recursive = False
    from_flags = False
    for opt, value in opts:
        if opt in ("-e", "--regexp", "--match") and value is not None:
            search.patterns.append(value)
            from_flags = True
        elif opt in ("-f", "--file") and spec is not AG:
            from_flags = True
        elif spec is GREP and (opt in ("-r", "-R", "--recursive", "--dereference-recursive") or (opt in ("-d", "--directories") and value == "recurse")):
            search.recursive = True
            search.follows = search.follows or opt in ("-R", "--dereference-recursive")
        elif (spec is RG and opt in ("-L", "--follow")) or (spec in (AG, ACK) and opt == "--follow") or (spec is AG and opt == "-f"):
            search.follows = True
        elif spec is GREP and opt == "--include" and value:
            search.includes.append(value)
        elif spec is GREP and opt == "--exclude" and value:
            search.file_excludes.append(value)
        elif spec is GREP and opt == "--exclude-dir" and value:
            search.excludes += _dir_excludes([value])
        elif spec is RG and opt in ("-g", "--glob", "--iglob") and value:
            if opt == "--iglob":  # case-insensitive: every letter matches either case
                value = "".join(f"[{c.lower()}{c.upper()}]" if c.isalpha() else c for c in value)
            if value.startswith("!"):
                search.excludes += _dir_excludes([value])
                tail = value.rsplit("/", 1)[-1]
                if any(ch in tail for ch in "*?[."):
                    search.file_excludes.append(value[1:])
            else:
                search.includes.append(value)
        elif opt in ("-t", "--type") and value and spec is not GREP:
            search.types.append(value)
        elif spec is RG and opt in ("-T", "--type-not") and value:
            search.type_nots.append(value)
        elif spec is RG and opt == "--type-add" and value and ":" in value:
            _type_add(search, value)
        elif spec is AG and opt in ("-G", "--file-search-regex") and value:
            search.include_regexes.append(value)
        elif opt in ("--ignore-dir", "--ignore") and value and spec in (AG, ACK):
            search.excludes += _dir_excludes([value])
        elif spec in (AG, ACK) and opt.startswith("--") and value is None:
            bare = opt[2:]
            if bare in _AG_ACK_TYPES:
                search.types.append(bare)
            elif bare.startswith("no") and bare[2:] in _AG_ACK_TYPES:
                search.type_nots.append(bare[2:])
    if not from_flags and pos and not search.listing:
        search.patterns.append(literal(pos[0][1]))
        pos = pos[1:]
    search.targets = [target(i, w, cmd.cwd) for i, w in pos if literal(w) != "-"]
    if not search.targets:
        reads_pipe = cmd.producer is not None or cmd.stdin_redirect
        if spec is GREP:
            search.stdin = not search.recursive
        else:
            search.stdin = reads_pipe
        if not search.stdin:
            search.targets = [Target(None, None, cmd.cwd)]
    return search


def git_grep(cmd: Command) -> Search | None:
    """Parse `git [-C DIR …] grep …`: it searches the work tree below its cwd (or its pathspecs)."""
    argv, cwd, i = cmd.argv, cmd.cwd, 1
    while i < len(argv):
        arg = literal(argv[i])
        if arg == "-C" and i + 1 < len(argv):
            cwd = resolve(argv[i + 1], cwd)
            i += 2
        elif arg in ("-c", "--git-dir", "--work-tree", "--namespace", "--exec-path") and i + 1 < len(argv) and "=" not in arg:
            i += 2
        elif arg.startswith("-"):
            i += 1
        else:
            break
    if i >= len(argv) or literal(argv[i]) != "grep":
        return None
    search = Search("git-grep", "git grep", Command(argv, cwd, cmd.producer, cmd.stdin_redirect, cmd.subs))
    search.recursive = True
    search.implicit = "pathspec"
    opts, pos = getopt(argv, i + 1, GIT_GREP)
    names = {o for o, _ in opts}
    if names & GIT_GREP.listing:
        search.listing = True
        return search
    from_flags = False
    for opt, value in opts:
        if opt in ("-e", "--regexp") and value is not None:
            search.patterns.append(value)
            from_flags = True
        elif opt in ("-f", "--file"):
            from_flags = True
    dashdash = "--" in [literal(a) for a in argv[i + 1 :]]
    if not from_flags and pos:
        search.patterns.append(literal(pos[0][1]))
        pos = pos[1:]
    root = git_root(cwd) if cwd else None
    for index, word in pos:
        spec_ = literal(word)
        if spec_.startswith(":"):
            magic, _, rest = spec_[1:].partition(")") if spec_.startswith(":(") else ("", "", spec_[1:])
            if spec_.startswith(":(") and "exclude" in magic or spec_[1:2] in ("!", "^"):
                rest = rest.lstrip("!^")
                search.excludes.append("/" + rest.strip("/"))
                continue
            if (spec_[1:2] == "/" or "top" in magic) and root:
                search.targets.append(Target(word, index, os.path.normpath(os.path.join(root, rest.lstrip("/"))), has_glob(rest)))
                continue
        t = target(index, word, cwd)
        lit = literal(word)
        if any(ch in lit for ch in "*?[") and "/" not in lit.rstrip("/"):
            search.includes.append(lit)  # git expands pathspecs itself: '*.py' matches file names anywhere
        elif dashdash or (t.path is not None and os.path.exists(t.path)):
            search.targets.append(t)
    if not search.targets:
        search.targets = [Target(None, None, cwd)]
    return search


def parse(cmd: Command) -> Search | None:
    """The content search `cmd` runs, if it is one of the known tools (no file-list forms)."""
    name = os.path.basename(literal(cmd.argv[0]))
    if name in TOOLS:
        return grep_family(cmd, name)
    if name == "git":
        return git_grep(cmd)
    if name in PROGRAMS or is_perl(name):
        return programmed(cmd, name)
    return None


def programmed(cmd: Command, name: str) -> Search | None:
    """An awk, sed or perl program that prints the lines a pattern selects (`guards/scripted.py`):
    a search of the files it names, which it never recurses into."""
    found = program_search(cmd.argv)
    if found is None:
        return None
    pattern, operands = found
    search = Search("grep", name, cmd)
    search.patterns.append(pattern)
    search.targets = [target(i, w, cmd.cwd) for i, w in operands if literal(w) != "-"]
    search.stdin = not search.targets
    return search
