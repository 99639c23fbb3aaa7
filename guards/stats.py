"""Reading the block log back: records, a summary (by rule, by day, retries, top commands), and text."""

from __future__ import annotations

import json
import os
import time
from collections import Counter
from typing import Any

from .blocklog import parse_ts
from .paths import BLOCKS, guard_file


def records(path: str | None = None) -> list[dict[str, Any]]:
    """Every block record, oldest first (the rotated `.1` file, then the current one); bad lines skipped."""
    path = path or guard_file(BLOCKS)
    out: list[dict[str, Any]] = []
    for name in (path + ".1", path):
        try:
            with open(name, encoding="utf-8", errors="replace") as fh:
                for line in fh:
                    try:
                        record = json.loads(line)
                    except ValueError:
                        continue
                    if isinstance(record, dict):
                        out.append(record)
        except FileNotFoundError:
            continue
    return out


def call_text(record: dict[str, Any]) -> str:
    """One line naming what was blocked: the command, or the tool and its pattern/path."""
    data = record.get("input")
    if isinstance(data, dict) and isinstance(data.get("command"), str):
        return " ".join(data["command"].split())
    if isinstance(data, dict):
        parts = [f"{k}={data[k]}" for k in ("pattern", "path", "glob", "type") if data.get(k)]
        return f"{record.get('tool')} " + " ".join(parts)
    return str(record.get("tool"))


def summarize(items: list[dict[str, Any]], days: int | None = None, now: float | None = None, top: int = 10) -> dict[str, Any]:
    """Counts by rule, by day (UTC), by folder; retries; the most blocked calls."""
    now = time.time() if now is None else now
    if days is not None:
        cutoff = now - days * 86400
        items = [r for r in items if (parse_ts(r.get("ts")) or 0) >= cutoff]
    retries = sum(1 for r in items if r.get("retry") is True)
    return {
        "total": len(items),
        "retries": retries,
        "sessions": len({r.get("session_id") for r in items}),
        "by_rule": dict(Counter(str(r.get("rule")) for r in items).most_common()),
        "by_day": dict(sorted(Counter(str(r.get("ts", ""))[:10] for r in items).items())),
        "by_folder": dict(Counter(str(r.get("folder")) for r in items).most_common()),
        "top_calls": [{"call": call, "count": n} for call, n in Counter(call_text(r) for r in items).most_common(top)],
    }


def render(summary: dict[str, Any]) -> str:
    """The summary as text for `qmd guard stats`."""
    total = summary["total"]
    if not total:
        return "No blocks logged yet.\n"
    rate = 100.0 * summary["retries"] / total
    lines = [f"{total} blocks in {summary['sessions']} sessions; {summary['retries']} retries ({rate:.0f}%: the same call again within 10 minutes)", ""]
    lines.append("by rule:")
    lines += [f"  {n:6d}  {rule}" for rule, n in summary["by_rule"].items()]
    lines.append("by day (UTC):")
    lines += [f"  {n:6d}  {day}" for day, n in summary["by_day"].items()]
    lines.append("by knowledge folder:")
    lines += [f"  {n:6d}  {folder}" for folder, n in summary["by_folder"].items()]
    lines.append("most blocked calls:")
    lines += [f"  {item['count']:6d}  {item['call'][:150]}" for item in summary["top_calls"]]
    return "\n".join(lines) + "\n"


def render_line(record: dict[str, Any]) -> str:
    """One block record as a log line: time, rule, retry mark, cwd, call."""
    retry = " retry" if record.get("retry") else ""
    cwd = record.get("cwd") or ""
    home = os.path.expanduser("~")
    if isinstance(cwd, str) and cwd.startswith(home + "/"):
        cwd = "~" + cwd[len(home) :]
    return f"{record.get('ts', '?')}  {record.get('rule', '?')}{retry}  {cwd}  {call_text(record)[:200]}"
