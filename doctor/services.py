"""The updater's service: systemd user unit (and linger) on Linux, LaunchAgent on macOS."""

from __future__ import annotations

import getpass
import os
import shutil
import subprocess
import sys
from pathlib import Path

from updater import service

from .context import Context, home_path
from .results import CheckResult, Clock, fail, ok, warn


def _run(argv: list[str]) -> tuple[int, str]:
    try:
        proc = subprocess.run(argv, capture_output=True, text=True, timeout=15, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return -1, str(exc)
    return proc.returncode, (proc.stdout.strip() or proc.stderr.strip())


def _restart(unit: str) -> str:
    code, out = _run(["systemctl", "--user", "restart", unit])
    if code != 0:
        from qmd import QmdError

        raise QmdError(f"systemctl --user restart {unit} failed: {out}", f"journalctl --user -u {unit}")
    return f"restarted {unit}"


def systemd_missing(ctx: Context) -> str | None:
    """Why no systemd user manager answers here (None where one does, and off Linux); asked
    once per run, since the queue's check words its fix by it too."""
    if not sys.platform.startswith("linux"):
        return None
    if "systemd" not in ctx.memo:
        ctx.memo["systemd"] = service.systemd_missing() or ""
    return ctx.memo["systemd"] or None


def _linux(ctx: Context) -> list[CheckResult]:
    installed = [p for p in (service.systemd_dir() / f"{service.UNIT}.service", service.systemd_dir() / f"{service.UNIT}.timer") if p.exists()]
    with Clock() as c:
        missing = systemd_missing(ctx)
    if missing:
        here = f"no systemd user manager here ({missing})"
        if not installed:
            return [ok("updater service", f"{here}: no service to check; the updater runs without one (qmd updater daemon, or cron)", service.run_elsewhere(), ms=c.ms)]
        return [warn("updater service", f"{home_path(installed[-1])} is installed but {here}: it never runs here", service.run_elsewhere(), ms=c.ms)]
    if not installed:
        return [ok("updater service", "no systemd user unit installed (optional: qmd updater install-service)")]
    unit = installed[-1].name  # the timer drives the service when both exist
    out = []
    with Clock() as c:
        code, state = _run(["systemctl", "--user", "is-active", unit])
    if state == "active":
        out.append(ok("updater service", f"{unit} active", ms=c.ms))
    elif code < 0:
        out.append(warn("updater service", f"{unit} is installed but systemctl did not answer ({state[:200]})", f"systemctl --user status {unit}", ms=c.ms))
    else:
        out.append(fail("updater service", f"{unit} is installed but {state or 'not active'}", f"systemctl --user restart {unit}", ms=c.ms, repair=lambda: _restart(unit)))
    if shutil.which("loginctl"):
        user = getpass.getuser()
        code, linger = _run(["loginctl", "show-user", user, "--property=Linger", "--value"])
        if code == 0 and linger == "no":
            out.append(warn("linger", f"the user service stops when {user} logs out", f"loginctl enable-linger {user}"))
        elif code == 0:
            out.append(ok("linger", f"enabled for {user}"))
    return out


def _macos() -> list[CheckResult]:
    plist = Path.home() / "Library" / "LaunchAgents" / f"{service.LABEL}.plist"
    if not plist.exists():
        return [ok("updater service", "no LaunchAgent installed (optional: qmd updater install-service)")]
    with Clock() as c:
        code, out = _run(["launchctl", "print", f"gui/{os.getuid()}/{service.LABEL}"])
    if code == 0:
        state = next((line.split("=", 1)[1].strip() for line in out.splitlines() if line.strip().startswith("state =")), "loaded")
        return [ok("updater service", f"{service.LABEL} {state}", ms=c.ms)]
    return [fail("updater service", f"{home_path(plist)} is installed but not loaded", f"launchctl bootstrap gui/{os.getuid()} {plist}", ms=c.ms)]


def check(ctx: Context) -> list[CheckResult]:
    if sys.platform == "darwin":
        return _macos()
    if sys.platform.startswith("linux"):
        return _linux(ctx)
    return [ok("updater service", f"no service support on {sys.platform}")]
