"""`qmd guard install|uninstall`: register `qmd-guard` as a PreToolUse hook for Claude Code and Codex,
and `qmd health --session-start` as a SessionStart hook (a raised index health flag reaches the agent).

Every changed file is backed up first (`<file>.qmd-backup-<time>`). What each install
added is remembered in `<state>/guard/installed.json`, so uninstall removes exactly that:
when a file is still byte-for-byte what install wrote, uninstall restores the original
bytes; otherwise it removes our handler (and only the containers install created).
"""

from __future__ import annotations

import hashlib
import os
import shlex
import sys
from pathlib import Path
from typing import Any

from qmd import harness
from qmd import QmdError
from qmd.agents import (
    check_changeable,
    HOOKS_FEATURE_LINE,
    claude_plugin,
    claude_settings,
    codex_plugin,
    codex_config,
    codex_hooks_json,
    disable_hooks_feature,
    dump_json,
    enable_hooks_feature,
    inside_project,
    plugin_notice,
    read_json_object,
    remove_hook_states,
    write_or_remove,
    write_with_backup,
)

from . import settings

__all__ = ["claude_settings", "install", "installed_files", "status", "uninstall", "uninstall_all"]

CLAUDE_MATCHER = "Bash|Grep|Glob"
CODEX_MATCHER = "^Bash$"
TRUST_NOTE = "Codex runs a new or edited hook only after you trust it: run `qmd guard trust --codex`, or start codex, open /hooks and trust the qmd hooks."


def guard_script() -> Path:
    """The `qmd-guard` console script next to the running interpreter."""
    return Path(sys.executable).parent / "qmd-guard"


def hook_command() -> str:
    """The hook command to register: the absolute path of `qmd-guard`, shell-quoted."""
    script = guard_script()
    if not script.exists():
        raise QmdError(f"{script} does not exist", "reinstall qmd into its venv (./install.sh) so the qmd-guard script is created")
    return shlex.quote(str(script.absolute()))


def health_command() -> str:
    """The SessionStart hook command: this venv's `qmd health --session-start`, absolute and quoted."""
    script = guard_script().with_name("qmd")
    if not script.exists():
        raise QmdError(f"{script} does not exist", "reinstall qmd into its venv (./install.sh) so the qmd script is created")
    return f"{shlex.quote(str(script.absolute()))} health --session-start"


def _manifest_path() -> Path:
    """What each install added, per file: `<state>/guard/installed.json`."""
    return harness.StateLayout.current().guard / "installed.json"


def _load_manifest() -> dict[str, Any]:
    data = harness.read_json(_manifest_path())
    return data if isinstance(data, dict) else {}


def _save_manifest(data: dict[str, Any]) -> None:
    harness.write_json(_manifest_path(), data, sort_keys=True)


def _sha(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


def _install_json(path: Path, matcher: str, command: str, lines: list[str], dry_run: bool = False) -> bool:
    data, raw = read_json_object(path)
    changed, created = settings.merge(data, path, command, matcher)
    health = health_command()
    session_changed, session_created = settings.merge_session(data, path, health)
    if not (changed or session_changed):
        lines.append(f"{path}: already installed (PreToolUse {matcher} → {command}; SessionStart → {health})")
        return False
    new = dump_json(data, raw)
    if dry_run:
        lines.append(_would_write(path, new, raw is not None))
        return True
    saved = write_with_backup(path, new)
    manifest = _load_manifest()
    entry = manifest.get(str(path)) or {"backup": str(saved) if saved else None, "created": (["file"] if raw is None else []) + created}
    entry["created"] = entry.get("created", []) + [key for key in session_created if key not in entry.get("created", [])]
    entry["written_sha256"] = _sha(new)
    manifest[str(path)] = entry
    _save_manifest(manifest)
    if changed:
        lines.append(f"{path}: added PreToolUse hook (matcher {matcher}, timeout {settings.TIMEOUT_S}s) → {command}")
    if session_changed:
        lines.append(f"{path}: added SessionStart hook → {health} (one line for the agent when qmd's index health flag is raised)")
    if saved:
        lines.append(f"  backup: {saved}")
    return True


def _uninstall_json(path: Path, lines: list[str]) -> None:
    manifest = _load_manifest()
    entry = manifest.get(str(path)) or {}
    data, raw = read_json_object(path)
    if raw is None:
        lines.append(f"{path}: no such file; nothing to remove")
        manifest.pop(str(path), None)
        _save_manifest(manifest)
        return
    original = Path(entry["backup"]) if entry.get("backup") else None
    untouched = entry.get("written_sha256") == _sha(raw)
    if untouched and "file" in entry.get("created", []):
        write_or_remove(path, None)  # exactly the bytes qmd wrote into a file qmd created: nothing to back up (one made read-only is refused)
        lines.append(f"{path}: removed (qmd created it)")
    elif untouched and original is not None and original.exists():
        saved = write_with_backup(path, original.read_bytes())
        lines.append(f"{path}: restored the original from {original}; backup: {saved}")
    else:
        drop = entry.get("created", []) if entry else ["hooks", "PreToolUse", settings.SESSION_EVENT]
        removed = settings.remove(data, path, drop)
        if not removed:
            lines.append(f"{path}: no qmd-guard hook found; nothing to remove")
        else:
            saved = write_with_backup(path, dump_json(data, raw))
            lines.append(f"{path}: removed the qmd-guard hook; backup: {saved}")
    manifest.pop(str(path), None)
    _save_manifest(manifest)


def _would_write(path: Path, new: bytes | str, exists: bool) -> str:
    """What `--print` shows for one file: its path (and that a backup would be kept), then its new content."""
    text = new.decode("utf-8") if isinstance(new, bytes) else new
    how = "replaced (the current file backed up first)" if exists else "created"
    return f"# {path} would be {how}:\n{text.rstrip(chr(10))}"


def _install_feature(path: Path, lines: list[str], dry_run: bool = False) -> bool:
    """Enable Codex's hooks flag in `path` when needed; True when it was (or, `dry_run`, would be) written."""
    new, how, note = enable_hooks_feature(path)
    if note:
        lines.append(f"note: {note}")
    if new is None or how is None:
        return False
    if dry_run:
        lines.append(_would_write(path, new, path.exists()))
        return True
    saved = write_with_backup(path, new)
    manifest = _load_manifest()
    manifest[str(path)] = {"feature": how}
    _save_manifest(manifest)
    lines.append(f"{path}: enabled hooks ([features] {HOOKS_FEATURE_LINE}) for Codex versions that need the flag" + (f"; backup: {saved}" if saved else ""))
    return True


def _uninstall_feature(path: Path, lines: list[str]) -> None:
    manifest = _load_manifest()
    how = (manifest.get(str(path)) or {}).get("feature")
    if not how:
        return
    new, delete = disable_hooks_feature(path, how)
    if delete:
        write_or_remove(path, None)  # still exactly what qmd created (one made read-only is refused)
        lines.append(f"{path}: removed (qmd created it)")
    elif new is not None:
        saved = write_with_backup(path, new)
        lines.append(f"{path}: removed `{HOOKS_FEATURE_LINE}` that qmd added; backup: {saved}")
    manifest.pop(str(path), None)
    _save_manifest(manifest)


def _claude_settings(scope: str) -> Path:
    """Claude Code's settings for `scope`; a project's only while it stays in the project (a
    cloned repository's `.claude -> /elsewhere` had install write there)."""
    path = claude_settings(scope)
    return path if scope == "user" else inside_project(path, Path.cwd())


def install(claude: bool, codex: bool, scope: str = "user", dry_run: bool = False) -> list[str]:
    """Register the hook; returns the lines to print. `dry_run`: change nothing; the lines show
    every file that would be written, with its whole new content."""
    command = hook_command()
    claude_plugin_id = claude_plugin(Path.cwd()) if claude else None
    codex_plugin_id = codex_plugin() if codex else None
    if not dry_run:  # every file to change checked first: a command changes all of them or none
        check_changeable(_changes(claude and not claude_plugin_id, codex and not codex_plugin_id, scope, command))
    lines: list[str] = []
    if claude_plugin_id:  # the plugin's hooks/hooks.json runs the same two commands: never twice
        lines.append(plugin_notice(claude_plugin_id, "the PreToolUse guard and the SessionStart notice"))
    elif claude:
        _install_json(_claude_settings(scope), CLAUDE_MATCHER, command, lines, dry_run)
    if codex_plugin_id:
        lines.append(plugin_notice(codex_plugin_id, "the PreToolUse guard and the SessionStart notice", "codex"))
    elif codex:
        changed = _install_json(codex_hooks_json(), CODEX_MATCHER, command, lines, dry_run)
        _install_feature(codex_config(), lines, dry_run)
        if changed:
            lines.append(f"\nnote: {TRUST_NOTE}" if dry_run else TRUST_NOTE)
    return lines


def _changes(claude: bool, codex: bool, scope: str, command: str) -> list[Path]:
    """The files `install` would write (what its dry run would show)."""
    scratch: list[str] = []
    files = [_claude_settings(scope)] if claude and _install_json(_claude_settings(scope), CLAUDE_MATCHER, command, scratch, True) else []
    if codex:
        files += [codex_hooks_json()] if _install_json(codex_hooks_json(), CODEX_MATCHER, command, scratch, True) else []
        files += [codex_config()] if _install_feature(codex_config(), scratch, True) else []
    return files


def uninstall(claude: bool, codex: bool, scope: str = "user") -> list[str]:
    """Remove what install added; returns the lines to print."""
    lines: list[str] = []
    if claude:
        _uninstall_json(_claude_settings(scope), lines)
    if codex:
        _uninstall_codex_hooks(codex_hooks_json(), lines)
        _uninstall_feature(codex_config(), lines)
    return lines


def _uninstall_codex_hooks(path: Path, lines: list[str]) -> None:
    """Remove qmd's handlers from Codex's hooks.json, then the trust Codex recorded for them
    (`qmd guard trust --codex` or /hooks), which would otherwise outlive the hooks."""
    from .codex_trust import qmd_hooks

    keys = [hook.key for hook in qmd_hooks(path, codex_config())]
    _uninstall_json(path, lines)
    try:
        removed = remove_hook_states(codex_config(), keys)
    except QmdError as exc:
        lines.append(f"{codex_config()}: {exc.message} ({exc.cli_hint})")
        return
    if removed:
        lines.append(f"{codex_config()}: removed Codex's trust of qmd's hooks ({len(removed)} entries)")


def _handlers(data: dict[str, Any], event: str) -> list[dict[str, Any]]:
    groups = (data.get("hooks") or {}).get(event) if isinstance(data.get("hooks"), dict) else None
    out = []
    for group in groups if isinstance(groups, list) else []:
        for handler in (group.get("hooks") or []) if isinstance(group, dict) else []:
            if isinstance(handler, dict):
                out.append(handler)
    return out


def status() -> list[tuple[str, bool, str]]:
    """(settings file, still registered, detail) for every file `install` wrote; [] when the
    guard was never installed. Registered = our PreToolUse and SessionStart handlers are in
    the file and the command they run exists."""
    out = []
    for name, entry in sorted(_load_manifest().items()):
        path = Path(name)
        if "feature" in entry:
            continue  # Codex's [features] flag: informational, not a hook
        try:
            data, raw = read_json_object(path)
        except QmdError as exc:
            out.append((name, False, exc.message))
            continue
        if raw is None:
            out.append((name, False, "the file is gone"))
            continue
        guard = [h for h in _handlers(data, "PreToolUse") if settings.is_ours(h)]
        session = [h for h in _handlers(data, settings.SESSION_EVENT) if settings.is_session_hook(h)]
        if not guard:
            out.append((name, False, "no qmd-guard PreToolUse hook in it any more"))
            continue
        exe = shlex.split(guard[0]["command"])[0]
        if not os.access(exe, os.X_OK):
            out.append((name, False, f"its hook runs {exe}, which is missing or not executable"))
            continue
        out.append((name, True, f"PreToolUse → {exe}" + ("; SessionStart → qmd health" if session else "; no SessionStart hook")))
    return out


def uninstall_all() -> list[str]:
    """Remove the guard from every file install wrote (any scope, Claude Code and Codex)."""
    lines: list[str] = []
    for name, entry in sorted(_load_manifest().items()):
        if "feature" in entry:
            _uninstall_feature(Path(name), lines)
        elif Path(name) == codex_hooks_json():
            _uninstall_codex_hooks(Path(name), lines)
        else:
            _uninstall_json(Path(name), lines)
    if _manifest_path().exists() and not _load_manifest():
        _manifest_path().unlink()
    return lines


def installed_files() -> list[Path]:
    """Every file `install` changed (settings, hooks.json, config.toml), from its record."""
    return [Path(name) for name in sorted(_load_manifest())]
