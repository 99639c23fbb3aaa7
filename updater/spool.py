"""The request queue: a maildir-style spool (design §3).

Writers put `tmp/<unique>` and rename it into `new/` (no locks, never half a file).
The updater claims a request by renaming it into `cur/`, and deletes it only after the
work it asked for succeeded; a request whose failure went dead, whose repository is
gone or that cannot be read moves to `failed/`. A request is a kick, not a diff: every
update rescans whole collections, so any number of requests for one repo coalesce.
"""

from __future__ import annotations

import json
import os
import socket
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmd import harness
from qmd.harness import StateLayout, now_iso, parse_iso, replace_file, write_text


@dataclass
class Request:
    path: Path  # where the file is now
    repo: str  # the work tree (or the watched folder) it is about
    event: str
    commit: str
    time: float  # when it was queued (seconds since the epoch)
    fresh: bool = False  # claimed from new/ by this run (not a retry left in cur/)
    retry: bool = False  # put back by `qmd updater retry`

    @property
    def name(self) -> str:
        return self.path.name


def unique_name(event: str) -> str:
    """`<time>.<pid>.<host-ish>.<event>`: unique among writers without coordination."""
    import time

    return f"{now_iso()}.{os.getpid()}.{time.monotonic_ns() % 10**9}.{socket.gethostname().split('.')[0] or 'host'}.{event}"


def enqueue(layout: StateLayout, repo: str, event: str, commit: str = "", extra: dict[str, Any] | None = None) -> Path:
    """Queue one request from Python (the watcher, `qmd updater retry`); the hooks do the same in sh."""
    layout.ensure_queue()
    name = unique_name(event)
    body = {"repo": repo, "event": event, "commit": commit, "time": now_iso(), **(extra or {})}
    tmp = write_text(layout.q("tmp") / name, json.dumps(body) + "\n")
    target = layout.q("new") / name
    replace_file(tmp, target)
    return target


MAX_REQUEST = 64 << 10  # a request is a few hundred bytes; a bigger file is not one


def _encodable(path: str) -> bool:
    """Whether `path` names a file at all: a lone surrogate outside the undecodable-byte range
    (`"\ud800"`) cannot become bytes, and every path operation on it raised."""
    try:
        os.fsencode(path)
    except UnicodeEncodeError:
        return False
    return True


def parse(path: Path) -> Request | None:
    """The request in `path`; None when it is not a readable request.

    Only a regular file is read, and only its first MAX_REQUEST bytes: a FIFO or a link to
    /dev/zero dropped into the spool blocked this read forever (the updater holding its lock,
    `qmd health --session-start` and doctor hanging); now it is junk, moved to failed/.
    """
    try:
        with harness.open_regular(path) as fh:
            raw = fh.read(MAX_REQUEST + 1)
        if len(raw) > MAX_REQUEST:
            return None
        data = json.loads(raw.decode("utf-8", errors="replace"), strict=False)
    except (OSError, ValueError):
        return None
    repo = data.get("repo") if isinstance(data, dict) else None
    if not isinstance(repo, str) or not os.path.isabs(repo) or "\0" in repo or not _encodable(repo):
        return None  # the hook writes an absolute path; a NUL made every drain crash (exit 3) on this file, a relative one named a folder of the updater's cwd
    when = parse_iso(data.get("time"))
    if when is None:
        try:
            when = path.stat().st_mtime
        except OSError:
            when = 0.0
    return Request(path, repo, str(data.get("event") or "?"), str(data.get("commit") or ""), when, retry=bool(data.get("retry")))


def names(folder: Path) -> list[str]:
    """The entries of a queue folder, sorted, without dot-files (`write_text`'s temporaries); [] when it is missing."""
    try:
        return sorted(n for n in os.listdir(folder) if not n.startswith("."))
    except (FileNotFoundError, NotADirectoryError):
        return []


def claim(layout: StateLayout) -> tuple[list[Request], list[Path]]:
    """Move everything in new/ into cur/; return (all requests in cur/, unreadable files moved to failed/)."""
    layout.ensure_queue()
    fresh: set[str] = set()
    for name in names(layout.q("new")):
        try:
            replace_file(layout.q("new") / name, layout.q("cur") / name)
            fresh.add(name)
        except FileNotFoundError:
            continue  # another claimer took it (cannot happen under the lock, harmless anyway)
    requests, bad = [], []
    for name in names(layout.q("cur")):
        path = layout.q("cur") / name
        request = parse(path)
        if request is None:
            bad.append(move(path, layout.q("failed")))
            continue
        request.fresh = name in fresh
        requests.append(request)
    return requests, bad


def move(path: Path, folder: Path) -> Path:
    """Rename a request into `folder` (failed/, new/); returns its new path."""
    folder.mkdir(parents=True, exist_ok=True)
    target = folder / path.name
    try:
        replace_file(path, target)
    except FileNotFoundError:
        pass
    return target


def delete(paths: list[Path]) -> None:
    for path in paths:
        try:
            path.unlink()
        except FileNotFoundError:
            pass


def failed_for(layout: StateLayout, repo: str) -> list[Path]:
    """Requests in failed/ about `repo` (superseded once the repo updates successfully)."""
    out = []
    for name in names(layout.q("failed")):
        request = parse(layout.q("failed") / name)
        if request is not None and os.path.realpath(request.repo) == repo:
            out.append(request.path)
    return out


@dataclass
class QueueInfo:
    pending: int  # new/ + cur/
    oldest: float | None  # queue time of the oldest pending request
    failed: int  # dead-lettered, dropped or unreadable requests in failed/
    by_repo: dict[str, int]


def info(layout: StateLayout) -> QueueInfo:
    """Counts for status and health (reads only; safe while an updater runs)."""
    oldest: float | None = None
    by_repo: dict[str, int] = {}
    pending = 0
    for sub in ("new", "cur"):
        folder = layout.q(sub)
        for name in names(folder):
            request = parse(folder / name)
            if request is None:
                continue  # claimed (renamed) while we looked, or unreadable: the updater handles it
            pending += 1
            by_repo[request.repo] = by_repo.get(request.repo, 0) + 1
            oldest = request.time if oldest is None else min(oldest, request.time)
    return QueueInfo(pending, oldest, len(names(layout.q("failed"))), by_repo)
