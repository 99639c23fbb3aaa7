"""The deny reason shown to the agent: what was blocked, why, and what to run instead.

What to suggest depends on what is installed for *that* agent: the qmd MCP server's
`query` tool when qmd is registered as an MCP server (Claude Code: `~/.claude.json`
`mcpServers`, per-project entries there, or a project `.mcp.json`; Codex:
`[mcp_servers.qmd]` in `~/.codex/config.toml` or a project `.codex/config.toml`; where they
are is `qmd.agents`' definition), else the `qmd search` / `qmd query` commands with the
agent's own pattern filled in. These files are read only when denying.
"""

from __future__ import annotations

import json
import os
import re
import shlex
from pathlib import Path

from .knowledge import Knowledge
from .model import Decision
from .narrow import suggest
from .shell import UNKNOWN

_CODEX_MCP = r"""^\s*\[\s*mcp_servers\s*\.\s*(?:"qmd"|'qmd'|qmd)\s*\]"""
_REGEX_CLASS = re.compile(r"\[\^?(.)[^\]]*\]")
_REGEX_NOISE = re.compile(r"\\[a-zA-Z]|[.*+?^$()|{}\\<>\[\]]+")


def agent_of(payload: dict[str, object]) -> str:
    """`codex` for Codex payloads (they carry `turn_id` / `model`), else `claude`."""
    return "codex" if "turn_id" in payload or "model" in payload else "claude"


def query_text(patterns: list[str]) -> str:
    """The agent's search pattern as plain query words (`retry.*policy` → `retry policy`)."""
    words: list[str] = []
    for pattern in patterns:
        pattern = pattern.replace(UNKNOWN, " ")
        pattern = _REGEX_CLASS.sub(lambda m: m.group(1), pattern)
        words.append(" ".join(_REGEX_NOISE.sub(" ", pattern).split()))
    text = " ".join(w for w in words if w)[:200]
    return text or " ".join(p.replace(UNKNOWN, "") for p in patterns).strip()[:200] or "your question"


def _ancestors(cwd: str | None) -> list[str]:
    out: list[str] = []
    probe = cwd
    while probe and len(out) < 40:
        out.append(probe)
        parent = os.path.dirname(probe)
        if parent == probe:
            break
        probe = parent
    return out


def _is_qmd(name: str, server: object) -> bool:
    if name.lower() == "qmd":
        return True
    if isinstance(server, dict):
        command = os.path.basename(str(server.get("command") or ""))
        args = server.get("args") or []
        return command == "qmd" and isinstance(args, list) and "mcp" in args
    return False


def _qmd_in(servers: object) -> str | None:
    if isinstance(servers, dict):
        for name, server in servers.items():
            if isinstance(name, str) and _is_qmd(name, server):
                return name
    return None


MAX_FILE = 16 * 1024 * 1024  # an agent's settings are kilobytes; a repository's link to /dev/zero is endless


def _read_json(path: str) -> object:
    from qmd.harness import read_regular

    try:
        return json.loads(read_regular(path, MAX_FILE))
    except (OSError, ValueError, RecursionError):  # a hostile file (a link to /dev/zero, a sparse 4 GB one, bad JSON) is no registration
        return None


def claude_mcp(cwd: str | None) -> str | None:
    """Name of the qmd MCP server registered for Claude Code in `cwd` (`plugin_qmd_qmd` when
    qmd's plugin provides it), or None."""
    from qmd.agents import PLUGIN_SERVER, claude_json, claude_plugin, project_mcp_json

    if claude_plugin(Path(cwd) if cwd else None):
        return PLUGIN_SERVER

    data = _read_json(str(claude_json()))
    if isinstance(data, dict):
        found = _qmd_in(data.get("mcpServers"))
        projects = data.get("projects")
        for folder in _ancestors(cwd):
            if found:
                break
            if isinstance(projects, dict) and isinstance(projects.get(folder), dict):
                found = _qmd_in(projects[folder].get("mcpServers"))
        if found:
            return found
    for folder in _ancestors(cwd):
        data = _read_json(str(project_mcp_json(Path(folder))))
        if isinstance(data, dict) and (found := _qmd_in(data.get("mcpServers"))):
            return found
    return None


def codex_mcp(cwd: str | None) -> str | None:
    """`qmd` when Codex has `[mcp_servers.qmd]` in its user or project config.toml, or qmd's
    plugin (whose server is named `qmd` too), else None."""
    from qmd.agents import codex_config, codex_plugin

    if codex_plugin():
        return "qmd"

    from qmd.harness import read_regular

    for path in [codex_config()] + [codex_config(Path(d)) for d in _ancestors(cwd)]:
        try:
            if re.search(_CODEX_MCP, read_regular(path, MAX_FILE).decode("utf-8", "replace"), re.MULTILINE):
                return "qmd"
        except OSError:
            continue
    return None


def mcp_server(agent: str | None, cwd: str | None) -> str | None:
    """The qmd MCP server name for `agent` (`claude`, `codex`, or None for either)."""
    if agent in (None, "claude"):
        found = claude_mcp(cwd)
        if found:
            return found
    if agent in (None, "codex"):
        return codex_mcp(cwd)
    return None


def _shown(text: str, limit: int = 160) -> str:
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _what(decision: Decision, call: str, extra: int) -> str:
    folder = decision.folder.label() if decision.folder else "a knowledge folder"
    more = f" and {extra} more" if extra else ""
    if decision.rule == "too-complex":
        return f"{call} is too large or too slow for the guard to check in full ({decision.detail}); it may search the notes, so it is blocked: run simpler commands"
    if decision.rule == "cat-pipe":
        return f"{call} pipes many notes from the knowledge folder {folder} into a text search"
    if decision.rule.startswith("glob-tool"):
        return f"{call} would list the knowledge folder {folder}"
    if decision.root is not None:
        return f"{call} would search {decision.root}, which holds the knowledge folder {folder}{more}"
    return f"{call} would search the knowledge folder {folder}"


def reason(kn: Knowledge, decision: Decision, call: str, agent: str | None, cwd: str | None) -> str:
    """The permissionDecisionReason for a deny: what, why, and what to do instead."""
    search = decision.search
    patterns = search.patterns if search is not None else []
    query = query_text(patterns)
    extra = 0
    if decision.root is not None:
        extra = max(0, len(kn.inside(decision.root)) - 1)
    lines = [f"qmd guard: {_what(decision, '`' + _shown(call) + '`', extra)}."]
    lines.append("grep matches characters, not meaning: it misses paraphrases, and finding nothing there does not mean the notes are silent.")
    server = mcp_server(agent, cwd)
    folder = decision.folder
    if server:
        tool = f" (mcp__{server}__query)" if agent != "codex" else ""
        lines.append(f"Search the notes with the `query` tool of the qmd MCP server{tool} instead, e.g. {{\"query\": {json.dumps(query)}}}.")
    else:
        scope = ""
        if folder is not None and folder.collection:
            index = f"--index {shlex.quote(folder.index)} " if folder.index and folder.index != "index" else ""
            scope = f" -c {shlex.quote(folder.collection)}"
            prefix = f"qmd {index}"
        else:
            prefix = "qmd "
        lines.append(
            f"Search the notes with qmd instead: {prefix}search {shlex.quote(query)}{scope} (keywords, ranked; --json for paths and snippets), "
            f"or {prefix}query {shlex.quote(query)}{scope} to search by meaning."
        )
    narrowed = suggest(kn, decision, cwd)
    if narrowed:
        lines.append(f"To search only the other folders, this narrowed command is allowed: {narrowed}")
    lines.append("Reading a note you already know (cat, sed -n, head, Read, or grep of that one file) is allowed.")
    return "\n".join(lines)
