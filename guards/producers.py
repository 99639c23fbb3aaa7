"""Searches fed by a list of files: `find -exec grep`, `fd -x rg`, `… | xargs grep`, `grep … $(find …)`,
`… | while read f; do grep … "$f"; done`, `parallel grep … ::: *.md` / `… | parallel grep …`,
and `cat notes/* | grep` (many notes concatenated into a search's stdin).

A *listing* is a Search-shaped description of the files a command prints or visits (its
roots, name filters and exclusions); the search run on those files inherits it.
"""

from __future__ import annotations

import os
import re
import shlex

from .lexer import SUB, literal
from .model import Search, Target
from .searches import TOOLS, getopt, grep_family, parse, target, Spec, _dir_excludes
from .shell import Command, tokenize_words

_SUB_KEY = re.compile(f"{SUB}[0-9]+{SUB}")
_CAT_LIKE = frozenset({"cat", "head", "tail", "bat", "batcat", "less", "more", "zcat", "tac", "nl", "sort", "uniq", "strings",
                       "paste", "cut", "sed", "awk", "gawk", "mawk", "perl", "iconv", "xxd", "od", "fold", "pr"})
_ORDER_ONLY = frozenset({"sort", "uniq", "head", "tail", "tac", "shuf", "cat"})  # pass a file list through (a part of it)
_FD = Spec("eEtdSjoc", {"--extension", "--exclude", "--type", "--max-depth", "--min-depth", "--exact-depth", "--size", "--owner",
                        "--threads", "--color", "--base-directory", "--search-path", "--ignore-file", "--format", "--max-results",
                        "--changed-within", "--changed-before", "--path-separator"}, True, set())
_XARGS_ARGS = frozenset({"-a", "-d", "-E", "-I", "-L", "-n", "-P", "-s", "--arg-file", "--delimiter", "--eof", "--replace",
                         "--max-lines", "--max-args", "--max-procs", "--max-chars", "--process-slot-var"})
_PARALLEL_ARGS = frozenset({"-a", "--arg-file", "-d", "--delimiter", "-E", "--eof", "-I", "--replace", "-j", "-P", "--jobs", "--max-procs",
                            "-L", "-l", "--max-lines", "-n", "--max-args", "-N", "-S", "--sshlogin", "--slf", "--sshloginfile",
                            "-C", "--colsep", "--delay", "--timeout", "--joblog", "--results", "--res", "--tmpdir", "--tempdir",
                            "--env", "--halt", "--retries", "--workdir", "--wd", "--basefile", "--bf", "--tagstring", "--tag-string",
                            "--memfree", "--load", "--block", "--blocksize", "--rpl", "--plus", "-s", "--max-chars", "--sqlworker"})
_SOURCES = frozenset({":::", ":::+", "::::", "::::+"})
_PLACEHOLDERS = frozenset({"{}", "{.}", "{/}", "{//}", "{/.}", "{#}", "{%}"})


def _strip_tail(pattern: str) -> str:
    for tail in ("/**", "/*", "/"):
        if pattern.endswith(tail) and len(pattern) > len(tail):
            return pattern[: -len(tail)]
    return pattern


def _run_search(argv: list[str], cwd: str | None) -> Search | None:
    """The search an `-exec`/`xargs` argument list runs, directly or through `sh -c '…'`."""
    from .shell import commands

    if not argv:
        return None
    for cmd in commands(shlex.join(argv), cwd):
        found = parse(cmd)
        if found is not None and not found.listing:
            found.targets = [t for t in found.targets if t.index is not None and t.path is not None and "{}" not in (t.word or "")]
            found.stdin = False
            return found
    return None


def find_listing(cmd: Command) -> tuple[Search, list[list[str]]]:
    """The files `find` visits (as a listing) and the argument lists of its `-exec`/`-ok` actions."""
    argv, n, i = cmd.argv, len(cmd.argv), 1
    while i < n and (literal(argv[i]) in ("-H", "-L", "-P") or literal(argv[i]).startswith("-O")):
        i += 1
    if i < n and literal(argv[i]) == "-D":
        i += 2
    listing = Search("file-list", "find", cmd)
    listing.recursive = True
    listing.implicit = "after-name"
    while i < n:
        word = literal(argv[i])
        if word.startswith("-") or word in ("(", ")", "!", ","):
            break
        listing.targets.append(target(i, argv[i], cmd.cwd, recursive=True))
        i += 1
    if not listing.targets:
        listing.targets = [Target(None, None, cmd.cwd, recursive=True)]
    expr = [literal(a) for a in argv[i:]]
    execs: list[list[str]] = []
    negate, j = False, 0
    while j < len(expr):
        word = expr[j]
        nxt = expr[j + 1] if j + 1 < len(expr) else None
        pruned = j + 2 < len(expr) and expr[j + 2] == "-prune"
        if word in ("!", "-not"):
            negate = True
            j += 1
            continue
        if word in ("-name", "-iname") and nxt is not None:
            if pruned:
                listing.excludes.append(nxt)
            else:
                (listing.file_excludes if negate else listing.includes).append(nxt)
            j += 2
        elif word in ("-path", "-ipath", "-wholename", "-iwholename") and nxt is not None:
            if negate or pruned:
                listing.path_excludes.append(_strip_tail(nxt))
            j += 2
        elif word in ("-exec", "-execdir", "-ok", "-okdir"):
            k = j + 1
            while k < len(expr) and expr[k] not in (";", "+"):
                k += 1
            execs.append(expr[j + 1 : k])
            j = k + 1
        else:
            j += 1
        negate = False
    return listing, execs


def fd_listing(cmd: Command) -> tuple[Search, list[list[str]]]:
    """The files `fd`/`fdfind` lists (as a listing) and the command of its `-x`/`-X` option."""
    argv = list(cmd.argv)
    execs: list[list[str]] = []
    for k, word in enumerate(argv):
        if literal(word) in ("-x", "--exec", "-X", "--exec-batch"):
            rest = [literal(a) for a in argv[k + 1 :]]
            execs.append(rest[: rest.index(";")] if ";" in rest else rest)
            argv = argv[:k]
            break
    listing = Search("file-list", "fd", Command(argv, cmd.cwd, cmd.producer, cmd.stdin_redirect, cmd.subs))
    listing.recursive = True
    opts, pos = getopt(argv, 1, _FD)
    for opt, value in opts:
        if opt in ("-e", "--extension") and value:
            listing.includes.append("*." + value.lstrip("."))
        elif opt in ("-E", "--exclude") and value:
            listing.excludes += _dir_excludes([value])
            listing.file_excludes.append(value)
    listing.targets = [target(i, w, cmd.cwd, recursive=True) for i, w in pos[1:]] or [Target(None, None, cmd.cwd, recursive=True)]
    return listing, execs


def listing_of(cmd: Command | None, depth: int = 0) -> Search | None:
    """What files `cmd` prints one per line, if the guard can tell (find, fd, git ls-files, rg --files, …)."""
    for _ in range(8):  # `find … | sort | head -50 | xargs grep`: the list passes through
        if cmd is None:
            return None
        name = os.path.basename(literal(cmd.argv[0]))
        if name not in _ORDER_ONLY or any(not literal(a).startswith("-") and not literal(a).isdigit() for a in cmd.argv[1:]):
            break
        cmd = cmd.producer
    if cmd is None:
        return None
    name = os.path.basename(literal(cmd.argv[0]))
    if name == "find":
        return find_listing(cmd)[0]
    if name in ("fd", "fdfind"):
        return fd_listing(cmd)[0]
    words = [literal(a) for a in cmd.argv]
    if name == "git" and "ls-files" in words:
        at = words.index("ls-files")
        listing = Search("file-list", "git ls-files", cmd)
        listing.recursive = True
        paths = [(i, cmd.argv[i]) for i in range(at + 1, len(words)) if not words[i].startswith("-") and words[i] != "--"]
        for i, w in list(paths):
            if any(ch in words[i] for ch in "*?[") and "/" not in words[i].rstrip("/"):
                listing.includes.append(words[i])  # git matches a wildcard pathspec at any depth
                paths.remove((i, w))
        listing.targets = [target(i, w, cmd.cwd, recursive=True) for i, w in paths] or [Target(None, None, cmd.cwd, recursive=True)]
        return listing
    if name in TOOLS:
        search = grep_family(cmd, name)
        opts, _pos = getopt(cmd.argv, 1, TOOLS[name])
        flags = {o for o, _ in opts}
        if search.stdin and cmd.producer is not None:
            return _filtered_listing(cmd, search, flags, depth)
        prints_names = flags & {"-l", "-L", "--files-with-matches", "--files-without-match", "--files"}
        if search.stdin or not (search.listing or prints_names):
            return None
        search.kind = "file-list"
        return search
    if name == "ls" and not [a for a in words[1:] if not a.startswith("-") and a not in (".", "./")] and cmd.cwd is not None:
        from glob import escape

        listing = Search("file-list", name, cmd)  # `ls` prints the names in its cwd
        listing.targets = [Target(None, None, cmd.cwd, True, False, os.path.join(escape(cmd.cwd), "*"))]
        listing.implicit = "none"
        return listing
    if name in ("ls", "echo", "printf"):
        listing = Search("file-list", name, cmd)
        listing.targets = [target(i, a, cmd.cwd) for i, a in enumerate(cmd.argv) if i and not literal(a).startswith("-")]
        listing.implicit = "none"
        if name == "ls":  # `ls DIR` prints names relative to DIR: only wildcard words yield usable paths
            listing.targets = [t for t in listing.targets if t.glob]
        return listing if listing.targets else None
    return None


def _filtered_listing(cmd: Command, search: Search, flags: set[str], depth: int) -> Search | None:
    """`find … | grep '\\.md$' | xargs grep foo`: a file list filtered by a grep on its lines keeps
    the names the pattern matches (an inverted or unreadable filter: the guard cannot tell)."""
    import re

    if flags & {"-v", "--invert-match", "-c", "--count", "-o", "--only-matching"} or not search.patterns:
        return None
    if depth >= 8:  # `find | grep a | grep b | …`: no deeper (the decision is then conservative)
        from . import budget

        budget.skipped("pipeline depth")
        return None
    inner = listing_of(cmd.producer, depth + 1)
    if inner is None:
        return None
    fixed = bool(flags & {"-F", "--fixed-strings"}) or search.tool == "fgrep"
    fold = "(?i)" if flags & {"-i", "--ignore-case"} else ""
    inner = inner.copy()
    inner.include_regexes = inner.include_regexes + [fold + (re.escape(p) if fixed else p.replace("\\|", "|")) for p in search.patterns]
    return inner


def _from_listing(kind: str, listing: Search, search: Search) -> Search:
    out = Search(kind, search.tool, listing.command)
    out.patterns = search.patterns
    out.targets = listing.targets
    out.recursive = listing.recursive or search.recursive  # `rg foo $(ls -d */)` recurses into the folders listed
    out.includes = listing.includes or search.includes
    out.include_regexes = listing.include_regexes + search.include_regexes
    out.types = search.types
    out.file_excludes = listing.file_excludes + search.file_excludes
    out.excludes = listing.excludes
    out.path_excludes = listing.path_excludes
    out.implicit = listing.implicit
    return out


def exec_searches(cmd: Command) -> list[Search]:
    """`find … -exec grep …` / `fd … -x rg …`: the search run on every file the finder visits."""
    name = os.path.basename(literal(cmd.argv[0]))
    listing, execs = find_listing(cmd) if name == "find" else fd_listing(cmd)
    out: list[Search] = []
    for argv in execs:
        search = _run_search(argv, cmd.cwd)
        if search is not None:
            out.append(_from_listing("find-exec", listing, search))
            if search.targets:
                out.append(search)
    return out


def xargs_searches(cmd: Command) -> list[Search]:
    """`producer | xargs [opts] grep …`: the search run on the files the producer prints."""
    argv, i, from_file = cmd.argv, 1, False
    listing = None
    while i < len(argv):
        word = literal(argv[i])
        if word == "--":
            i += 1
            break
        if not word.startswith("-"):
            break
        if word in ("-a", "--arg-file") or word.startswith("--arg-file="):
            from_file = True
            listing = _sub_listing(cmd, argv[i + 1] if word in ("-a", "--arg-file") and i + 1 < len(argv) else argv[i])
        i += 2 if word in _XARGS_ARGS else 1
    search = _run_search([literal(a) for a in argv[i:]], cmd.cwd)
    if search is None:
        return []
    return _fed(search, listing if from_file else listing_of(cmd.producer), argv)


def _fed(search: Search, listing: Search | None, argv: list[str]) -> list[Search]:
    """The search a command runs on its own arguments (if it names targets) and, when a file
    list reaches it (`producer | xargs …`, `-a <(find …)`), the same search over that list."""
    out = [search] if search.targets else []
    if listing is not None:
        fed = _from_listing("file-list", listing, search)
        fed.suffix = " | " + shlex.join([literal(a) for a in argv])
        out.append(fed)
    return out


def parallel_searches(cmd: Command) -> list[Search]:
    """GNU `parallel CMD ::: ARGS` (CMD run on each argument) and `producer | parallel CMD`."""
    argv, i, from_file = cmd.argv, 1, False
    while i < len(argv):
        word = literal(argv[i])
        if word in _SOURCES or not word.startswith("-") or word == "--":
            i += word == "--"
            break
        from_file = from_file or word in ("-a", "--arg-file") or word.startswith("--arg-file=")
        i += 2 if word in _PARALLEL_ARGS else 1
    rest = argv[i:]
    at = next((k for k, w in enumerate(rest) if literal(w) in _SOURCES), len(rest))
    run, sources = rest[:at], rest[at:]
    if len(run) == 1 and " " in literal(run[0]):
        run = tokenize_words(literal(run[0]))  # `parallel 'grep foo {}' ::: …`
    run = [w for w in run if literal(w) not in _PLACEHOLDERS]
    if not run:
        return []
    if sources:
        args = [w for w in sources if literal(w) not in _SOURCES]
        if any(literal(w).startswith("::::") for w in sources):
            return []  # arguments read from files
        direct = Command(run + args, cmd.cwd, None, False, cmd.subs)
        search = parse(direct)
        return [search] if search is not None and not search.listing else []
    search = _run_search([literal(a) for a in run], cmd.cwd)
    if search is None:
        return []
    return _fed(search, None if from_file else listing_of(cmd.producer), argv)


def _sub_listing(cmd: Command, word: str) -> Search | None:
    """What the substitution in `word` (`$(find …)`, `<(find …)`) lists, if the guard can tell."""
    for key in _SUB_KEY.findall(word):
        inner = cmd.subs.get(key)
        if inner:
            listing = next((ls for ls in (listing_of(c) for c in reversed(inner)) if ls is not None), None)
            if listing is not None:
                return listing
    return None


def substituted(cmd: Command, search: Search) -> list[Search]:
    """`grep foo $(find notes -name '*.md')`: the search run on the files a substitution prints."""
    out: list[Search] = []
    for t in list(search.targets):
        word = t.word or ""
        if SUB not in word:
            continue
        for key in dict.fromkeys(_SUB_KEY.findall(word)):  # in order, once each (not every sub per word)
            inner = cmd.subs.get(key)
            if inner is not None:
                listing = next((ls for ls in (listing_of(c) for c in reversed(inner)) if ls is not None), None)
                if listing is not None:
                    fed = _from_listing("file-list", listing, search)
                    fed.implicit = "none"
                    fed.command = None
                    out.append(fed)
    return out


def _cat_listing(producer: Command) -> Search | None:
    """The files a `find … -exec cat`, `… | xargs cat` or `cat $(find …)` producer concatenates."""
    name = os.path.basename(literal(producer.argv[0]))
    if name in _CAT_LIKE:
        return next((ls for ls in (_sub_listing(producer, a) for a in producer.argv[1:] if SUB in a) if ls is not None), None)
    if name == "find":
        listing, execs = find_listing(producer)
        return listing if any(e and os.path.basename(e[0]) in _CAT_LIKE for e in execs) else None
    if name == "xargs":
        rest = [literal(a) for a in producer.argv[1:]]
        while rest and rest[0].startswith("-"):
            rest = rest[2:] if rest[0] in _XARGS_ARGS else rest[1:]
        if rest and os.path.basename(rest[0]) in _CAT_LIKE:
            return listing_of(producer.producer)
    return None


def cat_pipe(cmd: Command, search: Search) -> Search | None:
    """`cat notes/*.md | grep foo` (also `find notes -exec cat {} + | grep`, `… | xargs cat | grep`,
    `cat $(find notes …) | grep`): many notes concatenated into a search that reads stdin."""
    producer = cmd.producer
    if not search.stdin or producer is None:
        return None
    listing = _cat_listing(producer)
    if listing is not None:
        fed = _from_listing("cat-pipe", listing, search)
        fed.command = None
        return fed
    if os.path.basename(literal(producer.argv[0])) not in _CAT_LIKE:
        return None
    fed = Search("cat-pipe", search.tool, None)
    fed.patterns = search.patterns
    fed.targets = [target(i, a, producer.cwd, recursive=False) for i, a in enumerate(producer.argv) if i and not literal(a).startswith("-")]
    fed.implicit = "none"
    return fed if fed.targets else None
