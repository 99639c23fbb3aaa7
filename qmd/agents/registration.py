"""`qmd mcp install`: register qmd's MCP server with Claude Code or Codex.

- Claude Code: through `claude mcp add-json` when `claude` is on PATH (`claude mcp add` has
  no flag for `alwaysLoad`), else by merging the file: user scope `~/.claude.json` →
  `mcpServers.qmd`, project scope `./.mcp.json` → `mcpServers.qmd`.
- Codex: by merging `${CODEX_HOME:-~/.codex}/config.toml` → `[mcp_servers.qmd]` (`codex mcp
  add` cannot set `required`); when `codex` is on PATH, `codex mcp get` then checks that
  Codex reads the entry, and a refused entry is rolled back.

Files are merged idempotently, with a backup of a file that changes. The server is named
`qmd` for the default index, `qmd-NAME` for another. It runs over stdio (`qmd [--index
NAME] mcp`), or with `--http` as a URL of `qmd mcp --http` (`--url` for a team server elsewhere).

A server that asks for tokens (qmd/serve/auth.py) gets the token from an environment
variable the client reads when it connects (`--token-env VAR`), never written into the
client's files: Claude Code `"headers": {"Authorization": "Bearer ${VAR}"}` (Claude Code
expands `${VAR}` in the headers of `.mcp.json` and `~/.claude.json` entries), Codex
`bearer_token_env_var = "VAR"` in `[mcp_servers.NAME]`. Doctor's probe of that server
reads the same variable (`token_env_of`).

What the entry holds, so the agent has qmd on its first turn and reads the same index as
the installing shell (checked with Claude Code 2.1.197 and Codex 0.171.0):

- Claude Code: `"alwaysLoad": true`: it waits for the server before the first model request
  (without it, `claude -p` waits at most about 2 s, then starts without qmd's tools).
- Codex: `required = true`: `codex exec` waits for the server, and fails loudly when it
  cannot start (without it, the first turn starts without qmd's tools).
- stdio: the settings that choose the index, config, state and models, where the installing
  shell's differ from the defaults (`pinned_env`): Claude Code `"env": {...}`, Codex `env =
  {...}`. Codex starts stdio servers with a trimmed environment (HOME, PATH, LANG, SHELL,
  TERM), so without them its server reads another index. `--index` is in `args`.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import qmd.agents.codex as codex
from qmd.agents.files import dump_json, inside_project, read_json_object, write_or_remove, write_with_backup
from qmd.agents.locations import claude_json, codex_config, codex_home, project_mcp_json
from qmd.agents.plugin import claude_plugin, codex_plugin, plugin_notice
from qmd.core.errors import QmdError
from qmd.core.paths import DEFAULT_INDEX


__all__ = ["PINNED", "Plan", "apply", "codex_home", "pinned_env", "plan_claude", "plan_codex", "registrations", "unregister_all", "unregister_claude_file"]

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


_ENV_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")


def check_token_env(name: str | None) -> str | None:
    """`name` if it can name an environment variable (None stays None)."""
    if name is not None and not _ENV_NAME.match(name):
        raise QmdError(f"'{name[:80]}' is not an environment variable name", "use letters, digits and _, e.g. --token-env QMD_TOKEN")
    return name


def claude_headers(token_env: str | None) -> dict[str, str]:
    """The `headers` of a Claude Code entry: the bearer token from `${VAR}`, expanded by Claude Code."""
    return {"Authorization": f"Bearer ${{{token_env}}}"} if token_env else {}


_CLAUDE_BEARER = re.compile(r"^Bearer \$\{([A-Za-z_][A-Za-z0-9_]*)(?::-[^}]*)?\}$")


def token_env_of(entry: object) -> str | None:
    """The environment variable whose token a registered entry sends (Claude Code headers or
    Codex `bearer_token_env_var`), else None."""
    if not isinstance(entry, dict):
        return None
    if isinstance(entry.get("bearer_token_env_var"), str):
        return str(entry["bearer_token_env_var"])
    headers = entry.get("headers")
    auth = headers.get("Authorization") if isinstance(headers, dict) else None
    match = _CLAUDE_BEARER.match(auth) if isinstance(auth, str) else None
    return match.group(1) if match else None


def registered_token_env(index: str, *, cwd: Path | None = None) -> str | None:
    """The token variable named by any registration of `index`'s server (Claude Code files, Codex config)."""
    name = server_name(index)
    for path in (claude_json(), project_mcp_json(cwd)):
        try:
            servers = _read_json(path).get("mcpServers")
        except QmdError:
            continue
        found = token_env_of(servers.get(name)) if isinstance(servers, dict) else None
        if found:
            return found
    try:
        text = codex.read_text(codex_config()) or ""
        table = codex.parse(text, codex_config(), "").get("mcp_servers", {}).get(name)
    except (QmdError, OSError):
        return None
    return token_env_of(table)


# Pinned into a stdio registration when set and different from the default: the variables
# that choose which index, config, harness state and models qmd reads (qmd/core/paths.py,
# qmd/llm/models.py, the sqlite-vec override). XDG_DATA_HOME is not read by qmd today; it is
# pinned too, so a later reader finds the same folder. Not pinned: knobs that tune how qmd
# runs but not what it reads (QMD_THREADS, QMD_MODEL_IDLE_S, QMD_PROGRESS_S, QMD_HF_ENDPOINT:
# a server never downloads), the HTTP server's (QMD_HTTP_TIMEOUT_S, QMD_ALLOWED_*), and the
# harness's (QMD_HOOKS, QMD_GUARD_GLOB, QMD_UPDATER_THREADS).
PINNED = (
    "XDG_CONFIG_HOME", "XDG_DATA_HOME", "XDG_CACHE_HOME", "XDG_STATE_HOME",
    "QMD_CONFIG_DIR", "QMD_STATE_DIR", "QMD_MODELS_DIR", "INDEX_PATH",
    "QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL", "QMD_SQLITE_VEC_PATH",
)
_XDG_DEFAULTS = {"XDG_CONFIG_HOME": ".config", "XDG_DATA_HOME": ".local/share", "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state"}


def pinned_env(index: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The settings of `environ` (default: this process's) that chose `index`'s files and
    differ from the defaults, as the server must see them: paths made absolute (the client
    starts the server in another folder), `hf:` model URIs as they are."""
    env = os.environ if environ is None else environ
    home = env.get("HOME") or str(Path.home())

    def given(key: str) -> str | None:
        value = env.get(key)
        if not value:
            return None
        if value == "~" or value.startswith("~/"):
            value = home + value[1:]
        return os.path.abspath(value)

    def xdg(key: str) -> str:
        return given(key) or os.path.join(home, _XDG_DEFAULTS[key])

    cache = os.path.join(xdg("XDG_CACHE_HOME"), "qmd")
    defaults = {
        "QMD_CONFIG_DIR": os.path.join(xdg("XDG_CONFIG_HOME"), "qmd"),
        "QMD_STATE_DIR": os.path.join(xdg("XDG_STATE_HOME"), "qmd"),
        "QMD_MODELS_DIR": os.path.join(cache, "models"),
        "INDEX_PATH": os.path.join(cache, f"{index}.sqlite"),
        **{key: os.path.join(home, sub) for key, sub in _XDG_DEFAULTS.items()},
    }
    pinned: dict[str, str] = {}
    for key in PINNED:
        raw = env.get(key)
        if not raw:
            continue
        if key.endswith("_MODEL") and raw.startswith("hf:"):
            pinned[key] = raw
            continue
        value = given(key)
        if value is not None and value != defaults.get(key):
            pinned[key] = value
    return pinned


@dataclass
class Plan:
    """What install will do (or did): run commands, or write one file."""

    client: str
    summary: str
    commands: list[list[str]] = field(default_factory=list)
    path: Path | None = None
    new_text: str | None = None
    changed: bool = False
    check: list[str] | None = None  # run after writing: the client must read the entry, else the file is put back
    old_text: str | None = None

    @property
    def writes(self) -> Path | None:
        """The file `apply` will write, if it writes one."""
        return self.path if not self.commands and self.changed and self.new_text is not None else None

    def describe(self) -> str:
        import shlex

        if self.commands:
            return "\n".join(shlex.join(c) for c in self.commands)
        if self.path is None:  # nothing to run or write (e.g. the plugin already provides it)
            return self.summary
        if not self.changed:
            return f"{self.path}: already up to date"
        return f"# {self.path}\n{self.new_text}"


# --- Claude Code ------------------------------------------------------------------------


def claude_entry(index: str, http: bool, port: int, environ: Mapping[str, str] | None = None, token_env: str | None = None, url: str | None = None) -> dict[str, Any]:
    """The `mcpServers` entry; `alwaysLoad` makes Claude Code wait for it before the first turn."""
    if http:
        entry: dict[str, Any] = {"type": "http", "url": url or server_url(port), "alwaysLoad": True}
        if token_env:
            entry["headers"] = claude_headers(token_env)
        return entry
    cmd = server_command(index)
    return {"type": "stdio", "command": cmd[0], "args": cmd[1:], "env": pinned_env(index, environ), "alwaysLoad": True}


def plan_claude(
    index: str, scope: str, http: bool, port: int, *, cwd: Path | None = None, which: Which = shutil.which, environ: Mapping[str, str] | None = None,
    token_env: str | None = None, url: str | None = None,
) -> Plan:
    if scope not in ("user", "project"):
        raise QmdError(f"unknown scope {scope!r}", "use --scope user or --scope project")
    name = server_name(index)
    plugin_id = claude_plugin(cwd or Path.cwd()) if name == server_name(DEFAULT_INDEX) else None
    if plugin_id:  # the plugin's server is this one: a second `qmd` would double every tool
        return Plan("claude", plugin_notice(plugin_id, f"the '{name}' MCP server"))
    where = "~/.claude.json" if scope == "user" else "./.mcp.json"
    entry = claude_entry(index, http, port, environ, check_token_env(token_env), url)
    exe = which("claude")
    if exe:
        add = [exe, "mcp", "add-json", "--scope", scope, name, json.dumps(entry, ensure_ascii=False)]
        remove = [exe, "mcp", "remove", "--scope", scope, name]
        return Plan("claude", f"registered '{name}' with Claude Code ({scope} scope) through `claude mcp add-json`", [remove, add])
    path = claude_json() if scope == "user" else inside_project(project_mcp_json(cwd), cwd or Path.cwd())
    data = _read_json(path)
    servers = data.setdefault("mcpServers", {})
    if not isinstance(servers, dict):
        raise QmdError(f"'mcpServers' in {path} is not an object", f"fix {path} by hand, then retry")
    changed = servers.get(name) != entry
    servers[name] = entry
    text = dump_json(data).decode("utf-8")
    verb = "registered" if changed else "already registered"
    return Plan("claude", f"{verb} '{name}' for Claude Code in {where}", path=path, new_text=text, changed=changed)


def _read_json(path: Path) -> dict[str, Any]:
    return read_json_object(path, f"fix {path} by hand, then retry")[0]


# --- Codex ------------------------------------------------------------------------------


def codex_block(index: str, http: bool, port: int, environ: Mapping[str, str] | None = None, token_env: str | None = None, url: str | None = None) -> str:
    """The `[mcp_servers.<name>]` table that registers the server of `index`; `required`
    makes Codex wait for it before the first turn (and fail loudly when it cannot start)."""
    if http:
        return codex.mcp_server_table(server_name(index), url=url or server_url(port), required=True, bearer_token_env_var=token_env)
    return codex.mcp_server_table(server_name(index), command=server_command(index), env=pinned_env(index, environ), required=True)


def plan_codex(
    index: str, http: bool, port: int, *, which: Which = shutil.which, environ: Mapping[str, str] | None = None, token_env: str | None = None, url: str | None = None,
) -> Plan:
    name = server_name(index)
    plugin_id = codex_plugin() if name == server_name(DEFAULT_INDEX) else None
    if plugin_id:  # the plugin's .mcp.json is this `qmd` server
        return Plan("codex", plugin_notice(plugin_id, f"the '{name}' MCP server", "codex"))
    exe = which("codex")
    path = codex_config()
    text = codex.read_text(path) or ""
    old = codex.parse(text, path, f"fix {path} by hand, then retry")
    new_text = codex.set_mcp_server_table(text, name, codex_block(index, http, port, environ, check_token_env(token_env), url))
    new = codex.parse(new_text, path, "add the table by hand (see qmd mcp install --codex --print)")
    changed = old.get("mcp_servers", {}).get(name) != new["mcp_servers"][name]
    verb = "registered" if changed else "already registered"
    check = [exe, "mcp", "get", name, "--json"] if exe else None
    return Plan("codex", f"{verb} '{name}' for Codex in {path}", path=path, new_text=new_text if changed else text, changed=changed, check=check, old_text=text)


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
    existed = plan.path.exists()
    backup = write_with_backup(plan.path, plan.new_text)
    if plan.check:
        proc = subprocess.run(plan.check, capture_output=True, text=True, timeout=60, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            write_or_remove(plan.path, plan.old_text if existed and plan.old_text is not None else None)
            if backup is not None:
                backup.unlink(missing_ok=True)
            raise QmdError(
                f"`{' '.join(plan.check[1:4])}` does not accept the new entry in {plan.path} ({_client_error(proc)}); the file is as it was",
                "update the client, or add the table by hand (qmd mcp install --print shows it)",
            )
    return plan.summary + (f" (backup: {backup})" if backup else "")


def _client_error(proc: subprocess.CompletedProcess[str]) -> str:
    """A client's error in one line: its message without warnings and stack backtrace."""
    text = (proc.stderr or proc.stdout).split("Stack backtrace:")[0]
    words = " ".join(line.strip() for line in text.splitlines() if line.strip() and not line.startswith("WARNING:"))
    return words[:300] or f"exit {proc.returncode}"


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
    project = project_mcp_json(cwd)
    files = [(claude_json(), unregister_claude_file), (project, unregister_claude_file), (codex_config(), codex.remove_qmd_servers)]
    try:
        inside_project(project, cwd or Path.cwd())
    except QmdError as exc:  # a link out of the project: that file is not the project's to change
        lines.append(f"left {project} as it is: {exc.message}")
        del files[1]
    unreadable: list[QmdError] = []
    for path, remove in files:
        try:
            removed = remove(path)
        except QmdError as exc:  # one unreadable file (not regular, too large, not JSON) does not stop the rest
            unreadable.append(exc)
            continue
        for name in removed:
            lines.append(f"removed MCP server '{name}' from {path}")
    if unreadable:  # the others are done (said first); this step still failed
        raise QmdError("; ".join([*lines, *(exc.message for exc in unreadable)]), unreadable[0].cli_hint)
    return lines


def registrations(*, cwd: Path | None = None) -> list[str]:
    """Where qmd's MCP server is registered, from the clients' files (for teardown's summary);
    a file that exists but cannot be read is named too (it may hold one: silence said "nothing
    to remove")."""
    found = []
    for path in (claude_json(), project_mcp_json(cwd)):
        try:
            servers = _read_json(path).get("mcpServers")
        except QmdError as exc:
            found.append(f"{path}: perhaps ({exc.message})")
            continue
        if isinstance(servers, dict):
            found += [f"{path}: {n}" for n, e in servers.items() if codex.is_qmd_server(n) and _is_our_entry(e)]
    found += [f"{codex_config()}: {n}" for n in codex.qmd_servers(codex_config())]
    return found
