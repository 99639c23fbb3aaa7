"""One drain of the queue: claim, coalesce per repo, route, refresh (update, embed), record, delete.

Steps (the caller holds the global lock):
0. Recover: a file left in queue/tmp/ past its grace period is a request its writer could not
   finish (a full disk): it becomes requests in new/ (`lost.recover`).
1. Claim: rename new/* into cur/ (cur/ may still hold requests of a killed or failed run).
2. Revalidate the failure records (read once per run: `records.Ledger`): a record whose
   repo is gone becomes a dropped one; a record whose repo no longer routes to its index
   is moot and removed.
3. Coalesce per repo. A repo that no longer exists: its requests are dropped (moved to
   failed/) with a record. A repo no collection lies in: its requests are deleted.
   With `respect_backoff` (the daemon, the timer) a repo whose last attempt failed waits
   for its backoff unless a new request (a commit, `qmd updater retry`) arrived.
4. Per index, one `Store.refresh(collections)` (qmd/store/refresh.py) over every collection
   the repos route to: the update, then the embed of those that are embeddable and updated
   cleanly. The embed says in the log what it is about to do (`embedding 12 documents of
   gitnotes that were never embedded`), then its phases and counts (`qmd.ProgressLines`). The index's config is the one routing read (the Store does not read it again).
   No embedding model at all (the built-in default, never downloaded) skips embedding
   without a failure and says so in the run's status; a configured model that is
   missing or broken is a failure of the embed step.
5. Per repo: every index succeeded → delete its requests (and its dead-lettered ones,
   now superseded) and clear its records; a failure → record it (backoff; dead after
   MAX_ATTEMPTS, then its requests move to failed/).
6. Recompute health.json, fold the run into stats.json.
"""

from __future__ import annotations

import logging
import os
import time
import traceback
from dataclasses import asdict, dataclass, field
from typing import Any

import qmd
from qmd import harness
from qmd import QmdError
from qmd.harness import StateLayout, now_iso

from . import lost, records, routing, spool, stats
from .records import index_name, index_phrase
from .logs import rotate_hooks_log


@dataclass
class RunResult:
    started_at: str
    finished_at: str = ""
    seconds: float = 0.0
    requests: int = 0
    repos: list[str] = field(default_factory=list)
    succeeded_repos: list[str] = field(default_factory=list)
    failures: list[dict[str, Any]] = field(default_factory=list)  # {id, repo, index, step, error, attempts, dead}
    dropped: list[str] = field(default_factory=list)
    deferred: list[str] = field(default_factory=list)
    unrouted: list[str] = field(default_factory=list)
    invalid: int = 0
    lost: dict[str, list[str]] = field(default_factory=dict)  # leftover in queue/tmp → the repos queued again for it
    lost_stuck: list[str] = field(default_factory=list)  # leftovers whose requests could not be written (still in queue/tmp)
    lost_error: str | None = None
    embed_skipped: dict[str, str] = field(default_factory=dict)  # index → why
    documents_updated: int = 0
    chunks_embedded: int = 0

    @property
    def succeeded(self) -> bool:
        return not self.failures and not self.lost_stuck

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), succeeded=self.succeeded)


def _describe(exc: BaseException, log: logging.Logger, what: str) -> tuple[str, str | None]:
    """(message, hint) for a failed step; an unexpected exception's traceback goes to the log."""
    if isinstance(exc, QmdError):
        return exc.message, exc.cli_hint
    log.error("%s: unexpected %s\n%s", what, type(exc).__name__, "".join(traceback.format_exception(exc)))
    return f"{type(exc).__name__}: {exc}", "this is a bug in qmd; the traceback is in the updater log"


def _revalidate(ledger: records.Ledger, indexes: routing.Indexes, log: logging.Logger) -> None:
    known = set(indexes.keys)
    for failure in ledger.all():
        if failure.dropped or failure.repo is None:
            if failure.repo is None and failure.index not in known and failure.index != CRASH_INDEX:  # that one: cleared when a drain ends
                ledger.remove(failure.id)
            continue
        if not os.path.isdir(failure.repo):
            log.warning("%s no longer exists: its failure record %s is now a dropped one", failure.repo, failure.id)
            ledger.remove(failure.id)
            ledger.record_dropped(failure.repo, 0)
        elif failure.index not in indexes.route(failure.repo) and failure.index not in indexes.errors:
            log.info("%s no longer routes to %s: record %s removed", failure.repo, index_phrase(failure.index), failure.id)
            ledger.remove(failure.id)


DIED_HINT = "if it keeps happening, look for the kernel's OOM killer (dmesg, journalctl -k) and at the end of the updater log; then: qmd updater run"


def _mark_working(layout: StateLayout, index: str, repos: dict[str, list[str]], step: str) -> None:
    """Say what this run is doing, so the next lock holder can tell a death from a clean stop."""
    try:
        harness.write_json(layout.working, {"pid": os.getpid(), "started_at": now_iso(), "index": index, "step": step, "repos": repos}, fsync=False)
    except OSError:
        pass  # a full disk costs only the record of a death


def _unmark_working(layout: StateLayout) -> None:
    try:
        layout.working.unlink()
    except OSError:
        pass


def _record_death(layout: StateLayout, ledger: records.Ledger, log: logging.Logger) -> None:
    """A `working.json` found under the lock was left by an updater that died mid-step (SIGKILL,
    the OOM killer, a power cut): record that step as a failed attempt of each repo it served.
    Without this the flag stayed down, and a supervisor restarting the updater repeated the
    fatal step at once, forever; now it backs off like any failure, dead after 5 attempts.
    Not a failure of this run: a retry that succeeds now clears it."""
    if not os.path.lexists(layout.working):
        return
    data = records.left_working(layout)
    _unmark_working(layout)
    if data is None or not isinstance(data.get("index"), str) or not isinstance(data.get("repos"), dict):
        return
    step, message = records.death_of(data)
    for repo, names in sorted(data["repos"].items()):
        if isinstance(repo, str) and isinstance(names, list):
            ledger.record_failure(repo, data["index"], [str(n) for n in names], step, message, DIED_HINT)
            log.error("%s → %s: %s", repo, index_name(data["index"]), message)


CRASH_INDEX = ""  # the failure record of a drain that stopped on an error of its own (no index's)


def drain(layout: StateLayout, log: logging.Logger, *, respect_backoff: bool = False) -> RunResult:
    """Process every request in the queue once (see the module docstring). An error of the
    drain's own (not one an update or embed met: those are recorded per repository) raises
    the flag and is a QmdError: a request it could not handle once made every run and every
    daemon start exit 3 on it, forever, with the flag down and doctor saying "ok"; a later
    drain that completes clears that record."""
    try:
        result = _drain(layout, log, respect_backoff)
    except (QmdError, KeyboardInterrupt):
        raise
    except Exception as exc:  # noqa: BLE001 - recorded, then said in one line (its traceback in the log file only)
        trace = log.makeRecord(log.name, logging.ERROR, __file__, 0, "%s", ("".join(traceback.format_exception(exc)),), None)
        for handler in log.handlers:
            if isinstance(handler, logging.FileHandler):
                handler.handle(trace)
        what = f"the updater stopped on an error of its own: {type(exc).__name__}: {exc}"
        hint = f"report this (the log {layout.updater_log} has the traceback); a request in {layout.q('cur')} may be what it could not handle"
        records.Ledger(layout).record_failure(None, CRASH_INDEX, [], "update", what, hint)
        raise QmdError(what + " (the health flag is raised)", hint) from exc
    return result


def _drain(layout: StateLayout, log: logging.Logger, respect_backoff: bool) -> RunResult:
    started = time.time()
    result = RunResult(now_iso(started))
    recovered = lost.recover(layout, log, started)
    result.lost, result.lost_stuck, result.lost_error = recovered.queued, recovered.stuck, recovered.error
    requests, bad = spool.claim(layout)
    result.invalid = len(bad) + len(recovered.junk)
    for path in bad:
        log.warning("unreadable request moved to %s", path)
    result.requests = len(requests)
    indexes = routing.load()
    ledger = records.Ledger(layout)
    _record_death(layout, ledger, log)
    for index, (message, hint) in indexes.errors.items():
        failure = ledger.record_failure(None, index, [], "update", f"config of {index_phrase(index)}: {message}", hint)
        log.error("%s: %s", index_name(index), message)
        result.failures.append(_summary(failure))
    for index in set(indexes.keys) - set(indexes.errors):
        ledger.clear(None, index, ("update",))
    _revalidate(ledger, indexes, log)

    by_repo: dict[str, list[spool.Request]] = {}
    for request in requests:
        by_repo.setdefault(os.path.realpath(request.repo), []).append(request)
    plan: dict[str, dict[str, list[str]]] = {}  # index → repo → collections
    now = time.time()
    for repo, batch in sorted(by_repo.items()):
        if not os.path.isdir(repo):
            for request in batch:
                spool.move(request.path, layout.q("failed"))
            ledger.record_dropped(repo, len(batch))
            result.dropped.append(repo)
            log.warning("%s %s: %d request(s) dropped", repo, "is not a folder" if os.path.lexists(repo) else "no longer exists", len(batch))
            continue
        if any(r.retry for r in batch):
            ledger.revive(repo)
        routes = indexes.route(repo)
        if not routes:
            spool.delete([r.path for r in batch])
            result.unrouted.append(repo)
            log.info("%s: no collection of any index lies in it; %d request(s) deleted", repo, len(batch))
            continue
        if respect_backoff and not any(r.fresh or r.retry for r in batch):
            mine = [f for f in ledger.all() if f.repo == repo and f.index in routes and not f.dropped]
            if any(f.dead for f in mine):  # left in cur/ by a killed run: dead letters, not retries
                for request in batch:
                    spool.move(request.path, layout.q("failed"))
                continue
            if any(not f.due(now) for f in mine):
                result.deferred.append(repo)
                continue
        result.repos.append(repo)
        for index, names in routes.items():
            plan.setdefault(index, {})[repo] = names

    failed_repos: dict[str, list[records.Failure]] = {}
    for index, repos in sorted(plan.items()):
        for repo, failure in _run_index(ledger, log, indexes.configured[index], repos, result).items():
            failed_repos.setdefault(repo, []).append(failure)

    for repo in result.repos:
        batch = by_repo.get(repo) or []
        problems = failed_repos.get(repo)
        if not problems:
            superseded = spool.failed_for(layout, repo)
            spool.delete([r.path for r in batch] + superseded)
            result.succeeded_repos.append(repo)
        elif any(f.dead for f in problems):
            for request in batch:
                spool.move(request.path, layout.q("failed"))
            log.error("%s: gave up after %d attempts; requests moved to %s (retry with: qmd updater retry)", repo, records.MAX_ATTEMPTS, layout.q("failed"))

    ledger.expire_dropped(time.time())
    ledger.clear(None, CRASH_INDEX, ("update",))  # this drain ran to its end: an earlier one's own error is over
    result.finished_at = now_iso()
    result.seconds = round(time.time() - started, 3)
    last_success = result.finished_at if result.succeeded_repos else None
    ledger.write_health(last_success)
    if result.requests or result.failures or result.invalid:
        stats.add_run(layout, result.as_dict())
    rotate_hooks_log(layout)
    return result


def _summary(failure: records.Failure) -> dict[str, Any]:
    return {"id": failure.id, "repo": failure.repo, "index": failure.index, "step": failure.step, "error": failure.error, "attempts": failure.attempts, "dead": failure.dead}


class _IndexRun:
    """One index's part of a run: `Store.refresh` for the repos routed to it, and the records it leaves."""

    def __init__(self, ledger: records.Ledger, log: logging.Logger, index: str, repos: dict[str, list[str]], result: RunResult) -> None:
        self.ledger, self.log, self.index, self.repos, self.result = ledger, log, index, repos, result
        self.failed: dict[str, records.Failure] = {}  # repo → its failure in this index

    def fail(self, repo: str, step: str, message: str, hint: str | None) -> None:
        failure = self.ledger.record_failure(repo, self.index, self.repos[repo], step, message, hint)
        self.failed[repo] = failure
        self.result.failures.append(_summary(failure))
        self.log.error("%s → %s: %s failed (attempt %d%s): %s", repo, index_name(self.index), step, failure.attempts, ", dead" if failure.dead else "", message)

    def fail_all(self, exc: BaseException, what: str) -> None:
        message, hint = _describe(exc, self.log, what)
        for repo in self.repos:
            self.fail(repo, "update", message, hint)

    def waiting(self) -> None:
        self.log.info("%s: waiting for its writer lock", index_name(self.index))

    def say(self, line: str) -> None:
        """One line of the embed's progress (qmd.ProgressLines): what it is about to do, then how far it is."""
        self.log.info("%s: %s", index_name(self.index), line)

    def updated(self, report: qmd.UpdateReport) -> None:
        _mark_working(self.ledger.layout, self.index, self.repos, "embed")
        self.result.documents_updated += sum(coll.new + coll.updated + coll.removed for coll in report.collections)

    def record(self, report: qmd.RefreshReport) -> None:
        """Per repo: the update's errors, then the embed's (or why it was skipped)."""
        broken = {name: f"{name}: {message}" + (f" (hint: {hint})" if hint else "") for name, message, hint in report.update.errors}
        for repo, names in self.repos.items():
            errors = [broken[n] for n in names if n in broken]
            if errors:
                self.fail(repo, "update", "; ".join(errors), "fix the collection (qmd collection show NAME), then: qmd updater run")
            else:
                self.ledger.clear(repo, self.index, ("update",))
        if report.embed_skipped is not None:
            self.result.embed_skipped[self.index] = report.embed_skipped
            self.log.info("%s: embedding skipped: %s", index_name(self.index), report.embed_skipped)
        elif report.embed is not None:
            embedded = report.embed
            self.result.chunks_embedded += embedded.chunks
            self.log.info("%s: embedded %s: %d documents, %d chunks in %.1fs", index_name(self.index), ", ".join(report.embedded), embedded.documents, embedded.chunks, embedded.seconds)
        elif report.embed_error is not None:
            message, hint = _describe(report.embed_error, self.log, f"{index_name(self.index)} embed")
            for repo, names in self.repos.items():
                if repo not in self.failed and set(names) & set(report.embedded):
                    self.fail(repo, "embed", message, hint)
        for repo in self.repos:
            if repo not in self.failed:
                self.ledger.clear(repo, self.index, ("embed",))


def _run_index(ledger: records.Ledger, log: logging.Logger, configured: harness.ConfiguredIndex, repos: dict[str, list[str]], result: RunResult) -> dict[str, records.Failure]:
    """Update then embed one index for `repos` (`Store.refresh`); returns {repo: failure} for the repos that failed."""
    run = _IndexRun(ledger, log, configured.key, repos, result)
    try:
        paths = configured.paths()
        store = qmd.Store(paths.index_path, paths.config_path, config=configured.config)  # the config routing read
    except Exception as exc:  # the config was readable a moment ago; anything can happen to files
        run.fail_all(exc, index_name(run.index))
        return run.failed
    union = sorted({name for names in repos.values() for name in names})
    try:
        log.info("%s: updating %s for %d repo(s)", index_name(run.index), ", ".join(union), len(repos))
        _mark_working(ledger.layout, run.index, repos, "update")
        report = store.refresh(union, run_commands=False, on_wait=run.waiting, on_updated=run.updated, embed_progress=qmd.ProgressLines(run.say))
    except Exception as exc:
        run.fail_all(exc, f"{index_name(run.index)} update")
        return run.failed
    finally:
        _unmark_working(ledger.layout)  # also on SIGTERM (SystemExit) and Ctrl-C: a clean stop, not a death
        store.close()
    run.record(report)
    return run.failed
