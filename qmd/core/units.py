"""Numbers for people: sizes (`313.4 MB`) and durations (`4m 20s`)."""

from __future__ import annotations


def human_size(n: int) -> str:
    """`512 B`, `1.2 KB`, `313.4 MB`, `2.0 GB`."""
    if n < 1024:
        return f"{n} B"
    size = float(n)
    for unit in ("KB", "MB", "GB"):
        size /= 1024
        if size < 1024 or unit == "GB":
            return f"{size:.1f} {unit}"
    return f"{n} B"  # pragma: no cover


def duration(seconds: float) -> str:
    """`12s`, `4m 20s`, `1h 05m` (negative counts as 0)."""
    s = max(0, int(seconds))
    if s >= 3600:
        return f"{s // 3600}h {s % 3600 // 60:02d}m"
    if s >= 60:
        return f"{s // 60}m {s % 60:02d}s"
    return f"{s}s"
