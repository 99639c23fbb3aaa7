"""Walk a shell command line into the simple commands it would run, each with its own cwd.

Tracks what changes where a command runs and what it reads: `cd`/`pushd`/`popd` (and
subshells that undo them), variables (`X=notes`, `export`, `for f in notes/*.md`), `~`,
wrappers (`env X=1 cmd`, `sudo`, `timeout 5`, `nice`, `command`, …), shell strings
(`bash -c '…'`, `sh -lc`, `eval`), pipelines (each command knows the one feeding its
stdin) and command substitutions (analysed as commands of their own).
"""

from __future__ import annotations

import os
import re

from .lexer import OP, REDIRECTS, STDIN_REDIRECTS, SUB, literal, tokenize

UNKNOWN = "\x00"  # stands for text the guard cannot know (an unset variable, `$1`, …)
MAX_DEPTH = 6
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?!$-]))")
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_KEYWORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "done", "fi", "esac", "time", "coproc"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish"})
_PLAIN_WRAPPERS = frozenset({"nohup", "builtin", "unbuffer", "chronic", "caffeinate", "noglob", "exec"})


class Command:
    """One simple command as it would run: expanded words, its cwd, and what feeds its stdin."""

    __slots__ = ("argv", "cwd", "producer", "stdin_redirect", "subs")

    def __init__(self, argv: list[str], cwd: str | None, producer: Command | None, stdin_redirect: bool, subs: dict[str, list[Command]]) -> None:
        self.argv = argv
        self.cwd = cwd
        self.producer = producer
        self.stdin_redirect = stdin_redirect
        self.subs = subs

    def __repr__(self) -> str:
        return f"Command({[literal(a) for a in self.argv]!r}, cwd={self.cwd!r})"


class _State:
    __slots__ = ("cwd", "oldcwd", "dirs", "vars")

    def __init__(self, cwd: str | None, variables: dict[str, list[str]]) -> None:
        self.cwd = cwd
        self.oldcwd: str | None = None
        self.dirs: list[str | None] = []
        self.vars = variables

    def copy(self) -> _State:
        other = _State(self.cwd, dict(self.vars))
        other.oldcwd, other.dirs = self.oldcwd, list(self.dirs)
        return other


def resolve(word: str, cwd: str | None) -> str | None:
    """Absolute normalised path of a (literal) word relative to `cwd`; None when unknowable."""
    if UNKNOWN in word or SUB in word or not word:
        return None
    word = literal(word)
    if os.path.isabs(word):
        return os.path.normpath(word)
    if cwd is None:
        return None
    return os.path.normpath(os.path.join(cwd, word))


def _tilde(word: str) -> str:
    if not word.startswith("~"):
        return word
    head, sep, rest = word.partition("/")
    expanded = os.path.expanduser(head)
    return word if expanded == head else expanded + sep + rest


def _expand(word: str, state: _State) -> list[str]:
    """Tilde and variable expansion; a lone list variable (`$f` from a for loop) expands to many words."""
    word = _tilde(word)
    match = _ASSIGN.match(word)
    if match and word[match.end() :].startswith("~"):
        word = word[: match.end()] + _tilde(word[match.end() :])
    if "$" not in word:
        return [word]
    whole = _VAR.fullmatch(word)
    if whole and (whole.group(1) or whole.group(2)) in state.vars:
        return list(state.vars[whole.group(1) or whole.group(2)])

    def value(m: re.Match[str]) -> str:
        name = m.group(1) or m.group(2)
        if name in state.vars:
            return " ".join(state.vars[name])
        if name == "PWD":
            return state.cwd or UNKNOWN
        if name == "OLDPWD":
            return state.oldcwd or UNKNOWN
        if name == "HOME":
            return os.path.expanduser("~")
        return UNKNOWN

    return [_VAR.sub(value, word)]


def _cd(state: _State, args: list[str], name: str) -> None:
    args = [a for a in args if not (a.startswith("-") and a not in ("-",) and len(a) > 1 and a[1:].isalpha())]
    if name == "popd":
        state.cwd = state.dirs.pop() if state.dirs else None
        return
    target = args[0] if args else None
    before = state.cwd
    if target is None:
        state.cwd = os.path.expanduser("~")
    elif target == "-":
        state.cwd = state.oldcwd
    else:
        state.cwd = resolve(target, state.cwd)
    if name == "pushd":
        state.dirs.append(before)
    state.oldcwd = before


def _shell_string(argv: list[str]) -> str | None:
    """The command string of `bash -c '…'` (flags may be combined: `-lc`, `-ec`), else None."""
    i = 1
    while i < len(argv):
        arg = literal(argv[i])
        if arg in ("-o", "-O", "+o", "+O"):
            i += 2
        elif arg.startswith("--"):
            i += 1
        elif len(arg) > 1 and arg[0] in "-+":
            if arg[0] == "-" and "c" in arg[1:]:
                j = i + 1
                while j < len(argv) and literal(argv[j])[:1] in ("-", "+") and len(argv[j]) > 1:
                    j += 1
                return literal(argv[j]) if j < len(argv) else None
            i += 2 if arg[-1] in "oO" else 1  # `-euo pipefail`: -o takes the next word
        else:
            return None  # a script file, not a command string
    return None


def _unwrap(argv: list[str], state: _State) -> list[str]:
    """Strip wrappers that run their arguments as a command (`env X=1`, `sudo -u u`, `timeout 5`, …)."""
    for _ in range(8):
        if not argv:
            return argv
        name = os.path.basename(literal(argv[0]))
        if name == "env":
            i = 1
            while i < len(argv):
                a = argv[i]
                if a in ("-u", "--unset", "-S", "--split-string"):
                    if a in ("-S", "--split-string") and i + 1 < len(argv):
                        argv = argv[:i] + tokenize_words(literal(argv[i + 1])) + argv[i + 2 :]
                        continue
                    i += 2
                elif a in ("-C", "--chdir") and i + 1 < len(argv):
                    state.cwd = resolve(argv[i + 1], state.cwd)
                    i += 2
                elif a.startswith("--chdir="):
                    state.cwd = resolve(a.split("=", 1)[1], state.cwd)
                    i += 1
                elif a.startswith("-") or _ASSIGN.match(a):
                    i += 1
                else:
                    break
            argv = argv[i:]
        elif name in ("sudo", "doas"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                a = argv[i]
                if a in ("-D", "--chdir") and i + 1 < len(argv):
                    state.cwd = resolve(argv[i + 1], state.cwd)
                    i += 2
                elif a in ("-u", "-g", "-C", "-h", "-p", "-r", "-t", "-T", "-U", "--user", "--group", "--host", "--prompt", "--role", "--type"):
                    i += 2
                elif a == "--":
                    i += 1
                    break
                else:
                    i += 1
            while i < len(argv) and _ASSIGN.match(argv[i]):
                i += 1
            argv = argv[i:]
        elif name in ("timeout", "gtimeout"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-s", "-k", "--signal", "--kill-after") else 1
            argv = argv[i + 1 :]  # skip the duration
        elif name == "nice":
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-n", "--adjustment") else 1
            argv = argv[i:]
        elif name in ("ionice", "stdbuf", "chrt", "taskset"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                a = argv[i]
                i += 2 if len(a) == 2 and a[1] in "cnpioe" else 1
            argv = argv[i:]
        elif name == "command":
            if len(argv) > 1 and argv[1] in ("-v", "-V"):
                return []
            argv = argv[2:] if len(argv) > 1 and argv[1] == "-p" else argv[1:]
        elif name in _PLAIN_WRAPPERS:
            argv = argv[1:]
            while argv and argv[0].startswith("-") and name == "exec":
                argv = argv[2:] if argv[0] == "-a" else argv[1:]
        elif name == "watch":
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-n", "--interval", "-d") else 1
            rest = argv[i:]
            argv = tokenize_words(" ".join(literal(a) for a in rest)) if len(rest) == 1 else rest
        else:
            return argv
    return argv


def tokenize_words(text: str) -> list[str]:
    """Plain word split of `text` (operators dropped): for `env -S` and `watch`."""
    tokens, _subs = tokenize(text)
    return [t for t in tokens if not t.startswith(OP)]


class _Walker:
    def __init__(self, depth: int) -> None:
        self.depth = depth
        self.out: list[Command] = []

    def walk(self, text: str, state: _State) -> None:
        tokens, subs = tokenize(text)
        stack: list[_State] = []
        words: list[str] = []
        producer: Command | None = None
        stdin_redirect = False
        skip_next = False
        for tok in tokens:
            if skip_next:
                skip_next = False
                continue
            if not tok.startswith(OP):
                words.append(tok)
                continue
            op = tok[1:]
            if op in REDIRECTS:
                skip_next = True
                stdin_redirect = stdin_redirect or op in STDIN_REDIRECTS
                continue
            piped = op in ("|", "|&")
            cmd = self._simple(words, state, producer, stdin_redirect, subs, in_pipeline=piped or producer is not None)
            words, stdin_redirect = [], False
            producer = cmd if piped else None
            if op == "(":
                stack.append(state)
                state = state.copy()
            elif op == ")" and stack:
                state = stack.pop()
        self._simple(words, state, producer, stdin_redirect, subs, in_pipeline=producer is not None)

    def _simple(self, raw: list[str], state: _State, producer: Command | None, stdin_redirect: bool, subs: dict[str, str], in_pipeline: bool) -> Command | None:
        if not raw:
            return None
        sub_cmds: dict[str, list[Command]] = {}
        for word in raw:
            for key in re.findall(f"{SUB}[0-9]+{SUB}", word):
                if key in subs and key not in sub_cmds:
                    sub_cmds[key] = self._nested(subs[key], state.copy())
        argv: list[str] = []
        for word in raw:
            argv.extend(_expand(word, state))
        while argv and _ASSIGN.match(argv[0]):
            name, _, value = argv[0].partition("=")
            if len(argv) == 1:
                state.vars[name.rstrip("+")] = [value]
            argv = argv[1:]
        while argv and argv[0] in _KEYWORDS:
            argv = argv[1:]
        if not argv:
            return None
        if argv[0] == "for" and len(argv) >= 3 and argv[2] == "in":
            state.vars[argv[1]] = argv[3:]
            return None
        if argv[0] in ("export", "local", "declare", "typeset", "readonly"):
            for a in argv[1:]:
                if _ASSIGN.match(a):
                    name, _, value = a.partition("=")
                    state.vars[name.rstrip("+")] = [value]
            return None
        run = state.copy()  # wrappers such as `env -C DIR` change only this command's cwd
        argv = _unwrap(argv, run)
        if not argv:
            return None
        name = os.path.basename(literal(argv[0]))
        if name in ("cd", "pushd", "popd", "chdir"):
            _cd(run if in_pipeline else state, argv[1:], name)  # a pipeline runs in subshells
            return None
        if name in _SHELLS or name == "eval":
            script = " ".join(literal(a) for a in argv[1:]) if name == "eval" else _shell_string(argv)
            if script is not None:
                self._nested(script, run)
                return None
        cmd = Command(argv, run.cwd, producer, stdin_redirect, sub_cmds)
        self.out.append(cmd)
        return cmd

    def _nested(self, text: str, state: _State) -> list[Command]:
        if self.depth >= MAX_DEPTH:
            return []
        inner = _Walker(self.depth + 1)
        inner.walk(text, state)
        self.out.extend(inner.out)
        return inner.out


def commands(command: str, cwd: str | None) -> list[Command]:
    """Every simple command `command` would run from `cwd`, in order (substitutions included)."""
    walker = _Walker(0)
    walker.walk(command, _State(cwd, {}))
    return walker.out
