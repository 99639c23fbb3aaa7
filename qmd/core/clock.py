"""Timestamps as every qmd file writes them (`2026-01-02T03:04:05Z`, UTC) and ages for people."""

from __future__ import annotations

import time


def now_iso(t: float | None = None, *, millis: bool = False) -> str:
    """UTC time as `2026-01-02T03:04:05Z` (`millis`: `…05.678Z`); `t` defaults to now."""
    t = time.time() if t is None else t
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return base + (f".{int(t * 1000) % 1000:03d}Z" if millis else "Z")


def parse_iso(text: object) -> float | None:
    """Seconds since the epoch for an ISO-8601 string (a naive one is UTC); None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    from datetime import datetime, timezone

    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def age(seconds: float) -> str:
    """`42s`, `5m`, `3h`, `2d`: a rough duration for people (negative counts as 0)."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def ago(iso: str | None, now: float | None = None) -> str:
    """`4m ago` for an ISO-8601 timestamp; `never` when there is none."""
    then = parse_iso(iso)
    if then is None:
        return "never"
    return age((time.time() if now is None else now) - then) + " ago"
