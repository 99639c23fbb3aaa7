"""Claude Code's and Codex's configuration files: where they are, read, back up, merge, remove.

The documented surface for `qmd mcp install`, `qmd guard install`, teardown and doctor:

- `plan_claude`, `plan_codex`, `apply`: register qmd's MCP server with a client.
- `registrations`, `unregister_all`: what is registered, and remove it (teardown).
- `codex_home`: `$CODEX_HOME`, else `~/.codex`.
"""

from __future__ import annotations

from qmd.agents.registration import apply, codex_home, plan_claude, plan_codex, registrations, unregister_all

__all__ = ["apply", "codex_home", "plan_claude", "plan_codex", "registrations", "unregister_all"]
