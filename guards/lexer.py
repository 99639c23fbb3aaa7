"""Shell lexing: a command string → words and operator tokens.

A quote-aware pre-pass does what `shlex` cannot: it marks operators (`&&`, `|`, `;`, `>`,
newlines, …) that are outside quotes, cuts out command substitutions (`$(…)`, backticks,
`<(…)`) and here-document bodies, drops comments, and marks characters that were quoted
or escaped (`$ ~ * ? [`) so that later expansion and glob detection leave them alone.
`shlex` then removes quotes and splits words.

Tokens: an operator is `OP + text` (e.g. `"\\x01&&"`); a substitution is the single word
`SUB + n + SUB`, its inner text in the returned map; every other token is a word. The body
of the n-th here-document (counted from 0) is in the same map under `heredoc_key(n)`, or
`heredoc_key(n, quoted=True)` when its delimiter was quoted (no expansion in the body).
ANSI-C strings (`$'\\x67rep'`) are decoded; `$"…"` is read as `"…"`.
"""

from __future__ import annotations

import shlex

OP = "\x01"
SUB = "\x02"
HEREDOC = "\x03"
_QUOTED = {"$": "\ue001", "~": "\ue002", "*": "\ue003", "?": "\ue004", "[": "\ue005", ",": "\ue006"}  # ",": no brace expansion
ESCAPED_BRACE = "\ue007"  # `\{`: a brace no brace expansion starts at (quoted ones have their commas marked)
_RESTORE = str.maketrans({**{v: k for k, v in _QUOTED.items()}, ESCAPED_BRACE: "{"})
_QUOTE_TABLE = str.maketrans(_QUOTED)
# Longest first: the scanner takes the first that matches.
_OPERATORS = ("&>>", "<<<", "<<-", "&&", "||", ";;", "|&", "&>", ">>", ">&", "<&", ">|", "<>", "<<", ";", "&", "|", "<", ">", "(", ")")
REDIRECTS = frozenset({"&>>", "<<<", "<<-", "&>", ">>", ">&", "<&", ">|", "<>", "<<", "<", ">"})
STDIN_REDIRECTS = frozenset({"<", "<<", "<<-", "<<<", "<>"})
_NO_SEP_AFTER = frozenset({"|", "|&", "&&", "||", "(", ";", "&", ";;"})


class Subs(dict[str, str]):
    """The substitution map of `tokenize` (key → inner text); `procsubs` holds the keys of
    process substitutions (`<(…)`, `>(…)`), which stand for a file name, not for their output."""

    procsubs: set[str]

    def __init__(self) -> None:
        super().__init__()
        self.procsubs = set()


def heredoc_key(n: int, quoted: bool = False) -> str:
    """The key of the n-th here-document body in the map `tokenize` returns."""
    return f"{HEREDOC}{n}{'q' if quoted else ''}{HEREDOC}"


def quoted(text: str) -> str:
    """`text` as a word whose `$ ~ * ? [` are literal (as if it had been quoted)."""
    return text.translate(_QUOTE_TABLE)


_ANSI = {"a": "\a", "b": "\b", "e": "\x1b", "E": "\x1b", "f": "\f", "n": "\n", "r": "\r", "t": "\t", "v": "\v",
         "\\": "\\", "'": "'", '"': '"', "?": "?"}


def ansi_c(body: str) -> str:
    """The value of an ANSI-C quoted string's body (`$'…'`): backslash escapes decoded."""
    out: list[str] = []
    i, n = 0, len(body)
    while i < n:
        ch = body[i]
        if ch != "\\" or i + 1 >= n:
            out.append(ch)
            i += 1
            continue
        nxt = body[i + 1]
        if nxt in _ANSI:
            out.append(_ANSI[nxt])
            i += 2
        elif nxt in "xuU":
            width = {"x": 2, "u": 4, "U": 8}[nxt]
            j = i + 2
            while j < min(n, i + 2 + width) and body[j] in "0123456789abcdefABCDEF":
                j += 1
            if j == i + 2:
                out.append("\\" + nxt)
            else:
                code = int(body[i + 2 : j], 16)
                out.append(chr(code) if code < 0x110000 else "")
            i = j if j > i + 2 else i + 2
        elif nxt in "01234567":
            j = i + 1
            while j < min(n, i + 4) and body[j] in "01234567":
                j += 1
            out.append(chr(int(body[i + 1 : j], 8) & 0xFF))
            i = j
        elif nxt == "c" and i + 2 < n:
            out.append(chr(ord(body[i + 2]) & 0x1F))
            i += 3
        else:
            out.append("\\" + nxt)
            i += 2
    return "".join(out)


def literal(word: str) -> str:
    """The word as the program receives it (quoted-character marks restored)."""
    return word.translate(_RESTORE)


def has_glob(word: str) -> bool:
    """True when the word holds an unquoted wildcard the shell would expand."""
    return "*" in word or "?" in word or "[" in word


def glob_pattern(word: str) -> str:
    """The word as a `glob` pattern: unquoted wildcards active, quoted ones escaped."""
    return "".join(f"[{ch}]" if ch in "\ue003\ue004\ue005" else ch for ch in word).translate(_RESTORE)


class _Scanner:
    def __init__(self, text: str) -> None:
        self.text = text
        self.out: list[str] = []
        self.subs = Subs()
        self.heredocs: list[tuple[str, bool, str]] = []  # (delimiter, strip tabs, key of the body)
        self.heredoc_count = 0
        self.last_op: str | None = ""  # "" = start of input; None = a word was emitted since

    # -- helpers -------------------------------------------------------------------
    def _sub(self, inner: str) -> str:
        key = f"{SUB}{len(self.subs)}{SUB}"
        self.subs[key] = inner
        return key

    def _word_start(self) -> bool:
        if not self.out:
            return True
        last = self.out[-1]
        return last[-1:] in (" ", "\t") or last.startswith(" " + OP)

    def _emit_op(self, op: str) -> None:
        if op in REDIRECTS:
            digits: list[str] = []
            while self.out and len(self.out[-1]) == 1 and self.out[-1].isdigit():
                digits.append(self.out.pop())
            if digits and not self._word_start():
                self.out.extend(reversed(digits))  # part of a word, not an fd number
        self.out.append(f" {OP}{op} ")
        self.last_op = op

    def _emit(self, text: str) -> None:
        self.out.append(text)
        if text.strip():
            self.last_op = None

    def _matching(self, start: int, open_ch: str = "(", close_ch: str = ")") -> int:
        """Index of the bracket closing the one before `start`, skipping quotes; len(text) if none."""
        text, depth, i = self.text, 1, start
        while i < len(text):
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if ch == "'":
                j = text.find("'", i + 1)
                i = len(text) if j < 0 else j + 1
                continue
            if ch == '"':
                i = self._end_double(i + 1)
                continue
            if ch == open_ch:
                depth += 1
            elif ch == close_ch:
                depth -= 1
                if depth == 0:
                    return i
            i += 1
        return len(text)

    def _end_double(self, i: int) -> int:
        text = self.text
        while i < len(text):
            ch = text[i]
            if ch == "\\":
                i += 2
                continue
            if ch == '"':
                return i + 1
            if ch == "$" and text.startswith("$(", i):
                i = self._matching(i + 2) + 1
                continue
            i += 1
        return len(text)

    def _dollar(self, i: int) -> int | None:
        """Handle `$((…))` and `$(…)` at `i`; returns the next index, or None if not one."""
        text = self.text
        if text.startswith("$((", i):
            end = self._matching(i + 3)
            end = self._matching(end + 1) if end < len(text) else end  # the outer paren
            self._emit("0")
            return end + 1
        if text.startswith("$(", i):
            end = self._matching(i + 2)
            self._emit(self._sub(text[i + 2 : end]))
            return end + 1
        return None

    def _backtick(self, i: int) -> int:
        text, j = self.text, i + 1
        while j < len(text) and text[j] != "`":
            j += 2 if text[j] == "\\" else 1
        self._emit(self._sub(text[i + 1 : j].replace("\\`", "`")))
        return j + 1

    # -- states --------------------------------------------------------------------
    def _single(self, i: int) -> int:
        j = self.text.find("'", i + 1)
        j = len(self.text) if j < 0 else j
        self._emit("'" + self.text[i + 1 : j].translate(_QUOTE_TABLE) + "'")
        return j + 1

    def _double(self, i: int) -> int:
        text, parts, i = self.text, ['"'], i + 1
        while i < len(text) and text[i] != '"':
            ch = text[i]
            if ch == "\\" and i + 1 >= len(text):  # a backslash ending an unclosed string: itself
                parts.append("\\\\")
                i += 1
                continue
            if ch == "\\" and i + 1 < len(text):
                nxt = text[i + 1]
                parts.append(_QUOTED["$"] if nxt == "$" else ("\\" + nxt if nxt in '"\\' else ("" if nxt == "\n" else "\\" + nxt)))
                i += 2
                continue
            if ch == "$" and text.startswith("$(", i):
                self._emit("".join(parts))
                parts = []
                nxt_i = self._dollar(i)
                i = nxt_i if nxt_i is not None else i + 1
                continue
            if ch == "`":
                self._emit("".join(parts))
                parts = []
                i = self._backtick(i)
                continue
            parts.append(ch if ch == "$" else ch.translate(_QUOTE_TABLE))
            i += 1
        parts.append('"')
        self._emit("".join(parts))
        return i + 1

    def _ansi(self, i: int) -> int:
        """`$'…'` at `i`: emitted as a double-quoted word holding the decoded value."""
        text, j = self.text, i + 2
        while j < len(text) and text[j] != "'":
            j += 2 if text[j] == "\\" else 1
        value = "".join(ch for ch in ansi_c(text[i + 2 : j]) if ch not in "\x00\x01\x02\x03")
        self._emit('"' + quoted(value.replace("\\", "\\\\").replace('"', '\\"')) + '"')
        return j + 1

    def _heredoc_word(self, i: int, strip_tabs: bool) -> int:
        text = self.text
        while i < len(text) and text[i] in " \t":
            i += 1
        j = i
        while j < len(text) and text[j] not in " \t\n;&|<>()":
            j += 1
        raw = text[i:j]
        word = raw.replace("'", "").replace('"', "").replace("\\", "")
        if word:
            key = heredoc_key(self.heredoc_count, quoted=word != raw)
            self.heredoc_count += 1
            self.heredocs.append((word, strip_tabs, key))
            self._emit(" " + word + " ")
        return j

    def _skip_heredocs(self, i: int) -> int:
        text = self.text
        for word, strip_tabs, key in self.heredocs:
            lines: list[str] = []
            while i < len(text):
                end = text.find("\n", i)
                end = len(text) if end < 0 else end
                line = text[i:end]
                i = end + 1
                if strip_tabs:
                    line = line.lstrip("\t")
                if line == word:
                    break
                lines.append(line + "\n")
            self.subs[key] = "".join(lines)
        self.heredocs = []
        return i

    def run(self) -> tuple[str, Subs]:
        text, i, n = self.text, 0, len(self.text)
        while i < n:
            ch = text[i]
            if ch == "\\":
                if i + 1 < n and text[i + 1] != "\n":
                    nxt = text[i + 1]
                    self._emit(_QUOTED.get(nxt) or (ESCAPED_BRACE if nxt == "{" else "\\" + nxt))
                i += 2
            elif ch == "'":
                i = self._single(i)
            elif ch == '"':
                i = self._double(i)
            elif ch == "`":
                i = self._backtick(i)
            elif ch == "$" and text.startswith("$(", i):
                i = self._dollar(i) or i + 1
            elif ch == "$" and text.startswith("$'", i):
                i = self._ansi(i)
            elif ch == "$" and text.startswith('$"', i):
                i = self._double(i + 1)
            elif ch == "#" and self._word_start():
                end = text.find("\n", i)
                i = n if end < 0 else end
            elif ch == "\n":
                if self.heredocs:
                    i = self._skip_heredocs(i + 1)
                else:
                    i += 1
                if self.last_op in _NO_SEP_AFTER or self.last_op == "":
                    self._emit(" ")
                else:
                    self._emit_op(";")
            elif ch in "<>" and text.startswith("(", i + 1):
                end = self._matching(i + 2)
                key = self._sub(text[i + 2 : end])
                self.subs.procsubs.add(key)
                self._emit(key)
                i = end + 1
            elif ch in ";&|<>()":
                op = next(o for o in _OPERATORS if text.startswith(o, i))
                self._emit_op(op)
                i += len(op)
                if op in ("<<", "<<-"):
                    i = self._heredoc_word(i, op == "<<-")
            else:
                self._emit(ch)
                i += 1
        return "".join(self.out), self.subs


def tokenize(command: str) -> tuple[list[str], Subs]:
    """Split `command` into tokens (words, `OP`-prefixed operators, substitution words) and substitutions."""
    text, subs = _Scanner(command).run()
    lex = shlex.shlex(text, posix=True)
    lex.whitespace_split = True
    lex.commenters = ""
    return list(lex), subs
