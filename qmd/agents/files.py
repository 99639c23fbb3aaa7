"""Agents' JSON files, edited safely: read, back up, write atomically (keeping the mode), or remove.

Used by `qmd mcp install` (Claude Code's `~/.claude.json`, `./.mcp.json`), `qmd guard install`
(`settings.json`, Codex's `hooks.json`), Codex's `config.toml` edits and teardown. Before a
file changes it is copied to `<name>.qmd-backup-<YYYYmmdd-HHMMSS>` (`-2`, `-3`, … when that
name is taken), with its mode.
"""

from __future__ import annotations

import json
import os
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from qmd.core.errors import QmdError
from qmd.core.paths import within
from qmd.core.fileio import NotRegularFile, TooLarge, check_writable, kept_copy, read_regular, refuse_read_only, write_bytes

FIX_HINT = "fix the file (or move it away) and run the command again"
MAX_CLIENT_FILE = 16 * 1024 * 1024  # a client's settings or MCP list are kilobytes (a cloned repository's may be a sparse file of gigabytes)


def read_json_object(path: Path, fix: str = FIX_HINT) -> tuple[dict[str, Any], bytes | None]:
    """(the JSON object in `path`, its bytes); `({}, None)` when the file does not exist.

    An empty file is `{}`. A file that cannot be read, is not JSON or does not hold an
    object raises a QmdError whose hint is `fix` (for the last two).
    """
    try:
        raw = read_regular(path, MAX_CLIENT_FILE)  # a cloned repo's .mcp.json linked to /dev/zero was read until memory ran out
    except FileNotFoundError:
        return {}, None
    except (NotRegularFile, TooLarge) as exc:
        raise QmdError(f"cannot read {path}: {exc.strerror}", f"move {path} away: qmd reads only a regular file of at most {MAX_CLIENT_FILE >> 20} MB there") from exc
    except OSError as exc:
        raise QmdError(f"cannot read {path}: {exc.strerror or exc}", "check the file's permissions") from exc
    if not raw.strip():
        return {}, raw
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise QmdError(f"{path} is not valid JSON ({exc})", fix) from exc
    except RecursionError:
        raise QmdError(f"{path} is not valid JSON (nested too deep)", fix) from None
    if not isinstance(data, dict):
        raise QmdError(f"{path} does not hold a JSON object", fix)
    return data, raw


def dump_json(data: dict[str, Any], like: bytes | None = None) -> bytes:
    """`data` as JSON in the style of the file it replaces (`like`: its indent and final newline).

    Without `like`: two-space indent and a final newline. Non-ASCII text stays as it is.
    """
    indent = 2
    if like:
        for line in like.decode("utf-8", errors="replace").splitlines()[1:]:
            stripped = line.lstrip(" ")
            if stripped and len(stripped) < len(line):
                indent = len(line) - len(stripped)
                break
    text = json.dumps(data, indent=indent, ensure_ascii=False)
    if like is None or like.endswith(b"\n"):
        text += "\n"
    return text.encode("utf-8")


def backup(path: Path) -> Path | None:
    """Copy `path` (bytes and mode) to `<name>.qmd-backup-<time>` before it changes; None when it does not exist."""
    if not path.exists():
        return None
    return kept_copy(path, "qmd-backup")


def inside_project(path: Path, root: Path) -> Path:
    """`path`, a project's file under `root` (`./.mcp.json`, `./.claude/settings.json`, the
    skills folders), when it stays inside the project once its links are followed; else a
    QmdError. A cloned repository's `.mcp.json -> ~/elsewhere.json` or `.claude -> /etc/x` had
    install and teardown change that outside file (a user's own links in `~` are written
    through on purpose: `write_file`)."""
    real_root = os.path.realpath(root)
    real = os.path.realpath(path)
    if within(real, real_root):
        return path
    link = next((p for p in [*reversed(path.parents), path] if p.is_symlink() and str(p).startswith(str(root))), path)
    raise QmdError(
        f"{path} leads outside the project ({real}) through the symbolic link {link}: qmd changes a project's files only inside it",
        f"remove the link (rm {link}) or make it a file or folder of the project, then run the command again",
    )


def _written(path: Path) -> Path:
    """The file a write of `path` changes: a link's target when it links to an existing file (see `write_file`)."""
    return Path(os.path.realpath(path)) if path.is_symlink() and path.is_file() else path


def check_changeable(paths: Iterable[Path]) -> None:
    """Raise what writing or removing each of `paths` would meet, changing nothing: a file a
    plain write may not change (ReadOnlyFile: its mode, owner, an immutable flag, a mount of
    its own), a folder it cannot be written or made in. For a command that changes several
    files: checked all before any is written, so it changes all of them or none."""
    for path in paths:
        target = _written(path)
        refuse_read_only(target)
        check_writable(target, make_folders=False)


def write_file(path: Path, data: bytes | str) -> None:
    """Replace `path` atomically with `data` (text is UTF-8), keeping an existing file's mode.

    A symlink to an existing file (a dotfiles manager's: stow, chezmoi, yadm) is written
    through: its target is replaced and the link stays, where replacing the link left the
    dotfiles copy silently out of use. A dangling link is replaced by a file. A file the user
    made read-only is refused (ReadOnlyFile), never replaced under its protection."""
    write_bytes(_written(path), data.encode("utf-8") if isinstance(data, str) else data, keep_read_only=True)  # a file made read-only is refused, not replaced


def write_with_backup(path: Path, data: bytes | str) -> Path | None:
    """Back up `path` (when it exists), then replace it with `data`; returns the backup's path."""
    check_changeable([path])  # before the backup: a refused write leaves no stray copy
    saved = backup(path)
    write_file(path, data)
    return saved


def write_or_remove(path: Path, data: bytes | str | None) -> None:
    """Replace `path` with `data`, or delete it when nothing of the user's is left (`None`)."""
    if data is None:
        refuse_read_only(path)  # removing it would override the protection as replacing it would
        path.unlink(missing_ok=True)
    else:
        write_file(path, data)
