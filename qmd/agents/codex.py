"""Codex's `config.toml`, edited as text so everything else in the file stays byte for byte.

Two edits: the `[mcp_servers.<name>]` table that registers qmd's MCP server (`qmd mcp
install`, teardown), and the `[features] hooks = true` flag the agent guard needs on Codex
releases that keep hooks behind it (`qmd guard install`). Every edit is checked by parsing
the result (`tomllib`, imported only when a file is edited).
"""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

from qmd.agents.files import write_or_remove
from qmd.core.errors import QmdError

HOOKS_FEATURE_LINE = "hooks = true"
_FEATURES = re.compile(r"^[ \t]*\[[ \t]*features[ \t]*\][ \t]*(?:#.*)?$", re.MULTILINE)
_TABLE = re.compile(r"^[ \t]*\[", re.MULTILINE)
_HOOKS_TRUE = re.compile(r"^[ \t]*hooks[ \t]*=[ \t]*true[ \t]*\r?\n?", re.MULTILINE)


def parse(text: str, path: Path, fix: str = "fix the file and run the command again") -> dict[str, Any]:
    """The TOML document `text` (read from `path`); a QmdError with hint `fix` when it is not valid TOML."""
    import tomllib

    try:
        return tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise QmdError(f"{path} is not valid TOML ({exc})", fix) from exc


def read_text(path: Path) -> str | None:
    """The file's text, or None when it does not exist."""
    try:
        return path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return None
    except UnicodeDecodeError as exc:  # a Latin-1 comment: once exit 3 from mcp install and guard install
        raise QmdError(f"{path} is not UTF-8 text (byte {exc.start}), as TOML must be", f"re-save {path} as UTF-8, then retry") from None


# --- [mcp_servers.<name>] ------------------------------------------------------------------


def toml_string(value: str) -> str:
    """A TOML basic string (JSON's string escapes are valid TOML)."""
    return json.dumps(value, ensure_ascii=False)


_BARE_KEY = re.compile(r"^[A-Za-z0-9_-]+$")


def toml_key(key: str) -> str:
    """A TOML key: bare when it can be, else quoted."""
    return key if _BARE_KEY.match(key) else toml_string(key)


def mcp_server_table(
    name: str, *, url: str | None = None, command: list[str] | None = None, env: dict[str, str] | None = None, required: bool = False,
    bearer_token_env_var: str | None = None,
) -> str:
    """The `[mcp_servers.NAME]` table for a server at `url` (sending the token held in the
    environment variable `bearer_token_env_var` as `Authorization: Bearer`), or one started
    by `command` (with `env` as an inline table); `required = true` when `required`."""
    lines = [f"[mcp_servers.{name}]"]
    if url is not None:
        lines.append(f"url = {toml_string(url)}")
        if bearer_token_env_var:
            lines.append(f"bearer_token_env_var = {toml_string(bearer_token_env_var)}")
    elif command:
        lines.append(f"command = {toml_string(command[0])}")
        lines.append("args = [" + ", ".join(toml_string(a) for a in command[1:]) + "]")
        if env:
            lines.append("env = { " + ", ".join(f"{toml_key(k)} = {toml_string(v)}" for k, v in env.items()) + " }")
    if required:
        lines.append("required = true")
    return "\n".join(lines) + "\n"


def set_mcp_server_table(text: str, name: str, table: str) -> str:
    """`text` with the `[mcp_servers.NAME]` table (and its sub-tables) replaced by `table`.

    The table is appended when there is none; an empty `table` removes it.
    """
    header = re.compile(r"^\s*\[\s*mcp_servers\s*\.\s*(?:\"" + re.escape(name) + r"\"|" + re.escape(name) + r")\s*(?:\.[^\]]*)?\]\s*(?:#.*)?$")
    any_header = re.compile(r"^\s*\[")
    out: list[str] = []
    inside = False
    inserted = False
    for line in text.splitlines(keepends=True):
        if any_header.match(line):
            if header.match(line):
                if not inserted:
                    out.append(table)
                    inserted = True
                inside = True
                continue
            inside = False
        if not inside:
            out.append(line)
    merged = "".join(out)
    if not inserted:
        if merged and not merged.endswith("\n"):
            merged += "\n"
        merged += ("\n" if merged.strip() else "") + table
    return merged


def is_qmd_server(name: str) -> bool:
    """qmd's server names: `qmd` (the default index) and `qmd-<index>`."""
    return name == "qmd" or name.startswith("qmd-")


def qmd_servers(path: Path) -> list[str]:
    """qmd's `[mcp_servers.*]` names in `path`; [] when the file is missing or unreadable."""
    try:
        servers = parse(read_text(path) or "", path).get("mcp_servers", {})
    except (OSError, ValueError, QmdError):
        return []
    return [n for n in servers if is_qmd_server(n)] if isinstance(servers, dict) else []


def remove_qmd_servers(path: Path) -> list[str]:
    """Remove every qmd `[mcp_servers.*]` table from `path` (the file goes when nothing else is left); returns the names."""
    fix = f"remove the [mcp_servers.qmd] table by hand from {path}"
    try:
        text = read_text(path)
    except OSError as exc:
        raise QmdError(f"cannot read {path} ({exc})", fix) from exc
    if text is None:
        return []
    try:
        servers = parse(text, path, fix).get("mcp_servers", {})
    except QmdError as exc:
        raise QmdError(f"cannot read {path} ({exc.__cause__})", fix) from exc.__cause__
    names = [n for n in servers if is_qmd_server(n)] if isinstance(servers, dict) else []
    for name in names:
        text = set_mcp_server_table(text, name, "")
    if names:
        write_or_remove(path, text if text.strip() else None)
    return names


# --- [hooks.state."<key>"]: the trust Codex records for a hook ---------------------------------


def remove_hook_states(path: Path, keys: list[str]) -> list[str]:
    """Remove the `[hooks.state."KEY"]` tables of `keys` (qmd's hooks, being uninstalled) from
    Codex's config.toml, and a `[hooks.state]` header left with nothing under it; everything
    else stays byte for byte. Returns the keys removed."""
    text = read_text(path)
    if not text or not keys:
        return []
    fix = f"remove the [hooks.state] entries of qmd's hooks by hand from {path}"
    before = parse(text, path, fix).get("hooks", {})
    known = before.get("state", {}) if isinstance(before, dict) else {}
    wanted = [k for k in keys if isinstance(known, dict) and k in known]
    if not wanted:
        return []
    header = re.compile(r'^\s*\[\s*hooks\s*\.\s*state\s*\.\s*"((?:[^"\\]|\\.)*)"\s*\]\s*(?:#.*)?$')
    bare = re.compile(r"^\s*\[\s*hooks\s*\.\s*state\s*\]\s*(?:#.*)?$")
    any_header = re.compile(r"^\s*\[")
    out: list[str] = []
    inside = False
    for line in text.splitlines(keepends=True):
        if any_header.match(line):
            m = header.match(line)
            inside = bool(m) and json.loads(f'"{m.group(1)}"') in wanted if m else False
            if inside:
                continue
        if not inside:
            out.append(line)
    new_text = "".join(out)
    state = parse(new_text, path, fix).get("hooks", {})
    rest = state.get("state", {}) if isinstance(state, dict) else {}
    if isinstance(rest, dict) and not rest:  # an empty [hooks.state] header: Codex wrote it for these
        new_text = "".join(line for line in new_text.splitlines(keepends=True) if not bare.match(line))
    new_text = re.sub(r"\n{3,}", "\n\n", new_text).strip("\n")
    new_text = new_text + "\n" if new_text else ""
    after = parse(new_text, path, fix).get("hooks", {})
    left = after.get("state", {}) if isinstance(after, dict) else {}
    if isinstance(left, dict) and any(k in left for k in wanted):
        raise QmdError(f"qmd's hook trust entries in {path} are not in the [hooks.state.\"KEY\"] form qmd can edit", fix)
    # No backup: only entries about qmd's own hooks go, everything else stays byte for byte.
    write_or_remove(path, new_text if new_text.strip() else None)
    return wanted


# --- [features] hooks = true ---------------------------------------------------------------


def enable_hooks_feature(path: Path) -> tuple[str | None, dict[str, str] | None, str | None]:
    """Add `[features] hooks = true` unless `hooks` or the older `codex_hooks` is set.

    Returns (the new text, or None when there is nothing to do; how it was added, for
    `disable_hooks_feature`; a note for the user).
    """
    text = read_text(path)
    if text is None:
        return f"[features]\n{HOOKS_FEATURE_LINE}\n", {"mode": "created"}, None
    data = parse(text, path)
    features = data.get("features")
    if isinstance(features, dict) and ("hooks" in features or "codex_hooks" in features):
        if features.get("hooks", features.get("codex_hooks")) is False:
            return None, None, f"hooks are turned off in {path} ([features] hooks = false); left as is: set it to true for the guard to run"
        return None, None, None
    match = _FEATURES.search(text)
    if match:
        end = text.find("\n", match.end())
        at = len(text) if end < 0 else end + 1
        prefix = text[:at] if end >= 0 else text + "\n"
        new = prefix + HOOKS_FEATURE_LINE + "\n" + text[at:]
        how = {"mode": "inserted"}
    elif features is not None:
        return None, None, f"{path} defines features without a [features] table; add `{HOOKS_FEATURE_LINE}` to it yourself if your Codex needs the flag"
    else:
        block = ("" if not text or text.endswith("\n") else "\n") + ("\n" if text.strip() else "") + f"[features]\n{HOOKS_FEATURE_LINE}\n"
        new = text + block
        how = {"mode": "appended", "block": block}
    check = parse(new, path).get("features")
    if not isinstance(check, dict) or check.get("hooks") is not True:
        return None, None, f"could not add `{HOOKS_FEATURE_LINE}` to {path} safely; add it under [features] yourself if your Codex needs it"
    return new, how, None


def _features_section(text: str) -> tuple[int, int] | None:
    match = _FEATURES.search(text)
    if not match:
        return None
    nxt = _TABLE.search(text, match.end())
    return match.end(), (nxt.start() if nxt else len(text))


def disable_hooks_feature(path: Path, how: dict[str, str]) -> tuple[str | None, bool]:
    """Undo what `enable_hooks_feature` added: (the new text, delete the file); (None, False) when it is gone already."""
    text = read_text(path)
    if text is None:
        return None, False
    mode = how.get("mode")
    if mode == "created" and text == f"[features]\n{HOOKS_FEATURE_LINE}\n":
        return None, True
    if mode == "appended" and how.get("block") and text.endswith(how["block"]):
        return text[: -len(how["block"])], False
    section = _features_section(text)
    if section is None:
        return None, False
    start, end = section
    line = _HOOKS_TRUE.search(text, start, end)
    if line is None:
        return None, False
    new = text[: line.start()] + text[line.end() :]
    if mode in ("created", "appended"):  # the [features] table was ours: drop it once it is empty
        header = _FEATURES.search(new)
        section = _features_section(new)
        if header and section and not new[section[0] : section[1]].strip():
            if new[section[1] :].strip():
                new = (new[: header.start()].rstrip("\n") + "\n\n" + new[section[1] :]).lstrip("\n")
            else:
                new = new[: header.start()].rstrip("\n") + ("\n" if new[: header.start()].strip() else "")
        if mode == "created" and not new.strip():
            return None, True
    return new, False
