"""`qmd-guard`: the PreToolUse hook for Claude Code (Bash, Grep, Glob) and Codex (Bash).

Reads the hook payload (JSON) on stdin. To deny it prints the `hookSpecificOutput` deny
JSON and exits 0; to allow it prints nothing and exits 0. It fails open, always: any
exception, malformed, empty or non-UTF-8 input, a payload over the 16 MiB hard cap, a
missing, non-string or relative `cwd`, an unknown tool or a missing `folders.json` means
allow, with one line in `<state>/guard/errors.log`. Every payload under the cap is decided
(a huge command is read through `decide.bounded`, so the work stays bounded). A deny stands
when its line cannot be added to `blocks.jsonl` (a link, a folder, a full disk): errors.log
says the block went unlogged.

Lean by design (every agent shell call pays for it): no typer, no YAML, no SQLite, and
not even `json`/`re` unless the call may search or is denied. The knowledge folders come
from `<state>/guard/folders.json`, which qmd rewrites whenever a config changes. `QMD_GUARD_GLOB=deny` also denies Glob listings of knowledge folders.
"""

from __future__ import annotations

import os
import sys

from .blocklog import LinkRefused, log_error, record_block
from .decide import BASH_TOOLS, decide
from .fastjson import loads
from .knowledge import load
from .paths import FOLDERS, guard_file

MAX_INPUT = 16 << 20  # 16 MiB hard cap: a real hook payload is a few KB; anything under it is decided
_DRAIN = 64 << 20


def read_input(stream: object) -> bytes | None:
    """All of the payload, or None when it is over MAX_INPUT (up to 64 MiB more is drained, not parsed)."""
    data = stream.read(MAX_INPUT + 1)  # type: ignore[attr-defined]
    if len(data) <= MAX_INPUT:
        return bytes(data)
    drained = len(data)
    while drained < _DRAIN and (chunk := stream.read(1 << 20)):  # type: ignore[attr-defined]
        drained += len(chunk)
    return None


def _call_text(tool: str, tool_input: dict[str, object]) -> str:
    command = tool_input.get("command", tool_input.get("cmd"))
    if tool in BASH_TOOLS and isinstance(command, str):
        return command
    if tool in BASH_TOOLS and isinstance(command, list):
        return " ".join(str(c) for c in command)
    import json

    fields = {k: tool_input[k] for k in ("pattern", "path", "glob", "type") if tool_input.get(k)}
    return f"{tool} {json.dumps(fields, ensure_ascii=False)}"


def _no_lone_surrogates(payload: object) -> object:
    """The payload with each lone surrogate (a JSON `\\ud800` escape, which no UTF-8 text can hold)
    replaced by U+FFFD, as the agent's shell receives it: left in, it made path calls and the
    block log raise, and a raise allows. Walked without recursion."""
    import re

    lone = re.compile("[\ud800-\udfff]")
    root: list[object] = [payload]
    stack: list[object] = [root]
    while stack:
        box = stack.pop()
        if isinstance(box, dict):
            if any(isinstance(k, str) and lone.search(k) for k in box):
                items = list(box.items())
                box.clear()
                box.update((lone.sub("\ufffd", k) if isinstance(k, str) else k, v) for k, v in items)
            pairs: list[tuple[object, object]] = list(box.items())
        elif isinstance(box, list):
            pairs = list(enumerate(box))
        else:
            continue
        for key, value in pairs:
            if isinstance(value, str):
                box[key] = lone.sub("\ufffd", value)  # type: ignore[call-overload]
            elif isinstance(value, (list, dict)):
                stack.append(value)
    return root[0]


def respond(data: bytes) -> str | None:
    """The hook's stdout for one payload: the deny JSON, or None to allow. Raises on bad input."""
    text = data.decode("utf-8")
    payload = loads(text)
    if "\\ud" in text or "\\uD" in text:
        payload = _no_lone_surrogates(payload)
    if not isinstance(payload, dict):
        raise ValueError("payload is not a JSON object")
    event = payload.get("hook_event_name")
    if event not in (None, "PreToolUse"):
        return None
    tool = payload.get("tool_name")
    tool_input = payload.get("tool_input")
    if tool not in BASH_TOOLS and tool not in ("Grep", "Glob"):
        log_error(f"unknown tool or input shape {str(tool)[:80]!r}: allowed")
        return None
    cwd = payload.get("cwd")
    if not isinstance(cwd, str) or not os.path.isabs(cwd):
        from .decide import kind_of

        what = "missing" if cwd is None else ("not an absolute path" if isinstance(cwd, str) else f"{kind_of(cwd)}, not a string")
        log_error(f"malformed input: cwd is {what}: allowed")
        return None
    knowledge = load(guard_file(FOLDERS))
    if knowledge is None:
        log_error("folders.json is missing: allowed everything (run `qmd guard check` to see why)")
        return None
    decision = decide(knowledge, str(tool), tool_input, cwd, os.environ.get("QMD_GUARD_GLOB") == "deny")
    if decision.rule == "unknown-tool":
        log_error(f"unknown tool or input shape {str(tool)[:80]!r}: allowed")
    elif decision.rule == "malformed":
        log_error(f"malformed input: {decision.detail}: allowed")
    if not decision.deny or not isinstance(tool_input, dict):
        return None
    import json

    from .advice import agent_of, reason

    text = reason(knowledge, decision, _call_text(str(tool), tool_input), agent_of(payload), cwd)
    session = payload.get("session_id")
    try:
        record_block(str(session) if session is not None else "", cwd, str(tool), tool_input, decision.rule, decision.folder.path if decision.folder else None)
    except LinkRefused as exc:  # a deliberate refusal, not a failure: the decision stands
        log_error(f"{exc}; the block was not logged (denied all the same)")
    except OSError as exc:  # the decision was made, only its record failed (a folder or a read-only file in its place,
        # a full disk): allowing would let whoever can break the log turn the guard off
        log_error(f"blocks.jsonl could not be written ({exc.strerror or exc}); the block was not logged (denied all the same)")
    return json.dumps(
        {"hookSpecificOutput": {"hookEventName": "PreToolUse", "permissionDecision": "deny", "permissionDecisionReason": text}},
        ensure_ascii=False,
    )


def _where(exc: BaseException) -> str:
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return f" [{os.path.basename(tb.tb_frame.f_code.co_filename)}:{tb.tb_lineno}]" if tb is not None else ""


def main() -> int:
    """Entry point of `qmd-guard`: always returns 0 (fail open)."""
    try:
        data = read_input(sys.stdin.buffer)
        if data is None:
            log_error(f"input over {MAX_INPUT} bytes: allowed without parsing")
            return 0
        out = respond(data)
        if out:
            encoded = (out + "\n").encode("utf-8")
            while encoded:
                encoded = encoded[os.write(1, encoded) :]
    except BaseException as exc:  # noqa: BLE001 - fail open: a guard bug must never block a tool
        log_error(f"{type(exc).__name__}: {exc}{_where(exc)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
