"""Word expansion of the shell walker: what a word stands for once the shell has expanded it.

Parameters and variables (`$X`, `${X:-default}`, `${X%pat}`, `"$@"`, `$PWD`), tilde
(`~`, `~+`, `~-`), and the output of the few commands whose output the guard can know
(`pwd`, `echo`, `printf`, `cat` of a here-document, `realpath`, `dirname`, `which`, …),
which takes the place of their command substitutions.
"""

from __future__ import annotations

import os
import re

from .command import UNKNOWN, Command, State, git_root, resolve
from .lexer import HEREDOC, SUB, ansi_c, has_glob, literal

_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?!$-])|\{([^}]*)\})")
_PARAM = r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(:?[-=+?]|%%|%|##|#)(.*)$"  # compiled on first use (re caches it)
ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")


def _tilde(word: str, state: State | None = None) -> str:
    if not word.startswith("~"):
        return word
    head, sep, rest = word.partition("/")
    if head in ("~+", "~-") and state is not None:
        where = state.cwd if head == "~+" else state.oldcwd
        return (where or UNKNOWN) + sep + rest
    expanded = os.path.expanduser(head)
    return word if expanded == head else expanded + sep + rest


def _param(name: str, state: State) -> list[str] | None:
    """The words of variable or parameter `name`, or None when it is not known."""
    if name in state.vars:
        return state.vars[name]
    if name.isdigit():
        if name == "0":
            return None
        args = state.args
        return None if args is None else ([args[int(name) - 1]] if int(name) <= len(args) else [])
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


def _braced(body: str, state: State) -> str:
    """`${…}` other than a plain name: `${X:-default}`, `${X-d}`, `${X:=d}`, `${X:+alt}`; else unknown."""
    match = re.match(_PARAM, body, re.DOTALL)
    if match is None:
        return UNKNOWN
    name, op, word = match.groups()
    value = _param(name, state)
    if value is None:
        return UNKNOWN  # it may be set in the agent's environment: neither its value nor the default is known
    if op[0] in "%#":
        return _trim(" ".join(value), op, _expand_text(word, state))
    empty = not "".join(value) if op.startswith(":") else False
    if op[-1] == "+":
        return "" if empty else _expand_text(word, state)
    if op[-1] in "-=" and empty:
        return _expand_text(word, state)
    return " ".join(value)


def _trim(value: str, op: str, pattern: str) -> str:
    """`${X%pat}`, `${X%%pat}`, `${X#pat}`, `${X##pat}`: the shortest/longest suffix/prefix removed."""
    from fnmatch import fnmatchcase

    if UNKNOWN in value + pattern or len(value) > 4096:
        return UNKNOWN
    cuts = range(len(value) + 1)
    if op[0] == "%":
        ends = list(cuts)[::-1] if op == "%" else list(cuts)
        return next((value[:k] for k in ends if fnmatchcase(value[k:], pattern)), value)
    starts = list(cuts) if op == "#" else list(cuts)[::-1]
    return next((value[k:] for k in starts if fnmatchcase(value[:k], pattern)), value)


def _expand_text(text: str, state: State) -> str:
    return _VAR.sub(lambda m: _value(m, state), _tilde(text, state))


def _value(m: re.Match[str], state: State) -> str:
    if m.group(4) is not None:
        return _braced(m.group(4), state)
    name = m.group(1) or m.group(2) or m.group(3)
    value = _param(name, state)
    return UNKNOWN if value is None else " ".join(value)


def expand(word: str, state: State) -> list[str]:
    """Tilde and variable expansion; a lone list variable (`$f` from a for loop, `"$@"`) expands to many words."""
    word = _tilde(word, state)
    match = ASSIGN.match(word)
    if match and word[match.end() :].startswith("~"):
        word = word[: match.end()] + _tilde(word[match.end() :], state)
    if "$" not in word:
        return [word]
    whole = _VAR.fullmatch(word)
    if whole and whole.group(4) is None:
        name = whole.group(1) or whole.group(2) or whole.group(3)
        value = _param(name, state)
        if value is not None and (name in state.vars or name in ("@", "*")):
            return list(value)
    return [_VAR.sub(lambda m: _value(m, state), word)]


_PRINTF_SPEC = r"%[-+ #0]*[0-9]*(?:\.[0-9]+)?([sbdiqc%])"


def _printf(fmt: str, args: list[str]) -> str:
    fmt = ansi_c(fmt)
    out: list[str] = []
    rest = list(args)
    for _ in range(64):
        used = 0

        def spec(m: re.Match[str]) -> str:
            nonlocal used
            if m.group(1) == "%":
                return "%"
            used += 1
            value = rest.pop(0) if rest else ""
            return ansi_c(value) if m.group(1) == "b" else value

        out.append(re.sub(_PRINTF_SPEC, spec, fmt))
        if not rest or not used:
            break
    return "".join(out)


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
            text = " ".join(args)
            return (ansi_c(text) if escapes else text) + ("\n" if newline else "")
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
