"""Walk a shell command line into the simple commands it would run, each with its own cwd.

Tracks what changes where a command runs and what it reads: `cd`/`pushd`/`popd` (and
subshells that undo them), variables (`X=notes`, `export`, `for f in notes/*.md`,
`${X:-default}`, arrays (`a=(…)`, `a+=(…)`, `a[N]=…`, `"${a[@]}"`), positional parameters of `sh -c '…' _ a b` and of functions), `~`, `~+`,
aliases and functions defined in the same command, wrappers (`env X=1 cmd`, `sudo`,
`timeout 5`, `nice`, `command`, `busybox`, `setsid`, …), shell strings (`bash -c '…'`,
`sh -lc`, `eval`, `script -c`, `su -c`), scripts a shell reads from its stdin or a file
descriptor (`bash <<EOF`, `bash <<< '…'`, `echo '…' | sh`, `bash <(echo …)`,
`source <(…)`), pipelines (each command knows the one feeding its stdin), `while read f`
loops (the variable stands for the lines the loop is fed) and command substitutions
(analysed as commands of their own; the output of the few whose output is known, such as
`$(pwd)` or `$(echo …)`, takes their place).

All the work is bounded: nesting depth, characters lexed and commands walked per call, and
what expansion builds (`guards.budget`). A bound that skips a part of the command marks the
decision's work incomplete, so that a sweep hidden past it is not simply allowed.

The pieces: `guards.command` (the command record and shell state), `guards.expand` (word
expansion and known command output) and `guards.unwrap` (wrappers, shell strings and
script operands); this module walks the tokens.
"""

from __future__ import annotations

import os
import re

from . import budget
from .command import UNKNOWN, Command, State, cd, git_root, resolve
from .expand import ASSIGN, MAX_WORDS, bounded_text, bounded_words, braces, expand, join_words, output_of
from .lexer import HEREDOC, OP, REDIRECTS, STDIN_REDIRECTS, SUB, heredoc_key, literal, quoted, tokenize
from .unwrap import SHELLS, option_value, script_operand, shell_string, tokenize_words, unwrap

__all__ = ["MAX_CALLS", "MAX_DEPTH", "MAX_LEXED", "MAX_STEPS", "UNKNOWN", "Command", "commands", "git_root", "output_of", "resolve", "tokenize", "tokenize_words"]

MAX_DEPTH = 6
MAX_LEXED = budget.MAX_LEXED  # characters all nested walks of one call may lex (the outer command counts too)
MAX_STEPS = 50_000  # simple commands one call may walk (function calls re-walk their bodies)
MAX_CALLS = 256  # function calls one call may follow
MAX_INDEX = 4096  # the highest array element `a[N]=…` the guard fills (past it the array is unknown)
_SUB_KEY = re.compile(f"{SUB}[0-9]+{SUB}")
_KEYWORDS = frozenset({"!", "{", "}", "then", "do", "else", "elif", "if", "while", "until", "done", "fi", "esac", "time", "coproc"})
_PLACEHOLDER_OUTPUT = frozenset({"true", ":", "cd", "pushd", "popd", "export", "set", "shopt"})


_ARRAY_START = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*\+?=$")  # the word before an array's `(`
_PLACED = re.compile(r"^\[([0-9]{1,6})\]=")  # `[N]=word` inside an array's parentheses


def _assign(state: State, name: str, value: str) -> None:
    """`NAME=value`, `NAME+=value` (taken as the value: the guard follows paths, not strings) or
    `NAME[N]=value` (one element of an array)."""
    name = name.rstrip("+")
    base, bracket, index = name.partition("[")
    if not bracket:
        state.vars[name] = [value]
        return
    words = list(state.vars.get(base) or [])
    state.vars[base] = words if _place(words, index.rstrip("]"), value) else [UNKNOWN]  # `a[$i]=…`, `a[key]=…`: unknown


def _place(words: list[str], index: str, value: str) -> bool:
    """Set element `index` of the array `words` to `value` (filling the gap with empty words);
    False, nothing set, for an index the guard does not follow: not a number, octal (`010` is
    element 8), or past MAX_INDEX."""
    if not index.isdigit() or int(index) >= MAX_INDEX or (len(index) > 1 and index.startswith("0")):
        return False
    words.extend([""] * (int(index) + 1 - len(words)))
    words[int(index)] = value
    return True


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
        self.uncalled: dict[str, tuple[list[str], State]] = {}
        self.files: dict[str, str] = {}  # path → the text this call writes there (`cat > s.sh <<EOF`), when known

    def key(self, mark: str = SUB) -> str:
        self.next_key += 1
        return f"{mark}{self.next_key}{mark}"


class _Walker:
    def __init__(self, depth: int, shared: _Shared) -> None:
        self.depth = depth
        self.shared = shared
        self.out: list[Command] = []
        self.ends: list[Command | None] = []  # this level's commands whose output is the walk's output

    # -- entry points ------------------------------------------------------------------------
    def walk(self, text: str, state: State) -> None:
        tokens = self._lex(text)
        if tokens is not None:
            self.walk_tokens(tokens, state)

    def _lex(self, text: str) -> list[str] | None:
        """The tokens of `text` with call-wide keys; None once the call's lexing budget is spent."""
        shared = self.shared
        if (shared.lexed and shared.lexed + len(text) > MAX_LEXED) or not budget.lex(len(text)):
            budget.skipped("lexing budget")
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

    def walk_tokens(self, tokens: list[str], state: State) -> None:
        stack: list[State] = []
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
            if op == "(" and words and _ARRAY_START.match(words[-1]):  # `a=(x y)`, `declare -a a=(…)`, `a+=(…)`
                i = self._array(tokens, i, words.pop(), state)
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

    def _array(self, tokens: list[str], i: int, assign: str, state: State) -> int:
        """Record the array `NAME=(` … `)` whose words start at `tokens[i]`; returns the index after
        its `)`. Newlines inside are separators; `[N]=word` places a word at N. Any other
        operator inside (not bash) leaves the array unknown, read through to its `)`."""
        raw: list[str] = []
        known = True
        while i < len(tokens) and tokens[i] != OP + ")":
            if tokens[i].startswith(OP):
                known = known and tokens[i] == OP + ";"  # a newline (the lexer's `;`)
            else:
                raw.append(tokens[i])
            i += 1
        name = assign.split("=", 1)[0]
        append = name.endswith("+")
        name = name.rstrip("+")
        if not known or i >= len(tokens):  # another operator inside, or no `)`
            state.vars[name] = [UNKNOWN]
            return i + 1
        value = list(state.vars.get(name) or []) if append else []
        for word in raw:
            placed = _PLACED.match(word)
            if placed is None:
                value.extend(self._expanded([word], state))
                continue
            if not _place(value, placed.group(1), (self._expanded([word[placed.end() :]], state) or [""])[0]):
                state.vars[name] = [UNKNOWN]  # octal, or past what the guard fills
                return i + 1
            if len(value) > MAX_WORDS:
                break
        state.vars[name] = value if len(value) <= MAX_WORDS else value[:MAX_WORDS] + [UNKNOWN]  # indices kept: no dedupe
        budget.charge(8 * len(value) + 256)
        return i + 1

    def _expanded(self, raw: list[str], state: State) -> list[str]:
        """The words `raw` stands for once expanded (variables, outputs, braces)."""
        for word in raw:
            for key in _SUB_KEY.findall(word):
                self._walk_sub(key, state)
        return [w for word in raw for v in expand(self._with_outputs(word), state) for w in braces(v)]

    def _define(self, tokens: list[str], i: int, name: str, state: State) -> int:
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
    def _walk_sub(self, key: str, state: State) -> None:
        """Walk the substitution `key` once; remember its commands and, when known, its output."""
        shared = self.shared
        if key in shared.cmds or key not in shared.texts:
            return
        inner = _Walker(self.depth + 1, shared)
        shared.cmds[key] = inner.out
        if self.depth < MAX_DEPTH:
            inner.walk(shared.texts[key], state.copy())
        else:
            budget.skipped("nesting depth")
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
        return join_words(parts, "") if parts else None

    def _with_outputs(self, word: str) -> str:
        """`word` with every substitution whose output is known replaced by that output."""
        if SUB not in word:
            return word

        def value(m: re.Match[str]) -> str:
            text = None if m.group() in self.shared.procsubs else self.shared.outputs.get(m.group())
            if text is None:
                return m.group()
            budget.charge(len(text) + 64)
            return quoted(text.rstrip("\n"))

        return _SUB_KEY.sub(value, word)

    def _redirects(self, redirects: list[tuple[str, str]], state: State) -> tuple[bool, str | None, list[Command] | None]:
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
                text = literal(join_words(expand(self._with_outputs(target), state))) + "\n"
            elif op == "<" and _SUB_KEY.fullmatch(target):
                fed = self.shared.cmds.get(target)
        return stdin_redirect, text, fed

    def _body_substitutions(self, body: str, state: State) -> None:
        """The command substitutions of an unquoted here-document run when it is read."""
        for tok in self._lex('"' + body.replace('"', '\\"') + '"') or []:
            for key in _SUB_KEY.findall(tok):
                self._walk_sub(key, state)

    def _simple(self, raw: list[str], redirects: list[tuple[str, str]], state: State, producer: Command | None, in_pipeline: bool) -> Command | None:
        shared = self.shared
        shared.steps += 1
        budget.charge(1024 + 48 * len(raw) if raw else 16)
        if shared.steps > MAX_STEPS:
            budget.skipped("commands walked")
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
        argv = self._expanded(raw, state)
        while argv and (argv[0] in _KEYWORDS or ASSIGN.match(argv[0])):  # `while IFS= read -r f`
            if argv[0] not in _KEYWORDS:
                name, _, value = argv[0].partition("=")
                if len(argv) == 1:
                    _assign(state, name, value)
            elif argv[0] == "time":  # the keyword's own option: `time -p [--] grep …`
                while len(argv) > 1 and argv[1] in ("-p", "--"):
                    argv = argv[1:]
            argv = argv[1:]
        if not argv:
            return None
        argv = self._aliased(argv, state)
        if literal(argv[0]) in state.functions:
            self._call(literal(argv[0]), argv[1:], state)
            return None
        if argv[0] == "for" and len(argv) >= 3 and argv[2] == "in":
            state.vars[argv[1]] = bounded_words(argv[3:])
            return None
        if argv[0] in ("export", "local", "declare", "typeset", "readonly"):
            for a in argv[1:]:
                if ASSIGN.match(a):
                    name, _, value = a.partition("=")
                    _assign(state, name, value)
            return None
        if literal(argv[0]) == "alias":
            for a in argv[1:]:
                name, eq, value = literal(a).partition("=")
                if eq and name:
                    state.aliases[name] = tokenize_words(value)
            return None
        run = state.copy()  # wrappers such as `env -C DIR` change only this command's cwd
        argv = unwrap(argv, run)
        if not argv:
            return None
        name = os.path.basename(literal(argv[0]))
        if name in ("cd", "pushd", "popd", "chdir"):
            cd(run if in_pipeline else state, argv[1:], name)  # a pipeline runs in subshells
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
        budget.seen(cmd)
        self._writes(cmd, redirects, state)
        if self._runs_script(cmd, name, run, fed):
            return None
        self.out.append(cmd)
        return cmd

    def _writes(self, cmd: Command, redirects: list[tuple[str, str]], state: State) -> None:
        """Remember what `cmd` writes to a file (`cat > s.sh <<'EOF'`, `echo … >> s.sh`), when known."""
        for op, target in redirects:
            if op not in (">", ">>", ">|", "&>", "&>>"):
                continue
            path = resolve(join_words(expand(target, state)), state.cwd)
            if path is None:
                continue
            text = output_of(cmd)
            before = self.shared.files.get(path, "") if op.endswith(">>") else ""
            if text is None:
                self.shared.files.pop(path, None)
            elif not before.endswith(UNKNOWN):  # past MAX_VALUE what follows is not known anyway
                budget.charge(len(before) + len(text) + 64)
                self.shared.files[path] = bounded_text(before + text)

    def _aliased(self, argv: list[str], state: State) -> list[str]:
        seen: set[str] = set()
        while argv and literal(argv[0]) in state.aliases and literal(argv[0]) not in seen:
            seen.add(literal(argv[0]))
            value = [w for word in state.aliases[literal(argv[0])] for w in expand(word, state)]
            argv = value + argv[1:]
            budget.charge(8 * len(argv) + 64)
        return argv

    def _read(self, argv: list[str], state: State, producer: Command | None, fed: list[Command] | None) -> None:
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

    def _runs_script(self, cmd: Command, name: str, run: State, fed: list[Command] | None) -> bool:
        """Walk the script a shell, `eval`, `source`, `script -c` or `su -c` runs; True when it was one."""
        argv = cmd.argv
        script: str | None = None
        args: list[str] | None = None
        if name == "eval":
            script = join_words([self._script_text(a) for a in argv[1:]])
        elif name in ("source", "."):
            script = self._script_file(argv[1], run) if len(argv) > 1 else None
            if script is None:
                return False
        elif name in ("script", "su", "runuser", "flock"):
            script = option_value(argv, "c", ("--command",))
            if script is None:
                return False
        elif name in SHELLS:
            found = shell_string(argv)
            if found is not None:
                script = self._script_text(found[0])
                rest = argv[found[1] + 1 :]
                args = None if any(UNKNOWN in a or SUB in a for a in rest) else rest
                if found[1] < len(argv):
                    run = run.copy()
                    run.vars["0"] = [argv[found[1]]]
            else:
                operand, from_stdin = script_operand(argv)
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

    def _script_file(self, word: str, state: State) -> str | None:
        """The text of a script operand: a process substitution's output, or a file this command
        wrote earlier (a script file already on disk is not read)."""
        if _SUB_KEY.fullmatch(word):
            return self.shared.outputs.get(word)
        path = resolve(word, state.cwd)
        return None if path is None else self.shared.files.get(path)

    def _call(self, name: str, args: list[str], state: State) -> None:
        self.shared.uncalled.pop(name, None)
        self.shared.calls += 1
        if self.depth >= MAX_DEPTH or self.shared.calls > MAX_CALLS:
            budget.skipped("nesting depth" if self.depth >= MAX_DEPTH else "function calls")
            return
        inner = _Walker(self.depth + 1, self.shared)
        body = state.copy()
        body.args = None if any(UNKNOWN in a or SUB in a for a in args) else list(args)
        inner.walk_tokens(state.functions[name], body)
        self.out.extend(inner.out)

    def _nested(self, text: str, state: State) -> list[Command]:
        if self.depth >= MAX_DEPTH:
            budget.skipped("nesting depth")
            return []
        inner = _Walker(self.depth + 1, self.shared)
        inner.walk(text, state)
        self.out.extend(inner.out)
        return inner.out


def commands(command: str, cwd: str | None) -> list[Command]:
    """Every simple command `command` would run from `cwd`, in order (substitutions included).
    Raises budget.Exhausted past the decision's deadline or work budget."""
    work = budget.begin()  # None inside a decision (or a nested call): that one's work counts
    try:
        shared = _Shared()
        walker = _Walker(0, shared)
        walker.walk(command, State(cwd, {}))
        for body, state in list(shared.uncalled.values()):  # a function defined but not called here: its searches all the same
            inner = _Walker(1, shared)
            inner.walk_tokens(body, state)
            walker.out.extend(inner.out)
        return walker.out
    finally:
        budget.end(work)
