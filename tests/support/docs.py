"""Reading the documentation as tests/docs checks it: the markdown files, their fenced code
blocks and the `qmd …` command lines in them, their links and headings (GitHub's anchors),
and the real CLI a command line is parsed against (without running it).

Conventions the docs follow (docs/development.md, "Documentation"):
- a fenced block whose language is sh, bash, shell or console holds command lines; each `qmd`
  invocation in it (also after `&&`, `|`, `;` or `VAR=value`) must parse;
- a line ending in the comment `# not parsed` is left alone (a placeholder it cannot avoid);
- `<!-- runnable -->` on the line before a fence: every line of the block runs, in a temp home
  where examples/notes is the collection `notes`; `<!-- runnable: fresh -->`: in an empty home.
"""

from __future__ import annotations

import codecs
import io
import re
import shlex
from contextlib import redirect_stderr, redirect_stdout
from dataclasses import dataclass
from pathlib import Path

from tests.support.paths import REPO

SHELL_LANGS = {"sh", "bash", "shell", "console"}
SKIP_MARK = "# not parsed"
RUNNABLE = "<!-- runnable -->"
RUNNABLE_FRESH = "<!-- runnable: fresh -->"
_FENCE = re.compile(r"^(\s*)(```+|~~~+)\s*([\w-]*)")
_OPERATORS = {"|", "||", "&&", ";", "&"}
_ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")
_ANSI_C = re.compile(r"\$'((?:[^'\\]|\\.)*)'")


def doc_files(repo: Path = REPO) -> list[Path]:
    """README.md and every page of docs/."""
    return [repo / "README.md", *sorted((repo / "docs").glob("*.md"))]


@dataclass(frozen=True)
class Block:
    path: Path
    line: int  # 1-based line of the opening fence
    lang: str
    text: str
    marker: str | None  # RUNNABLE, RUNNABLE_FRESH or None

    @property
    def where(self) -> str:
        """`docs/page.md:12`, for test ids and messages."""
        shown = self.path.relative_to(REPO).as_posix() if self.path.is_relative_to(REPO) else self.path.name
        return f"{shown}:{self.line}"


def blocks(path: Path, text: str | None = None) -> list[Block]:
    """The fenced code blocks of a markdown file, with the marker on the line before each."""
    lines = (path.read_text(encoding="utf-8") if text is None else text).splitlines()
    out: list[Block] = []
    i = 0
    while i < len(lines):
        m = _FENCE.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang, start = m.group(2), m.group(3).lower(), i
        body: list[str] = []
        i += 1
        while i < len(lines) and not lines[i].strip().startswith(fence[0] * len(fence)):
            body.append(lines[i])
            i += 1
        before = next((lines[j].strip() for j in range(start - 1, -1, -1) if lines[j].strip()), "")
        marker = before if before in (RUNNABLE, RUNNABLE_FRESH) else None
        out.append(Block(path, start + 1, lang, "\n".join(body), marker))
        i += 1
    return out


def _strip_comment(line: str) -> str:
    """The line without its shell comment: a `#` at a word's start outside quotes."""
    quote: str | None = None
    escaped = False
    for i, ch in enumerate(line):
        if escaped:
            escaped = False
        elif ch == "\\" and quote != "'":
            escaped = True
        elif quote:
            if ch == quote:
                quote = None
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line


def _ansi_c(match: re.Match[str]) -> str:
    """bash's $'…' as the plain quoted word it stands for."""
    return shlex.quote(codecs.decode(match.group(1).encode("latin-1", "backslashreplace"), "unicode_escape"))


def tokens(line: str) -> list[str]:
    """The shell words and control operators of one logical line (ValueError: quotes left open)."""
    lexer = shlex.shlex(_ANSI_C.sub(_ansi_c, _strip_comment(line)), posix=True, punctuation_chars=";&|")
    lexer.whitespace_split = True
    lexer.commenters = ""  # _strip_comment did bash's part: `#` inside a word is the word's
    return list(lexer)


def logical_lines(block: Block) -> list[tuple[int, str]]:
    """(line number in the file, text) of each command of a block: `\\` continuations and
    quotes left open across lines joined; a console block's `$ ` prompts dropped, its output left out."""
    out: list[tuple[int, str]] = []
    pending: tuple[int, str] | None = None
    for offset, raw in enumerate(block.text.splitlines(), start=1):
        number = block.line + offset
        if block.lang == "console" and pending is None:
            if not raw.startswith("$ "):
                continue  # output
            raw = raw[2:]
        line = raw if pending is None else pending[1] + "\n" + raw
        start = number if pending is None else pending[0]
        if line.endswith("\\"):
            pending = (start, line[:-1])
            continue
        try:
            tokens(line)
        except ValueError:
            pending = (start, line)
            continue
        pending = None
        if line.strip():
            out.append((start, line))
    if pending is not None:
        out.append(pending)
    return out


def invocations(line: str) -> list[list[str]]:
    """The argv after `qmd` of each qmd command on a line (after `VAR=value` prefixes, between operators)."""
    found: list[list[str]] = []
    segment: list[str] = []
    for word in [*tokens(line), ";"]:
        if word in _OPERATORS:
            while segment and _ASSIGNMENT.match(segment[0]):
                segment.pop(0)
            if segment and segment[0] == "qmd":
                found.append(segment[1:])
            segment = []
        else:
            segment.append(word)
    return found


def shell_segments(line: str) -> list[list[str]]:
    """Every simple command of a line (for runnable blocks: each must be a qmd command)."""
    out, segment = [], []
    for word in [*tokens(line), ";"]:
        if word in _OPERATORS:
            if segment:
                out.append(segment)
            segment = []
        else:
            segment.append(word)
    return out


def parse_error(argv: list[str]) -> str | None:
    """None when `qmd ARGV` parses against the real CLI (resolved command by command, each
    context made, nothing invoked); else click's message."""
    import typer
    from typer._click import exceptions

    from qmd.cli.argv import hoist_globals
    from qmd.cli.docgen import root_command

    args = hoist_globals(list(argv))
    command = root_command()
    sink = io.StringIO()
    try:
        with redirect_stdout(sink), redirect_stderr(sink):  # --help and --version print as they parse
            ctx = command.make_context("qmd", args)
            while hasattr(command, "resolve_command"):
                rest = [*getattr(ctx, "_protected_args", []), *ctx.args]
                if not rest:
                    break
                name, sub, rest = command.resolve_command(ctx, rest)
                if sub is None:
                    return f"no such command {name!r}"
                command, ctx = sub, sub.make_context(name or "", rest, parent=ctx)
            if ctx.args or getattr(ctx, "_protected_args", []):
                return f"unexpected extra arguments {ctx.args}"
    except typer.Exit:  # --help, --version: parsed, answered, done
        return None
    except exceptions.ClickException as exc:
        return exc.format_message().splitlines()[0]  # a missing command's "error" is the whole help
    return None


def slug(heading: str) -> str:
    """GitHub's anchor for a heading: markup dropped, lower case, punctuation gone, spaces → '-'."""
    text = re.sub(r"`([^`]*)`", r"\1", heading)
    text = re.sub(r"\[([^\]]*)\]\([^)]*\)", r"\1", text)
    return re.sub(r"[^\w\- ]", "", text.strip().lower()).replace(" ", "-")


def anchors(text: str) -> set[str]:
    """Every heading's anchor in a markdown text (a repeated one gets -1, -2 … as on GitHub)."""
    seen: dict[str, int] = {}
    out: set[str] = set()
    inside = False
    for line in text.splitlines():
        if _FENCE.match(line):
            inside = not inside
            continue
        m = None if inside else re.match(r"^#{1,6} (.+?)\s*#*$", line)
        if m:
            base = slug(m.group(1))
            n = seen.get(base, 0)
            out.add(base if n == 0 else f"{base}-{n}")
            seen[base] = n + 1
    return out


_LINK = re.compile(r"(?<!!)\[(?:[^\]]|\][^(])*?\]\(([^)\s]+)\)")


def links(text: str) -> list[tuple[int, str]]:
    """(line, target) of every inline link outside code blocks and code spans."""
    out: list[tuple[int, str]] = []
    inside = False
    for number, line in enumerate(text.splitlines(), start=1):
        if _FENCE.match(line):
            inside = not inside
            continue
        if inside:
            continue
        prose = re.sub(r"`[^`]*`", "", line)
        out += [(number, m.group(1)) for m in _LINK.finditer(prose)]
    return out


def broken_links(path: Path, text: str | None = None) -> list[str]:
    """`file:line: target` for each relative link whose file or #anchor is not there."""
    text = path.read_text(encoding="utf-8") if text is None else text
    bad = []
    for number, target in links(text):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target):  # https:, mailto:
            continue
        file_part, _, anchor = target.partition("#")
        dest = (path.parent / file_part).resolve() if file_part else path
        if file_part and not dest.exists():
            bad.append(f"{path.name}:{number}: {target} (no such file)")
        elif anchor and dest.suffix == ".md" and anchor not in anchors(dest.read_text(encoding="utf-8") if dest != path else text):
            bad.append(f"{path.name}:{number}: {target} (no such heading)")
    return bad
