"""Codex's hooks feature flag in `~/.codex/config.toml`, edited as text so the rest of the file stays as it is.

Codex releases that keep hooks behind a feature flag need `[features] hooks = true`
(older ones spelled it `codex_hooks`). We add `hooks = true` only when neither key is
present, and remember how, so uninstall removes exactly that line (or block, or file).
"""

from __future__ import annotations

import re
import tomllib
from pathlib import Path
from typing import Any

from qmd import QmdError

LINE = "hooks = true"
_HEADER = re.compile(r"^[ \t]*\[[ \t]*features[ \t]*\][ \t]*(?:#.*)?$", re.MULTILINE)
_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)
_OUR_LINE = re.compile(r"^[ \t]*hooks[ \t]*=[ \t]*true[ \t]*\r?\n?", re.MULTILINE)


def _parse(text: str, path: Path) -> dict[str, Any]:
    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise QmdError(f"{path} is not valid TOML ({exc})", "fix the file and run the command again") from exc


def plan(path: Path) -> tuple[str | None, dict[str, str] | None, str | None]:
    """(new text or None if nothing to do, how it was added, a note for the user)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return f"[features]\n{LINE}\n", {"mode": "created"}, None
    data = _parse(text, path)
    features = data.get("features")
    if isinstance(features, dict) and ("hooks" in features or "codex_hooks" in features):
        if features.get("hooks", features.get("codex_hooks")) is False:
            return None, None, f"hooks are turned off in {path} ([features] hooks = false); left as is: set it to true for the guard to run"
        return None, None, None
    match = _HEADER.search(text)
    if match:
        end = text.find("\n", match.end())
        at = len(text) if end < 0 else end + 1
        prefix = text[:at] if end >= 0 else text + "\n"
        new = prefix + LINE + "\n" + text[at:]
        how = {"mode": "inserted"}
    elif features is not None:
        return None, None, f"{path} defines features without a [features] table; add `{LINE}` to it yourself if your Codex needs the flag"
    else:
        block = ("" if not text or text.endswith("\n") else "\n") + ("\n" if text.strip() else "") + f"[features]\n{LINE}\n"
        new = text + block
        how = {"mode": "appended", "block": block}
    check = _parse(new, path).get("features")
    if not isinstance(check, dict) or check.get("hooks") is not True:
        return None, None, f"could not add `{LINE}` to {path} safely; add it under [features] yourself if your Codex needs it"
    return new, how, None


def _features_section(text: str) -> tuple[int, int] | None:
    match = _HEADER.search(text)
    if not match:
        return None
    nxt = _TABLE.search(text, match.end())
    return match.end(), (nxt.start() if nxt else len(text))


def unplan(path: Path, how: dict[str, str]) -> tuple[str | None, bool]:
    """(new text, delete the file) that undoes what `plan` added; (None, False) when it is gone already."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None, False
    mode = how.get("mode")
    if mode == "created" and text == f"[features]\n{LINE}\n":
        return None, True
    if mode == "appended" and how.get("block") and text.endswith(how["block"]):
        return text[: -len(how["block"])], False
    section = _features_section(text)
    if section is None:
        return None, False
    start, end = section
    line = _OUR_LINE.search(text, start, end)
    if line is None:
        return None, False
    new = text[: line.start()] + text[line.end() :]
    if mode in ("created", "appended"):  # the [features] table was ours: drop it once it is empty
        header = _HEADER.search(new)
        section = _features_section(new)
        if header and section and not new[section[0] : section[1]].strip():
            new = (new[: header.start()].rstrip("\n") + "\n\n" + new[section[1] :]).lstrip("\n") if new[section[1] :].strip() else new[: header.start()].rstrip("\n") + ("\n" if new[: header.start()].strip() else "")
        if mode == "created" and not new.strip():
            return None, True
    return new, False
