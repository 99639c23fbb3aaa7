"""One renderer for doctor's results: text (✓/⚠/✗ lines, then "Next steps") or JSON.

On a terminal the marks are coloured (none with NO_COLOR set or TERM=dumb) and lines longer
than its width wrap at spaces, each continuation indented under its line's text; output
to a pipe or a file is plain and unwrapped (one line per check, for grep), unless COLUMNS
asks for a width.
"""

from __future__ import annotations

import json
import os
import shutil
import textwrap
from dataclasses import dataclass
from typing import TextIO

from qmd import harness

from .results import CheckResult, Status, exit_code, worst
from .runner import TITLES, Report

MARKS = {Status.OK: "✓", Status.WARN: "⚠", Status.FAIL: "✗"}
COLOURS = {Status.OK: "32", Status.WARN: "33", Status.FAIL: "31"}  # green, yellow, red
SCHEMA_VERSION = 1
KEEP = "\u00a0"
MIN_WIDTH = 40  # narrower terminals get lines this long rather than a word a line


@dataclass(frozen=True)
class Style:
    """How the text is laid out: `width` to wrap at (None: never), `colour` for the marks."""

    width: int | None = None
    colour: bool = False

    @classmethod
    def of(cls, stream: TextIO) -> Style:
        """The style for `stream`: a terminal's width and colours, plain for anything else."""
        try:
            tty = stream.isatty()
        except (AttributeError, ValueError):
            tty = False
        colour = tty and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        width = max(MIN_WIDTH, shutil.get_terminal_size().columns) if tty or os.environ.get("COLUMNS") else None
        return cls(width, colour)

    def wrap(self, text: str, first: str, rest: str) -> list[str]:
        """`first` + `text`, wrapped at spaces into lines of at most `width` (continuations
        start with `rest`); a word longer than a whole line is cut, nothing else. A no-break
        space (KEEP) holds two words together and prints as a space."""
        if self.width is None:
            return [(first + text).replace(KEEP, " ")]
        lines = textwrap.wrap(text, self.width, initial_indent=first, subsequent_indent=rest, break_on_hyphens=False) or [first.rstrip()]
        return [line.replace(KEEP, " ") for line in lines]

    def mark(self, status: Status) -> str:
        return f"\x1b[{COLOURS[status]}m{MARKS[status]}\x1b[0m" if self.colour else MARKS[status]


def as_json(report: Report, strict: bool) -> dict[str, object]:
    """The documented shape (docs/harness.md, "Doctor")."""
    return {
        "version": SCHEMA_VERSION,
        "status": worst(report.results).value,
        "exit_code": exit_code(report.results, strict),
        "build_id": harness.build_id(),
        "seconds": round(report.seconds, 3),
        "checks": [r.as_dict() for r in report.results],
    }


def _line(r: CheckResult, style: Style) -> list[str]:
    lines = style.wrap(f"{r.name}: {r.detail}  ({r.ms:.0f}{KEEP}ms)", f"  {MARKS[r.status]} ", " " * 6)
    lines[0] = lines[0].replace(MARKS[r.status], style.mark(r.status), 1)  # colour after measuring
    if r.repaired:
        lines += style.wrap(r.repaired, "      repaired: ", " " * 16)
    if r.status is not Status.OK and r.fix:
        lines += style.wrap(r.fix, "      fix: ", " " * 11)
    return lines


def as_text(report: Report, strict: bool, style: Style = Style()) -> str:
    out = [f"qmd doctor (build {harness.build_id()})"]
    group = None
    for r in report.results:
        if r.group != group:
            group = r.group
            out.append(f"\n{TITLES.get(group, group)}")
        out += _line(r, style)
    counts = {s: sum(1 for r in report.results if r.status is s) for s in Status}
    steps = [r for r in report.results if r.status is not Status.OK]
    if steps:
        out.append("\nNext steps:")
        for n, r in enumerate(sorted(steps, key=lambda r: -r.status.rank), 1):
            out += style.wrap(f"{r.fix or 'see above'}   # {r.name}", f"  {n}. ", " " * 5)
    summary = f"{counts[Status.OK]} ok, {counts[Status.WARN]} warning(s), {counts[Status.FAIL]} failed in {report.seconds:.1f}s"
    out.append("")
    out += style.wrap(summary + (" (warnings fail under --strict)" if strict and counts[Status.WARN] else ""), "", "")
    return "\n".join(out)


def render(report: Report, as_json_: bool, strict: bool, style: Style = Style()) -> str:
    return json.dumps(as_json(report, strict), indent=2, ensure_ascii=False) if as_json_ else as_text(report, strict, style)
