"""Is Codex going to run qmd's hooks? Codex's hook trust, read from its files or asked of `codex app-server`.

Codex (CLI 0.171.0) runs a hook from `hooks.json` only once the user has trusted it, and
`codex exec` skips an untrusted one without a word. Trust is per handler, in the user's
`config.toml`:

    [hooks.state."<realpath of CODEX_HOME>/hooks.json:pre_tool_use:0:0"]
    trusted_hash = "sha256:…"

The key is `<source path>:<event label>:<group index>:<handler index>` (codex-rs/hooks/src/lib.rs
`hook_key`; the indexes count every group and handler of the event in the file, including ones
Codex skips). The hash (codex-rs/hooks/src/engine/discovery.rs `command_hook_hash`, via
codex-rs/config `version_for_toml`) is sha256 over the compact, key-sorted JSON of

    {"event_name": <label>, "matcher": <as written>, "hooks": [<the handler, normalized>]}

where the handler keeps only the fields Codex knows (`type`, `command`, `timeout` (absent: 600,
at least 1), `async` (default false), `statusMessage`, `additionalContextLimit` when set) and a
matcher appears only for events that take one. A stored hash that differs from the current one
means the definition changed after it was trusted ("modified"). `tests/guards/test_codex_trust.py`
checks this computation against the real `codex app-server`'s `hooks/list`.

Trusting is the user's act: `trust()` (behind `qmd guard trust --codex`) asks the real
`codex app-server` for its view (`hooks/list`) and writes Codex's own hashes for qmd's handlers
with `config/batchWrite` of `hooks.state`, exactly what Codex's `/hooks` screen does. Doctor only
reads.
"""

from __future__ import annotations

import hashlib
import json
import os
import selectors
import shutil
import subprocess
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from qmd import QmdError
from qmd.agents import codex_config, codex_hooks_json

from . import settings

EVENTS = ("PreToolUse", settings.SESSION_EVENT)  # the events qmd installs into hooks.json
LABELS = {"PreToolUse": "pre_tool_use", "SessionStart": "session_start", "PostToolUse": "post_tool_use",
          "PermissionRequest": "permission_request", "UserPromptSubmit": "user_prompt_submit", "Stop": "stop",
          "PreCompact": "pre_compact", "PostCompact": "post_compact"}
NO_MATCHER = {"UserPromptSubmit", "Stop"}  # events whose matcher Codex drops
DEFAULT_TIMEOUT_S = 600
TRUST_FIX = "qmd guard trust --codex (or start codex, open /hooks and trust the qmd hooks)"


@dataclass(frozen=True)
class CodexHook:
    """One of qmd's handlers in Codex's hooks.json, with the trust Codex records for it."""

    event: str  # "PreToolUse" or "SessionStart"
    key: str  # the hooks.state key
    command: str
    current_hash: str
    trusted_hash: str | None
    enabled: bool

    @property
    def status(self) -> str:
        """Codex's trustStatus: trusted, untrusted, or modified (trusted once, changed since)."""
        if self.trusted_hash is None:
            return "untrusted"
        return "trusted" if self.trusted_hash == self.current_hash else "modified"


def event_label(event: str) -> str:
    """The event's label in hooks.state keys (`PreToolUse` → `pre_tool_use`)."""
    return LABELS.get(event) or "".join("_" + c.lower() if c.isupper() and i else c.lower() for i, c in enumerate(event))


def source_path(hooks_json: Path) -> str:
    """The path Codex names hooks.json by: CODEX_HOME resolved (Codex canonicalizes it), then `hooks.json`."""
    return os.path.join(os.path.realpath(hooks_json.parent), hooks_json.name)


def hook_key(source: str, event: str, group_index: int, handler_index: int) -> str:
    """Codex's hooks.state key for one handler."""
    return f"{source}:{event_label(event)}:{group_index}:{handler_index}"


def normalized_handler(handler: dict[str, Any]) -> dict[str, Any]:
    """The handler as Codex hashes it: its known fields, the timeout defaulted and at least 1."""
    timeout = handler.get("timeout")
    out: dict[str, Any] = {
        "type": "command",
        "command": handler["command"],
        "timeout": max(1, DEFAULT_TIMEOUT_S if timeout is None else int(timeout)),
        "async": bool(handler.get("async", False)),
    }
    for name in ("statusMessage", "additionalContextLimit"):
        if handler.get(name) is not None:
            out[name] = handler[name]
    return out


def hook_hash(event: str, matcher: str | None, handler: dict[str, Any]) -> str:
    """Codex's `trusted_hash` for a command handler of `event` in a group with `matcher`."""
    identity: dict[str, Any] = {"event_name": event_label(event), "hooks": [normalized_handler(handler)]}
    if matcher is not None and event not in NO_MATCHER:
        identity["matcher"] = matcher
    text = json.dumps(identity, sort_keys=True, separators=(",", ":"), ensure_ascii=False)
    return "sha256:" + hashlib.sha256(text.encode("utf-8")).hexdigest()


def _config(config_toml: Path) -> dict[str, Any]:
    import tomllib

    try:
        return tomllib.loads(config_toml.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, tomllib.TOMLDecodeError):
        return {}


def hooks_turned_off(config_toml: Path | None = None) -> bool:
    """True when Codex's config.toml says `[features] hooks = false` (or the older `codex_hooks = false`)."""
    features = _config(config_toml or codex_config()).get("features")
    return isinstance(features, dict) and features.get("hooks", features.get("codex_hooks")) is False


def states(config_toml: Path) -> dict[str, dict[str, Any]]:
    """`[hooks.state]` of Codex's user config.toml: key → {enabled?, trusted_hash?} ({} when absent or unreadable)."""
    hooks = _config(config_toml).get("hooks")
    table = hooks.get("state") if isinstance(hooks, dict) else None
    out: dict[str, dict[str, Any]] = {}
    for key, state in (table or {}).items() if isinstance(table, dict) else ():
        if not isinstance(state, dict) or not key.strip():
            continue
        if not isinstance(state.get("enabled", True), bool) or not isinstance(state.get("trusted_hash", ""), str):
            continue  # Codex drops an entry it cannot read
        out[key.strip()] = state
    return out


def _ours(event: str) -> Any:
    return settings.is_ours if event == "PreToolUse" else settings.is_session_hook


def qmd_hooks(hooks_json: Path | None = None, config_toml: Path | None = None) -> list[CodexHook]:
    """qmd's handlers in Codex's hooks.json (PreToolUse guard, SessionStart health), each with its trust."""
    path = hooks_json or codex_hooks_json()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError):
        return []
    known = states(config_toml or codex_config())
    source = source_path(path)
    hooks = data.get("hooks") if isinstance(data, dict) else None
    out = []
    for event in EVENTS:
        groups = hooks.get(event) if isinstance(hooks, dict) else None
        for gi, group in enumerate(groups if isinstance(groups, list) else []):
            handlers = group.get("hooks") if isinstance(group, dict) else None
            for hi, handler in enumerate(handlers if isinstance(handlers, list) else []):
                if not _ours(event)(handler):
                    continue
                key = hook_key(source, event, gi, hi)
                state = known.get(key, {})
                out.append(CodexHook(event, key, handler["command"], hook_hash(event, group.get("matcher"), handler),
                                     state.get("trusted_hash"), state.get("enabled", True) is not False))
    return out


# --- the real Codex, through `codex app-server` (JSON-RPC over stdio) ---------------------------


class AppServer:
    """`codex app-server` as a subprocess: initialize, then requests; always closed by `close()`."""

    def __init__(self, codex: str, timeout: float = 30.0) -> None:
        self.timeout = timeout
        # stderr holds Codex's own log lines (sandbox warnings …): not ours to show, and a pipe could fill
        try:
            self.proc = subprocess.Popen([codex, "app-server"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL)
        except OSError as exc:
            raise QmdError(f"cannot run {codex} app-server: {exc.strerror or exc}", "pass the codex executable with --codex-bin PATH") from exc
        self._next = 0
        self._buf = b""
        try:
            self.request("initialize", {"clientInfo": {"name": "qmd", "version": "1"}})
            self._send({"jsonrpc": "2.0", "method": "initialized"})
        except BaseException:
            self.close()
            raise

    def _send(self, message: dict[str, Any]) -> None:
        assert self.proc.stdin is not None
        try:
            self.proc.stdin.write((json.dumps(message) + "\n").encode())
            self.proc.stdin.flush()
        except OSError as exc:
            raise QmdError("codex app-server exited before answering", "run `codex app-server` by hand to see why") from exc

    def _line(self, deadline: float) -> bytes:
        assert self.proc.stdout is not None
        fd = self.proc.stdout.fileno()
        with selectors.DefaultSelector() as sel:
            sel.register(fd, selectors.EVENT_READ)
            while b"\n" not in self._buf:
                left = deadline - time.monotonic()
                if left <= 0 or not sel.select(left):
                    raise QmdError(f"codex app-server did not answer within {self.timeout:.0f}s", "run `codex app-server` by hand to see why")
                chunk = os.read(fd, 65536)
                if not chunk:
                    raise QmdError("codex app-server exited before answering", "run `codex app-server` by hand to see why")
                self._buf += chunk
        line, _, self._buf = self._buf.partition(b"\n")
        return line

    def request(self, method: str, params: dict[str, Any]) -> Any:
        """Send one request; skip notifications until its answer; a JSON-RPC error is a QmdError."""
        self._next += 1
        ident = self._next
        self._send({"jsonrpc": "2.0", "id": ident, "method": method, "params": params})
        deadline = time.monotonic() + self.timeout
        while True:
            try:
                message = json.loads(self._line(deadline))
            except ValueError:
                continue
            if isinstance(message, dict) and message.get("id") == ident and "method" not in message:
                if "error" in message:
                    raise QmdError(f"codex app-server: {method} failed: {message['error'].get('message', message['error'])}", "check Codex's config.toml")
                return message.get("result")

    def close(self) -> None:
        if self.proc.poll() is None:
            assert self.proc.stdin is not None
            try:
                self.proc.stdin.close()
            except OSError:
                pass
            try:
                self.proc.wait(timeout=5)
            except subprocess.TimeoutExpired:
                self.proc.terminate()
                try:
                    self.proc.wait(timeout=5)
                except subprocess.TimeoutExpired:
                    self.proc.kill()
                    self.proc.wait()
        for stream in (self.proc.stdin, self.proc.stdout):
            if stream is not None and not stream.closed:
                stream.close()

    def __enter__(self) -> AppServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def find_codex(given: str | None = None) -> str:
    """The codex executable: `given`, else `codex` on PATH."""
    exe = given or shutil.which("codex")
    if not exe:
        raise QmdError("codex is not on PATH", "install Codex (npm install -g @openai/codex) or pass --codex-bin PATH")
    return exe


def listed(server: AppServer) -> list[dict[str, Any]]:
    """Every hook `hooks/list` reports (all cwds' entries, flattened)."""
    result = server.request("hooks/list", {})
    return [hook for entry in (result or {}).get("data", []) for hook in entry.get("hooks", [])]


def trust(codex: str | None = None) -> list[str]:
    """Trust qmd's Codex hooks the supported way (the user runs this): `hooks/list` for Codex's own
    keys and hashes, `config/batchWrite` of `hooks.state` for qmd's handlers only, then `hooks/list`
    again to confirm. Returns the lines to print."""
    ours = {h.key: h for h in qmd_hooks()}
    if not ours:
        raise QmdError(f"no qmd hook in {codex_hooks_json()}", "run `qmd guard install --codex` first")
    with AppServer(find_codex(codex)) as server:
        found = {h["key"]: h for h in listed(server) if h.get("key") in ours and h.get("command") == ours[h["key"]].command}
        missing = sorted(set(ours) - set(found))
        if missing:
            raise QmdError(f"Codex does not list qmd's hook(s) {', '.join(missing)}", "check that `codex` is the Codex whose CODEX_HOME holds qmd's hooks.json")
        todo = {key: h for key, h in found.items() if h.get("trustStatus") != "trusted"}
        lines = []
        if todo:
            value = {key: {"trusted_hash": h["currentHash"]} for key, h in todo.items()}
            server.request("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "value": value, "mergeStrategy": "upsert"}], "reloadUserConfig": True})
            after = {h["key"]: h for h in listed(server) if h.get("key") in todo}
            for key, h in sorted(todo.items()):
                status = after.get(key, {}).get("trustStatus")
                if status != "trusted":
                    raise QmdError(f"Codex still reports {key} as {status}", "open /hooks in codex and trust it there")
                lines.append(f"trusted {ours[key].event} → {h['command']} ({h['currentHash'][:19]}…) in {codex_config()}")
        for key in sorted(set(found) - set(todo)):
            lines.append(f"already trusted: {ours[key].event} → {found[key]['command']}")
        disabled = [ours[k].event for k, h in found.items() if h.get("enabled") is False]
        if disabled:
            lines.append(f"note: {', '.join(disabled)} disabled in Codex; enable it in codex's /hooks for it to run")
    return lines
