"""`qmd updater install-service`: a systemd user unit (or a timer) on Linux, a LaunchAgent on macOS.

Absolute paths everywhere (the `qmd` script of this venv, the state/config/cache dirs as
resolved now), so the service sees exactly the indexes and queue this shell sees.
"""

from __future__ import annotations

import os
import plistlib
import shutil
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from qmd import harness
from qmd import QmdError

UNIT = "qmd-updater"
LABEL = "dev.qmd.updater"
PASS_THROUGH = ("INDEX_PATH", "QMD_MODELS_DIR", "QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL", "QMD_HF_ENDPOINT", "QMD_UPDATER_THREADS", "QMD_SQLITE_VEC_PATH")
LINGER_NOTE = "note: a user service stops when you log out; to keep it running: loginctl enable-linger $USER"


@dataclass
class UnitFile:
    path: Path
    text: str


def qmd_executable() -> Path:
    """The `qmd` console script next to the running interpreter, absolute."""
    script = Path(sys.executable).absolute().parent / "qmd"
    if not script.exists():
        raise QmdError(f"{script} does not exist", "reinstall qmd into its venv (./install.sh) so the qmd script is created")
    return script


def environment() -> dict[str, str]:
    """What the service needs to find the same state, configs, indexes and models as this shell."""
    bin_dir = str(qmd_executable().parent)
    env = {
        "PATH": os.pathsep.join(dict.fromkeys([bin_dir, "/usr/local/bin", *(["/opt/homebrew/bin"] if sys.platform == "darwin" else []), "/usr/bin", "/bin"])),
        "QMD_STATE_DIR": str(harness.StateLayout.current().root),
        "QMD_CONFIG_DIR": os.path.abspath(harness.config_dir()),
        "XDG_CACHE_HOME": os.path.abspath(harness.cache_dir().parent),
    }
    for key in PASS_THROUGH:
        if os.environ.get(key):
            env[key] = os.path.abspath(os.environ[key]) if key in ("INDEX_PATH", "QMD_MODELS_DIR") else os.environ[key]
    return env


def _systemd_quote(word: str, exec_line: bool = True) -> str:
    """One word for a unit file: C-style escapes, `%` specifiers doubled, `$` doubled on Exec lines."""
    escaped = word.replace("\\", "\\\\").replace('"', '\\"').replace("%", "%%")
    if exec_line:
        escaped = escaped.replace("$", "$$")
    return f'"{escaped}"' if any(c.isspace() for c in word) or escaped != word or not word else escaped


def _argv(timer: bool, watch: bool) -> list[str]:
    if timer:
        return [str(qmd_executable()), "updater", "run", "--respect-backoff", "--if-idle"]
    return [str(qmd_executable()), "updater", "daemon", *(["--watch"] if watch else [])]


def systemd_dir() -> Path:
    base = os.environ.get("XDG_CONFIG_HOME")
    return (Path(base) if base else Path.home() / ".config") / "systemd" / "user"


def systemd_units(timer: bool = False, watch: bool = False, interval_min: int = 2) -> list[UnitFile]:
    """The unit file(s): a long-running service, or a oneshot service plus its timer."""
    env = "\n".join(f"Environment={_systemd_quote(f'{k}={v}', exec_line=False)}" for k, v in environment().items())
    exec_start = " ".join(_systemd_quote(w) for w in _argv(timer, watch))
    folder = systemd_dir()
    if not timer:
        return [UnitFile(folder / f"{UNIT}.service", f"""[Unit]
Description=qmd updater: keeps qmd indexes fresh from the requests git hooks queue

[Service]
Type=simple
ExecStart={exec_start}
Restart=on-failure
RestartSec=2
Nice=10
IOSchedulingClass=idle
{env}

[Install]
WantedBy=default.target
""")]
    return [
        UnitFile(folder / f"{UNIT}.service", f"""[Unit]
Description=qmd updater (one run): drains the requests git hooks queue into qmd indexes

[Service]
Type=oneshot
ExecStart={exec_start}
Nice=10
IOSchedulingClass=idle
{env}
"""),
        UnitFile(folder / f"{UNIT}.timer", f"""[Unit]
Description=Run the qmd updater every {interval_min} minutes

[Timer]
OnBootSec=1min
OnUnitInactiveSec={interval_min}min
Unit={UNIT}.service

[Install]
WantedBy=timers.target
"""),
    ]


def launchd_plist(timer: bool = False, watch: bool = False, interval_min: int = 2) -> UnitFile:
    """A LaunchAgent: kept alive and restarted when it fails, or started every few minutes."""
    logs = harness.StateLayout.current().logs
    data: dict[str, object] = {
        "Label": LABEL,
        "ProgramArguments": _argv(timer, watch),
        "EnvironmentVariables": environment(),
        "RunAtLoad": True,
        "ProcessType": "Background",
        "Nice": 10,
        "LowPriorityIO": True,
        "StandardOutPath": str(logs / "launchd.out.log"),
        "StandardErrorPath": str(logs / "launchd.err.log"),
    }
    if timer:
        data["StartInterval"] = interval_min * 60
    else:
        data["KeepAlive"] = {"SuccessfulExit": False}  # restart when it exits with a failure
        data["ThrottleInterval"] = 10
    path = Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"
    return UnitFile(path, plistlib.dumps(data, sort_keys=True).decode("utf-8"))


def platform_name(override: str | None = None) -> str:
    name = override or ("macos" if sys.platform == "darwin" else "linux" if sys.platform.startswith("linux") else sys.platform)
    if name not in ("linux", "macos"):
        raise QmdError(f"no service support for {name}", "run `qmd updater daemon` from your session's startup instead")
    return name


def units(platform: str, timer: bool, watch: bool, interval_min: int) -> list[UnitFile]:
    return systemd_units(timer, watch, interval_min) if platform == "linux" else [launchd_plist(timer, watch, interval_min)]


def _run(argv: list[str]) -> tuple[bool, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip()


def install(platform: str, timer: bool, watch: bool, interval_min: int, start: bool) -> list[str]:
    """Write the unit file(s), then enable and start them (unless `start` is False)."""
    files = units(platform, timer, watch, interval_min)
    lines: list[str] = []
    for unit in files:
        harness.write_text(unit.path, unit.text)
        lines.append(f"wrote {unit.path}")
    if platform == "linux":
        other = systemd_dir() / f"{UNIT}.timer"
        if not timer and other.exists():
            _run(["systemctl", "--user", "disable", "--now", other.name])
            other.unlink()
            lines.append(f"removed {other} (the timer variant)")
        target = f"{UNIT}.timer" if timer else f"{UNIT}.service"
        # restart (not start) so a changed unit takes effect; it starts a stopped one too
        commands = [["systemctl", "--user", "daemon-reload"], ["systemctl", "--user", "enable", target], ["systemctl", "--user", "restart", target]]
        note = LINGER_NOTE
    else:
        domain = f"gui/{os.getuid()}"
        commands = [["launchctl", "bootout", domain, str(files[0].path)], ["launchctl", "bootstrap", domain, str(files[0].path)]]
        note = "note: the LaunchAgent starts at login (RunAtLoad)"
    if start and shutil.which(commands[-1][0]):
        for argv in commands:
            ok, output = _run(argv)
            if not ok and argv[1] != "bootout":
                lines.append(f"warning: `{' '.join(argv)}` failed: {output}")
                lines.append("start it yourself: " + " && ".join(" ".join(c) for c in commands[-2:]))
                break
        else:
            lines.append(f"started: {' '.join(commands[-1])}")
    else:
        lines.append("to start it: " + " && ".join(" ".join(c) for c in commands if c[1] != "bootout"))
    lines.append(note)
    return lines


def uninstall(platform: str) -> list[str]:
    """Stop and remove whatever install-service wrote."""
    lines = []
    if platform == "linux":
        paths = [systemd_dir() / f"{UNIT}.timer", systemd_dir() / f"{UNIT}.service"]
        if shutil.which("systemctl"):
            for path in paths:
                if path.exists():
                    _run(["systemctl", "--user", "disable", "--now", path.name])
    else:
        paths = [Path.home() / "Library" / "LaunchAgents" / f"{LABEL}.plist"]
        if shutil.which("launchctl") and paths[0].exists():
            _run(["launchctl", "bootout", f"gui/{os.getuid()}", str(paths[0])])
    for path in paths:
        if path.exists():
            path.unlink()
            lines.append(f"removed {path}")
    if platform == "linux" and shutil.which("systemctl"):
        _run(["systemctl", "--user", "daemon-reload"])
    return lines or ["no qmd updater service installed"]
