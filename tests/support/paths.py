"""Where the tests find the checkout and the shared benchmark data."""

from __future__ import annotations

import os
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
BENCH_DATA = Path(os.environ.get("QMD_BENCH_DATA", REPO.parent / "shared" / "benchmarks"))
REFERENCE = BENCH_DATA.parent / "reference-outputs"
