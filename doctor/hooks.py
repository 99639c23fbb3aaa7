"""Git hooks of every enrolled repository, the agent guard's registration, and its error log."""

from __future__ import annotations

import os
import re
from functools import partial
from pathlib import Path
from typing import Any

from qmd import QmdError, harness
from qmd.agents import claude_config_dir, claude_json, claude_plugin, claude_settings, codex_config, read_json_object
from guards import codex_trust
from guards import install as guard_install
from hooks import install as hook_install
from updater import registry, spool

from .context import Context, home_path
from .results import CheckResult, Clock, fail, ok, warn

WATERMARK = "doctor/watermarks.json"


def _reinstall(repo: str) -> str:
    hook_install.install(repo)
    return f"reinstalled qmd's hooks in {home_path(repo)}"


def _repos(ctx: Context) -> list[CheckResult]:
    enrolled = registry.load(ctx.layout)
    if not enrolled:
        return [ok("git hooks", "no repository enrolled (qmd hooks install REPO)")]
    out = []
    for repo, entry in sorted(enrolled.items()):
        name = f"git hooks [{home_path(repo)}]"
        with Clock() as c:
            exists, states = hook_install.inspect(repo, entry, ctx.layout)
        if not exists:
            out.append(warn(name, "the enrolled repository no longer exists", f"qmd hooks uninstall {repo}", ms=c.ms))
            continue
        bad = [s for s in states if s.state != "installed"]
        if bad:
            out.append(fail(name, "; ".join(f"{s.name}: {s.state}: {s.detail}" for s in bad), f"qmd hooks install {repo}", ms=c.ms, repair=partial(_reinstall, repo)))
        else:
            out.append(ok(name, f"{', '.join(s.name for s in states)} installed and executable", ms=c.ms))
    return out


# one line a hook call (enqueue-tmpl): `<time> <event> <repo> <commit or -> queued|NOT queued: <why>`,
# the repo's newlines written `\n` and its backslashes `\\` (log_repo)
HOOK_LINE = re.compile(r"^(?P<time>\S+) (?P<event>\S+) (?P<repo>.+) (?:[0-9a-f]+|-) (?P<outcome>queued|NOT queued: .*)$")
HOOK_LOG_TAIL = 256 << 10
_ESCAPED = re.compile(r"\\([n\\])")


def log_repo(repo: str) -> str:
    """A repository path as hooks.log holds it: one line whatever the path (as enqueue-tmpl writes it)."""
    return repo.replace("\\", "\\\\").replace("\n", "\\n")


def logged_repo(text: str) -> str:
    """The repository path `log_repo` wrote as `text`."""
    return _ESCAPED.sub(lambda m: "\n" if m[1] == "n" else "\\", text)


def lost_requests(layout: harness.StateLayout) -> dict[str, str]:
    """{repo: its latest hooks.log line} for each repository whose latest hook call could not
    queue its request (read from the tail of hooks.log.1 then hooks.log; a later line wins)."""
    latest: dict[str, tuple[str, bool]] = {}  # repo → (line, queued)
    for path in (layout.hooks_log.with_name(layout.hooks_log.name + ".1"), layout.hooks_log):
        try:
            with harness.open_regular(path) as fh:
                fh.seek(max(0, os.fstat(fh.fileno()).st_size - HOOK_LOG_TAIL))
                text = fh.read().decode("utf-8", "replace")
        except OSError:
            continue
        for line in text.split("\n"):  # not splitlines(): a path may hold a carriage return or a form feed
            found = HOOK_LINE.match(line)
            if found:
                latest[logged_repo(found["repo"])] = (line, found["outcome"] == "queued")
    return {repo: line for repo, (line, queued) in latest.items() if not queued}


def _queue_again(layout: harness.StateLayout, repos: list[str]) -> str:
    """--fix: queue each lost request again (a request is a kick: the update rescans the whole
    collection) and log it as the hook would, so the check reads the repo as queued."""
    for repo in repos:
        spool.enqueue(layout, repo, "doctor")
        layout.hooks_log.parent.mkdir(parents=True, exist_ok=True)
        with open(layout.hooks_log, "a", encoding="utf-8") as log:
            log.write(f"{harness.now_iso()} doctor {log_repo(repo)} - queued\n")
    return f"queued a request again for {', '.join(log_repo(home_path(r)) for r in repos)}"


def _queueing(ctx: Context) -> CheckResult:
    """A hook that cannot queue leaves only a 'NOT queued' line in hooks.log (the commit must
    succeed whatever happens): a state dir a `sudo qmd …` left root-owned, a full disk, a
    folder in the way. Silent otherwise: health and the queue look fine, the index goes stale."""
    with Clock() as c:
        lost = lost_requests(ctx.layout)
    if not lost:
        return ok("hook queueing", f"every enrolled repository's latest hook call queued its request ({home_path(ctx.layout.hooks_log)})", ms=c.ms)
    repo, line = sorted(lost.items())[-1]
    why = line.split(" NOT queued: ", 1)[-1]
    return fail(
        "hook queueing",
        f"the latest commit of {len(lost)} repositor{'y' if len(lost) == 1 else 'ies'} was NOT queued ({log_repo(repo)}: {why})",
        "qmd doctor --fix  # once what it names is fixed (a folder in the way, permissions, a full disk): queues them again",
        ms=c.ms, repair=partial(_queue_again, ctx.layout, sorted(lost)),
    )


def _guard() -> list[CheckResult]:
    with Clock() as c:
        found = guard_install.status()
    if not found:
        return [ok("agent guard", "not installed (optional: qmd guard install --claude --codex)", ms=c.ms)]
    out = []
    for path, registered, detail in found:
        agent = "--codex" if Path(path).name == "hooks.json" else "--claude"
        scope = [] if agent == "--codex" or Path(path).parent == claude_config_dir() else ["--scope", "project"]
        fix = " ".join(["qmd", "guard", "install", agent, *scope])
        if registered:
            out.append(ok(f"agent guard [{home_path(path)}]", detail, ms=c.ms))
            if agent == "--codex":
                out.append(_codex_trust(Path(path)))
        else:
            out.append(fail(f"agent guard [{home_path(path)}]", f"installed there, but {detail}", fix, ms=c.ms))
    return out


def _codex_trust(hooks_json: Path) -> CheckResult:
    """Codex runs a hook only once the user trusted it (and skips it silently otherwise): read the
    trust Codex recorded in its config.toml against the hash of the definition in hooks.json.
    Never trusts anything itself, not even under --fix: trusting is the user's act."""
    name = f"codex hook trust [{home_path(hooks_json)}]"
    with Clock() as c:
        hooks = codex_trust.qmd_hooks(hooks_json)
    if not hooks:
        return ok(name, "no qmd hook in it to trust", ms=c.ms)
    config = home_path(codex_config())
    if codex_trust.hooks_turned_off():
        return warn(name, f"hooks are turned off in {config} ([features] hooks = false): Codex runs none of them", f"set hooks = true under [features] in {config}", ms=c.ms)
    untrusted = [h.event for h in hooks if h.status == "untrusted"]
    modified = [h.event for h in hooks if h.status == "modified"]
    disabled = [h.event for h in hooks if h.enabled is False]
    problems = []
    if untrusted:
        problems.append(f"{' and '.join(untrusted)} not trusted yet")
    if modified:
        problems.append(f"{' and '.join(modified)} changed since trusted")
    if problems:
        them = "it" if len(untrusted) + len(modified) == 1 else "them"
        return warn(name, f"{'; '.join(problems)}: Codex skips {them} without a word (codex exec too) until you trust {them}", codex_trust.TRUST_FIX, ms=c.ms)
    if disabled:
        return warn(name, f"{' and '.join(disabled)} trusted but disabled in Codex: it does not run", "start codex, open /hooks and enable the qmd hooks", ms=c.ms)
    return ok(name, f"{' and '.join(h.event for h in hooks)} trusted ({config})", ms=c.ms)


def _refresh_cache() -> str:
    return f"rewrote {home_path(harness.refresh_folder_cache())}"


def _guard_cache(ctx: Context) -> CheckResult:
    """folders.json against what the configs say now. qmd rewrites it when it saves a config;
    a config edited by hand leaves it stale: a collection added that way goes unprotected and
    one removed stays blocked, with nothing else saying so."""
    name = "guard folder cache"
    path = ctx.layout.guard_folders
    if not guard_install.status() and claude_plugin(Path.cwd()) is None:
        return ok(name, "not used (no guard installed)")
    with Clock() as c:
        cached = harness.read_json(path)
        fresh = harness.collect_folders()
    if not isinstance(cached, dict):
        return fail(name, f"{home_path(path)} is missing or unreadable: the guard allows every search", "qmd guard refresh", ms=c.ms, repair=_refresh_cache)
    def same(key: str) -> bool:  # order-blind: the order of the config files is not a change
        a, b = cached.get(key), fresh.get(key)
        return sorted(map(repr, a)) == sorted(map(repr, b)) if isinstance(a, list) and isinstance(b, list) else a == b

    if all(same(k) for k in ("folders", "patterns", "protect", "allow", "project_allow")):
        return ok(name, f"{home_path(path)} matches the configs ({len(fresh['folders'])} knowledge folders)", ms=c.ms)
    had = {f.get("path") for f in cached.get("folders") or [] if isinstance(f, dict)}
    now = {f["path"] for f in fresh["folders"]}
    parts = []
    if now - had:
        parts.append(f"not protected: {', '.join(sorted(now - had))}")
    if had - now:
        parts.append(f"still blocked though no config names them: {', '.join(sorted(str(p) for p in had - now))}")
    what = "; ".join(parts) or "its patterns or guard globs differ from the configs"
    return fail(name, f"{home_path(path)} is stale (a config edited by hand?): {what}", "qmd guard refresh", ms=c.ms, repair=_refresh_cache)


def _guard_errors(ctx: Context) -> CheckResult:
    """New lines in the guard's error log since the last doctor run (a watermark in the state dir)."""
    log = ctx.layout.guard_errors
    mark_path = ctx.layout.root / WATERMARK
    found = harness.read_json(mark_path)
    marks: dict[str, Any] = found if isinstance(found, dict) else {}
    raw = marks.get("guard_errors")
    seen: dict[str, Any] = raw if isinstance(raw, dict) else {}
    try:
        st = log.stat()
    except OSError:
        return ok("guard errors", "no error log")
    start = int(seen.get("offset", 0)) if seen.get("inode") == st.st_ino and int(seen.get("offset", 0)) <= st.st_size else 0
    with open(log, "rb") as f:
        f.seek(start)
        new = f.read().decode("utf-8", "replace")
    lines = [line for line in new.splitlines() if line.strip()]
    marks["guard_errors"] = {"inode": st.st_ino, "offset": start + len(new.encode("utf-8", "replace"))}
    try:
        harness.write_json(mark_path, marks, indent=2, sort_keys=True)  # the bytes updater.layout wrote
    except OSError:
        pass  # a read-only state dir must not break the check; the lines show again next time
    if not lines:
        return ok("guard errors", f"no new lines since the last doctor run ({home_path(log)})")
    return warn("guard errors", f"{len(lines)} new line(s) since the last doctor run; latest: {lines[-1][:300]}", f"less {log}")


def _claude_plugin() -> list[CheckResult]:
    """qmd's Claude Code plugin beside a registration by hand: every tool and hook twice."""
    plugin_id = claude_plugin(Path.cwd())
    if plugin_id is None:
        return []
    name = f"claude plugin [{plugin_id}]"
    twice = []
    try:
        servers = read_json_object(claude_json())[0].get("mcpServers")
    except QmdError:  # an unreadable ~/.claude.json is the MCP checks' to report
        servers = None
    if isinstance(servers, dict) and "qmd" in servers:
        twice.append(("the 'qmd' MCP server is also in ~/.claude.json", "claude mcp remove --scope user qmd"))
    settings = str(claude_settings("user"))
    if any(str(path) == settings and registered for path, registered, _ in guard_install.status()):
        twice.append((f"the guard hooks are also in {home_path(settings)}", "qmd guard uninstall --claude"))
    if not twice:
        return [ok(name, "installed and enabled: qmd's MCP server, skill and hooks come from it")]
    return [warn(name, "installed and enabled, and " + "; ".join(w for w, _ in twice) + ": Claude Code runs them twice", " && ".join(f for _, f in twice))]


def check(ctx: Context) -> list[CheckResult]:
    return [*_repos(ctx), _queueing(ctx), *_guard(), _guard_cache(ctx), *_claude_plugin(), _guard_errors(ctx)]
