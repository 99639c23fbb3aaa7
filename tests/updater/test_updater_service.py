"""`qmd updater install-service`: the units it prints and writes; where no systemd user manager
answers (a container, WSL: a fake `systemctl` failing as there, or none on PATH) it writes
nothing and says what works instead; a fake one that answers shows the calls it gets."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import BUS_ERROR, fake_systemctl, queue_files


QMD = str(Path(sys.executable).absolute().parent / "qmd")


def _units(text: str) -> dict[str, str]:
    """Split --print output into {path: unit text}."""
    out: dict[str, str] = {}
    current = None
    for line in text.splitlines(keepends=True):
        if line.startswith("# /"):
            current = line[2:].strip()
            out[current] = ""
        elif current and not line.startswith("# note"):
            out[current] += line
    return {k: v.rstrip("\n") + "\n" for k, v in out.items()}


def _verify(folder: Path) -> None:
    """systemd-analyze verify where it exists and can run (it needs no running systemd)."""
    if shutil.which("systemd-analyze") is None:
        return
    proc = subprocess.run(["systemd-analyze", "verify", *map(str, sorted(folder.iterdir()))], capture_output=True, text=True, timeout=60)
    if proc.returncode != 0 and "Failed to initialize manager" in proc.stderr:
        pytest.skip(f"systemd-analyze cannot run here: {proc.stderr.strip()}")
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.strip() == "", proc.stderr  # no warnings either


def test_print_shows_a_systemd_user_service(cli, state: Path, isolated_home: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("updater", "install-service", "--print", "--platform", "linux")
    assert code == 0, err
    [(path, text)] = _units(out).items()
    assert path == str(isolated_home / ".config" / "systemd" / "user" / "qmd-updater.service")
    assert f"ExecStart={QMD} updater daemon\n" in text
    for line in ("Restart=on-failure", "RestartSec=2", "WantedBy=default.target", "Nice=10", f"Environment=QMD_STATE_DIR={state}"):
        assert f"\n{line}\n" in text
    assert "loginctl enable-linger" in out
    assert not Path(path).exists()  # --print installs nothing
    folder = tmp_path / "units"
    folder.mkdir()
    (folder / "qmd-updater.service").write_text(text)
    _verify(folder)


def test_print_timer_variant(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("updater", "install-service", "--print", "--timer", "--interval", "5", "--platform", "linux")
    assert code == 0, err
    units = {Path(p).name: t for p, t in _units(out).items()}
    assert sorted(units) == ["qmd-updater.service", "qmd-updater.timer"]
    assert "Type=oneshot" in units["qmd-updater.service"]
    assert f"ExecStart={QMD} updater run --respect-backoff --if-idle\n" in units["qmd-updater.service"]
    assert "OnUnitInactiveSec=5min" in units["qmd-updater.timer"] and "WantedBy=timers.target" in units["qmd-updater.timer"]
    folder = tmp_path / "units"
    folder.mkdir()
    for name, text in units.items():
        (folder / name).write_text(text)
    _verify(folder)


def test_paths_with_spaces_and_percent_are_escaped(cli, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    odd = tmp_path / "my state 100%"
    monkeypatch.setenv("QMD_STATE_DIR", str(odd))
    code, out, _ = cli("updater", "install-service", "--print", "--platform", "linux")
    assert code == 0
    assert f'Environment="QMD_STATE_DIR={str(odd).replace("%", "%%")}"' in out
    folder = tmp_path / "units"
    folder.mkdir()
    [text] = _units(out).values()
    (folder / "qmd-updater.service").write_text(text)
    _verify(folder)


def test_print_shows_a_launch_agent(cli, state: Path, isolated_home: Path) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("updater", "install-service", "--print", "--platform", "macos")
    assert code == 0, err
    [(path, text)] = _units(out).items()
    assert path == str(isolated_home / "Library" / "LaunchAgents" / "dev.qmd.updater.plist")
    plist = plistlib.loads(text.encode())
    assert plist["ProgramArguments"] == [QMD, "updater", "daemon"] and os.path.isabs(plist["ProgramArguments"][0])
    assert plist["RunAtLoad"] is True and plist["KeepAlive"] == {"SuccessfulExit": False}
    assert plist["EnvironmentVariables"]["QMD_STATE_DIR"] == str(state) and str(Path(QMD).parent) in plist["EnvironmentVariables"]["PATH"]
    assert plist["StandardErrorPath"].startswith(str(state / "logs"))
    timer = plistlib.loads(_units(cli("updater", "install-service", "--print", "--timer", "--platform", "macos")[1]).popitem()[1].encode())
    assert timer["StartInterval"] == 120 and "KeepAlive" not in timer


def test_install_writes_the_unit_and_uninstall_removes_it(cli, state: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake_systemctl(tmp_path, monkeypatch, "running")
    code, out, err = cli("updater", "install-service", "--no-start", "--platform", "linux")
    assert code == 0, err
    unit = isolated_home / ".config" / "systemd" / "user" / "qmd-updater.service"
    assert unit.exists() and "to start it: systemctl --user daemon-reload" in out and "enable-linger" in out
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no systemctl to call: files only
    code, out, err = cli("updater", "uninstall-service", "--platform", "linux")
    assert code == 0, err
    assert f"removed {unit}" in out and not unit.exists()


def _cron_line(text: str, minutes: int = 2) -> str:
    [line] = [line.strip() for line in text.splitlines() if line.strip().startswith(f"*/{minutes} * * * * ")]
    return line


@pytest.mark.parametrize("kind", ["container", "absent"])
def test_without_a_systemd_user_manager_nothing_is_written_and_what_works_is_said(cli, state: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:  # type: ignore[no-untyped-def]
    log = fake_systemctl(tmp_path, monkeypatch, kind)
    for timer in ([], ["--timer"]):
        code, out, err = cli("updater", "install-service", "--platform", "linux", *timer)
        assert code == 1 and out == ""
        first = err.splitlines()[0]
        assert first.startswith("Error: no systemd user manager here") and "nothing was written" in first
        assert (BUS_ERROR if kind == "container" else "systemctl is not on PATH") in first
        assert f"\n      QMD_STATE_DIR={state} {QMD} updater daemon\n" in err  # the foreground command, on a line of its own
        assert f" {QMD} updater run --respect-backoff --if-idle" in _cron_line(err)
        assert "the git hooks" in err and "qmd updater run" in err
        assert "systemctl --user enable" not in err
        assert not (isolated_home / ".config" / "systemd").exists()  # nothing half-written
    code, _, err = cli("updater", "install-service", "--platform", "linux", "--watch", "--interval", "5")
    assert code == 1 and f"QMD_STATE_DIR={state} {QMD} updater daemon --watch\n" in err and _cron_line(err, 5)
    calls = log.read_text().splitlines() if log.exists() else []
    assert calls == (["--user show-environment"] * 3 if kind == "container" else [])


def test_the_cron_line_drains_this_queue_from_a_bare_environment(cli, state: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """cron gives a command HOME, a minimal PATH and /bin/sh; `%` in the line would end the command."""
    from qmd import harness
    from updater import spool

    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "state 100%"))
    fake_systemctl(tmp_path, monkeypatch, "container")
    code, _, err = cli("updater", "install-service", "--platform", "linux")
    assert code == 1
    fields = _cron_line(err).split(None, 5)
    assert fields[:5] == ["*/2", "*", "*", "*", "*"]
    command = fields[5]
    assert "%" not in command.replace("\\%", "")  # every % escaped for cron
    repo = tmp_path / "repo"
    repo.mkdir()
    spool.enqueue(harness.StateLayout(tmp_path / "state 100%"), str(repo), "post-commit")
    bare = {"HOME": str(isolated_home), "PATH": "/usr/bin:/bin", "PYTHONPATH": os.environ.get("PYTHONPATH", "")}  # PYTHONPATH: this checkout
    proc = subprocess.run(["/bin/sh", "-c", command.replace("\\%", "%")], env=bare, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert queue_files(tmp_path / "state 100%", "new") == [] and (tmp_path / "state 100%" / "health.json").exists()


def test_with_a_systemd_user_manager_the_unit_is_enabled_and_started(cli, state: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    log = fake_systemctl(tmp_path, monkeypatch, "running")
    code, out, err = cli("updater", "install-service", "--platform", "linux")
    assert code == 0, err
    assert (isolated_home / ".config" / "systemd" / "user" / "qmd-updater.service").exists()
    assert "started: systemctl --user restart qmd-updater.service" in out and "enable-linger" in out
    assert log.read_text().splitlines() == [
        "--user show-environment", "--user daemon-reload", "--user enable qmd-updater.service", "--user restart qmd-updater.service",
    ]


def test_no_start_without_systemd_writes_the_files_asked_for_and_says_where_they_work(cli, state: Path, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    fake_systemctl(tmp_path, monkeypatch, "container")
    code, out, err = cli("updater", "install-service", "--no-start", "--platform", "linux")
    assert code == 0, err
    assert (isolated_home / ".config" / "systemd" / "user" / "qmd-updater.service").exists()
    assert "no systemd user manager here" in out and f"{QMD} updater daemon" in out
    assert "to start it: systemctl" not in out


def test_a_line_break_in_a_path_never_becomes_a_unit_directive_or_a_crontab_line(cli, isolated_home: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """A value holding a line break ended the unit's Environment= line (what followed was a
    directive of its own: ExecStartPost=...) and split the printed crontab line in two (the
    second a crontab entry of its own, run every minute once pasted)."""
    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "a\nExecStartPost=/bin/touch /tmp/x\n* * * * * touch /tmp/y #"))
    code, out, err = cli("updater", "install-service", "--print", "--platform", "linux")
    assert code == 0, err
    [(_, text)] = _units(out).items()
    keys = [line.split("=", 1)[0] for line in text.splitlines() if line and not line.startswith("[")]
    assert "ExecStartPost" not in keys and all(key.isalpha() for key in keys), text
    assert '\\x0aExecStartPost=/bin/touch /tmp/x\\x0a* * * * * touch /tmp/y #"' in text  # systemd's C escape: the same value
    fake_systemctl(tmp_path, monkeypatch, "container")
    code, _, err = cli("updater", "install-service", "--platform", "linux")
    assert code == 1
    lines = err.splitlines()
    cron = lines[next(i for i, line in enumerate(lines) if "- from cron" in line) + 1]
    assert cron.strip() == "(none: a path here holds a line break, which a crontab line cannot hold)", err
