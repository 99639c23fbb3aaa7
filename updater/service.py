"""`qmd updater install-service`: a systemd user unit (or a timer) on Linux, a LaunchAgent on macOS.

Absolute paths everywhere (the `qmd` script of this venv, the state/config/cache dirs as
resolved now), so the service sees exactly the indexes and queue this shell sees.
Where no systemd user manager answers (a container, WSL without systemd, a `su` shell),
nothing is written: `without_systemd` says what runs the updater there instead.
"""

from __future__ import annotations

import os
import plistlib
import shlex
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
CRON_MINUTES = 2  # as the timer's default interval


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
    escaped = "".join(f"\\x{ord(c):02x}" if ord(c) < 0x20 or c == "\x7f" else c for c in escaped)  # a line break would end the line: what follows would be a directive
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


def _run(argv: list[str], timeout: float = 60) -> tuple[bool, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return False, str(exc)
    return proc.returncode == 0, (proc.stderr or proc.stdout).strip() or f"exit {proc.returncode}"


def systemd_missing() -> str | None:
    """Why no systemd user manager answers here, or None when one does.

    `systemctl --user show-environment` changes nothing and needs the user manager itself, so
    it fails exactly where `enable` and `start` would: a container or WSL without systemd
    ("Failed to connect to bus"), a `su`/`sudo` shell without a user session. A missing
    $XDG_RUNTIME_DIR/bus proves nothing by itself (systemctl also reaches the manager through
    its private socket), so only the manager's own answer counts.
    """
    systemctl = shutil.which("systemctl")
    if systemctl is None:
        return "systemctl is not on PATH"
    ok, output = _run([systemctl, "--user", "show-environment"], timeout=15)
    return None if ok else f"`systemctl --user show-environment` failed: {output.splitlines()[0]}"


def _outside_env(with_path: bool) -> list[str]:
    """`NAME=value` words that give a command started outside this shell (cron, a supervisor)
    the state, configs and indexes this shell sees: the service's environment less what HOME
    alone already gives; PATH only for cron (whose own is /usr/bin:/bin)."""
    home = Path.home()
    implied = {"QMD_STATE_DIR": home / ".local" / "state" / "qmd", "QMD_CONFIG_DIR": home / ".config" / "qmd", "XDG_CACHE_HOME": home / ".cache"}
    words = []
    for key, value in environment().items():
        if (key == "PATH" and not with_path) or (key in implied and os.path.abspath(implied[key]) == value):
            continue
        words.append(f"{key}={shlex.quote(value)}")
    return words


def daemon_command(watch: bool = False) -> str:
    """The updater daemon in the foreground, for a supervisor of the user's own."""
    return " ".join([*_outside_env(False), shlex.join(_argv(False, watch))])


def cron_line(minutes: int = CRON_MINUTES) -> str:
    """A crontab line that drains the queue every `minutes` (what the timer runs; from an hour
    on, every whole hour it holds); stdout dropped (the run's summary; updater.log has it),
    errors left for cron to mail; every `%` escaped (cron ends the command at one). Where a
    path or value holds a line break, which no crontab line can (the rest would be a crontab
    line of its own), the reason instead of a line."""
    schedule = f"*/{minutes} * * * *" if minutes < 60 else f"0 */{min(minutes // 60, 23)} * * *"
    command = " ".join([*_outside_env(True), shlex.join(_argv(True, False)), ">/dev/null"])
    if "\n" in command or "\r" in command:
        return "(none: a path here holds a line break, which a crontab line cannot hold)"
    return f"{schedule} " + command.replace("%", "\\%")


def _wsl() -> bool:
    try:
        return "microsoft" in Path("/proc/sys/kernel/osrelease").read_text(encoding="utf-8").lower()
    except OSError:
        return False


def without_systemd(watch: bool = False, minutes: int = CRON_MINUTES) -> str:
    """What keeps the queue drained where no systemd user manager runs (several lines)."""
    lines = [
        "the updater does not need systemd; any one of these keeps the indexes fresh:",
        "  - in the foreground, under a supervisor of your own (tmux, supervisord, runit, a container's entrypoint):",
        f"      {daemon_command(watch)}",
        "  - from cron (crontab -e; a cron daemon must be running):",
        f"      {cron_line(minutes)}",
        "  - by hand: the git hooks need neither; every commit still queues its request, and `qmd updater run` indexes what is queued",
    ]
    if _wsl():
        lines.append("  - or turn systemd on in WSL: [boot] systemd=true in /etc/wsl.conf, `wsl --shutdown` from Windows, then run this again")
    return "\n".join(lines)


def run_elsewhere() -> str:
    """One line naming what runs the updater where no systemd does (doctor's fix, hooks' note)."""
    return f"{daemon_command()}  # under a supervisor of your own; or in crontab: {cron_line()}"


def install(platform: str, timer: bool, watch: bool, interval_min: int, start: bool) -> list[str]:
    """Write the unit file(s), then enable and start them (unless `start` is False).

    On Linux with no systemd user manager to start them in, nothing is written (a QmdError
    saying what runs the updater there instead), unless `start` is False: then the files are
    what was asked for, and the lines say where they take effect.
    """
    missing = systemd_missing() if platform == "linux" else None
    if missing and start:
        raise QmdError(
            f"no systemd user manager here to run the updater service ({missing}); nothing was written",
            without_systemd(watch, interval_min) + "\n(to write the unit files anyway, for a machine where systemd runs: --no-start)",
        )
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
    elif missing:
        lines.append(f"not started: no systemd user manager here ({missing}); where one runs: " + " && ".join(" ".join(c) for c in commands))
        lines.append("here, run the updater without systemd: " + daemon_command(watch))
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
