"""Our hooks in agents' JSON hook settings: merge the PreToolUse (and SessionStart) handlers, remove them.

Beside the guard, install registers `qmd health --session-start` as a SessionStart hook (its
plain stdout, one line only when the index health flag is raised, reaches the agent's context).

Used for Claude Code (`settings.json`) and Codex (`hooks.json`); both share the shape
`{"hooks": {"PreToolUse": [{"matcher": …, "hooks": [{"type": "command", "command": …}]}]}}`.
Our handler is recognised by its command: a `qmd-guard` executable (the marker), so a
reinstall from another venv replaces it and uninstall removes exactly it. Reading, backing
up and writing the files is `qmd.agents`' job (`read_json_object`, `write_with_backup`).
"""

from __future__ import annotations

import os
import shlex
from collections.abc import Callable
from pathlib import Path
from typing import Any

from qmd import QmdError

MARKER = "qmd-guard"
TIMEOUT_S = 5
SESSION_EVENT = "SessionStart"
SESSION_TIMEOUT_S = 10


def is_ours(handler: object) -> bool:
    """True for a hook handler whose command runs a `qmd-guard` executable."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    return bool(words) and os.path.basename(words[0]) == MARKER


def is_session_hook(handler: object) -> bool:
    """True for a hook handler whose command runs `qmd health --session-start`."""
    if not isinstance(handler, dict) or not isinstance(handler.get("command"), str):
        return False
    try:
        words = shlex.split(handler["command"])
    except ValueError:
        return False
    return len(words) >= 3 and os.path.basename(words[0]) == "qmd" and words[1:3] == ["health", "--session-start"]


def _pre_tool_use(data: dict[str, Any], path: Path, create: bool, event: str = "PreToolUse") -> list[Any] | None:
    hooks = data.get("hooks")
    if hooks is None:
        if not create:
            return None
        hooks = data["hooks"] = {}
    if not isinstance(hooks, dict):
        raise QmdError(f'{path}: "hooks" is not an object', "fix the file and run the command again")
    pre = hooks.get(event)
    if pre is None:
        if not create:
            return None
        pre = hooks[event] = []
    if not isinstance(pre, list):
        raise QmdError(f'{path}: "hooks.{event}" is not a list', "fix the file and run the command again")
    return pre


def _strip_ours(pre: list[Any], ours: Callable[[object], bool] = is_ours) -> int:
    removed = 0
    for group in list(pre):
        handlers = group.get("hooks") if isinstance(group, dict) else None
        if not isinstance(handlers, list):
            continue
        keep = [h for h in handlers if not ours(h)]
        removed += len(handlers) - len(keep)
        if len(keep) != len(handlers):
            if keep:
                group["hooks"] = keep
            else:
                pre.remove(group)
    return removed


def merge(data: dict[str, Any], path: Path, command: str, matcher: str) -> tuple[bool, list[str]]:
    """Put exactly one handler of ours under PreToolUse; returns (changed, containers created)."""
    created = [key for key, present in (("hooks", "hooks" in data), ("PreToolUse", isinstance(data.get("hooks"), dict) and "PreToolUse" in data["hooks"])) if not present]
    pre = _pre_tool_use(data, path, create=True)
    assert pre is not None
    handler = {"type": "command", "command": command, "timeout": TIMEOUT_S}
    ours = [(g, h) for g in pre if isinstance(g, dict) for h in (g.get("hooks") or []) if is_ours(h)]
    if len(ours) == 1 and ours[0][0].get("matcher") == matcher and ours[0][1] == handler and len(ours[0][0]["hooks"]) == 1:
        return False, []
    _strip_ours(pre)
    pre.append({"matcher": matcher, "hooks": [handler]})
    return True, created


def merge_session(data: dict[str, Any], path: Path, command: str) -> tuple[bool, list[str]]:
    """Put exactly one `qmd health --session-start` handler under SessionStart (no matcher: every start)."""
    created = [SESSION_EVENT] if not (isinstance(data.get("hooks"), dict) and SESSION_EVENT in data["hooks"]) else []
    starts = _pre_tool_use(data, path, create=True, event=SESSION_EVENT)
    assert starts is not None
    handler = {"type": "command", "command": command, "timeout": SESSION_TIMEOUT_S}
    ours = [(g, h) for g in starts if isinstance(g, dict) for h in (g.get("hooks") or []) if is_session_hook(h)]
    if len(ours) == 1 and ours[0][1] == handler and ours[0][0] == {"hooks": [handler]}:
        return False, []
    _strip_ours(starts, is_session_hook)
    starts.append({"hooks": [handler]})
    return True, created


def remove(data: dict[str, Any], path: Path, drop_empty: list[str]) -> int:
    """Remove our handlers (and groups left empty); drop the containers named in `drop_empty` if empty."""
    removed = 0
    starts = _pre_tool_use(data, path, create=False, event=SESSION_EVENT)
    if starts is not None:
        removed += _strip_ours(starts, is_session_hook)
        if not starts and SESSION_EVENT in drop_empty:
            del data["hooks"][SESSION_EVENT]
    pre = _pre_tool_use(data, path, create=False)
    if pre is None:
        if not data.get("hooks") and "hooks" in drop_empty and "hooks" in data:
            del data["hooks"]
        return removed
    removed += _strip_ours(pre)
    if not pre and "PreToolUse" in drop_empty:
        del data["hooks"]["PreToolUse"]
    if not data.get("hooks") and "hooks" in drop_empty and "hooks" in data:
        del data["hooks"]
    return removed
