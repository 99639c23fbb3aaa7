"""`qmd health`, `qmd updater status` and `qmd updater retry` with a state folder this user may
not read (`sudo -u alice qmd health` with another's state dir, a mode): the health flag cannot
be known, which health says in one line naming the chmod (exit 1; `--json` still prints the
state), status lists as a problem, and retry refuses (all four crashed with exit 3)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modes import moded
from tests.support.modes import qmd_bound as qmd


@pytest.fixture
def unreadable_state(state: Path) -> Iterator[Path]:
    for name in ("failures", "queue/new", "queue/failed"):
        (state / name).mkdir(parents=True)
    with moded(state, 0o000, 0o755):
        yield state


def no_crash(err: str) -> None:
    assert "Traceback" not in err and "bug" not in err and "Unexpected" not in err, err


def test_health_says_the_state_cannot_be_read_and_names_the_chmod(unreadable_state: Path, tmp_path: Path) -> None:
    code, out, err = qmd("health", cwd=tmp_path)
    assert code == 1, (code, out, err)
    no_crash(err)
    assert "problem:" in out and "not raised, but the harness is broken" in out, out
    assert f"chmod u+rwx {unreadable_state}" in err, err
    code, out, err = qmd("health", "--json", cwd=tmp_path)
    assert code == 1, (code, out, err)
    no_crash(err)
    snap = json.loads(out)
    assert snap["problems"] and str(unreadable_state) in snap["problems"][0], snap
    code, out, err = qmd("health", "--session-start", cwd=tmp_path)
    assert code == 0 and out.startswith("qmd: the index freshness harness is broken"), (code, out, err)


def test_updater_status_lists_the_unreadable_state_and_retry_refuses_in_one_line(unreadable_state: Path, tmp_path: Path) -> None:
    code, out, err = qmd("updater", "status", cwd=tmp_path)
    assert code == 0, (code, out, err)
    no_crash(err)
    assert f"problem: cannot read {unreadable_state}: Permission denied" in out, out
    code, out, err = qmd("updater", "retry", cwd=tmp_path)
    assert code == 1, (code, out, err)
    no_crash(err)
    assert f"chmod u+rwx {unreadable_state}" in err and len(err.strip().splitlines()) == 2, err


def test_updater_run_in_a_state_folder_it_may_not_write_names_the_chmod_not_a_move(state: Path, tmp_path: Path) -> None:
    """A read-only state folder: the lock cannot be made there. The hint was `mv updater.lock
    …moved-aside` for a file that does not exist (and could not be moved in that folder)."""
    state.mkdir(parents=True, exist_ok=True)
    state.chmod(0o500)
    try:
        code, out, err = qmd("updater", "run", cwd=tmp_path)
    finally:
        state.chmod(0o755)
    assert code == 1, (code, out, err)
    no_crash(err)
    assert "cannot take the updater lock" in err and f"chmod u+rwx {state}" in err and "moved-aside" not in err, err
