"""Walk a shell command line into the simple commands it would run, each with its own cwd.

Tracks what changes where a command runs and what it reads: `cd`/`pushd`/`popd` (and
subshells that undo them), variables (`X=notes`, `export`, `for f in notes/*.md`,
`${X:-default}`, positional parameters of `sh -c '…' _ a b` and of functions), `~`, `~+`,
aliases and functions defined in the same command, wrappers (`env X=1 cmd`, `sudo`,
`timeout 5`, `nice`, `command`, `busybox`, `setsid`, …), shell strings (`bash -c '…'`,
`sh -lc`, `eval`, `script -c`, `su -c`), scripts a shell reads from its stdin or a file
descriptor (`bash <<EOF`, `bash <<< '…'`, `echo '…' | sh`, `bash <(echo …)`,
`source <(…)`), pipelines (each command knows the one feeding its stdin), `while read f`
loops (the variable stands for the lines the loop is fed) and command substitutions
(analysed as commands of their own; the output of the few whose output is known, such as
`$(pwd)` or `$(echo …)`, takes their place).

All the work is bounded: nesting depth, characters lexed and commands walked per call.
"""

from __future__ import annotations

import os
import re

from .lexer import HEREDOC, OP, REDIRECTS, STDIN_REDIRECTS, SUB, ansi_c, has_glob, heredoc_key, literal, quoted, tokenize

UNKNOWN = "\x00"  # stands for text the guard cannot know (an unset variable, `$1`, …)
MAX_DEPTH = 6
MAX_LEXED = 6 * 64 * 1024  # characters all nested walks of one call may lex (the outer command counts too)
MAX_STEPS = 50_000  # simple commands one call may walk (function calls re-walk their bodies)
MAX_CALLS = 256  # function calls one call may follow
_VAR = re.compile(r"\$(?:\{([A-Za-z_][A-Za-z0-9_]*)\}|([A-Za-z_][A-Za-z0-9_]*)|([0-9@*#?!$-])|\{([^}]*)\})")
_PARAM = r"^([A-Za-z_][A-Za-z0-9_]*|[0-9]+)(:?[-=+?]|%%|%|##|#)(.*)$"  # compiled on first use (re caches it)
_ASSIGN = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*(\[[^\]]*\])?\+?=")
_SUB_KEY = re.compile(f"{SUB}[0-9]+{SUB}")
_KEYWORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "done", "fi", "esac", "time", "coproc"})
_SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "ash", "mksh", "fish", "yash", "posh", "rbash"})
_PLAIN_WRAPPERS = frozenset({"nohup", "builtin", "unbuffer", "chronic", "caffeinate", "noglob", "exec", "setsid", "fakeroot", "catchsegv"})
_MULTICALL = frozenset({"busybox", "toybox"})
_PLACEHOLDER_OUTPUT = frozenset({"true", ":", "cd", "pushd", "popd", "export", "set", "shopt"})


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


class _State:
    __slots__ = ("cwd", "oldcwd", "dirs", "vars", "aliases", "functions", "args")

    def __init__(self, cwd: str | None, variables: dict[str, list[str]]) -> None:
        self.cwd = cwd
        self.oldcwd: str | None = None
        self.dirs: list[str | None] = []
        self.vars = variables
        self.aliases: dict[str, list[str]] = {}
        self.functions: dict[str, list[str]] = {}  # name → the body's tokens
        self.args: list[str] | None = None  # positional parameters ($1 …); None: unknown

    def copy(self) -> _State:
        other = _State(self.cwd, dict(self.vars))
        other.oldcwd, other.dirs = self.oldcwd, list(self.dirs)
        other.aliases, other.functions, other.args = dict(self.aliases), dict(self.functions), self.args
        return other


class _Shared:
    """What the walkers of one call share: substitution texts and commands, budgets."""

    __slots__ = ("texts", "quoted", "procsubs", "cmds", "outputs", "pending_reads", "lexed", "steps", "calls", "next_key", "uncalled", "files")

    def __init__(self) -> None:
        self.texts: dict[str, str] = {}  # key → a substitution's inner text or a here-document body
        self.quoted: set[str] = set()  # here-documents whose delimiter was quoted
        self.procsubs: set[str] = set()  # `<(…)`: a file name, not the output
        self.cmds: dict[str, list[Command]] = {}  # key → the commands a substitution runs (or a `read` is fed by)
        self.outputs: dict[str, str | None] = {}  # key → what a substitution prints, when known
        self.pending_reads: list[str] = []  # `read` keys waiting for the loop's `done < <(…)`
        self.lexed = 0
        self.steps = 0
        self.calls = 0
        self.next_key = 0
        self.uncalled: dict[str, tuple[list[str], _State]] = {}
        self.files: dict[str, str] = {}  # path → the text this call writes there (`cat > s.sh <<EOF`), when known

    def key(self, mark: str = SUB) -> str:
        self.next_key += 1
        return f"{mark}{self.next_key}{mark}"


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


def _tilde(word: str, state: _State | None = None) -> str:
    if not word.startswith("~"):
        return word
    head, sep, rest = word.partition("/")
    if head in ("~+", "~-") and state is not None:
        where = state.cwd if head == "~+" else state.oldcwd
        return (where or UNKNOWN) + sep + rest
    expanded = os.path.expanduser(head)
    return word if expanded == head else expanded + sep + rest


def _param(name: str, state: _State) -> list[str] | None:
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


def _braced(body: str, state: _State) -> str:
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


def _expand_text(text: str, state: _State) -> str:
    return _VAR.sub(lambda m: _value(m, state), _tilde(text, state))


def _value(m: re.Match[str], state: _State) -> str:
    if m.group(4) is not None:
        return _braced(m.group(4), state)
    name = m.group(1) or m.group(2) or m.group(3)
    value = _param(name, state)
    return UNKNOWN if value is None else " ".join(value)


def _expand(word: str, state: _State) -> list[str]:
    """Tilde and variable expansion; a lone list variable (`$f` from a for loop, `"$@"`) expands to many words."""
    word = _tilde(word, state)
    match = _ASSIGN.match(word)
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


def _shell_string(argv: list[str]) -> tuple[str, int] | None:
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


def _script_operand(argv: list[str]) -> tuple[int | None, bool]:
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


def _option_value(argv: list[str], shorts: str, longs: tuple[str, ...]) -> str | None:
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
            while i < len(argv) and _ASSIGN.match(argv[i]):
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
    """Plain word split of `text` (operators dropped): for `env -S`, `watch` and alias values."""
    tokens, _subs = tokenize(text)
    return [t for t in tokens if not t.startswith(OP)]


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


class _Walker:
    def __init__(self, depth: int, shared: _Shared) -> None:
        self.depth = depth
        self.shared = shared
        self.out: list[Command] = []
        self.ends: list[Command | None] = []  # this level's commands whose output is the walk's output

    # -- entry points ------------------------------------------------------------------------
    def walk(self, text: str, state: _State) -> None:
        tokens = self._lex(text)
        if tokens is not None:
            self.walk_tokens(tokens, state)

    def _lex(self, text: str) -> list[str] | None:
        """The tokens of `text` with call-wide keys; None once the call's lexing budget is spent."""
        shared = self.shared
        if shared.lexed and shared.lexed + len(text) > MAX_LEXED:
            return None
        shared.lexed += len(text)
        tokens, subs = tokenize(text)
        return self._rekey(tokens, subs)

    def _rekey(self, tokens: list[str], subs: dict[str, str]) -> list[str]:
        """Give this text's substitutions and here-documents keys unique in the whole call."""
        shared = self.shared
        mapping: dict[str, str] = {}

        def fresh(m: re.Match[str]) -> str:
            local = m.group()
            if local not in mapping:
                mapping[local] = shared.key()
                if local in subs:
                    shared.texts[mapping[local]] = subs[local]
                if local in getattr(subs, "procsubs", ()):
                    shared.procsubs.add(mapping[local])
            return mapping[local]

        out: list[str] = []
        heredocs = 0
        after_heredoc = False
        for tok in tokens:
            if after_heredoc:
                after_heredoc = False
                for was_quoted in (False, True):
                    local = heredoc_key(heredocs, was_quoted)
                    if local in subs:
                        key = shared.key(HEREDOC)
                        shared.texts[key] = subs[local]
                        if was_quoted:
                            shared.quoted.add(key)
                        tok = key
                        heredocs += 1
                        break
            elif tok.startswith(OP):
                after_heredoc = tok[1:] in ("<<", "<<-")
            elif SUB in tok:
                tok = _SUB_KEY.sub(fresh, tok)
            out.append(tok)
        return out

    def walk_tokens(self, tokens: list[str], state: _State) -> None:
        stack: list[_State] = []
        words: list[str] = []
        redirects: list[tuple[str, str]] = []
        producer: Command | None = None
        pending: str | None = None
        i, n = 0, len(tokens)
        while i < n:
            tok = tokens[i]
            i += 1
            if pending is not None:
                redirects.append((pending, tok))
                pending = None
                continue
            if not tok.startswith(OP):
                if tok == "{" and len(words) == 2 and words[0] == "function":  # function NAME { … }
                    i = self._define(tokens, i - 1, words[1], state)
                    words = []
                    continue
                words.append(tok)
                continue
            op = tok[1:]
            if op in REDIRECTS:
                pending = op
                continue
            if op == "(" and i < n and tokens[i] == OP + ")" and len(words) in (1, 2) and (len(words) == 1 or words[0] == "function"):
                i = self._define(tokens, i + 1, words[-1], state)  # NAME () { … }
                words = []
                continue
            piped = op in ("|", "|&")
            cmd = self._simple(words, redirects, state, producer, in_pipeline=piped or producer is not None)
            if not piped and words:
                self.ends.append(cmd)
            words, redirects = [], []
            producer = cmd if piped else None
            if op == "(":
                stack.append(state)
                state = state.copy()
            elif op == ")" and stack:
                state = stack.pop()
        cmd = self._simple(words, redirects, state, producer, in_pipeline=producer is not None)
        if words:
            self.ends.append(cmd)

    def _define(self, tokens: list[str], i: int, name: str, state: _State) -> int:
        """Record a function whose body starts at `tokens[i]` (`{`); returns the index after it."""
        while i < len(tokens) and tokens[i] == OP + ";":
            i += 1
        if i >= len(tokens) or tokens[i] != "{":
            return i
        depth, j = 0, i
        while j < len(tokens):
            if tokens[j] == "{":
                depth += 1
            elif tokens[j] == "}":
                depth -= 1
                if depth == 0:
                    break
            j += 1
        body = tokens[i + 1 : j]
        name = literal(name)
        state.functions[name] = body
        self.shared.uncalled[name] = (body, state.copy())
        return j + 1

    # -- one simple command ----------------------------------------------------------------
    def _walk_sub(self, key: str, state: _State) -> None:
        """Walk the substitution `key` once; remember its commands and, when known, its output."""
        shared = self.shared
        if key in shared.cmds or key not in shared.texts:
            return
        inner = _Walker(self.depth + 1, shared)
        shared.cmds[key] = inner.out
        if self.depth < MAX_DEPTH:
            inner.walk(shared.texts[key], state.copy())
        self.out.extend(inner.out)
        shared.outputs[key] = inner.output()

    def output(self) -> str | None:
        """What this walk's commands print, when the guard can know it."""
        parts: list[str] = []
        for cmd in self.ends:
            if cmd is None:
                continue
            text = output_of(cmd)
            if text is None:
                if os.path.basename(literal(cmd.argv[0])) in _PLACEHOLDER_OUTPUT:
                    continue
                return None
            parts.append(text)
        return "".join(parts) if parts else None

    def _with_outputs(self, word: str) -> str:
        """`word` with every substitution whose output is known replaced by that output."""
        if SUB not in word:
            return word

        def value(m: re.Match[str]) -> str:
            text = None if m.group() in self.shared.procsubs else self.shared.outputs.get(m.group())
            return m.group() if text is None else quoted(text.rstrip("\n"))

        return _SUB_KEY.sub(value, word)

    def _redirects(self, redirects: list[tuple[str, str]], state: _State) -> tuple[bool, str | None, list[Command] | None]:
        """(reads a redirected stdin, the here-document/here-string text, the commands of `< <(…)`)."""
        stdin_redirect, text, fed = False, None, None
        for op, target in redirects:
            stdin_redirect = stdin_redirect or op in STDIN_REDIRECTS
            if op in ("<<", "<<-"):
                body = self.shared.texts.get(target)
                if body is not None and target not in self.shared.quoted and ("$(" in body or "`" in body):
                    self._body_substitutions(body, state)
                text = body
                continue
            for key in _SUB_KEY.findall(target):
                self._walk_sub(key, state)  # `> >(…)`, `< <(…)` run their commands
            if op == "<<<":
                text = literal(" ".join(_expand(self._with_outputs(target), state))) + "\n"
            elif op == "<" and _SUB_KEY.fullmatch(target):
                fed = self.shared.cmds.get(target)
        return stdin_redirect, text, fed

    def _body_substitutions(self, body: str, state: _State) -> None:
        """The command substitutions of an unquoted here-document run when it is read."""
        for tok in self._lex('"' + body.replace('"', '\\"') + '"') or []:
            for key in _SUB_KEY.findall(tok):
                self._walk_sub(key, state)

    def _simple(self, raw: list[str], redirects: list[tuple[str, str]], state: _State, producer: Command | None, in_pipeline: bool) -> Command | None:
        shared = self.shared
        shared.steps += 1
        if shared.steps > MAX_STEPS:
            return None
        stdin_redirect, stdin_text, fed = self._redirects(redirects, state)
        if producer is None and fed:
            producer = fed[-1]  # `xargs grep foo < <(find …)` reads what the substitution prints
        if raw and raw[0] == "done" and shared.pending_reads:  # `while read f; do …; done < <(find …)`
            for key in shared.pending_reads:
                shared.cmds[key].extend(fed or [])
            shared.pending_reads = []
        if not raw:
            return None
        for word in raw:
            for key in _SUB_KEY.findall(word):
                self._walk_sub(key, state)
        argv: list[str] = []
        for word in raw:
            argv.extend(_expand(self._with_outputs(word), state))
        while argv and (argv[0] in _KEYWORDS or _ASSIGN.match(argv[0])):  # `while IFS= read -r f`
            if argv[0] not in _KEYWORDS:
                name, _, value = argv[0].partition("=")
                if len(argv) == 1:
                    state.vars[name.rstrip("+")] = [value]
            argv = argv[1:]
        if not argv:
            return None
        argv = self._aliased(argv, state)
        if literal(argv[0]) in state.functions:
            self._call(literal(argv[0]), argv[1:], state)
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
        if literal(argv[0]) == "alias":
            for a in argv[1:]:
                name, eq, value = literal(a).partition("=")
                if eq and name:
                    state.aliases[name] = tokenize_words(value)
            return None
        run = state.copy()  # wrappers such as `env -C DIR` change only this command's cwd
        argv = _unwrap(argv, run)
        if not argv:
            return None
        name = os.path.basename(literal(argv[0]))
        if name in ("cd", "pushd", "popd", "chdir"):
            _cd(run if in_pipeline else state, argv[1:], name)  # a pipeline runs in subshells
            return None
        if name == "read":
            self._read(argv, state, producer, fed)
            return None
        sub_cmds: dict[str, list[Command]] = {}
        for word in argv:
            for key in _SUB_KEY.findall(word):
                if key in shared.cmds:
                    sub_cmds.setdefault(key, shared.cmds[key])
        cmd = Command(argv, run.cwd, producer, stdin_redirect, sub_cmds, stdin_text)
        self._writes(cmd, redirects, state)
        if self._runs_script(cmd, name, run, fed):
            return None
        self.out.append(cmd)
        return cmd

    def _writes(self, cmd: Command, redirects: list[tuple[str, str]], state: _State) -> None:
        """Remember what `cmd` writes to a file (`cat > s.sh <<'EOF'`, `echo … >> s.sh`), when known."""
        for op, target in redirects:
            if op not in (">", ">>", ">|", "&>", "&>>"):
                continue
            path = resolve(" ".join(_expand(target, state)), state.cwd)
            if path is None:
                continue
            text = output_of(cmd)
            if text is None:
                self.shared.files.pop(path, None)
            else:
                self.shared.files[path] = (self.shared.files.get(path, "") if op.endswith(">>") else "") + text

    def _aliased(self, argv: list[str], state: _State) -> list[str]:
        seen: set[str] = set()
        while argv and literal(argv[0]) in state.aliases and literal(argv[0]) not in seen:
            seen.add(literal(argv[0]))
            value = [w for word in state.aliases[literal(argv[0])] for w in _expand(word, state)]
            argv = value + argv[1:]
        return argv

    def _read(self, argv: list[str], state: _State, producer: Command | None, fed: list[Command] | None) -> None:
        """`read [-r] f`: `$f` stands for the lines the loop reads (what feeds it, if known)."""
        names: list[str] = []
        i = 1
        while i < len(argv):
            arg = literal(argv[i])
            if arg.startswith("-") and len(arg) > 1:
                i += 2 if arg[-1] in "dpntuaiN" and len(arg) == 2 else 1
                continue
            names.append(arg)
            i += 1
        if not names:
            return
        key = self.shared.key()
        self.shared.cmds[key] = [producer] if producer is not None else list(fed or [])
        if producer is None and not fed:
            self.shared.pending_reads.append(key)
        state.vars[names[0]] = [key]
        for other in names[1:]:
            state.vars[other] = [UNKNOWN]

    def _script_text(self, word: str) -> str:
        return literal(self._with_outputs(word))

    def _runs_script(self, cmd: Command, name: str, run: _State, fed: list[Command] | None) -> bool:
        """Walk the script a shell, `eval`, `source`, `script -c` or `su -c` runs; True when it was one."""
        argv = cmd.argv
        script: str | None = None
        args: list[str] | None = None
        if name == "eval":
            script = " ".join(self._script_text(a) for a in argv[1:])
        elif name in ("source", "."):
            script = self._script_file(argv[1], run) if len(argv) > 1 else None
            if script is None:
                return False
        elif name in ("script", "su", "runuser", "flock"):
            script = _option_value(argv, "c", ("--command",))
            if script is None:
                return False
        elif name in _SHELLS:
            found = _shell_string(argv)
            if found is not None:
                script = self._script_text(found[0])
                rest = argv[found[1] + 1 :]
                args = None if any(UNKNOWN in a or SUB in a for a in rest) else rest
                if found[1] < len(argv):
                    run = run.copy()
                    run.vars["0"] = [argv[found[1]]]
            else:
                operand, from_stdin = _script_operand(argv)
                if operand is not None:
                    script = self._script_file(argv[operand], run)  # `bash <(echo …)`, `bash s.sh` of a file written here
                elif from_stdin:
                    if cmd.stdin_text is not None:
                        script = cmd.stdin_text
                    elif cmd.producer is not None:
                        script = output_of(cmd.producer)
                    elif fed:
                        script = output_of(fed[-1])
                if script is None:
                    return False
        elif "/" in literal(argv[0]):
            script = self._script_file(argv[0], run)  # `./s.sh` written earlier in this command
            if script is None:
                return False
        else:
            return False
        nested = run.copy()
        if args is not None:
            nested.args = args
        self._nested(script, nested)
        return True

    def _script_file(self, word: str, state: _State) -> str | None:
        """The text of a script operand: a process substitution's output, or a file this command
        wrote earlier (a script file already on disk is not read)."""
        if _SUB_KEY.fullmatch(word):
            return self.shared.outputs.get(word)
        path = resolve(word, state.cwd)
        return None if path is None else self.shared.files.get(path)

    def _call(self, name: str, args: list[str], state: _State) -> None:
        self.shared.uncalled.pop(name, None)
        self.shared.calls += 1
        if self.depth >= MAX_DEPTH or self.shared.calls > MAX_CALLS:
            return
        inner = _Walker(self.depth + 1, self.shared)
        body = state.copy()
        body.args = None if any(UNKNOWN in a or SUB in a for a in args) else list(args)
        inner.walk_tokens(state.functions[name], body)
        self.out.extend(inner.out)

    def _nested(self, text: str, state: _State) -> list[Command]:
        if self.depth >= MAX_DEPTH:
            return []
        inner = _Walker(self.depth + 1, self.shared)
        inner.walk(text, state)
        self.out.extend(inner.out)
        return inner.out


def commands(command: str, cwd: str | None) -> list[Command]:
    """Every simple command `command` would run from `cwd`, in order (substitutions included)."""
    shared = _Shared()
    walker = _Walker(0, shared)
    walker.walk(command, _State(cwd, {}))
    for body, state in list(shared.uncalled.values()):  # a function defined but not called here: its searches all the same
        inner = _Walker(1, shared)
        inner.walk_tokens(body, state)
        walker.out.extend(inner.out)
    return walker.out
