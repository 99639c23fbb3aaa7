"""Failure records and the health flag (design §7).

A record `failures/<id>.json` = {id, repo, index, collections, step, error, attempts,
first_at, last_at, log} (+ next_at, dead, dropped), one per failing (repo, index, step).
Retries back off (30 s, 2 min, 8 min, 32 min); after MAX_ATTEMPTS attempts a record is
dead: its requests move to queue/failed/ and nothing retries them until a new request for
that repo arrives or `qmd updater retry` puts them back. Only a success clears the records
it covers. A request for a repository that no longer exists is dropped with a record
marked `dropped`: reported by `qmd health` and `qmd updater status`, but it does not raise
the flag (nothing can fix it; `qmd hooks uninstall PATH` forgets it, and it expires after
DROPPED_TTL_S). health.json = {raised, since, failures, last_success}: raised iff a live
record (any record that is not `dropped`) exists.
"""

from __future__ import annotations

import hashlib
import os
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from qmd import harness
from qmd.harness import StateLayout, now_iso, parse_iso, read_json


def index_name(key: str) -> str:
    """How the log names an index: `index` for the default one (not "index index"), else `index KEY`
    (no key: a record of no one index's, a dropped repository's or the drain's own)."""
    return "every index" if not key else "index" if key == harness.DEFAULT_INDEX else f"index {key}"


def index_phrase(key: str) -> str:
    """How a sentence names an index: `the default index`, else `index KEY` (no key: every index)."""
    return "every index" if not key else "the default index" if key == harness.DEFAULT_INDEX else f"index {key}"


def left_working(layout: StateLayout) -> dict[str, Any] | None:
    """The `working.json` an updater writes for the step it is in (see run._mark_working), as
    a mapping; None when there is none, or it is not one."""
    data = read_json(layout.working) if os.path.lexists(layout.working) else None
    return data if isinstance(data, dict) else None


def death_of(working: dict[str, Any]) -> tuple[str, str]:
    """(step, what happened) for the updater whose `working.json` is `working`, found while
    nobody holds the lock: it died in that step. Only an integer pid and a parsed time are
    shown: a field of the file's own (a newline in it) never splits a line."""
    step = "embed" if working.get("step") == "embed" else "update"
    pid, started = working.get("pid"), working.get("started_at")
    who = f"pid {pid}" if isinstance(pid, int) and not isinstance(pid, bool) else "pid ?"
    when = f" started at {started}" if isinstance(started, str) and parse_iso(started) is not None else ""
    return step, f"the updater ({who}) died during an {step}{when}: killed, or out of memory?"


MAX_ATTEMPTS = 5
BACKOFF_S = (30, 120, 480, 1920)
DROPPED_TTL_S = 7 * 86400


def record_id(repo: str | None, index: str, step: str) -> str:
    return hashlib.sha256(f"{repo or ''}\0{index}\0{step}".encode("utf-8", "surrogatepass")).hexdigest()[:12]  # a path's undecodable bytes (surrogates) too


@dataclass
class Failure:
    id: str
    repo: str | None
    index: str
    collections: list[str]
    step: str  # update | embed
    error: str
    attempts: int
    first_at: str
    last_at: str
    log: str
    next_at: str | None = None  # no automatic retry before this time
    dead: bool = False
    dropped: bool = False
    hint: str | None = None
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def live(self) -> bool:
        """Raises the flag: every record except a dropped request's."""
        return not self.dropped

    def due(self, now: float) -> bool:
        """May be retried automatically now (not dead, backoff elapsed)."""
        when = parse_iso(self.next_at)
        return not self.dead and (when is None or when <= now)


def load_all(layout: StateLayout) -> list[Failure]:
    """Every readable record, oldest first."""
    out = []
    try:
        names = sorted(os.listdir(layout.failures))
    except (FileNotFoundError, NotADirectoryError):
        return []
    for name in names:
        if not name.endswith(".json") or name.startswith("."):
            continue
        data = read_json(layout.failures / name)
        if not isinstance(data, dict):
            continue
        known = {k: data[k] for k in Failure.__dataclass_fields__ if k in data and k != "extra"}
        try:
            out.append(Failure(**known))
        except TypeError:
            continue
    return sorted(out, key=lambda f: f.first_at)


def save(layout: StateLayout, failure: Failure) -> None:
    harness.write_json(layout.failures / f"{failure.id}.json", {k: v for k, v in asdict(failure).items() if k != "extra"}, sort_keys=True)


def remove(layout: StateLayout, failure_id: str) -> bool:
    try:
        (layout.failures / f"{failure_id}.json").unlink()
        return True
    except FileNotFoundError:
        return False


def forget_repo(layout: StateLayout, repo: str) -> int:
    """Remove the dropped records of `repo` (it was uninstalled); returns how many."""
    return sum(remove(layout, f.id) for f in load_all(layout) if f.dropped and f.repo == repo)


class Ledger:
    """The failure records as one run sees them: failures/ is read once, every change is
    written through (the lock holder is their only writer; `forget_repo` removes dropped
    records only, which never raise the flag)."""

    def __init__(self, layout: StateLayout) -> None:
        self.layout = layout
        self.by_id = {f.id: f for f in load_all(layout)}

    def all(self) -> list[Failure]:
        """Every record, oldest first."""
        return sorted(self.by_id.values(), key=lambda f: f.first_at)

    def save(self, failure: Failure) -> Failure:
        save(self.layout, failure)
        self.by_id[failure.id] = failure
        return failure

    def remove(self, failure_id: str) -> bool:
        self.by_id.pop(failure_id, None)
        return remove(self.layout, failure_id)

    def record_failure(self, repo: str | None, index: str, collections: list[str], step: str, error: str, hint: str | None = None) -> Failure:
        """Create or bump the record of (repo, index, step): one more attempt, the next backoff, dead at the limit."""
        fid = record_id(repo, index, step)
        old = self.by_id.get(fid)
        stamp = now_iso()
        attempts = (old.attempts if old is not None else 0) + 1
        dead = attempts >= MAX_ATTEMPTS
        delay = BACKOFF_S[min(attempts, len(BACKOFF_S)) - 1]
        return self.save(Failure(
            id=fid, repo=repo, index=index, collections=sorted(collections), step=step, error=error, attempts=attempts,
            first_at=(old.first_at if old is not None else None) or stamp, last_at=stamp, log=str(self.layout.updater_log),
            next_at=None if dead else now_iso(time.time() + delay), dead=dead, hint=hint,
        ))

    def record_dropped(self, repo: str, requests: int) -> Failure:
        """A request for a repository that no longer exists: dropped, recorded, not retried, flag not raised."""
        stamp = now_iso()
        return self.save(Failure(
            id=record_id(repo, "", "update"), repo=repo, index="", collections=[], step="update",
            error=f"{repo} no longer exists: {requests} request(s) dropped", attempts=1, first_at=stamp, last_at=stamp,
            log=str(self.layout.updater_log), dead=True, dropped=True,
            hint=f"if it moved, run qmd hooks install in its new place; to forget it: qmd hooks uninstall {repo}",
        ))

    def clear(self, repo: str | None, index: str, steps: tuple[str, ...] = ("update", "embed")) -> list[str]:
        """A success covers these records: delete them; returns the ids removed."""
        return [fid for step in steps if self.remove(fid := record_id(repo, index, step))]

    def revive(self, repo: str) -> None:
        """`qmd updater retry`: dead records of `repo` get their attempts back."""
        for failure in self.all():
            if failure.repo == repo and failure.dead and not failure.dropped:
                failure.dead, failure.attempts, failure.next_at = False, 0, None
                self.save(failure)

    def expire_dropped(self, now: float) -> None:
        for failure in self.all():
            when = parse_iso(failure.last_at)
            if failure.dropped and when is not None and now - when > DROPPED_TTL_S:
                self.remove(failure.id)

    def write_health(self, last_success: str | None = None) -> dict[str, Any]:
        """Recompute the flag from the records and write health.json."""
        return _write_health(self.layout, self.all(), last_success)


def health(layout: StateLayout) -> dict[str, Any]:
    """The flag as stored in health.json (a default when no updater has written it yet)."""
    data = read_json(layout.health)
    if not isinstance(data, dict):
        return {"raised": False, "since": None, "failures": [], "last_success": None}
    return data


def write_health(layout: StateLayout, last_success: str | None = None) -> dict[str, Any]:
    """Recompute the flag from the records (the lock holder only) and write health.json."""
    return _write_health(layout, load_all(layout), last_success)


def _write_health(layout: StateLayout, failures: list[Failure], last_success: str | None) -> dict[str, Any]:
    old = health(layout)
    live = [f for f in failures if f.live]
    raised = bool(live)
    since = None
    if raised:
        since = old.get("since") if old.get("raised") and old.get("since") else min(f.first_at for f in live)
    data = {
        "raised": raised,
        "since": since,
        "failures": [f.id for f in live],
        "last_success": last_success or old.get("last_success"),
    }
    if data != old or not layout.health.exists():
        harness.write_json(layout.health, data, sort_keys=True)
    return data
