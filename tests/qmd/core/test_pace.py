"""The time left of a long job (qmd.core.pace.Eta), on a simulated clock: no estimate until
enough work is done to make one, then an estimate that settles on the truth."""

from __future__ import annotations

import random

import pytest

from qmd.core.pace import Eta, progress_interval


def _run(pace: list[tuple[float, float]], batch: float, total: float, seed: int = 1) -> list[tuple[float, float, float | None]]:
    """Feed an Eta a job done in batches of about `batch` units: `pace` is [(until_done, units/s)],
    each batch's time jittered ±30%. Returns (done, true seconds left, estimate) per update."""
    rng = random.Random(seed)

    def rate(done: float) -> float:
        return next(r for until, r in pace if done < until)

    # the true time of every batch, known in advance, so "seconds left" is exact
    steps: list[tuple[float, float]] = []  # (done after, seconds it took)
    done = 0.0
    while done < total:
        size = min(batch * rng.uniform(0.5, 1.5), total - done)
        steps.append((done + size, size / rate(done) * rng.uniform(0.7, 1.3)))
        done += size
    eta = Eta(total, started=100.0)
    now, out = 100.0, []
    for i, (done, took) in enumerate(steps):
        now += took
        left = sum(t for _, t in steps[i + 1 :])
        out.append((done, left, eta.update(done, now)))
    return out


def test_no_estimate_until_enough_work_is_done() -> None:
    slow = Eta(10_000, started=0.0)
    assert slow.update(100, 10.0) is None  # 1% done: too little to say
    assert slow.update(250, 20.0) == pytest.approx(9_750 / (250 / 20))  # 2.5% after 20 s: the pace so far (the window is 30 s)
    fast = Eta(10_000, started=0.0)
    assert fast.update(5_000, 1.0) is None  # half done after a second: still too soon to trust
    assert fast.update(6_000, 6.0) is not None


def test_the_estimate_settles_on_the_truth_after_a_slow_start() -> None:
    total = 500_000.0  # tokens
    # the first 3% at a fifth of the speed (a model warming up, a first large file), then steady
    updates = _run([(0.03 * total, 200.0), (float("inf"), 1000.0)], batch=4_000, total=total)
    estimates = [(done / total, left, est) for done, left, est in updates if est is not None]
    assert estimates and estimates[0][0] >= Eta.MIN_SHARE
    for share, left, est in estimates:
        if share >= 0.25 and left > 60:
            assert est == pytest.approx(left, rel=0.2), (share, left, est)
    late = [abs(est - left) / left for share, left, est in estimates if share >= 0.5 and left > 60]
    early = [abs(est - left) / left for share, left, est in estimates if 0.1 <= share < 0.2]
    assert max(late) < max(early) and max(late) < 0.12


def test_the_estimate_follows_a_pace_that_changes_for_good() -> None:
    total = 1_000_000.0
    updates = _run([(0.4 * total, 1000.0), (float("inf"), 500.0)], batch=5_000, total=total, seed=3)  # the machine got busy
    at = {round(done / total, 2): (left, est) for done, left, est in updates}
    share = max(s for s in at if s <= 0.8)
    left, est = at[share]
    assert est is not None and est == pytest.approx(left, rel=0.15)


def test_progress_interval_reads_qmd_progress_s(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_PROGRESS_S", "2.5")
    assert progress_interval() == 2.5
    for bad in ("soon", "-1", "nan"):
        monkeypatch.setenv("QMD_PROGRESS_S", bad)
        assert progress_interval() == 10.0
