"""The reindex queue, the health flag and the updater (via the updater package's snapshot)."""

from __future__ import annotations

import shlex
import subprocess
import sys
import time

from qmd import harness
from updater import health
from updater import registry
from updater import service
from updater.records import index_phrase

from .services import systemd_missing

from .context import Context, home_path
from .results import CheckResult, Clock, fail, ok, warn

UPDATER_TIMEOUT_S = 3600


def run_updater(ctx: Context) -> str:
    """`qmd updater retry` (dead requests back in the queue), then one `qmd updater run`.

    In a subprocess: its own lock, nice level and threads, and a crash cannot take doctor
    down. Only that run's success lowers the health flag.
    """
    if ctx.memo.get("updater"):
        return ctx.memo["updater"]
    base = [sys.executable, "-m", "qmd", "updater"]
    subprocess.run([*base, "retry"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    proc = subprocess.run([*base, "run"], capture_output=True, text=True, timeout=UPDATER_TIMEOUT_S, stdin=subprocess.DEVNULL)
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip()]
    summary = "; ".join(lines[:3])[:400] or f"exit {proc.returncode}"
    result = f"ran the updater once ({'succeeded' if proc.returncode == 0 else f'failed, exit {proc.returncode}'}): {summary}"
    ctx.memo["updater"] = result
    return result


def _move_aside(ctx: Context) -> str:
    """The command that moves the state path that should be a folder (and is not) aside, whole."""
    layout = ctx.layout
    path = health.blocked_folder(layout)
    if path is not None:
        aside = path.with_name(f"{path.name}.moved-aside")
        return f"mv {shlex.quote(str(path))} {shlex.quote(str(aside))}  # the hooks and the updater re-create the folder"
    return f"ls -la {shlex.quote(str(layout.root))}  # a state path that should be a folder is not one"


def check(ctx: Context) -> list[CheckResult]:
    with Clock() as c:
        snap = health.snapshot(ctx.layout)
    now = time.time()
    out: list[CheckResult] = []
    if snap["problems"]:
        out.append(fail("state folder", snap["problems"][0], _move_aside(ctx), ms=c.ms))
    if snap["died"]:
        out.append(fail("updater that died", snap["died"], health.DIED_FIX, ms=c.ms, repair=lambda: run_updater(ctx)))
    q = snap["queue"]
    who = snap["updater"]
    running = f"; the updater (pid {who['pid']}, {who.get('mode')}) holds the lock since {who.get('started_at')}" if who else "; no updater is running"
    age = q["oldest_age_s"]
    if not q["pending"]:
        out.append(ok("queue", f"empty ({q['failed_requests']} in queue/failed)", ms=c.ms))
    else:
        detail = f"{q['pending']} request(s) pending, the oldest {harness.age(age or 0)} old{running}"
        limits = f" (thresholds: warn {harness.age(ctx.queue_warn_s)}, fail {harness.age(ctx.queue_fail_s)})"
        if age is not None and age >= ctx.queue_fail_s:
            out.append(fail("queue", "stuck: " + detail + limits, "qmd updater run", ms=c.ms, repair=lambda: run_updater(ctx)))
        elif age is not None and age >= ctx.queue_warn_s:
            out.append(warn("queue", "slow: " + detail + limits, "qmd updater run", ms=c.ms, repair=lambda: run_updater(ctx)))
        else:
            out.append(ok("queue", detail, ms=c.ms))
    flag = snap["health"]
    last = flag.get("last_success")
    last_text = f"last success {last}" if last else "no successful run yet"
    live = snap["failures"] + snap["dead"]
    if flag["raised"]:
        latest = max(live, key=lambda f: f["last_at"]) if live else None
        cause = f"; latest: {latest['step']} of {latest['repo'] or 'every repo'} into {index_phrase(latest['index'])}: {latest['error']}" if latest else ""
        dead = f", {len(snap['dead'])} dead (no more automatic retries)" if snap["dead"] else ""
        out.append(
            fail(
                "health flag",
                f"raised since {flag['since']}: {len(live)} failure(s){dead}{cause}; {last_text}",
                "qmd health  # fix the cause, then: qmd updater retry && qmd updater run",
                repair=lambda: run_updater(ctx),
            )
        )
    else:
        out.append(ok("health flag", f"not raised; {last_text}"))
    enrolled = registry.load(ctx.layout)
    if who:
        out.append(ok("updater", f"{who.get('mode')} running, pid {who['pid']}, since {who.get('started_at')} (lock {home_path(ctx.layout.lock)})"))
    elif enrolled:
        start = service.run_elsewhere() if systemd_missing(ctx) else "qmd updater install-service"
        out.append(warn("updater", f"no updater is running and {len(enrolled)} repositor{'y is' if len(enrolled) == 1 else 'ies are'} enrolled: requests wait until one runs", start))
    else:
        out.append(ok("updater", "not running (no repository enrolled)"))
    return out
