"""A check's result as data (design §4.10): one renderer prints it, the exit code is the worst status."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from enum import Enum


class Status(str, Enum):
    OK = "ok"
    WARN = "warn"
    FAIL = "fail"

    @property
    def rank(self) -> int:
        return {"ok": 0, "warn": 1, "fail": 2}[self.value]


Repair = Callable[[], str]  # does the repair, returns what it did; raises QmdError when it cannot


@dataclass
class CheckResult:
    """One finding: `fix` is a command a person can run; `repair` is what `--fix` runs."""

    name: str
    status: Status
    detail: str
    fix: str | None = None
    ms: float = 0.0
    group: str = ""
    repaired: str | None = None  # what --fix did (or tried) for this check
    repair: Repair | None = field(default=None, repr=False, compare=False)

    def as_dict(self) -> dict[str, object]:
        return {
            "group": self.group, "name": self.name, "status": self.status.value, "detail": self.detail,
            "fix": self.fix, "ms": round(self.ms, 1), "repaired": self.repaired,
        }


def ok(name: str, detail: str, fix: str | None = None, *, ms: float = 0.0, repair: Repair | None = None) -> CheckResult:
    """A passed check (`fix` is still shown in --json when given)."""
    return CheckResult(name, Status.OK, detail, fix, ms=ms, repair=repair)


def warn(name: str, detail: str, fix: str | None = None, *, ms: float = 0.0, repair: Repair | None = None) -> CheckResult:
    """A warning: exit 0 unless --strict; `fix` names the command, `repair` is what --fix runs."""
    return CheckResult(name, Status.WARN, detail, fix, ms=ms, repair=repair)


def fail(name: str, detail: str, fix: str | None = None, *, ms: float = 0.0, repair: Repair | None = None) -> CheckResult:
    """A failed check: doctor exits 2; `fix` names the command, `repair` is what --fix runs."""
    return CheckResult(name, Status.FAIL, detail, fix, ms=ms, repair=repair)


class Clock:
    """`with Clock() as c: ...; c.ms` — a check's own time."""

    def __enter__(self) -> Clock:
        self.start = time.perf_counter()
        return self

    def __exit__(self, *exc: object) -> None:
        pass

    @property
    def ms(self) -> float:
        return (time.perf_counter() - self.start) * 1000


def worst(results: list[CheckResult]) -> Status:
    return max((r.status for r in results), key=lambda s: s.rank, default=Status.OK)


def exit_code(results: list[CheckResult], strict: bool) -> int:
    """0 no failures (warnings allowed), 1 warnings under --strict, 2 a failed check."""
    status = worst(results)
    if status is Status.FAIL:
        return 2
    return 1 if status is Status.WARN and strict else 0
