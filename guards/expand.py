"""Word expansion of the shell walker: what a word stands for once the shell has expanded it.

Parameters and variables (`$X`, `${X:-default}`, `${X%pat}`, `"$@"`, `$PWD`), tilde
(`~`, `~+`, `~-`), and the output of the few commands whose output the guard can know
(`pwd`, `echo`, `printf`, `cat` of a here-document, `realpath`, `dirname`, `which`, …),
which takes the place of their command substitutions.

Every value is bounded: a word or variable value longer than MAX_VALUE characters keeps its
first MAX_VALUE characters followed by UNKNOWN (a script's known start is still read; a
path that long does not exist), a list longer than MAX_WORDS words (a `for` loop over
`$x $x`) keeps its distinct words, or the first MAX_WORDS of them and UNKNOWN, and what
expansion builds is paid for out of the decision's work budget (`guards.budget`). Pattern
removal (`${X#*/}`) is linear in the value: it places the pattern's pieces between `*`s
with regular-expression searches instead of trying every cut.
"""

from __future__ import annotations

import os
import re

from . import budget
from .command import UNKNOWN, Command, State, git_root, resolve
from .lexer import HEREDOC, SUB, ansi_c, has_glob, literal

MAX_VALUE = 64 * 1024  # characters of one expanded word, variable value or known output (the size of a whole command)
MAX_WORDS = 32 * 1024  # words of one list (a `for` list, "$@"): more than the words of a whole command
_TRIM_WORK = 1 << 22  # value length × pattern length a pattern removal may search through

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?!$-])|\{([^}]*)\})")
_PARAM = r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(:?[-=+?]|%%|%|##|#)(.*)$"  # compiled on first use (re caches it)
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
# `${a[@]}`, `${a[*]}`, `${a[2]}` (a `[` inside quotes is marked, see lexer._QUOTED); `${#a[@]}`
_ELEMENT = re.compile(r"^(#?)([A-Za-z_][A-Za-z0-9_]*)[\[\ue005]([@*]|[0-9]{1,6})\]$")


def _tilde(word: str, state: State | None = None) -> str:
    if not word.startswith("~"):
        return word
    head, sep, rest = word.partition("/")
    if head in ("~+", "~-") and state is not None:
        where = state.cwd if head == "~+" else state.oldcwd
        return (where or UNKNOWN) + sep + rest
    try:
        expanded = os.path.expanduser(head)
    except ValueError:  # `~` and a NUL (an unknown part) or a lone surrogate: no such user
        return word
    return word if expanded == head else expanded + sep + rest


def bounded_text(text: str) -> str:
    """`text`, or its first MAX_VALUE characters followed by UNKNOWN when it is longer."""
    return text if len(text) <= MAX_VALUE else text[:MAX_VALUE] + UNKNOWN


MAX_BRACE_WORDS = 256  # words one word's braces may make (`{a,b}{c,d}` makes 4); past it the rest is UNKNOWN
MAX_BRACE_WORD = 4096  # a longer word is left unexpanded: real brace lists are short, and this bounds the work


def _brace_span(word: str) -> tuple[int, int, list[int]] | None:
    """(open, close, top-level comma positions) of the leftmost `{…,…}` bash would expand: not
    `${`, commas unquoted (the lexer marks quoted ones), nested braces matched. One pass."""
    stack: list[tuple[int, list[int]]] = []
    best: tuple[int, int, list[int]] | None = None
    for i, c in enumerate(word):
        if c == "{" and not (i and word[i - 1] == "$"):
            stack.append((i, []))
        elif c == "," and stack:
            stack[-1][1].append(i)
        elif c == "}" and stack:
            start, commas = stack.pop()
            if commas and (best is None or start < best[0]):
                best = (start, i, commas)
            if best is not None and not stack:
                return best  # nothing still open can start further left
    return best


def braces(word: str) -> list[str]:
    """Bash's brace expansion of one word (`{src,notes}` → `src notes`, nested, several per word);
    the comma form only (`{1..3}` is left as it is), bounded by MAX_BRACE_WORDS and MAX_BRACE_WORD."""
    if "{" not in word or "," not in word or len(word) > MAX_BRACE_WORD:
        return [word]
    out: list[str] = []
    todo = [word]
    while todo:
        item = todo.pop(0)
        budget.charge(len(item))
        span = _brace_span(item)
        if span is None:
            out.append(item)
        else:
            start, end, commas = span
            cuts = [start, *commas, end]
            todo[:0] = [item[:start] + item[a + 1 : b] + item[end + 1 :] for a, b in zip(cuts, cuts[1:])]
        if len(out) + len(todo) > MAX_BRACE_WORDS:
            return [*out, UNKNOWN]
    return out


def bounded_words(words: list[str]) -> list[str]:
    """A list of at most MAX_WORDS words: its distinct words, or the first MAX_WORDS and UNKNOWN."""
    budget.charge(8 * len(words) + 256)
    if len(words) <= MAX_WORDS:
        return words
    words = list(dict.fromkeys(words))
    return words if len(words) <= MAX_WORDS else words[:MAX_WORDS] + [UNKNOWN]


def join_words(words: list[str], sep: str = " ") -> str:
    """`sep.join(words)`, built only up to MAX_VALUE characters (then UNKNOWN)."""
    if len(words) == 1:
        return words[0]
    size = 0
    for k, word in enumerate(words):
        size += len(word) + len(sep)
        if size > MAX_VALUE + len(sep):
            text = sep.join(words[: k + 1])[:MAX_VALUE] + UNKNOWN
            break
    else:
        text = sep.join(words)
    budget.charge(len(text) + 64)
    return text


def _param(name: str, state: State) -> list[str] | None:
    """The words of variable or parameter `name`, or None when it is not known."""
    if name in state.vars:
        return state.vars[name]
    if name.isdigit():
        if name == "0":
            return None
        args = state.args
        index = int(name) if len(name) < 10 else 1 << 40  # `${99…9}`: int() refuses 4300 digits
        return None if args is None else ([args[index - 1]] if index <= len(args) else [])
    if name in ("@", "*"):
        return None if state.args is None else list(state.args)
    if name == "#":
        return None if state.args is None else [str(len(state.args))]
    if name == "PWD":
        return [state.cwd] if state.cwd else None
    if name == "OLDPWD":
        return [state.oldcwd] if state.oldcwd else None
    if name == "HOME":
        return [os.path.expanduser("~")]
    return None


def _element(body: str, state: State) -> list[str] | None:
    """The words of `${a[@]}`, `${a[*]}`, `${a[N]}` or `${#a[@]}` for an array the command
    assigned (`a=(…)`: its list; any other variable is an array of one word); None otherwise."""
    match = _ELEMENT.match(body)
    if match is None or match.group(2) not in state.vars:
        return None
    count, name, index = match.groups()
    value = state.vars[name]
    if count:
        return None if UNKNOWN in value else [str(len(value))]
    if index in ("@", "*"):
        return list(value)
    if len(index) > 1 and index.startswith("0"):
        return None  # `${a[010]}` is element 8: arithmetic, not followed
    if int(index) < len(value):
        return [value[int(index)]]
    return [UNKNOWN] if UNKNOWN in value else [""]


def _spread(word: str, state: State) -> list[str] | None:
    """A word holding one `${a[@]}` of a known array among other text: as bash splits it, one
    word per element, the text before it joined to the first and the text after to the last."""
    found = [m for m in _VAR.finditer(word) if m.group(4) is not None and _ELEMENT.match(m.group(4)) and m.group(4)[-2] == "@"]
    if len(found) != 1:
        return None
    element = _element(found[0].group(4), state)
    if element is None:
        return None
    before, after = _substitute(word[: found[0].start()], state), _substitute(word[found[0].end() :], state)
    if not element:
        return [before + after]
    words = list(element)
    words[0] = before + words[0]
    words[-1] = words[-1] + after
    return bounded_words(words)


def _braced(body: str, state: State) -> str:
    """`${…}` other than a plain name: `${X:-default}`, `${X-d}`, `${X:=d}`, `${X:+alt}`, an array's
    elements; else unknown."""
    element = _element(body, state)
    if element is not None:
        return join_words(element)
    match = re.match(_PARAM, body, re.DOTALL)
    if match is None:
        return UNKNOWN
    name, op, word = match.groups()
    value = _param(name, state)
    if value is None:
        return UNKNOWN  # it may be set in the agent's environment: neither its value nor the default is known
    if op[0] in "%#":
        return _trim(join_words(value), op, _expand_text(word, state))
    empty = not any(value) if op.startswith(":") else False
    if op[-1] == "+":
        return "" if empty else _expand_text(word, state)
    if op[-1] in "-=" and empty:
        return _expand_text(word, state)
    return join_words(value)


def _atoms(pattern: str) -> list[list[str]]:
    """The pieces of a glob pattern between its `*`s, each a list of one-character atoms (a
    character, `?`, or a `[…]` class read the way fnmatch reads it)."""
    pieces: list[list[str]] = [[]]
    i, n = 0, len(pattern)
    while i < n:
        ch = pattern[i]
        if ch == "*":
            pieces.append([])
            i += 1
            continue
        j = i + 1
        if ch == "[":
            j += pattern.startswith("!", j)
            j += pattern.startswith("]", j)
            j = pattern.find("]", j)
            j = i + 1 if j < 0 else j + 1  # unclosed: a literal `[`
        pieces[-1].append(pattern[i:j])
        i = j
    return pieces


def _regex(atoms: list[str]) -> str:
    from fnmatch import translate

    return "".join("." if a == "?" else (translate(a)[4:-3] if len(a) > 1 else re.escape(a)) for a in atoms)


def _prefix(value: str, pieces: list[list[str]], longest: bool) -> int | None:
    """The length of the shortest (longest) prefix of `value` the pattern matches, or None: the
    first piece at the start, each middle piece at its earliest place, the last one at its
    earliest (latest) place — linear searches, no trial of every cut."""
    first = re.compile(f"(?s:{_regex(pieces[0])})").match(value)
    if first is None:
        return None
    if len(pieces) == 1:
        return first.end()
    pos = first.end()
    for piece in pieces[1:-1]:
        found = re.compile(f"(?s:{_regex(piece)})").search(value, pos)
        if found is None:
            return None
        pos = found.end()
    if longest:
        if not pieces[-1]:
            return len(value)
        found = re.compile(f"(?s:.*{_regex(pieces[-1])})").match(value, pos)
    else:
        found = re.compile(f"(?s:{_regex(pieces[-1])})").search(value, pos)
    return None if found is None else found.end()


def _trim(value: str, op: str, pattern: str) -> str:
    """`${X%pat}`, `${X%%pat}`, `${X#pat}`, `${X##pat}`: the shortest/longest suffix/prefix removed."""
    if UNKNOWN in value or UNKNOWN in pattern or len(value) * max(1, len(pattern)) > _TRIM_WORK:
        return UNKNOWN
    budget.charge(len(value) + len(pattern) + 64)
    pieces = _atoms(pattern)
    if op[0] == "%":  # a suffix: the same search on the reversed value with the reversed pattern
        cut = _prefix(value[::-1], [piece[::-1] for piece in pieces[::-1]], op == "%%")
        return value if cut is None else value[: len(value) - cut]
    cut = _prefix(value, pieces, op == "##")
    return value if cut is None else value[cut:]


def _substitute(text: str, state: State) -> str:
    """`text` with its parameters expanded, built only up to MAX_VALUE characters (then UNKNOWN)."""
    parts: list[str] = []
    size = pos = 0
    for m in _VAR.finditer(text):
        value = _value(m, state)
        parts += (text[pos : m.start()], value)
        size += m.start() - pos + len(value)
        pos = m.end()
        if size > MAX_VALUE:
            break
    parts.append(text[pos:])
    out = bounded_text("".join(parts))
    budget.charge(len(out) + 256)
    return out


def _expand_text(text: str, state: State) -> str:
    return _substitute(_tilde(text, state), state)


def _value(m: re.Match[str], state: State) -> str:
    if m.group(4) is not None:
        return _braced(m.group(4), state)
    name = m.group(1) or m.group(2) or m.group(3)
    value = _param(name, state)
    return UNKNOWN if value is None else join_words(value)


def expand(word: str, state: State) -> list[str]:
    """Tilde and variable expansion; a lone list variable (`$f` from a for loop, `"$@"`) expands to many words."""
    word = _tilde(word, state)
    match = ASSIGN.match(word)
    if match and word[match.end() :].startswith("~"):
        word = word[: match.end()] + _tilde(word[match.end() :], state)
    if "$" not in word:
        return [word]
    whole = _VAR.fullmatch(word)
    if whole and whole.group(4) is not None:  # `"${a[@]}"`: one word per element
        element = _element(whole.group(4), state)
        if element is not None:
            return bounded_words(element)
    if whole is None and "[@]" in word.replace("\ue005", "["):  # `"$PWD/${a[@]}"`: the text around joins the first and last
        spread = _spread(word, state)
        if spread is not None:
            return spread
    if whole and whole.group(4) is None:
        name = whole.group(1) or whole.group(2) or whole.group(3)
        value = _param(name, state)
        if value is not None and (name in state.vars or name in ("@", "*")):
            return bounded_words(list(value))
    return [_substitute(word, state)]


_PRINTF_SPEC = r"%[-+ #0]*[0-9]*(?:\.[0-9]+)?([sbdiqc%])"


def _printf(fmt: str, args: list[str]) -> str:
    fmt = ansi_c(fmt)
    out: list[str] = []
    size = at = 0
    for _ in range(64):
        used = 0

        def spec(m: re.Match[str]) -> str:
            nonlocal used, at, size
            if m.group(1) == "%":
                return "%"
            used += 1
            value = args[at] if at < len(args) else ""
            at += 1
            size += len(value)
            return "" if size > MAX_VALUE else (ansi_c(value) if m.group(1) == "b" else value)

        out.append(re.sub(_PRINTF_SPEC, spec, fmt))
        size += len(fmt)
        if at >= len(args) or not used or size > MAX_VALUE:
            break
    text = join_words(out, "")
    return text if size <= MAX_VALUE else text[:MAX_VALUE] + UNKNOWN  # values were left out: the rest is not known


def output_of(cmd: Command) -> str | None:
    """What `cmd` prints, for the few commands whose output the guard can know (pwd, echo,
    printf, cat of a here-document, realpath, which, git rev-parse --show-toplevel)."""
    for _ in range(8):
        if any(UNKNOWN in a or SUB in a or HEREDOC in a for a in cmd.argv):
            return None
        argv = [literal(a) for a in cmd.argv]
        name, args = os.path.basename(argv[0]), argv[1:]
        if name == "pwd":
            return None if cmd.cwd is None else (os.path.realpath(cmd.cwd) if "-P" in args else cmd.cwd) + "\n"
        if name in ("echo", "printf") and any(has_glob(a) for a in cmd.argv[1:]):
            return None  # the words are file names the guard would have to expand
        if name == "echo":
            newline, escapes = True, False
            while args and re.fullmatch("-[neE]+", args[0]):
                newline = newline and "n" not in args[0]
                escapes = "e" in args[0] or (escapes and "E" not in args[0])
                args = args[1:]
            text = join_words(args) if args else ""
            return bounded_text((ansi_c(text) if escapes else text) + ("\n" if newline else ""))
        if name == "printf":
            if args[:1] == ["--"]:
                args = args[1:]
            if not args or args[0].startswith("-"):
                return None
            return _printf(args[0], args[1:])
        if name in ("cat", "tee") and not [a for a in args if a != "-" and not a.startswith("-")]:
            if cmd.stdin_text is not None:
                return cmd.stdin_text
            if cmd.producer is None:
                return None
            cmd = cmd.producer
            continue
        if name == "realpath" or (name == "readlink" and any(a in args for a in ("-f", "-e", "-m"))):
            paths = [resolve(a, cmd.cwd) for a in args if not a.startswith("-")]
            if not paths or None in paths:
                return None
            return "".join(os.path.realpath(p) + "\n" for p in paths if p)
        if name == "dirname":
            names = [a for a in args if not a.startswith("-")]
            return "".join((os.path.dirname(a.rstrip("/")) or ("/" if a.startswith("/") else ".")) + "\n" for a in names) if names else None
        if name == "basename":
            names = [a for a in args if not a.startswith("-")]
            return os.path.basename(names[0].rstrip("/")) + "\n" if len(names) == 1 else None
        if name == "which":
            names = [a for a in args if not a.startswith("-")]
            return "".join(f"/usr/bin/{n}\n" for n in names) if names else None
        if name == "git" and "rev-parse" in args and "--show-toplevel" in args and cmd.cwd:
            root = git_root(cmd.cwd)
            return None if root is None else root + "\n"
        return None
    return None
