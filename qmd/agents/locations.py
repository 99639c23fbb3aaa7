"""Where Claude Code and Codex keep the files qmd edits or reads, defined once.

- Claude Code's config dir: `$CLAUDE_CONFIG_DIR`, else `~/.claude` (its user settings, plugins).
- Claude Code settings (hooks): `user` → `<config dir>/settings.json`; `project` → `./.claude/settings.json`.
- Claude Code MCP servers: user scope `~/.claude.json`, project scope `./.mcp.json`.
- Codex: `$CODEX_HOME`, else `~/.codex`, holding `hooks.json` and `config.toml`; a project
  may have its own `.codex/config.toml`.

Only `os`, `pathlib` and `qmd.core.errors`: the agent guard reads these on its deny path.
"""

from __future__ import annotations

import os
from pathlib import Path

from qmd.core.errors import QmdError

SCOPES = ("user", "project")


def claude_config_dir() -> Path:
    """`$CLAUDE_CONFIG_DIR`, else `~/.claude`: where Claude Code keeps the user's settings and plugins."""
    explicit = os.environ.get("CLAUDE_CONFIG_DIR")
    return Path(explicit) if explicit else Path.home() / ".claude"


def claude_settings(scope: str, cwd: Path | None = None) -> Path:
    """Claude Code's settings file for `scope`: `user` or `project` (under `cwd`, default here)."""
    if scope == "user":
        return claude_config_dir() / "settings.json"
    if scope == "project":
        return (cwd or Path.cwd()) / ".claude" / "settings.json"
    raise QmdError(f"unknown scope {scope!r}", "use --scope user or --scope project")


def claude_json() -> Path:
    """`~/.claude.json`: Claude Code's user-scope MCP servers (and per-project entries)."""
    return Path.home() / ".claude.json"


def project_mcp_json(folder: Path | None = None) -> Path:
    """`<folder>/.mcp.json` (default: the current directory): project-scope MCP servers."""
    return (folder or Path.cwd()) / ".mcp.json"


def codex_home() -> Path:
    """`$CODEX_HOME`, else `~/.codex`."""
    explicit = os.environ.get("CODEX_HOME")
    return Path(explicit) if explicit else Path.home() / ".codex"


def codex_hooks_json() -> Path:
    """Codex's hook settings: `<codex home>/hooks.json`."""
    return codex_home() / "hooks.json"


def codex_config(folder: Path | None = None) -> Path:
    """Codex's `config.toml`: the user's (`<codex home>/config.toml`), or a project's `<folder>/.codex/config.toml`."""
    return codex_home() / "config.toml" if folder is None else folder / ".codex" / "config.toml"
