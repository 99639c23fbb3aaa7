"""What a terminal gets and a pipe does not: colour and clickable (OSC-8) paths.

As the original: colour only when stdout is a terminal and `NO_COLOR` is unset (any value
non-empty value turns it off, https://no-color.org); links only when stdout is a terminal, pointing at
`QMD_EDITOR_URI` (`{path}`, `{line}`, `{col}`/`{column}` filled in; default
`vscode://file/{path}:{line}:{col}`). A pipe gets the plain bytes the formats produce.
"""

from __future__ import annotations

import os
import re
import sys

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import TextIO

DEFAULT_EDITOR_URI = "vscode://file/{path}:{line}:{col}"
RESET, DIM, BOLD, CYAN, YELLOW, GREEN = "\x1b[0m", "\x1b[2m", "\x1b[1m", "\x1b[36m", "\x1b[33m", "\x1b[32m"


class Style:
    """How the cli format decorates a hit; `Style()` (the default) decorates nothing."""

    def __init__(self, colour: bool = False, links: bool = False, editor: str = DEFAULT_EDITOR_URI) -> None:
        self.colour = colour
        self.links = links
        self.editor = editor

    def paint(self, code: str, text: str) -> str:
        return f"{code}{text}{RESET}" if self.colour and text else text

    def score(self, score: float, text: str) -> str:
        code = GREEN if score >= 0.7 else YELLOW if score >= 0.4 else DIM
        return self.paint(code, text)

    def link(self, text: str, abs_path: str | None, line: int) -> str:
        if not self.links or not abs_path:
            return text
        return f"\x1b]8;;{editor_uri(self.editor, abs_path, line)}\x07{text}\x1b]8;;\x07"

    def highlight(self, text: str, query: str) -> str:
        """Query words of 3+ letters in bold yellow (the original's rule)."""
        if not self.colour:
            return text
        words = sorted({w for w in re.findall(r"[^\s\"']+", query.lower()) if len(w.lstrip("-")) >= 3 and not w.startswith("-")}, key=len, reverse=True)
        if not words:
            return text
        pattern = re.compile("(" + "|".join(re.escape(w) for w in words) + ")", re.IGNORECASE)
        return pattern.sub(lambda m: f"{YELLOW}{BOLD}{m.group(1)}{RESET}", text)


PLAIN = Style()


def editor_uri(template: str, abs_path: str, line: int, col: int = 1) -> str:
    """The editor link for a file and line (the path percent-encoded as encodeURI does, plus ? and #)."""
    from urllib.parse import quote

    path = quote(abs_path, safe="/:@!$&'()*+,;=-._~")
    line, col = (line if line > 0 else 1), (col if col > 0 else 1)
    return template.replace("{path}", path).replace("{line}", str(line)).replace("{col}", str(col)).replace("{column}", str(col))


def style_for(stream: TextIO | None = None) -> Style:
    """The Style for printing to `stream` (stdout by default)."""
    stream = sys.stdout if stream is None else stream
    try:
        tty = stream.isatty()
    except (AttributeError, ValueError):
        tty = False
    if not tty:
        return PLAIN
    editor = os.environ.get("QMD_EDITOR_URI", "").strip() or DEFAULT_EDITOR_URI
    return Style(colour=not os.environ.get("NO_COLOR"), links=True, editor=editor)
