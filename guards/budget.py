"""The work limits of one decision: a wall-clock deadline, a work budget and a glob budget.

`decide` opens one `Work` per decision (`begin`/`end`; a nested `commands()` call shares it).
Word expansion, the shell reader and evaluation `charge` it for what they build (characters
of values and words, list entries, copies of the shell state) and `check` the deadline in
their loops; past the deadline or the budget they raise `Exhausted`, and the decision falls
back to `fallback.judge`, a cheap conservative judgement. Limits that only skip a part of
the command (nesting depth, commands walked, characters lexed, function calls) mark the work
`incomplete` instead: a decision that found no sweep in what it read then falls back too.

Wildcards are expanded by `iglob`, which pays for every folder it lists out of the call's
glob budget and raises `GlobSpent` once that is spent (its caller then judges the wildcard
without expanding it). It walks iteratively, so a pattern of a thousand `*/` cannot overflow
the stack.
"""

from __future__ import annotations

import os
import time

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Iterator

    from .command import Command
    from .model import Search

DEADLINE_S = 2.0  # the hook runs under a 5 s timeout that lets the command run when it kills the guard
MAX_WORK = 32 << 20  # ~characters (and 8 per list entry) one decision may build while reading a command
MAX_LEXED = 6 * 64 * 1024  # characters the shell reader may lex in one decision (the outer command counts too)
MAX_GLOB = 2000  # folders listed (plus one per 16 names read) by all the wildcards of one decision


class Exhausted(Exception):
    """The decision ran past its deadline or its work budget."""


class GlobSpent(Exception):
    """A wildcard could not be expanded within the decision's glob budget."""


class Work:
    """What one decision has spent, and what the fallback judgement needs to know."""

    __slots__ = ("deadline", "left", "glob_left", "lexed", "incomplete", "walked", "searches", "judged", "seen")

    def __init__(self, seconds: float) -> None:
        self.deadline = time.monotonic() + seconds
        self.left = MAX_WORK
        self.glob_left = MAX_GLOB
        self.lexed = 0
        self.incomplete = ""  # why a part of the command was not read ("" when all of it was)
        self.walked = False  # every command of the call has been read and its searches found
        self.searches: list[Search] = []  # the searches found (once walked)
        self.judged = 0  # how many of them evaluate has decided
        self.seen: list[Command] = []  # the simple commands read so far


_active: Work | None = None


def begin() -> Work | None:
    """Open the decision's work; None when one is open already (a nested call shares it)."""
    global _active
    if _active is not None:
        return None
    _active = Work(DEADLINE_S)
    return _active


def end(work: Work | None) -> None:
    global _active
    if work is not None and _active is work:
        _active = None


def current() -> Work | None:
    return _active


def charge(amount: int) -> None:
    """Pay `amount` out of the work budget; raises Exhausted past it or past the deadline."""
    work = _active
    if work is None:
        return
    work.left -= amount
    if work.left < 0 or time.monotonic() > work.deadline:
        raise Exhausted("work budget spent" if work.left < 0 else "deadline passed")


def check() -> None:
    """Raise Exhausted once the deadline has passed."""
    work = _active
    if work is not None and time.monotonic() > work.deadline:
        raise Exhausted("deadline passed")


def skipped(why: str) -> None:
    """A bound made the reader skip a part of the command: the decision cannot rest on the rest."""
    work = _active
    if work is not None and not work.incomplete:
        work.incomplete = why


def lex(size: int) -> bool:
    """May the reader lex `size` more characters? (The decision's first text always may.)"""
    work = _active
    if work is None:
        return True
    if work.lexed and work.lexed + size > MAX_LEXED:
        skipped("lexing budget")
        return False
    work.lexed += size
    charge(size)
    return True


def seen(command: Command) -> None:
    if _active is not None:
        _active.seen.append(command)


# -- bounded wildcards --------------------------------------------------------------------------
def _magic(part: str) -> bool:
    return "*" in part or "?" in part or "[" in part


def _join(base: str, name: str) -> str:
    return base + name if not base or base.endswith("/") else base + "/" + name


class _Spend:
    """The glob budget: the decision's, or (outside a decision) one of this expansion's own."""

    def __init__(self) -> None:
        self.own = MAX_GLOB

    def __call__(self, amount: int) -> None:
        work = _active
        if work is not None:
            work.glob_left -= amount
            left = work.glob_left
            check()
        else:
            self.own -= amount
            left = self.own
        if left < 0:
            raise GlobSpent()


def _names(base: str, part: str | None, dirs_only: bool, spend: _Spend) -> list[str]:
    """Names in folder `base` matching `part` (every name when None), hidden ones only for a
    part that starts with `.` (as glob does); paid for out of the glob budget."""
    from fnmatch import fnmatchcase

    spend(1)
    out: list[str] = []
    hidden = part is not None and part.startswith(".")
    try:
        with os.scandir(base or ".") as entries:
            for k, entry in enumerate(entries):
                if k % 16 == 15:
                    spend(1)
                name = entry.name
                if (name.startswith(".") and not hidden) or (part is not None and not fnmatchcase(name, part)):
                    continue
                try:
                    if dirs_only and not entry.is_dir():
                        continue
                except OSError:
                    continue
                out.append(name)
    except OSError:
        return []
    return out


def iglob(pattern: str) -> Iterator[str]:
    """The paths `glob.iglob(pattern, recursive=True)` yields (in another order), paid for out of
    the glob budget (a folder listed costs 1, and 1 more per 16 names read); raises GlobSpent
    when it is spent."""
    spend = _Spend()
    absolute = pattern.startswith("/")
    parts = pattern.lstrip("/").split("/") if absolute else pattern.split("/")
    last = len(parts) - 1
    stack: list[tuple[str, int]] = [("/" if absolute else "", 0)]
    while stack:
        base, i = stack.pop()
        part = parts[i]
        if part == "**":  # no folder or any number of them
            if i == last:
                yield base or "."
            else:
                stack.append((base, i + 1))
            for name in reversed(_names(base, None, i < last, spend)):
                child = _join(base, name)
                if i < last or os.path.isdir(child):
                    stack.append((child, i))
                else:
                    yield child
        elif i == last:
            if not part:  # a trailing `/`: the folder itself
                if os.path.isdir(base or "."):
                    yield base
            elif not _magic(part):
                if os.path.lexists(_join(base, part)):
                    yield _join(base, part)
            else:
                for name in _names(base, part, False, spend):
                    yield _join(base, name)
        elif not part:
            stack.append((base, i + 1))
        elif not _magic(part):
            stack.append((_join(base, part), i + 1))
        else:
            stack.extend((_join(base, name), i + 1) for name in reversed(_names(base, part, True, spend)))
