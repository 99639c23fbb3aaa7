"""Is qmd's plugin (plugins/qmd in this repository) installed and enabled in Claude Code or Codex?

The plugin brings qmd's MCP server (named `plugin:qmd:qmd` by Claude Code, so its tools are
`mcp__plugin_qmd_qmd__*`), the skill and the two hooks. `qmd mcp install --claude` and
`qmd guard install --claude` ask this first so that qmd is never registered twice, the
guard's advice names the plugin's tool, and doctor warns when both ways are present.

Claude Code (checked with 2.1.197 and 2.1.332) records an installed plugin in
`<config dir>/plugins/installed_plugins.json` (`{"version": 2, "plugins": {"qmd@MARKET":
[{scope, installPath, ...}]}}`) and enables it in a settings file's `enabledPlugins`
(`{"qmd@MARKET": true}`): the user's `<config dir>/settings.json`, a project's
`.claude/settings.json` or `.claude/settings.local.json`. The config dir is
`locations.claude_config_dir()`. Codex 0.171.0 installs the same plugin from the same
marketplace and records it in its config.toml (`codex_plugin`).

Only `json`, `pathlib` and `locations`: the guard reads this on its deny path.
"""

from __future__ import annotations

import json
from pathlib import Path

from qmd.agents.locations import claude_config_dir, claude_settings, codex_config

PLUGIN = "qmd"
PLUGIN_SERVER = f"plugin_{PLUGIN}_{PLUGIN}"  # Claude Code's `plugin:qmd:qmd`, as it spells it in tool names


MAX_FILE = 16 * 1024 * 1024  # a client's plugin list or settings are kilobytes; the guard reads them on its deny path


def _load(path: Path) -> object:
    """The JSON in `path`, or None when it is missing, over MAX_FILE, not JSON, or nested too
    deep for the decoder (a hostile file: doctor and install must not crash on it)."""
    from qmd.core.fileio import read_regular

    try:
        return json.loads(read_regular(path, MAX_FILE))  # a link to a FIFO or a terminal never ended the read
    except (OSError, ValueError, RecursionError):
        return None


def _ancestors(cwd: Path | None) -> list[Path]:
    if cwd is None:
        return []
    return [cwd, *cwd.parents]


def claude_plugin(cwd: Path | None = None) -> str | None:
    """The id (`qmd@MARKETPLACE`) of qmd's Claude Code plugin when it is installed and enabled
    (by the user's settings, or a project's at or above `cwd`), else None."""
    installed = _load(claude_config_dir() / "plugins" / "installed_plugins.json")
    plugins = installed.get("plugins") if isinstance(installed, dict) else None
    if not isinstance(plugins, dict):
        return None
    ids = [key for key, entries in plugins.items() if isinstance(key, str) and key.split("@", 1)[0] == PLUGIN and entries]
    if not ids:
        return None
    files = [claude_settings("user")]
    for folder in _ancestors(cwd):
        files += [folder / ".claude" / "settings.json", folder / ".claude" / "settings.local.json"]
    enabled: dict[str, bool] = {}
    for path in files:  # the user's first; a project's later file overrides
        data = _load(path)
        flags = data.get("enabledPlugins") if isinstance(data, dict) else None
        if isinstance(flags, dict):
            enabled.update({k: v for k, v in flags.items() if isinstance(k, str) and isinstance(v, bool)})
    for plugin_id in ids:
        if enabled.get(plugin_id):
            return plugin_id
    return None


def codex_plugin() -> str | None:
    """The id (`qmd@MARKETPLACE`) of qmd's plugin when Codex has it installed and enabled
    (`[plugins."qmd@MARKETPLACE"] enabled = true` in `<codex home>/config.toml`; Codex 0.171.0
    installs the same plugin from the same marketplace), else None."""
    import tomllib

    try:
        with open(codex_config(), "rb") as fh:
            data = tomllib.load(fh)
    except (OSError, ValueError):
        return None
    plugins = data.get("plugins")
    if not isinstance(plugins, dict):
        return None
    for key, table in plugins.items():
        if key.split("@", 1)[0] == PLUGIN and isinstance(table, dict) and table.get("enabled", True) is True:
            return str(key)
    return None


def remove_command(plugin_id: str, client: str = "claude") -> str:
    """The command that removes qmd's plugin from `client` (`claude` or `codex`); qmd never does it itself."""
    return f"claude plugin uninstall {plugin_id}" if client == "claude" else f"codex plugin remove {plugin_id}"


def plugin_notice(plugin_id: str, what: str, client: str = "claude") -> str:
    """The line install prints instead of registering `what` a second time."""
    return (
        f"{'Claude Code' if client == 'claude' else 'Codex'} already has {what} from qmd's plugin ({plugin_id}); not adding a second copy. "
        f"To register by hand instead, first run: {remove_command(plugin_id, client)}"
    )
