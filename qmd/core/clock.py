"""Timestamps as every qmd file writes them (`2026-01-02T03:04:05Z`, UTC) and ages for people."""

from __future__ import annotations

import time


def now_iso(t: float | None = None, *, millis: bool = False) -> str:
    """UTC time as `2026-01-02T03:04:05Z` (`millis`: `…05.678Z`); `t` defaults to now."""
    t = time.time() if t is None else t
    base = time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(t))
    return base + (f".{int(t * 1000) % 1000:03d}Z" if millis else "Z")


def _days_from_civil(year: int, month: int, day: int) -> int:
    """Days from 1970-01-01 to a proleptic Gregorian date (H. Hinnant's `days_from_civil`)."""
    year -= month <= 2
    era = year // 400
    yoe = year - era * 400
    doy = (153 * (month + (-3 if month > 2 else 9)) + 2) // 5 + day - 1
    return era * 146097 + yoe * 365 + yoe // 4 - yoe // 100 + doy - 719468


_MONTH_DAYS = (31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31)


def _canonical(text: str) -> float | None:
    """`parse_iso` of the form qmd writes (`now_iso`: `2026-01-02T03:04:05Z`, `…05.678Z`)
    without the datetime module (2 ms of import on every MCP answer's freshness); None for
    any other form, which datetime then reads."""
    if len(text) not in (20, 24) or not text.isascii() or text[-1] != "Z" or text[4] + text[7] + text[10] + text[13] + text[16] != "--T::":
        return None
    parts = (text[0:4], text[5:7], text[8:10], text[11:13], text[14:16], text[17:19], text[20:23] if len(text) == 24 else "0")
    if (len(text) == 24 and text[19] != ".") or not all(p.isdigit() for p in parts):
        return None
    year, month, day, hour, minute, second, millis = map(int, parts)
    leap = year % 4 == 0 and (year % 100 != 0 or year % 400 == 0)
    if not (year and 1 <= month <= 12 and 1 <= day <= _MONTH_DAYS[month - 1] + (month == 2 and leap) and hour < 24 and minute < 60 and second < 60):
        return None
    seconds = _days_from_civil(year, month, day) * 86400 + hour * 3600 + minute * 60 + second
    return (seconds * 10**6 + millis * 1000) / 10**6  # as datetime.timestamp() divides: the same float


def parse_iso(text: object) -> float | None:
    """Seconds since the epoch for an ISO-8601 string (a naive one is UTC); None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    fast = _canonical(text)
    if fast is not None:
        return fast
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
