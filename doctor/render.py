"""One renderer for doctor's results: text (✓/⚠/✗ lines, then "Next steps") or JSON."""

from __future__ import annotations

import json

from qmd import harness

from .results import CheckResult, Status, exit_code, worst
from .runner import TITLES, Report

MARKS = {Status.OK: "✓", Status.WARN: "⚠", Status.FAIL: "✗"}
SCHEMA_VERSION = 1


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


def _line(r: CheckResult) -> list[str]:
    lines = [f"  {MARKS[r.status]} {r.name}: {r.detail}  ({r.ms:.0f} ms)"]
    if r.repaired:
        lines.append(f"      repaired: {r.repaired}")
    if r.status is not Status.OK and r.fix:
        lines.append(f"      fix: {r.fix}")
    return lines


def as_text(report: Report, strict: bool) -> str:
    out = [f"qmd doctor (build {harness.build_id()})"]
    group = None
    for r in report.results:
        if r.group != group:
            group = r.group
            out.append(f"\n{TITLES.get(group, group)}")
        out += _line(r)
    counts = {s: sum(1 for r in report.results if r.status is s) for s in Status}
    steps = [r for r in report.results if r.status is not Status.OK]
    if steps:
        out.append("\nNext steps:")
        for n, r in enumerate(sorted(steps, key=lambda r: -r.status.rank), 1):
            out.append(f"  {n}. {r.fix or 'see above'}   # {r.name}")
    out.append(
        f"\n{counts[Status.OK]} ok, {counts[Status.WARN]} warning(s), {counts[Status.FAIL]} failed in {report.seconds:.1f}s"
        + (" (warnings fail under --strict)" if strict and counts[Status.WARN] else "")
    )
    return "\n".join(out)


def render(report: Report, as_json_: bool, strict: bool) -> str:
    return json.dumps(as_json(report, strict), indent=2, ensure_ascii=False) if as_json_ else as_text(report, strict)
