"""Counters kept across runs (`<state>/updater/stats.json`): for `qmd updater status` and doctor."""

from __future__ import annotations

from typing import Any

from qmd import harness


def load(layout: harness.StateLayout) -> dict[str, Any]:
    data = harness.read_json(layout.stats)
    base: dict[str, Any] = {"runs": 0, "documents_updated": 0, "chunks_embedded": 0, "last_run": None}
    if isinstance(data, dict):
        base.update({k: v for k, v in data.items() if k in base})
    return base


def add_run(layout: harness.StateLayout, run: dict[str, Any]) -> dict[str, Any]:
    """Fold one run into the counters (the lock holder only)."""
    data = load(layout)
    data["runs"] += 1
    data["documents_updated"] += int(run.get("documents_updated") or 0)
    data["chunks_embedded"] += int(run.get("chunks_embedded") or 0)
    data["last_run"] = run
    harness.write_json(layout.stats, data, sort_keys=True)
    return data
