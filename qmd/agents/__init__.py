"""Claude Code's and Codex's configuration files: where they are, read, back up, merge, remove.

The documented surface for `qmd mcp install`, `qmd guard install`, teardown and doctor.
Names load on first use (PEP 562), so a caller that only needs a path pays for `pathlib`.

MCP registration (`registration`):
- `plan_claude`, `plan_codex`, `apply`: register qmd's MCP server with a client.
- `registrations`, `unregister_all`: what is registered, and remove it (teardown).
- `registered_token_env(index)`: the variable whose bearer token a registration sends (doctor).

Where the files are (`locations`):
- `claude_config_dir()`: `$CLAUDE_CONFIG_DIR`, else `~/.claude`.
- `claude_settings(scope)`: Claude Code's settings.json (hooks) for `user` or `project`.
- `claude_json()`, `project_mcp_json()`: Claude Code's MCP servers (user, project scope).
- `codex_home()`, `codex_hooks_json()`, `codex_config()`: Codex's folder, hooks.json, config.toml.

qmd's Claude Code plugin (`plugin`):
- `claude_plugin(cwd)`, `codex_plugin()`: the plugin's id when Claude Code / Codex has it installed
  and enabled (so nothing registers qmd twice); `PLUGIN_SERVER`: its server's name in tool names.
- `plugin_notice(id, what)`: the line printed instead of a second registration;
  `remove_command(id, client)`: the client's command that removes the plugin (teardown names it).
Editing them (`files`, `codex`):
- `read_json_object`, `dump_json`: read a JSON object file, write JSON in its style.
- `backup`, `write_file`, `write_with_backup`, `write_or_remove`, `check_changeable`: `*.qmd-backup-<time>`
  copies and atomic, mode-keeping writes; `inside_project(path, root)`: a project's file, refused
  when a link leads it outside the project.
- `enable_hooks_feature`, `disable_hooks_feature`, `HOOKS_FEATURE_LINE`: Codex's
  `[features] hooks = true` flag, added and removed as text.
- `remove_hook_states`: the trust Codex recorded for qmd's hooks (`[hooks.state."KEY"]`), removed
  when the hooks are.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from qmd.core.lazy import lazy_exports

_EXPORTS = {
    "apply": "registration",
    "plan_claude": "registration",
    "plan_codex": "registration",
    "registrations": "registration",
    "registered_token_env": "registration",
    "unregister_all": "registration",
    "claude_config_dir": "locations",
    "claude_settings": "locations",
    "claude_json": "locations",
    "project_mcp_json": "locations",
    "codex_home": "locations",
    "codex_hooks_json": "locations",
    "codex_config": "locations",
    "read_json_object": "files",
    "dump_json": "files",
    "backup": "files",
    "write_file": "files",
    "check_changeable": "files",
    "write_with_backup": "files",
    "write_or_remove": "files",
    "inside_project": "files",
    "enable_hooks_feature": "codex",
    "disable_hooks_feature": "codex",
    "remove_hook_states": "codex",
    "HOOKS_FEATURE_LINE": "codex",
    "claude_plugin": "plugin",
    "codex_plugin": "plugin",
    "PLUGIN_SERVER": "plugin",
    "plugin_notice": "plugin",
    "remove_command": "plugin",
}

__all__ = sorted(_EXPORTS)


__getattr__ = lazy_exports(__name__, _EXPORTS)


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from qmd.agents.codex import HOOKS_FEATURE_LINE, disable_hooks_feature, enable_hooks_feature, remove_hook_states
    from qmd.agents.files import backup, check_changeable, dump_json, inside_project, read_json_object, write_file, write_or_remove, write_with_backup
    from qmd.agents.plugin import PLUGIN_SERVER, claude_plugin, codex_plugin, plugin_notice, remove_command
    from qmd.agents.locations import claude_config_dir, claude_json, claude_settings, codex_config, codex_home, codex_hooks_json, project_mcp_json
    from qmd.agents.registration import apply, plan_claude, plan_codex, registered_token_env, registrations, unregister_all
