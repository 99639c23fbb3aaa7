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

AWKS = frozenset({"awk", "gawk", "mawk", "nawk", "busybox-awk"})
SEDS = frozenset({"sed", "gsed"})
PERLS = frozenset({"perl"})
TOOLS = AWKS | SEDS | PERLS

_AWK_VALUE = frozenset({"-F", "-v", "-f", "-e", "-i", "-l", "-E", "-W", "--field-separator", "--assign", "--file", "--source", "--include", "--load", "--exec"})
_AWK_ASSIGN = r"[A-Za-z_][A-Za-z0-9_]*="  # an operand `var=value`: an assignment, not a file
_SED_VALUE = frozenset({"-e", "-f", "-l", "--expression", "--file", "--line-length"})
_SED_FLAGS = frozenset("nErsuzb")  # -n and the switches that take no value (bundled as in `-nE`)
# Patterns are kept as text: `re` compiles each on first use and caches it, so a guard run
# that meets no awk, sed or perl never pays for compiling them.
_OCTAL = frozenset("01234567")
_HEX = frozenset("0123456789abcdefABCDEF")

# a regular expression in a program: `/re/` where an operand may start, a match operator
# (awk's `~`/`!~`, perl's `=~`/`!~`), awk's match(), perl's m{…}/m!…! and grep {…}
_SLASHED = r"(?:^|[\s;{}(!&|,=~])/((?:\\.|[^/\\\n])+)/"
_AWK_MATCH = r"~|\bmatch\s*\("
_PERL_MATCH = r"[=!]~|(?<![\w$@%])m[^\w\s]|\bgrep\s*[{(]"
_PERL_M = r"(?<![\w$@%])m([^\w\s])"
_QUOTED = r'~\s*"((?:\\.|[^"\\])+)"'
_CLOSERS = {"{": "}", "(": ")", "[": "]", "<": ">"}
_PERL_FILTER = r"\b(?:if|unless|next|last)\b|&&|\|\||\?"  # a line kept or dropped by a condition
# sed: an address that is a regular expression, at the start of a command (`/re/p`, `\%re%d`, `1,/re/`)
_SED_ADDRESS = r"(?:^|[;\n{}]|,)\s*(?:/((?:\\.|[^/\\\n])+)/|\\([^\w\s])(.+?)\2)"
_SED_SUBST_PRINT = r"(?:^|[;\n{}]|\s)s([^\w\s\\])((?:\\.|(?!\1).)*)\1(?:\\.|(?!\1).)*\1[gIiMme0-9w]*p"


def program_search(argv: list[str]) -> tuple[str, list[tuple[int, str]]] | None:
    """(the pattern, the file operands as (index, raw word)) of the awk, sed or perl command
    line `argv`, or None when it selects no lines by a pattern (see the module's text)."""
    name = os.path.basename(literal(argv[0]))
    if name in AWKS:
        return _awk(argv)
    if name in SEDS:
        return _sed(argv)
    if name in PERLS:
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
            if opt in ("-e", "--source"):
                sources.append(value)
            i += 1
            continue
        if program is None and not sources:
            program = arg
        elif not re.match(_AWK_ASSIGN, arg):
            operands.append((i, argv[i]))
        i += 1
    text = "\n".join(sources) if sources else program
    if not text:
        return None
    if re.search(_SLASHED, text) is None and re.search(_AWK_MATCH, text) is None:
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
    script = "\n".join(scripts)
    if in_place or from_file or not script:
        return None
    quiet = quiet or script.startswith("#n\n") or script == "#n"
    address = re.search(_SED_ADDRESS, script)
    if address is not None:
        return (address.group(1) or address.group(3) or script).strip(), operands
    printed = re.search(_SED_SUBST_PRINT, script) if quiet else None
    if printed is not None:
        return printed.group(2).strip() or script, operands
    return None


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
    text = "\n".join(code)
    if not text:
        return None
    if not loop and "<>" not in text and "<ARGV>" not in text and "<<>>" not in text:
        return None  # reads no file line by line
    if re.search(_SLASHED, text) is None and re.search(_PERL_MATCH, text) is None:
        return None
    if printing and re.search(_PERL_FILTER, text) is None:
        return None  # `-pe 's/a/b/'` prints every line: a rewrite, not a search
    return _pattern(text), operands


def _pattern(program: str) -> str:
    """The first regular expression (or matched string) written in `program`, for the advice's
    example query; the whole program when none is plain to see."""
    found: list[tuple[int, str]] = []
    if (m := re.search(_SLASHED, program)) is not None:
        found.append((m.start(1), m.group(1)))
    if (m := re.search(_QUOTED, program)) is not None:
        found.append((m.start(1), m.group(1)))
    if (m := re.search(_PERL_M, program)) is not None:
        close = _CLOSERS.get(m.group(1), m.group(1))
        end = program.find(close, m.end())
        if end > m.end():
            found.append((m.end(), program[m.end() : end]))
    return min(found)[1].strip() if found else program.strip()
