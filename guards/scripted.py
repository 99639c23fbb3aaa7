"""Pattern sweeps written as programs: `awk '/retry/' notes/*.md`, `sed -n '/retry/p' notes/*.md`,
`perl -ne 'print if /retry/' notes/*.md`.

Each reads the files it names, line by line, and prints the lines a regular expression
selects: a search like `grep retry notes/*.md`, judged the same way (none of them recurses,
so a wildcard over several notes is what denies; one named note is allowed). A program that
selects nothing by a pattern (`awk 'NR==1'`, `sed -n 1,20p`), one that edits in place
(`sed -i`, `perl -i`), one the guard cannot read (`awk -f prog.awk`) and one that only
rewrites every line (`sed s/a/b/`, `perl -pe 's/a/b/'`) is not a search.
"""

from __future__ import annotations

import os
import re

from .lexer import literal

AWKS = frozenset({"awk", "gawk", "mawk", "nawk"})
SEDS = frozenset({"sed", "gsed"})
PERLS = frozenset({"perl"})  # and perl5.36.0 and the like (is_perl)
TOOLS = AWKS | SEDS | PERLS

MAX_PROGRAM = 8192  # characters of a program looked into: a longer one is judged by its start
_AWK_VALUE = frozenset({"-F", "-v", "-f", "-e", "-i", "-l", "-E", "-W", "--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec"})
_AWK_ASSIGN = r"[A-Za-z_][A-Za-z0-9_]*="  # an operand `var=value`: an assignment, not a file
_SED_LONG = ("--quiet", "--silent", "--expression", "--file", "--in-place", "--line-length", "--null-data", "--zero-terminated",
             "--separate", "--unbuffered", "--regexp-extended", "--posix", "--debug", "--sandbox", "--follow-symlinks", "--binary")
_SED_VALUE = frozenset({"--expression", "--file", "--line-length"})
_SED_FLAGS = frozenset("nErsuzb")  # -n and the switches that take no value (bundled as in `-nE`)
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")

# Patterns are kept as text: `re` compiles each on first use and caches it, so a guard run
# that meets no awk, sed or perl never pays for compiling them. Each is linear in its input
# (no two ways to match one character): a guard decision has a deadline, `re` does not.
_AWK_MATCH = r"~|\b(?:match|index)\s*\("  # a field or the line tested against a pattern, or a string searched
_PERL_MATCH = r"[=!]~|(?<![\w$@%])m[^\w\s]|\bgrep\s*[{(]|\bindex\s*\("
_PERL_M = r"(?<![\w$@%])m([^\w\s])"
_QUOTED = r'~[ \t]*"((?:\\.|[^"\\\n])+)"'
_CLOSERS = {"{": "}", "(": ")", "[": "]", "<": ">"}
_PERL_FILTER = r"\b(?:if|unless|next|last|and|or)\b|&&|\|\||\?"  # a line kept or dropped by a condition
# words after which a `/` starts a regular expression, not a division
_BEFORE_REGEX = frozenset({"print", "printf", "return", "if", "unless", "and", "or", "not", "grep", "when", "while", "until", "split"})
_REWRITES = r"(?:\b(?:g?sub|gensub)\s*\(|\bsplit\s*\([^()\n]*,|\bsplit)[ \t(]*$"  # a regex that rewrites or splits, not selects
# sed: a command whose address is one regular expression (`/re/p`, `\%re%!d`, `/re/{…}`); group 1 or 3 the
# regex, 4 a comma (a range: a block, not the lines a pattern selects), 5 `!`, 6 the command
_SED_COMMAND = r"(?:^|[;\n{}])[ \t]*(?:/((?:\\.|[^/\\\n])+)/|\\([^\w\s\\])((?:\\.|(?!\2)[^\\\n])+)\2)[IM]*[ \t]*(,?)[ \t]*(!?)[ \t]*([a-zA-Z{=]?)"
_SED_SUBST_PRINT = r"(?:^|[;\n{}]|[ \t])s([^\w\s\\])((?:\\.|(?!\1)[^\\\n])*)\1(?:\\.|(?!\1)[^\\\n])*\1[gIiMme0-9]*p"


def is_perl(name: str) -> bool:
    return name in PERLS or (name.startswith("perl5") and all(c.isdigit() or c == "." for c in name[4:]))


def program_search(argv: list[str]) -> tuple[str, list[tuple[int, str]]] | None:
    """(the pattern, the file operands as (index, raw word)) of the awk, sed or perl command
    line `argv`, or None when it selects no lines by a pattern (see the module's text)."""
    name = os.path.basename(literal(argv[0]))
    if name in AWKS:
        return _awk(argv)
    if name in SEDS:
        return _sed(argv)
    if is_perl(name):
        return _perl(argv)
    return None


def _awk(argv: list[str]) -> tuple[str, list[tuple[int, str]]] | None:
    sources: list[str] = []  # -e/--source program text (gawk)
    program: str | None = None
    operands: list[tuple[int, str]] = []
    i, n = 1, len(argv)
    while i < n:
        arg = literal(argv[i])
        if arg == "--":
            rest = list(range(i + 1, n))
            if program is None and not sources and rest:
                program = literal(argv[rest[0]])
                rest = rest[1:]
            operands.extend((j, argv[j]) for j in rest if not re.match(_AWK_ASSIGN, literal(argv[j])))
            break
        if arg.startswith("-") and len(arg) > 1 and program is None:  # awk stops reading options at its program
            if arg.startswith("--"):
                opt, eq, value = arg.partition("=")
                attached = bool(eq)
            else:
                opt, value = arg[:2], arg[2:]
                attached = bool(value)
            if opt in _AWK_VALUE and not attached:
                value = literal(argv[i + 1]) if i + 1 < n else ""
                i += 1
            if opt in ("-f", "--file", "-E", "--exec"):
                return None  # the program is in a file the guard does not read
            if opt in ("-i", "--include") and value in ("inplace", "inplace.awk"):
                return None  # gawk's in-place edit
            if opt in ("-e", "--source"):
                sources.append(value)
            i += 1
            continue
        if program is None and not sources:
            program = arg
        elif not re.match(_AWK_ASSIGN, arg):
            operands.append((i, argv[i]))
        i += 1
    text = ("\n".join(sources) if sources else program or "")[:MAX_PROGRAM]
    if not text:
        return None
    if not _regexes(text) and re.search(_AWK_MATCH, text) is None:
        return None
    return _pattern(text), operands


def _sed(argv: list[str]) -> tuple[str, list[tuple[int, str]]] | None:
    scripts: list[str] = []
    quiet = in_place = from_file = False
    operands: list[tuple[int, str]] = []
    i, n = 1, len(argv)
    while i < n:
        arg = literal(argv[i])
        if arg == "--":
            operands.extend((j, argv[j]) for j in range(i + 1, n))
            break
        if arg.startswith("--") and len(arg) > 2:
            opt, eq, value = arg.partition("=")
            opt = _long_option(opt, _SED_LONG)
            quiet = quiet or opt in ("--quiet", "--silent")
            in_place = in_place or opt == "--in-place"
            from_file = from_file or opt == "--file"
            if opt in _SED_VALUE and not eq:
                value = literal(argv[i + 1]) if i + 1 < n else ""
                i += 1
            if opt == "--expression":
                scripts.append(value)
        elif arg.startswith("-") and len(arg) > 1:
            for k, ch in enumerate(arg[1:], 1):
                if ch == "i":
                    in_place = True
                    break  # -i[SUFFIX]: the rest is its suffix
                if ch in "efl":
                    value = arg[k + 1 :] or (literal(argv[i + 1]) if i + 1 < n else "")
                    i += 0 if arg[k + 1 :] else 1
                    if ch == "e":
                        scripts.append(value)
                    from_file = from_file or ch == "f"
                    break
                quiet = quiet or ch == "n"
                if ch not in _SED_FLAGS:
                    break
        elif not scripts and not from_file:
            scripts.append(arg)
        else:
            operands.append((i, argv[i]))
        i += 1
    script = "\n".join(scripts)[:MAX_PROGRAM]
    if in_place or from_file or not script:
        return None
    quiet = quiet or script.startswith("#n\n") or script == "#n"
    for command in re.finditer(_SED_COMMAND, script):
        ranged, negated, verb = command.group(4), command.group(5), command.group(6)
        if not ranged and ((quiet and not negated and verb in ("p", "{")) or (negated and verb == "d")):
            return (command.group(1) or command.group(3)).strip(), operands  # `-n /re/p`, `/re/!d`: the lines it selects
    printed = re.search(_SED_SUBST_PRINT, script) if quiet else None
    if printed is not None:
        return printed.group(2).strip() or script, operands
    return None


def _long_option(given: str, names: tuple[str, ...]) -> str:
    """A GNU long option as getopt reads it: the whole name, or a prefix only one name has."""
    if given in names:
        return given
    found = [name for name in names if name.startswith(given)]
    return found[0] if len(found) == 1 else given


def _perl(argv: list[str]) -> tuple[str, list[tuple[int, str]]] | None:
    code: list[str] = []
    loop = printing = False
    operands: list[tuple[int, str]] = []
    i, n = 1, len(argv)
    while i < n:
        arg = literal(argv[i])
        if arg == "--" or not arg.startswith("-") or len(arg) == 1:
            if not code:  # the first operand is a script file the guard does not read
                return None
            operands.extend((j, argv[j]) for j in range(i + 1 if arg == "--" else i, n))
            break
        j = 1
        while j < len(arg):
            ch = arg[j]
            j += 1
            if ch == "i":
                return None  # edits in place
            if ch in "np":
                loop = True
                printing = printing or ch == "p"
            elif ch == "l":  # -l[octal]
                while j < len(arg) and arg[j] in _OCTAL:
                    j += 1
            elif ch == "0":  # -0[octal] or -0xHEX
                digits = _HEX if arg[j : j + 1] == "x" else _OCTAL
                j += 1 if digits is _HEX else 0
                while j < len(arg) and arg[j] in digits:
                    j += 1
            elif ch == "a":  # autosplit: implies -n
                loop = True
            elif ch == "F":  # -Fpattern: implies -a, which implies -n
                loop = True
                break
            elif ch in "eE" or ch in "IMm":
                value = arg[j:]
                if not value and i + 1 < n:
                    value = literal(argv[i + 1])
                    i += 1
                if ch in "eE":
                    code.append(value)
                break
            elif ch in "dDxC":  # a value attached, if any
                break
        i += 1
    text = "\n".join(code)[:MAX_PROGRAM]
    if not text:
        return None
    if not loop and "<>" not in text and "<ARGV>" not in text and "<<>>" not in text:
        return None  # reads no file line by line
    if not _regexes(text) and re.search(_PERL_MATCH, text) is None:
        return None
    if printing and re.search(_PERL_FILTER, text) is None:
        return None  # `-pe 's/a/b/'` prints every line: a rewrite, not a search
    return _pattern(text), operands


def _pattern(program: str) -> str:
    """The first regular expression (or matched string) written in `program`, for the advice's
    example query; the whole program when none is plain to see."""
    found: list[tuple[int, str]] = []
    if slashed := _regexes(program, first=True):
        found.append(slashed[0])
    if (m := re.search(_QUOTED, program)) is not None:
        found.append((m.start(1), m.group(1)))
    if (m := re.search(_PERL_M, program)) is not None:
        close = _CLOSERS.get(m.group(1), m.group(1))
        end = program.find(close, m.end())
        if end > m.end():
            found.append((m.end(), program[m.end() : end]))
    return min(found)[1].strip() if found else program.strip()


def _regexes(program: str, first: bool = False) -> list[tuple[int, str]]:
    """The `/re/` literals of an awk or perl program that select lines, as (offset, text): a `/`
    starts one where an operand may start (after an operator, a bracket or the start, or a
    word such as `print`, `if`, `grep`); after an operand (`$1 / 1024`, `total / NR`) it is a
    division. Those that rewrite or split (`gsub(/ +$/, "")`, `split /,/`) do not count. One
    pass, linear in the program."""
    found: list[tuple[int, str]] = []
    i, n = 0, len(program)
    while i < n:
        slash = program.find("/", i)
        if slash < 0:
            break
        j = slash - 1
        while j >= 0 and program[j] in " \t":
            j -= 1
        before = program[j] if j >= 0 else ""
        if before and (before.isalnum() or before in "_)]$.\"'"):
            word_end = j + 1
            while j >= 0 and (program[j].isalnum() or program[j] == "_"):
                j -= 1
            if program[j + 1 : word_end] not in _BEFORE_REGEX:
                i = slash + 1  # a division
                continue
        k = slash + 1
        while k < n and program[k] not in "/\n":
            k += 2 if program[k] == "\\" else 1
        if k >= n or program[k] != "/" or k == slash + 1:
            i = slash + 1
            continue
        if re.search(_REWRITES, program[max(0, slash - 200) : slash]) is None:
            found.append((slash + 1, program[slash + 1 : k]))
            if first:
                break
        i = k + 1
    return found
