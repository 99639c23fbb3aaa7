"""Where the harness keeps its state (design §7) and small helpers to write it safely."""

from __future__ import annotations

import json
import os
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

import qmd

QUEUE_DIRS = ("tmp", "new", "cur", "failed")


@dataclass(frozen=True)
class Layout:
    """Every path of the harness state dir, computed once from its root."""

    root: Path

    @classmethod
    def current(cls) -> Layout:
        """The layout of `qmd.state_dir()` (`$QMD_STATE_DIR`, else XDG), made absolute."""
        return cls(Path(os.path.abspath(qmd.state_dir())))

    @property
    def queue(self) -> Path:
        return self.root / "queue"

    def q(self, name: str) -> Path:
        """`queue/tmp`, `queue/new`, `queue/cur` or `queue/failed`."""
        return self.queue / name

    @property
    def lock(self) -> Path:
        return self.root / "updater.lock"

    @property
    def holder(self) -> Path:
        """Who holds the lock: written by the holder, read by anyone who finds it busy."""
        return self.root / "updater.lock.json"

    @property
    def health(self) -> Path:
        return self.root / "health.json"

    @property
    def failures(self) -> Path:
        return self.root / "failures"

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def updater_log(self) -> Path:
        return self.logs / "updater.log"

    @property
    def hooks_log(self) -> Path:
        return self.logs / "hooks.log"

    @property
    def stats(self) -> Path:
        return self.root / "updater" / "stats.json"

    @property
    def repos(self) -> Path:
        """The repositories `qmd hooks install` enrolled."""
        return self.root / "hooks" / "repos.json"

    def ensure_queue(self) -> None:
        """Create queue/{tmp,new,cur,failed}; a QmdError naming the fix when something is in the way."""
        for name in QUEUE_DIRS:
            try:
                self.q(name).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise qmd.QmdError(
                    f"cannot create the queue folder {self.q(name)}: {exc.strerror or exc}",
                    f"move away whatever is in the way under {self.root} (or set QMD_STATE_DIR to a writable folder)",
                ) from exc


def now_iso(t: float | None = None) -> str:
    """UTC time as `2024-05-01T12:00:00Z` (the format every harness file uses)."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() if t is None else t))


def parse_iso(text: object) -> float | None:
    """Seconds since the epoch for a `now_iso` string; None for anything else."""
    if not isinstance(text, str) or not text:
        return None
    try:
        value = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.timestamp()


def ago(seconds: float) -> str:
    """`42s`, `5m`, `3h`, `2d`: a rough age for people."""
    s = max(0, int(seconds))
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if s >= size:
            return f"{s // size}{unit}"
    return f"{s}s"


def read_json(path: Path) -> Any:
    """The JSON in `path`, or None when it is missing or unreadable (never half-written: see write_json)."""
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def write_json(path: Path, data: Any) -> None:
    """Write atomically: temp file, fsync, rename. Readers see the old or the new file, never half."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(tmp, "w", encoding="utf-8") as fh:
        fh.write(json.dumps(data, indent=2, sort_keys=True) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, path)
