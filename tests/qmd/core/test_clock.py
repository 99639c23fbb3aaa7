"""qmd's timestamps (qmd/core/clock.py): the form qmd writes is read without datetime, to the same float."""

from __future__ import annotations

import random
import subprocess
import sys
from datetime import datetime, timedelta, timezone

import pytest

from qmd.core.clock import now_iso, parse_iso


def reference(text: str) -> float | None:
    """What parse_iso always answered: datetime's reading (a naive time is UTC)."""
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return (value if value.tzinfo else value.replace(tzinfo=timezone.utc)).timestamp()


def test_qmds_own_form_reads_as_datetime_reads_it() -> None:
    rng = random.Random(31)
    start = datetime(1, 1, 1, tzinfo=timezone.utc)
    for _ in range(20_000):
        d = start + timedelta(seconds=rng.randrange(0, 315_537_897_599))
        whole = f"{d.year:04d}-{d.month:02d}-{d.day:02d}T{d.hour:02d}:{d.minute:02d}:{d.second:02d}"
        for text in (whole + "Z", f"{whole}.{rng.randrange(1000):03d}Z"):
            assert parse_iso(text) == reference(text), text
    for t in (0.0, 951_782_400.0, 1_709_164_800.5, 4_102_444_800.999):
        assert parse_iso(now_iso(t)) == reference(now_iso(t)) and parse_iso(now_iso(t, millis=True)) == reference(now_iso(t, millis=True))


@pytest.mark.parametrize("text", [
    "2024-02-29T00:00:00Z", "2026-02-29T00:00:00Z", "1900-02-29T00:00:00Z", "2000-02-29T12:00:00Z", "2026-04-31T00:00:00Z",
    "2026-13-01T00:00:00Z", "2026-01-01T24:00:00Z", "2026-01-01T00:60:00Z", "2026-01-01T00:00:60Z", "0000-01-01T00:00:00Z",
    "２026-01-01T00:00:00Z", "+026-01-01T00:00:00Z", "2026-1_-01T00:00:00Z", "2026-01-01 00:00:00Z", "2026-01-01T00:00:00,123Z",
    "2026-01-01T00:00:00.1234", "2026-01-01T00:00:00+02:00", "2026-01-01T00:00:00", "2026-01-01", "garbage", "",
])
def test_every_other_form_still_reads_as_datetime_reads_it(text: str) -> None:
    assert parse_iso(text) == reference(text)


def test_reading_qmds_form_imports_no_datetime() -> None:
    code = "import sys\nfrom qmd.core.clock import ago, parse_iso\nassert parse_iso('2026-01-02T03:04:05.678Z') and ago('2026-01-02T03:04:05Z')\nprint('datetime' in sys.modules)"
    assert subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip() == "False"
