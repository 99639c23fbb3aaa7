"""`qmd mcp install`: register qmd's MCP server with Claude Code or Codex.

Through the client's own command (`claude mcp add`, `codex mcp add`) when it is on PATH;
otherwise by merging the client's config file, idempotently, with a backup of a file
that changes:

- Claude Code, user scope: `~/.claude.json` → `mcpServers.qmd`;
  project scope: `./.mcp.json` → `mcpServers.qmd`.
- Codex: `${CODEX_HOME:-~/.codex}/config.toml` → `[mcp_servers.qmd]`.

The server is named `qmd` for the default index, `qmd-NAME` for another. It runs over
stdio (`qmd [--index NAME] mcp`), or with `--http` as a URL of `qmd mcp --http`.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qmd.agents.codex as codex
from qmd.agents.files import dump_json, read_json_object, write_or_remove, write_with_backup
from qmd.agents.locations import claude_json, codex_config, codex_home, project_mcp_json
from qmd.core.errors import QmdError
from qmd.core.paths import DEFAULT_INDEX

__all__ = ["Plan", "apply", "codex_home", "plan_claude", "plan_codex", "registrations", "unregister_all", "unregister_claude_file"]

Which = Callable[[str], str | None]


def server_name(index: str) -> str:
    return "qmd" if index == DEFAULT_INDEX else f"qmd-{index}"


def server_command(index: str) -> list[str]:
    """The absolute command that starts the stdio server (the venv's qmd launcher if present)."""
    launcher = Path(sys.executable).parent / "qmd"
    base = [str(launcher)] if launcher.exists() else [sys.executable, "-m", "qmd"]
    return [*base, *(["--index", index] if index != DEFAULT_INDEX else []), "mcp"]


def server_url(port: int) -> str:
    return f"http://127.0.0.1:{port}/mcp"


@dataclass
class Plan:
    """What install will do (or did): run commands, or write one file."""

    client: str
    summary: str
    commands: list[list[str]] = field(default_factory=list)
    path: Path | None = None
    new_text: str | None = None
    changed: bool = False

    def describe(self) -> str:
        import shlex

        if self.commands:
            return "\n".join(shlex.join(c) for c in self.commands)
        if not self.changed:
            return f"{self.path}: already up to date"
        return f"# {self.path}\n{self.new_text}"


# --- Claude Code ------------------------------------------------------------------------


def claude_entry(index: str, http: bool, port: int) -> dict[str, Any]:
    if http:
        return {"type": "http", "url": server_url(port)}
    cmd = server_command(index)
    return {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": {}}


def plan_claude(index: str, scope: str, http: bool, port: int, *, cwd: Path | None = None, which: Which = shutil.which) -> Plan:
    if scope not in ("user", "project"):
        raise QmdError(f"unknown scope {scope!r}", "use --scope user or --scope project")
    name = server_name(index)
    where = "~/.claude.json" if scope == "user" else "./.mcp.json"
    exe = which("claude")
    if exe:
        if http:
            add = [exe, "mcp", "add", "--scope", scope, "--transport", "http", name, server_url(port)]
        else:
            add = [exe, "mcp", "add", "--scope", scope, name, "--", *server_command(index)]
        remove = [exe, "mcp", "remove", "--scope", scope, name]
        return Plan("claude", f"registered '{name}' with Claude Code ({scope} scope) through `claude mcp add`", [remove, add])
    path = claude_json() if scope == "user" else project_mcp_json(cwd)
    data = _read_json(path)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise QmdError(f"'mcpServers' in {path} is not an object", f"fix {path} by hand, then retry")
    entry = claude_entry(index, http, port)
    changed = servers.get(name) != entry
    servers[name] = entry
    text = dump_json(data).decode("utf-8")
    verb = "registered" if changed else "already registered"
    return Plan("claude", f"{verb} '{name}' for Claude Code in {where}", path=path, new_text=text, changed=changed)


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, f"fix {path} by hand, then retry")[0]


# --- Codex ------------------------------------------------------------------------------


def codex_block(index: str, http: bool, port: int) -> str:
    """The `[mcp_servers.<name>]` table that registers the server of `index`."""
    if http:
        return codex.mcp_server_table(server_name(index), url=server_url(port))
    return codex.mcp_server_table(server_name(index), command=server_command(index))


def plan_codex(index: str, http: bool, port: int, *, which: Which = shutil.which) -> Plan:
    name = server_name(index)
    exe = which("codex")
    if exe:
        add = [exe, "mcp", "add", name, "--url", server_url(port)] if http else [exe, "mcp", "add", name, "--", *server_command(index)]
        return Plan("codex", f"registered '{name}' with Codex through `codex mcp add`", [[exe, "mcp", "remove", name], add])
    path = codex_config()
    text = codex.read_text(path) or ""
    old = codex.parse(text, path, f"fix {path} by hand, then retry")
    new_text = codex.set_mcp_server_table(text, name, codex_block(index, http, port))
    new = codex.parse(new_text, path, "add the table by hand (see qmd mcp install --codex --print)")
    changed = old.get("mcp_servers", {}).get(name) != new["mcp_servers"][name]
    verb = "registered" if changed else "already registered"
    return Plan("codex", f"{verb} '{name}' for Codex in {path}", path=path, new_text=new_text if changed else text, changed=changed)


# --- applying ---------------------------------------------------------------------------


def apply(plan: Plan) -> str:
    """Carry out `plan`; returns the line to print (with the backup's path, if one was made)."""
    if plan.commands:
        *cleanup, add = plan.commands
        for cmd in cleanup:  # remove a previous registration: `add` refuses an existing name
            subprocess.run(cmd, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        proc = subprocess.run(add, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            detail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or [f"exit {proc.returncode}"]
            raise QmdError(f"`{' '.join(add[:3])}` failed: {detail[0]}", "run it by hand to see why (qmd mcp install --print shows it)")
        return plan.summary
    if not plan.changed or plan.path is None or plan.new_text is None:
        return plan.summary
    backup = write_with_backup(plan.path, plan.new_text)
    return plan.summary + (f" (backup: {backup})" if backup else "")


# --- removing (qmd teardown) --------------------------------------------------------------


def _is_our_entry(entry: object) -> bool:
    """A Claude Code mcpServers entry that runs qmd's server (stdio launcher or local URL)."""
    if not isinstance(entry, dict):
        return False
    if entry.get("type") == "http" or "url" in entry:
        return str(entry.get("url", "")).startswith("http://127.0.0.1:") and str(entry.get("url", "")).endswith("/mcp")
    words = [str(entry.get("command", "")), *[str(a) for a in entry.get("args") or []]]
    return "mcp" in words and any(os.path.basename(w) == "qmd" or w == "qmd" for w in words)


def unregister_claude_file(path: Path) -> list[str]:
    """Remove qmd's entries (`qmd`, `qmd-*`) from a Claude Code JSON file; returns the names removed."""
    data = _read_json(path)
    servers = data.get("mcpServers")
    if not isinstance(servers, dict):
        return []
    names = [n for n, e in servers.items() if codex.is_qmd_server(n) and _is_our_entry(e)]
    if not names:
        return []
    for name in names:
        del servers[name]
    if not servers:
        del data["mcpServers"]
    write_or_remove(path, dump_json(data) if data else None)
    return names


def unregister_all(*, cwd: Path | None = None, which: Which = shutil.which) -> list[str]:
    """Remove qmd's MCP registrations from Claude Code (user scope and ./.mcp.json) and Codex,
    through the clients' own commands when they are on PATH and from their files; returns lines."""
    lines = []
    for client, argv in (("claude", ["mcp", "remove", "--scope", "user"]), ("codex", ["mcp", "remove"])):
        exe = which(client)
        if not exe:
            continue
        listing = subprocess.run([exe, "mcp", "list"], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL).stdout
        for name in sorted(set(re.findall(r"(?m)^\s*(qmd(?:-[A-Za-z0-9._-]+)?)\b", listing))):
            proc = subprocess.run([exe, *argv, name], capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
            if proc.returncode == 0:
                lines.append(f"removed MCP server '{name}' from {client} (`{client} mcp remove`)")
    files = [(claude_json(), unregister_claude_file), (project_mcp_json(cwd), unregister_claude_file), (codex_config(), codex.remove_qmd_servers)]
    for path, remove in files:
        for name in remove(path):
            lines.append(f"removed MCP server '{name}' from {path}")
    return lines


def registrations(*, cwd: Path | None = None) -> list[str]:
    """Where qmd's MCP server is registered, from the clients' files (for teardown's summary)."""
    found = []
    for path in (claude_json(), project_mcp_json(cwd)):
        try:
            servers = _read_json(path).get("mcpServers")
        except QmdError:
            continue
        if isinstance(servers, dict):
            found += [f"{path}: {n}" for n, e in servers.items() if codex.is_qmd_server(n) and _is_our_entry(e)]
    found += [f"{codex_config()}: {n}" for n in codex.qmd_servers(codex_config())]
    return found
