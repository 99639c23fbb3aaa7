"""`qmd updater install-service`: the units it prints and writes (never a faked systemctl)."""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from pathlib import Path

import pytest


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


def test_install_writes_the_unit_and_uninstall_removes_it(cli, state: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    code, out, err = cli("updater", "install-service", "--no-start", "--platform", "linux")
    assert code == 0, err
    unit = isolated_home / ".config" / "systemd" / "user" / "qmd-updater.service"
    assert unit.exists() and "to start it: systemctl --user daemon-reload" in out and "enable-linger" in out
    monkeypatch.setenv("PATH", str(Path(sys.executable).parent))  # no systemctl to call: files only
    code, out, err = cli("updater", "uninstall-service", "--platform", "linux")
    assert code == 0, err
    assert f"removed {unit}" in out and not unit.exists()
