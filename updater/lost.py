"""Requests a writer could not finish: files left in `queue/tmp/` (silence is not freshness).

The hook writes `queue/tmp/<pid>.<event>.<commit>` and renames it into `queue/new/` within
milliseconds. A file still in `queue/tmp/` LOST_GRACE_S later is a request that never made
it: the disk filled up (the hook's `date >file` created the file, 0 bytes, and could not
write it; hooks.log could not be written either), the hook was killed between the write and
the rename, or the rename failed. The commit succeeded (the hook fails open), so without
this the change stayed unindexed with nothing saying so.

`leftovers` finds them (reads only: status and health count them as pending and name the
fix); `recover` (the lock holder, at the start of every drain) turns each into requests:
- a complete request (the rename never happened) moves into `queue/new/` as it is;
- an empty or cut-short one carries its event and commit in its name only: it becomes one
  request for each enrolled repository that has that commit (`git cat-file -e`), else for
  every enrolled repository, else (nothing enrolled) for every collection folder of every
  index. A request is a kick and every update rescans whole collections, so asking too
  widely costs an update, never a wrong index;
- a link, FIFO or device (no writer of ours makes one) moves to `queue/failed/` unread.
The leftover is deleted only once its requests are written (`spool.enqueue`: write, fsync,
rename); when that fails (the disk still full) it stays, and the run says so and exits 1.
A file younger than the grace period is never touched: a hook may still be writing it.
"""

from __future__ import annotations

import logging
import os
import re
import stat
import subprocess
import time
from dataclasses import dataclass, field
from pathlib import Path

from qmd.harness import StateLayout, age

from . import registry, routing, spool

LOST_GRACE_S = 60.0  # a hook holds its file a few milliseconds; a minute is far beyond any live writer
HOOK_TMP = re.compile(r"^[0-9]+\.(?P<event>[A-Za-z0-9_-]+)\.(?P<commit>[0-9a-f]+)$")  # enqueue-tmpl's `$$.$event.${commit:-0}`
FIX = "run: qmd updater run (it queues them again), or qmd update --embed to index everything now"


@dataclass
class Leftover:
    path: Path
    mtime: float

    @property
    def name(self) -> str:
        return self.path.name


def leftovers(layout: StateLayout, now: float | None = None, grace: float = LOST_GRACE_S) -> list[Leftover]:
    """Files in queue/tmp/ whose last change is more than `grace` seconds away from `now`
    (either way: a clock set back leaves a file in the future), oldest first. Only lstat:
    safe without the lock, and it never opens a FIFO. Dot-files are `write_text`'s own
    temporaries (`spool.enqueue` raises when it cannot write; it leaves no request behind)."""
    now = time.time() if now is None else now
    out = []
    folder = layout.q("tmp")
    for name in spool.names(folder):
        try:
            mtime = os.lstat(folder / name).st_mtime
        except OSError:
            continue  # renamed into new/ while we looked
        if abs(now - mtime) > grace:
            out.append(Leftover(folder / name, mtime))
    return sorted(out, key=lambda left: left.mtime)


def describe(found: list[Leftover], now: float | None = None) -> str:
    """One sentence for status, health and the session line."""
    now = time.time() if now is None else now
    n = len(found)
    return (
        f"{n} request{'s' if n != 1 else ''} the git hooks could not finish writing (a full disk?) "
        f"{'are' if n != 1 else 'is'} stuck in {found[0].path.parent}, the oldest {age(max(0.0, now - found[0].mtime))} old: "
        "those changes are not indexed"
    )


@dataclass
class Recovered:
    queued: dict[str, list[str]] = field(default_factory=dict)  # leftover name → the repos (or folders) queued for it
    junk: list[Path] = field(default_factory=list)  # not regular files: moved to queue/failed/
    stuck: list[str] = field(default_factory=list)  # names left in queue/tmp: their requests could not be written
    error: str | None = None


_GIT_ENV_DROP = ("GIT_DIR", "GIT_WORK_TREE", "GIT_COMMON_DIR", "GIT_INDEX_FILE", "GIT_OBJECT_DIRECTORY", "GIT_ALTERNATE_OBJECT_DIRECTORIES")


def has_commit(repo: str, commit: str) -> bool:
    """True when the repository at `repo` holds the commit `commit` (False on any doubt)."""
    env = {k: v for k, v in os.environ.items() if k not in _GIT_ENV_DROP}
    try:
        proc = subprocess.run(["git", "-C", repo, "cat-file", "-e", f"{commit}^{{commit}}"], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return False
    return proc.returncode == 0


def targets(layout: StateLayout, commit: str) -> list[str]:
    """Where a request whose repository is unknown goes (see the module docstring)."""
    enrolled = sorted(repo for repo in registry.load(layout) if os.path.isdir(repo))
    if enrolled:
        holders = [repo for repo in enrolled if has_commit(repo, commit)] if commit.strip("0") else []
        return holders or enrolled
    return sorted({coll.path for coll in routing.load().collections if os.path.isdir(coll.path)})


def recover(layout: StateLayout, log: logging.Logger, now: float | None = None) -> Recovered:
    """Turn every leftover older than the grace period into requests in queue/new/ (the caller holds the lock)."""
    out = Recovered()
    for left in leftovers(layout, now):
        try:
            mode = os.lstat(left.path).st_mode
        except FileNotFoundError:
            continue
        try:
            if not stat.S_ISREG(mode):
                out.junk.append(spool.move(left.path, layout.q("failed")))
                log.warning("%s is not a request (not a regular file): moved to %s", left.path, layout.q("failed"))
                continue
            request = spool.parse(left.path)
            if request is not None:
                spool.move(left.path, layout.q("new"))
                out.queued[left.name] = [request.repo]
                log.warning("%s: a whole request its writer never moved into the queue (killed, or the rename failed): queued", left.path)
                continue
            found = HOOK_TMP.match(left.name)
            event, commit = (found["event"], found["commit"]) if found else ("lost", "")
            repos = targets(layout, commit)
            for repo in repos:
                spool.enqueue(layout, repo, event, "" if not commit.strip("0") else commit, {"lost": left.name})
            left.path.unlink()
            out.queued[left.name] = repos
            where = ", ".join(repos) if repos else "nothing (no repository enrolled, no collection configured)"
            log.warning("%s: a request its hook could not write (a full disk?), %s; queued again for %s", left.path, f"{event} of {commit[:12]}" if commit.strip("0") else event, where)
        except OSError as exc:
            out.stuck.append(left.name)
            out.error = f"cannot queue again the request{'s' if len(out.stuck) != 1 else ''} the git hooks left in {layout.q('tmp')}: {exc.strerror or exc}"
            log.error("%s: %s", left.path, out.error)
    return out
