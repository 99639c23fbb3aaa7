"""One drain of the queue: claim, coalesce per repo, route, update, embed, record, delete.

Steps (the caller holds the global lock):
1. Claim: rename new/* into cur/ (cur/ may still hold requests of a killed or failed run).
2. Revalidate the failure records: a record whose repo is gone becomes a dropped one; a
   record whose repo no longer routes to its index is moot and removed.
3. Coalesce per repo. A repo that no longer exists: its requests are dropped (moved to
   failed/) with a record. A repo no collection lies in: its requests are deleted.
   With `respect_backoff` (the daemon, the timer) a repo whose last attempt failed waits
   for its backoff unless a new request (a commit, `qmd updater retry`) arrived.
4. Per index, one `Store.update(collections)` over every collection the repos route to,
   then one `Store.embed(collections)` for those that are embeddable and updated cleanly.
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
from qmd import QmdError, StateLayout, now_iso

from . import records, routing, spool, stats
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
    embed_skipped: dict[str, str] = field(default_factory=dict)  # index → why
    documents_updated: int = 0
    chunks_embedded: int = 0

    @property
    def succeeded(self) -> bool:
        return not self.failures

    def as_dict(self) -> dict[str, Any]:
        return dict(asdict(self), succeeded=self.succeeded)


def _describe(exc: BaseException, log: logging.Logger, what: str) -> tuple[str, str | None]:
    """(message, hint) for a failed step; an unexpected exception's traceback goes to the log."""
    if isinstance(exc, QmdError):
        return exc.message, exc.cli_hint
    log.error("%s: unexpected %s\n%s", what, type(exc).__name__, "".join(traceback.format_exception(exc)))
    return f"{type(exc).__name__}: {exc}", "this is a bug in qmd; the traceback is in the updater log"


def _revalidate(layout: StateLayout, indexes: routing.Indexes, log: logging.Logger) -> None:
    known = set(routing.index_names())
    for failure in records.load_all(layout):
        if failure.dropped or failure.repo is None:
            if failure.repo is None and failure.index not in known:
                records.remove(layout, failure.id)
            continue
        if not os.path.isdir(failure.repo):
            log.warning("%s no longer exists: its failure record %s is now a dropped one", failure.repo, failure.id)
            records.remove(layout, failure.id)
            records.record_dropped(layout, failure.repo, 0)
        elif failure.index not in indexes.route(failure.repo) and failure.index not in indexes.errors:
            log.info("%s no longer routes to index %s: record %s removed", failure.repo, failure.index, failure.id)
            records.remove(layout, failure.id)


def drain(layout: StateLayout, log: logging.Logger, *, respect_backoff: bool = False) -> RunResult:
    """Process every request in the queue once (see the module docstring)."""
    started = time.time()
    result = RunResult(now_iso(started))
    requests, bad = spool.claim(layout)
    result.invalid = len(bad)
    for path in bad:
        log.warning("unreadable request moved to %s", path)
    result.requests = len(requests)
    indexes = routing.load()
    for index, (message, hint) in indexes.errors.items():
        failure = records.record_failure(layout, None, index, [], "update", f"config of index {index}: {message}", hint)
        log.error("index %s: %s", index, message)
        result.failures.append(_summary(failure))
    for index in set(routing.index_names()) - set(indexes.errors):
        records.clear(layout, None, index, ("update",))
    _revalidate(layout, indexes, log)

    by_repo: dict[str, list[spool.Request]] = {}
    for request in requests:
        by_repo.setdefault(os.path.realpath(request.repo), []).append(request)
    plan: dict[str, dict[str, list[str]]] = {}  # index → repo → collections
    now = time.time()
    current = {f.id: f for f in records.load_all(layout)}
    for repo, batch in sorted(by_repo.items()):
        if not os.path.isdir(repo):
            for request in batch:
                spool.move(request.path, layout.q("failed"))
            records.record_dropped(layout, repo, len(batch))
            result.dropped.append(repo)
            log.warning("%s no longer exists: %d request(s) dropped", repo, len(batch))
            continue
        if any(r.retry for r in batch):
            records.revive(layout, repo)
            current = {f.id: f for f in records.load_all(layout)}
        routes = indexes.route(repo)
        if not routes:
            spool.delete([r.path for r in batch])
            result.unrouted.append(repo)
            log.info("%s: no collection of any index lies in it; %d request(s) deleted", repo, len(batch))
            continue
        if respect_backoff and not any(r.fresh or r.retry for r in batch):
            mine = [f for f in current.values() if f.repo == repo and f.index in routes and not f.dropped]
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
        for repo, failure in _run_index(layout, log, index, repos, result).items():
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

    records.expire_dropped(layout, time.time())
    result.finished_at = now_iso()
    result.seconds = round(time.time() - started, 3)
    last_success = result.finished_at if result.succeeded_repos else None
    records.write_health(layout, last_success)
    if result.requests or result.failures or result.invalid:
        stats.add_run(layout, result.as_dict())
    rotate_hooks_log(layout)
    return result


def _summary(failure: records.Failure) -> dict[str, Any]:
    return {"id": failure.id, "repo": failure.repo, "index": failure.index, "step": failure.step, "error": failure.error, "attempts": failure.attempts, "dead": failure.dead}


def _run_index(layout: StateLayout, log: logging.Logger, index: str, repos: dict[str, list[str]], result: RunResult) -> dict[str, records.Failure]:
    """Update then embed one index for `repos`; returns {repo: failure} for the repos that failed."""
    failed: dict[str, records.Failure] = {}
    union = sorted({name for names in repos.values() for name in names})

    def fail(repo: str, step: str, message: str, hint: str | None) -> None:
        failure = records.record_failure(layout, repo, index, repos[repo], step, message, hint)
        failed[repo] = failure
        result.failures.append(_summary(failure))
        log.error("%s → index %s: %s failed (attempt %d%s): %s", repo, index, step, failure.attempts, ", dead" if failure.dead else "", message)

    try:
        store = qmd.open_index(index)
    except Exception as exc:  # the config was readable a moment ago; anything can happen to files
        message, hint = _describe(exc, log, f"index {index}")
        for repo in repos:
            fail(repo, "update", message, hint)
        return failed
    try:
        log.info("index %s: updating %s for %d repo(s)", index, ", ".join(union), len(repos))
        broken: dict[str, str] = {}
        try:
            report = store.update(union, run_commands=False, on_wait=lambda: log.info("index %s: waiting for its writer lock", index))
            for name, message, hint in report.errors:
                broken[name] = f"{name}: {message}" + (f" (hint: {hint})" if hint else "")
            for coll in report.collections:
                result.documents_updated += coll.new + coll.updated + coll.removed
        except Exception as exc:
            message, hint = _describe(exc, log, f"index {index} update")
            broken = {name: message for name in union}
            for repo in repos:
                fail(repo, "update", message, hint)
        for repo, names in repos.items():
            if repo in failed:
                continue
            errors = [broken[n] for n in names if n in broken]
            if errors:
                fail(repo, "update", "; ".join(errors), "fix the collection (qmd collection show NAME), then: qmd updater run")
            else:
                records.clear(layout, repo, index, ("update",))
        clean = sorted({n for repo, names in repos.items() if repo not in failed for n in names})
        embeddable, _ = store.embed_collections(clean) if clean else ([], [])
        if embeddable:
            unconfigured = store.unconfigured_embedding()
            if unconfigured is not None:
                result.embed_skipped[index] = unconfigured
                log.info("index %s: embedding skipped: %s", index, result.embed_skipped[index])
            else:
                log.info("index %s: embedding %s", index, ", ".join(embeddable))
                try:
                    embedded = store.embed(collections=embeddable, on_wait=lambda: log.info("index %s: waiting for its writer lock", index))
                    result.chunks_embedded += embedded.chunks
                    log.info("index %s: embedded %d documents, %d chunks in %.1fs", index, embedded.documents, embedded.chunks, embedded.seconds)
                except Exception as exc:
                    message, hint = _describe(exc, log, f"index {index} embed")
                    for repo, names in repos.items():
                        if repo not in failed and set(names) & set(embeddable):
                            fail(repo, "embed", message, hint)
        for repo in repos:
            if repo not in failed:
                records.clear(layout, repo, index, ("embed",))
    finally:
        store.close()
    return failed
