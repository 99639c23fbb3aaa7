"""doctor's updater checks: the health flag's words; where no systemd user manager answers (a
container, WSL: a fake `systemctl` failing as there, or none on PATH) and where one does."""

from __future__ import annotations

import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import BUS_ERROR, fake_systemctl

QMD = str(Path(sys.executable).absolute().parent / "qmd")
pytestmark = [pytest.mark.usefixtures("in_home"), pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux's")]
Cli = Callable[..., tuple[int, str, str]]


def _checks() -> dict[str, tuple[str, str, str | None]]:
    """{name: (status, detail, fix)} of doctor's queue and services groups, run here."""
    from doctor import queue, services
    from doctor.context import Context

    ctx = Context.create(None)
    return {r.name: (r.status.value, r.detail, r.fix) for r in queue.check(ctx) + services.check(ctx)}


@pytest.mark.parametrize("kind", ["container", "absent"])
def test_without_systemd_doctor_says_so_and_recommends_what_works(cli: Cli, indexed: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:
    assert cli("hooks", "install", str(indexed))[0] == 0  # enrolled: something must drain its requests
    fake_systemctl(tmp_path, monkeypatch, kind)
    reason = BUS_ERROR if kind == "container" else "systemctl is not on PATH"
    checks = _checks()
    status, detail, fix = checks["updater"]
    assert status == "warn" and fix is not None
    assert f"{QMD} updater daemon" in fix and "*/2 * * * * " in fix and "install-service" not in fix and "systemctl" not in fix
    status, detail, fix = checks["updater service"]
    assert status == "ok" and "no systemd user manager here" in detail and reason in detail and "install-service" not in detail

    code, out, err = cli("updater", "install-service", "--no-start")  # files written for elsewhere: installed, never runs here
    assert code == 0, err
    status, detail, fix = _checks()["updater service"]
    assert status == "warn" and "qmd-updater.service is installed but no systemd user manager here" in detail and reason in detail
    assert fix is not None and f"{QMD} updater daemon" in fix and "systemctl" not in fix


def test_with_systemd_doctor_checks_the_unit_as_before(cli: Cli, indexed: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("hooks", "install", str(indexed))[0] == 0
    log = fake_systemctl(tmp_path, monkeypatch, "running")
    checks = _checks()
    assert checks["updater"][0] == "warn" and checks["updater"][2] == "qmd updater install-service"
    assert checks["updater service"][:2] == ("ok", "no systemd user unit installed (optional: qmd updater install-service)")
    assert cli("updater", "install-service")[0] == 0
    assert _checks()["updater service"][:2] == ("ok", "qmd-updater.service active")
    assert "--user is-active qmd-updater.service" in log.read_text().splitlines()


def test_the_health_flag_reads_not_raised_or_raised_with_its_cause(state: Path) -> None:
    """"down" read as an outage: the flag is "not raised", or "raised" with the failure behind it."""
    from qmd import harness
    from updater import records

    status, detail, _ = _checks()["health flag"]
    assert status == "ok" and detail.startswith("not raised; ") and "down" not in detail
    layout = harness.StateLayout(state)
    records.Ledger(layout).record_failure("/srv/notes", "index", ["notes"], "embed", "the embed model file /m/x.gguf does not exist", "fix QMD_EMBED_MODEL")
    records.write_health(layout)
    status, detail, _ = _checks()["health flag"]
    assert status == "fail" and detail.startswith("raised since ") and "/m/x.gguf does not exist" in detail
