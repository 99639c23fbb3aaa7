"""The block log (`<state>/guard/blocks.jsonl`) and the error log (`<state>/guard/errors.log`).

One JSON line per block (design §7): `{ts, session_id, cwd, tool, input, rule, folder,
retry}`; `retry` is true when the same session was blocked on the same normalised input
within the last 10 minutes. The file is created 0600 and rotated to `blocks.jsonl.1` at
10 MB. The error log gets one line per failure the hook swallowed (fail open); a message
identical to the previous line is repeated at most once a minute, and the file rotates at 1 MB.

Neither log is ever written, chmod'ed, read or rotated through a link: both are opened with
`O_NOFOLLOW`, and a symlink, a file with other hard links, or a symlinked `.1` file raises
`LinkRefused` (record_block) or drops the line (log_error, which never raises).
"""

from __future__ import annotations

import os
import time

from .paths import BLOCKS, ERRORS, guard_dir

MAX_BYTES = 10 * 1024 * 1024
MAX_ERROR_BYTES = 1024 * 1024
RETRY_WINDOW_S = 600
MAX_FIELD = 4000
ERROR_REPEAT_S = 60
_TAIL_BYTES = 512 * 1024
_NOFOLLOW = getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)


class LinkRefused(OSError):
    """A log file is a symbolic or hard link: nothing is written through it."""


def _refuse_link(path: str, exc: OSError | None = None) -> None:
    """Raise LinkRefused when `path` is a symlink (`exc`: the error opening it, re-raised otherwise)."""
    if os.path.islink(path):
        raise LinkRefused(f"refused to write through a link: {path} is a symbolic link") from None
    if exc is not None:
        raise exc


def parse_ts(ts: object) -> float | None:
    """Seconds since the epoch of a block-log timestamp (`2026-01-02T03:04:05.678Z`), or None."""
    from qmd.harness import parse_iso  # only on the deny and error paths: the allow path never imports qmd

    return parse_iso(ts)


def _now_iso(now: float | None = None) -> str:
    from qmd.harness import now_iso

    return now_iso(now, millis=True)


def normalized(tool: str, tool_input: object) -> str:
    """The retry key: tool plus its input with whitespace runs collapsed."""
    import json

    if isinstance(tool_input, dict) and isinstance(tool_input.get("command"), str):
        return tool + "\0" + " ".join(str(tool_input["command"]).split())
    text = json.dumps(tool_input, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return tool + "\0" + " ".join(text.split())


def clip(value: object) -> object:
    """`value` with strings longer than 4000 characters cut (log lines stay small)."""
    if isinstance(value, str):
        return value if len(value) <= MAX_FIELD else value[:MAX_FIELD] + "…"
    if isinstance(value, dict):
        return {str(k): clip(v) for k, v in list(value.items())[:50]}
    if isinstance(value, list):
        return [clip(v) for v in value[:50]]
    return value


def tail_lines(path: str, max_bytes: int = _TAIL_BYTES) -> list[str]:
    """The complete lines in the last `max_bytes` of `path` (empty when it does not exist)."""
    try:
        fd = os.open(path, os.O_RDONLY | _NOFOLLOW)
    except OSError as exc:
        if isinstance(exc, FileNotFoundError) or os.path.islink(path):
            return []  # missing, or a link: nothing of ours to read
        raise
    with os.fdopen(fd, "rb") as fh:
        size = fh.seek(0, os.SEEK_END)
        start = max(0, size - max_bytes)
        fh.seek(start)
        data = fh.read()
    lines = data.decode("utf-8", errors="replace").splitlines()
    return lines[1:] if start > 0 else lines


def is_retry(path: str, session_id: str, key: str, now: float) -> bool:
    """True when `session_id` was blocked on `key` within the retry window."""
    import json

    for line in reversed(tail_lines(path)):
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict):
            continue
        ts = parse_ts(record.get("ts"))
        if ts is not None and now - ts > RETRY_WINDOW_S:
            return False
        if record.get("session_id") == session_id and normalized(str(record.get("tool")), record.get("input")) == key:
            return ts is not None
    return False


def _append(path: str, line: str, mode: int) -> None:
    """Append `line` to the regular file `path` (created with `mode`); LinkRefused for a link."""
    import errno
    import stat

    try:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT | _NOFOLLOW, mode)
    except OSError as exc:
        _refuse_link(path, exc)
        raise
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise OSError(errno.EINVAL, "not a regular file", path)
        if info.st_nlink > 1:
            raise LinkRefused(f"refused to write through a link: {path} has {info.st_nlink - 1} other hard link(s)")
        if stat.S_IMODE(info.st_mode) != mode:
            os.fchmod(fd, mode)
        data = line.encode("utf-8")
        while data:
            data = data[os.write(fd, data) :]
    finally:
        os.close(fd)


def _rotate(path: str, limit: int) -> None:
    """Rename `path` to `path.1` once it reaches `limit` bytes; never through a link (LinkRefused)."""
    import stat

    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    _refuse_link(path)
    if not stat.S_ISREG(info.st_mode) or info.st_size < limit:
        return
    if os.path.islink(path + ".1"):
        raise LinkRefused(f"refused to rotate onto a link: {path}.1 is a symbolic link")
    from qmd.harness import replace_file

    replace_file(path, path + ".1")


def record_block(session_id: str, cwd: str | None, tool: str, tool_input: object, rule: str, folder: str | None, now: float | None = None) -> dict[str, object]:
    """Append one block line; returns the record written.

    Raises LinkRefused when blocks.jsonl (or, when rotating, blocks.jsonl.1) is a link, and
    OSError when it cannot be written.
    """
    import json

    now = time.time() if now is None else now
    directory = guard_dir()
    os.makedirs(directory, mode=0o700, exist_ok=True)
    path = os.path.join(directory, BLOCKS)
    _rotate(path, MAX_BYTES)
    record: dict[str, object] = {
        "ts": _now_iso(now),
        "session_id": session_id,
        "cwd": cwd,
        "tool": tool,
        "input": clip(tool_input),
        "rule": rule,
        "folder": folder,
        "retry": bool(session_id) and is_retry(path, session_id, normalized(tool, tool_input), now),
    }
    _append(path, json.dumps(record, ensure_ascii=False) + "\n", 0o600)
    return record


def log_error(message: str) -> None:
    """Append one line to errors.log; never raises (the hook fails open even when this fails)."""
    try:
        message = " ".join(message.split())[:2000]
        directory = guard_dir()
        os.makedirs(directory, mode=0o700, exist_ok=True)
        path = os.path.join(directory, ERRORS)
        last = tail_lines(path, 4096)
        if last:
            ts, _, previous = last[-1].partition(" ")
            when = parse_ts(ts)
            if previous == message and when is not None and time.time() - when < ERROR_REPEAT_S:
                return
        _rotate(path, MAX_ERROR_BYTES)
        _append(path, f"{_now_iso()} {message}\n", 0o600)
    except Exception:  # noqa: BLE001 - nothing may escape the fail-open path
        pass
