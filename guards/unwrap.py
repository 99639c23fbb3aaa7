"""What a command really runs: wrappers unwrapped, shell strings and script operands found.

`unwrap` strips wrappers that run their arguments as a command (`env X=1`, `sudo -u u`,
`timeout 5`, `nice`, `command`, `busybox`, `watch`, …); `shell_string`, `script_operand`
and `option_value` find the script a shell, `script -c` or `su -c` runs: a command string
(`bash -c '…'`), a script file operand, or its stdin.
"""

from __future__ import annotations

import os

from . import budget
from .command import UNKNOWN, State, resolve
from .expand import ASSIGN
from .lexer import OP, literal, tokenize

SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "yash", "posh", "rbash"})
_PLAIN_WRAPPERS = frozenset({"nohup", "builtin", "unbuffer", "chronic", "caffeinate", "noglob", "exec", "setsid", "fakeroot", "catchsegv"})
_MULTICALL = frozenset({"busybox", "toybox"})


def shell_string(argv: list[str]) -> tuple[str, int] | None:
    """The command string of `bash -c '…'` (flags may be combined: `-lc`, `-ec`) and the index
    of the word after it (`$0`, then the positional parameters), else None."""
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
                return (literal(argv[j]), j + 1) if j < len(argv) else None
            i += 2 if arg[-1] in "oO" else 1  # `-euo pipefail`: -o takes the next word
        else:
            return None  # a script file, not a command string
    return None


def script_operand(argv: list[str]) -> tuple[int | None, bool]:
    """(index of the script file operand of a shell, reads its script from stdin)."""
    i, from_stdin = 1, False
    while i < len(argv):
        arg = literal(argv[i])
        if arg in ("-o", "-O", "+o", "+O", "--rcfile", "--init-file"):
            i += 2
        elif arg == "-" or arg == "--":
            return (i + 1 if arg == "--" and i + 1 < len(argv) else None), arg == "-" or i + 1 >= len(argv)
        elif arg.startswith("--"):
            i += 1
        elif len(arg) > 1 and arg[0] in "-+":
            from_stdin = from_stdin or (arg[0] == "-" and "s" in arg[1:])
            i += 2 if arg[-1] in "oO" else 1
        else:
            return (None if from_stdin else i), from_stdin
    return None, True


def option_value(argv: list[str], shorts: str, longs: tuple[str, ...]) -> str | None:
    """The value of `-c CMD` (also combined `-qc CMD`, `--command=CMD`) in a command line."""
    for i in range(1, len(argv)):
        arg = literal(argv[i])
        if arg == "--":
            return None
        for name in longs:
            if arg == name and i + 1 < len(argv):
                return literal(argv[i + 1])
            if arg.startswith(name + "="):
                return arg[len(name) + 1 :]
        if len(arg) > 1 and arg[0] == "-" and arg[1] != "-" and arg[-1] in shorts:
            return literal(argv[i + 1]) if i + 1 < len(argv) else None
    return None


def unwrap(argv: list[str], state: State) -> list[str]:
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
                elif a.startswith("-") or ASSIGN.match(a):
                    i += 1
                else:
                    break
            argv = argv[i:]
        elif name in ("sudo", "doas", "runuser"):
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
            while i < len(argv) and ASSIGN.match(argv[i]):
                i += 1
            argv = argv[i:]
        elif name in ("timeout", "gtimeout"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-s", "-k", "--signal", "--kill-after") else 1
            argv = argv[i + 1 :]  # skip the duration
        elif name in ("unshare", "chroot"):
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 1
            if name == "chroot":
                if i < len(argv) and resolve(argv[i], state.cwd) != "/":
                    state.cwd = None  # another root: where the paths lead is not known
                i += 1
            argv = argv[i:]
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
        elif name == "time":
            i = 1
            while i < len(argv) and argv[i].startswith("-"):
                i += 2 if argv[i] in ("-o", "-f", "--output", "--format") else 1
            argv = argv[i:]
        elif name == "command":
            if len(argv) > 1 and argv[1] in ("-v", "-V"):
                return []
            argv = argv[2:] if len(argv) > 1 and argv[1] == "-p" else argv[1:]
        elif name in _MULTICALL:
            argv = argv[1:] if len(argv) > 1 and not literal(argv[1]).startswith("-") else argv
            if argv and os.path.basename(literal(argv[0])) in _MULTICALL:
                return argv
        elif name in _PLAIN_WRAPPERS:
            argv = argv[1:]
            while argv and argv[0].startswith("-") and name in ("exec", "setsid"):
                argv = argv[2:] if argv[0] == "-a" and name == "exec" else argv[1:]
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
    """Plain word split of `text` (operators dropped): for `env -S`, `watch` and alias values
    (UNKNOWN once the decision's lexing budget is spent)."""
    if not budget.lex(len(text)):
        return [UNKNOWN]
    tokens, _subs = tokenize(text)
    return [t for t in tokens if not t.startswith(OP)]
