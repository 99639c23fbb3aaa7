"""`qmd health`: the flag, the failures behind it, the queue; `--session-start` for agent hooks.

Exit codes: 0 when the flag is not raised, 1 when it is raised, the harness is broken, or a
request the hooks could not finish writing is stuck in queue/tmp (a QmdError naming the fix, so
scripts can `qmd health || notify`). `--session-start` always exits 0 and prints one plain
line for the agent's context only when something needs attention: the flag is raised, a
request was lost in queue/tmp (`lost.py`), or requests have waited more than STALE_QUEUE_S
with no updater running (silence is not freshness). Nothing at all when healthy.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from qmd import harness
from qmd import QmdError
from qmd.harness import age, parse_iso

from . import lost, records, spool, stats
from .records import index_phrase
from .lock import holder

STALE_QUEUE_S = 15 * 60  # doctor's queue_warn_minutes default


def blocked_folder(layout: harness.StateLayout) -> Path | None:
    """The first state path that must be a folder and is something else (a file, a dangling link).

    Every queue folder counts: with queue/tmp in the way each hook logs 'NOT queued' and the
    updater cannot start, which health and doctor must say rather than look fine.
    """
    for path in (layout.root, layout.queue, *(layout.q(name) for name in harness.QUEUE_DIRS), layout.failures):
        if os.path.lexists(path) and not path.is_dir():
            return path
    return None


def unreadable_folder(layout: harness.StateLayout) -> tuple[str, str] | None:
    """(problem, hint) for the first state folder this user may not read (a mode, another
    owner: `sudo -u alice qmd health` with root's state dir), else None: then the failures and
    the queue are unknown, which health must say rather than look fine."""
    for path in (layout.root, layout.queue, *(layout.q(name) for name in harness.QUEUE_DIRS), layout.failures):
        try:
            os.listdir(path)  # the root first: the outermost folder in the way is the one named
        except (FileNotFoundError, NotADirectoryError):
            continue  # missing: re-created on use; in the way: blocked_folder says so
        except OSError as exc:
            problem = f"cannot read {path}: {exc.strerror or exc} (the failures and the queue are unknown)"
            if isinstance(exc, PermissionError):
                return problem, f"make it readable to you (chmod u+rwx {path}), or run qmd as the user who owns it"
            return problem, "check that folder (or move it away: the hooks and the updater re-create it)"
    return None


def snapshot(layout: harness.StateLayout) -> dict[str, Any]:
    """Everything status and health report, read without the lock."""
    now = time.time()
    unreadable = unreadable_folder(layout)
    failures = records.load_all(layout) if unreadable is None else []
    queue = spool.info(layout) if unreadable is None else spool.QueueInfo(0, None, 0, {})
    leftovers = lost.leftovers(layout, now) if unreadable is None else []
    if leftovers:  # lost requests are pending too: not queued yet, not indexed either
        queue.pending += len(leftovers)
        queue.oldest = leftovers[0].mtime if queue.oldest is None else min(queue.oldest, leftovers[0].mtime)
    flag = records.health(layout)
    live = [f for f in failures if f.live]
    # health.json is rewritten after every run; the records are the truth in between
    flag["raised"] = bool(live)
    flag["failures"] = [f.id for f in live]
    if not live:
        flag["since"] = None
    elif not flag.get("since"):
        flag["since"] = min(f.first_at for f in live)
    blocked = blocked_folder(layout)
    problems = [f"{blocked} is not a folder: commits cannot be queued nor failures recorded"] if blocked else []
    updater = holder(layout)
    died = _died(layout) if updater is None and unreadable is None else None
    if unreadable is not None:
        problems.append(unreadable[0])
    return {
        "problems": problems,
        "health": flag,
        "updater": updater,
        "died": died,  # an updater that died mid-step (its working.json), until the next run records it
        "queue": {
            "pending": queue.pending,
            "oldest": queue.oldest,
            "oldest_age_s": round(now - queue.oldest, 1) if queue.oldest else None,
            "failed_requests": queue.failed,
            "by_repo": queue.by_repo,
            "lost": [left.name for left in leftovers],
            "lost_detail": lost.describe(leftovers, now) if leftovers else None,
        },
        "failures": [dict(f.__dict__) for f in failures if not f.dead and not f.dropped],
        "dead": [dict(f.__dict__) for f in failures if f.dead and not f.dropped],
        "dropped": [dict(f.__dict__) for f in failures if f.dropped],
        "stats": stats.load(layout),
        "state_dir": str(layout.root),
    }


DIED_FIX = "qmd updater run"


def _died(layout: harness.StateLayout) -> str | None:
    """The step an updater that no longer holds the lock left in `working.json` (SIGKILL, the
    OOM killer; its PID may belong to another process by now): said at once, not only once the
    next run records it as a failed attempt. The caller asked the lock: nobody holds it."""
    data = records.left_working(layout)
    pid = data.get("pid") if data is not None else None
    if data is None or not isinstance(pid, int) or isinstance(pid, bool):  # a record naming no process is none
        return None
    step, what = records.death_of(data)
    return f"{what} The next run records it as a failed attempt and does that {step} again"


def _when(stamp: str | None, now: float) -> str:
    t = parse_iso(stamp)
    return f"{stamp} ({age(now - t)} ago)" if t else "never"


def failure_line(f: dict[str, Any], now: float) -> str:
    where = f"{f['repo'] or '(every repo)'} → {index_phrase(f['index'])}" + (f" [{', '.join(f['collections'])}]" if f.get("collections") else "")
    if f.get("dropped"):
        state = "dropped"
    elif f.get("dead"):
        state = f"dead after {f['attempts']} attempts"
    else:
        nxt = parse_iso(f.get("next_at"))
        state = f"attempt {f['attempts']}/{records.MAX_ATTEMPTS}" + (f", next retry in {age(nxt - now)}" if nxt and nxt > now else ", retry due")
    return f"  {f['id']}  {f['step']:<6} {where}  ({state})\n      {f['error']}" + (f"\n      hint: {f['hint']}" if f.get("hint") else "")


def render(snap: dict[str, Any]) -> str:
    now = time.time()
    flag = snap["health"]
    lines = []
    if flag["raised"]:
        n = len(flag["failures"])
        lines.append(f"health flag: raised since {flag['since']} ({n} failing update{'s' if n != 1 else ''}, below)")
    else:
        lines.append("health flag: not raised" if not snap["problems"] else "health flag: not raised, but the harness is broken (below)")
    lines += [f"problem: {p}" for p in snap["problems"]]
    if snap["died"]:
        lines.append(f"died: {snap['died']} ({DIED_FIX})")
    for key, title in (("failures", "failing (retried with backoff)"), ("dead", "dead (no more automatic retries; `qmd updater retry` puts them back)"), ("dropped", "dropped (the repository no longer exists; does not raise the flag)")):
        if snap[key]:
            lines.append(f"{title}:")
            lines += [failure_line(f, now) for f in snap[key]]
    q = snap["queue"]
    oldest = f" (oldest {age(q['oldest_age_s'])} old)" if q["oldest_age_s"] is not None else ""
    lines.append(f"queue: {q['pending']} pending{oldest}, {q['failed_requests']} in queue/failed")
    if q.get("lost_detail"):
        lines.append(f"lost: {q['lost_detail']}; {lost.FIX}")
    who = snap["updater"]
    lines.append(f"updater: running ({who.get('mode')}, pid {who['pid']}, since {who.get('started_at')})" if who else "updater: not running (start one: qmd updater daemon, under a supervisor or from cron, or qmd updater install-service where systemd runs)")
    lines.append(f"last success: {_when(flag.get('last_success'), now)}")
    return "\n".join(lines)


def refresh_stale_guard_cache(layout: harness.StateLayout) -> None:
    """Rewrite the guard's folders.json when a config in the config dir is newer than it.

    qmd rewrites it whenever it saves a config; one edited by hand left it stale (a collection
    added that way unprotected, one removed still blocked) until `qmd guard refresh`. An agent
    session starts here, so each one starts with it fresh. Best-effort and silent.
    """
    try:
        cached = layout.guard_folders.stat().st_mtime
        if any(p.stat().st_mtime > cached for p in harness.config_dir().glob("*.yml")):
            harness.refresh_folder_cache()
    except Exception:  # noqa: BLE001 - an agent's session must start whatever happens here
        pass


def session_line(snap: dict[str, Any]) -> str | None:
    """One plain factual line for an agent's context, or None when all is well."""
    flag = snap["health"]
    live = snap["failures"] + snap["dead"]
    if flag["raised"] and live:
        latest = max(live, key=lambda f: f["last_at"])
        where = f"{latest['step']} of {latest['repo'] or 'every repo'} into {index_phrase(latest['index'])}"
        return (
            f"qmd: index updates have been failing since {flag['since']} ({len(live)} failure{'s' if len(live) != 1 else ''}; latest: {where}: {latest['error']}). "
            "Search results from qmd may be stale. Details: qmd health."
        )
    if snap["problems"]:
        return f"qmd: the index freshness harness is broken: {snap['problems'][0]}. Search results from qmd may be stale. Details: qmd health."
    if snap["died"]:
        return f"qmd: {snap['died']}. Search results from qmd may be stale. Run: {DIED_FIX}."
    q = snap["queue"]
    if q.get("lost_detail"):
        return f"qmd: {q['lost_detail']}; search results from qmd may be stale. Fix: {lost.FIX}."
    if q["pending"] and not snap["updater"] and (q["oldest_age_s"] or 0) > STALE_QUEUE_S:
        return (
            f"qmd: {q['pending']} index update request{'s have' if q['pending'] != 1 else ' has'} waited {age(q['oldest_age_s'])} and no updater is running; "
            "search results from qmd may be stale. Run: qmd updater run (to keep one running: qmd updater daemon, or qmd updater install-service where systemd runs)."
        )
    return None


def health(
    json_: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False,
    session_start: Annotated[bool, typer.Option("--session-start", help="For agent SessionStart hooks: one line when something is wrong, nothing when healthy; always exits 0.")] = False,
) -> None:
    """The health flag: raised while an index update keeps failing (exit 1 when raised)."""
    layout = harness.StateLayout.current()
    if session_start:
        refresh_stale_guard_cache(layout)
        try:
            line = session_line(snapshot(layout))
        except Exception as exc:  # an agent's session must start whatever happens here
            line = f"qmd: cannot read the index health ({type(exc).__name__}: {exc}); run qmd health."
        if line:
            typer.echo(line)
        raise typer.Exit(0)
    snap = snapshot(layout)
    typer.echo(json.dumps(snap, indent=2, sort_keys=True, default=str) if json_ else render(snap))
    if snap["problems"]:
        unreadable = unreadable_folder(layout)
        hint = unreadable[1] if unreadable is not None and unreadable[0] == snap["problems"][0] else "move it away; the hooks and the updater re-create the folders"
        raise QmdError(snap["problems"][0], hint)
    if snap["queue"]["lost_detail"]:
        raise QmdError(snap["queue"]["lost_detail"], lost.FIX)
    if snap["died"]:
        raise QmdError(snap["died"], DIED_FIX)
    if snap["health"]["raised"]:
        n = len(snap["health"]["failures"])
        raise QmdError(f"the health flag is raised: {n} index update failure{'s' if n != 1 else ''}", "fix the cause shown above, then: qmd updater run")

