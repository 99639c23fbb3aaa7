"""Text from the network made safe for a log line (pure).

A request path, a header or a JSON field can carry terminal escapes (`ESC [ 2 J` clears the
screen of whoever reads the log with `tail -f`), CR/LF (a forged second log line) or NUL.
`escape` writes every such character the way Python's `repr` does (`\\x1b`, `\\r`, `\\n`,
`\\x00`, `\\u2028`): one request is one line, and reading the log cannot drive the terminal.
"""

from __future__ import annotations

_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}


def _one(char: str) -> str:
    named = _NAMED.get(char)
    if named is not None:
        return named
    if char == " " or char.isprintable():
        return char
    code = ord(char)
    if code < 0x100:
        return f"\\x{code:02x}"
    return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def escape(text: str) -> str:
    """`text` with control, format and separator characters escaped (the space kept)."""
    if text.isprintable():
        return text  # the common case: one C-level scan
    return "".join(_one(c) for c in text)


def escape_lines(text: str) -> str:
    """Each line of `text` escaped, the line breaks kept (for tracebacks holding user text)."""
    return "\n".join(escape(line) for line in text.split("\n"))


def stderr_log(line: str) -> None:
    """One timestamped line on stderr (the servers' log); a closed stderr is not an error."""
    import sys
    import time

    try:
        sys.stderr.write(f"{time.strftime('%Y-%m-%dT%H:%M:%S')} {line}\n")
        sys.stderr.flush()
    except (OSError, ValueError):
        pass
