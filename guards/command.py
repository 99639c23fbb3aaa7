"""A simple command as the shell walker sees it, and the shell state it runs in.

`Command` is one simple command as it would run (expanded words, cwd, what feeds its
stdin); `State` is what a shell carries from one command to the next (cwd, `OLDPWD`, the
`pushd` stack, variables, aliases, functions, positional parameters); `cd` changes it.
`resolve` and `git_root` turn words into paths; `UNKNOWN` marks text the guard cannot know.
"""

from __future__ import annotations

import os

from . import budget
from .lexer import HEREDOC, SUB, literal

UNKNOWN = "\x00"  # stands for text the guard cannot know (an unset variable, `$1`, …)


class Command:
    """One simple command as it would run: expanded words, its cwd, and what feeds its stdin."""

    __slots__ = ("argv", "cwd", "producer", "stdin_redirect", "subs", "stdin_text")

    def __init__(self, argv: list[str], cwd: str | None, producer: Command | None, stdin_redirect: bool, subs: dict[str, list[Command]],
                 stdin_text: str | None = None) -> None:
        self.argv = argv
        self.cwd = cwd
        self.producer = producer
        self.stdin_redirect = stdin_redirect
        self.subs = subs
        self.stdin_text = stdin_text  # a here-document or here-string fed to it

    def __repr__(self) -> str:
        return f"Command({[literal(a) for a in self.argv]!r}, cwd={self.cwd!r})"


class State:
    """What a shell carries from one command to the next; subshells and wrappers work on a copy."""

    __slots__ = ("cwd", "oldcwd", "dirs", "vars", "aliases", "functions", "args")

    def __init__(self, cwd: str | None, variables: dict[str, list[str]]) -> None:
        self.cwd = cwd
        self.oldcwd: str | None = None
        self.dirs: list[str | None] = []
        self.vars = variables
        self.aliases: dict[str, list[str]] = {}
        self.functions: dict[str, list[str]] = {}  # name → the body's tokens
        self.args: list[str] | None = None  # positional parameters ($1 …); None: unknown

    def copy(self) -> State:
        budget.charge(8 * (len(self.vars) + len(self.aliases) + len(self.functions)) + 64)
        other = State(self.cwd, dict(self.vars))
        other.oldcwd, other.dirs = self.oldcwd, list(self.dirs)
        other.aliases, other.functions, other.args = dict(self.aliases), dict(self.functions), self.args
        return other


def resolve(word: str, cwd: str | None) -> str | None:
    """Absolute normalised path of a (literal) word relative to `cwd`; None when unknowable."""
    if UNKNOWN in word or SUB in word or HEREDOC in word or not word:
        return None
    word = literal(word)
    if os.path.isabs(word):
        return os.path.normpath(word)
    if cwd is None:
        return None
    return os.path.normpath(os.path.join(cwd, word))


def git_root(cwd: str) -> str | None:
    """The work tree holding `cwd` (the nearest folder with a `.git`), or None."""
    probe = cwd
    while True:
        if os.path.exists(os.path.join(probe, ".git")):
            return probe
        parent = os.path.dirname(probe)
        if parent == probe:
            return None
        probe = parent


def cd(state: State, args: list[str], name: str) -> None:
    """`cd`, `pushd`, `popd` or `chdir` with `args`, applied to `state`."""
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
