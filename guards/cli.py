"""`qmd guard …`: explain decisions, read the block log, install the hook (a typer sub-app of qmd)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path
from typing import Annotated, Any

import typer

from qmd import harness
from qmd import QmdError

from . import install as installer
from . import stats as blockstats
from .advice import mcp_server, reason
from .blocklog import tail_lines
from .decide import decide
from .evaluate import shell_searches
from .knowledge import Knowledge, load
from .lexer import literal

app = typer.Typer(
    name="guard",
    help="The agent grep guard: a PreToolUse hook that steers agents from grep sweeps of your notes to qmd.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)


def _out(text: str) -> None:
    typer.echo(text.rstrip("\n"))


def _knowledge() -> tuple[Knowledge | None, list[str]]:
    """The knowledge folders as the hook sees them, and warnings about the cache."""
    path = harness.StateLayout.current().guard_folders
    warnings: list[str] = []
    try:
        kn = load(str(path))
    except (OSError, ValueError) as exc:
        raise QmdError(f"cannot read {path}: {exc}", "run `qmd guard refresh` to rebuild it") from exc
    if kn is None:
        warnings.append(f"{path} does not exist: the hook allows everything. Run `qmd guard refresh`.")
        return None, warnings
    cache_mtime = path.stat().st_mtime
    newer = [p.name for p in harness.config_dir().glob("*.yml") if p.stat().st_mtime > cache_mtime]
    if newer:
        warnings.append(f"{', '.join(sorted(newer))} changed after {path.name} was written; run `qmd guard refresh`.")
    return kn, warnings


def _describe_searches(command: str, cwd: str) -> list[str]:
    from .budget import Exhausted

    lines = []
    try:
        found = shell_searches(command, cwd)
    except Exhausted:
        return ["  (too large or too slow to list: the guard ran out of time or work reading it)"]
    for s in found:
        targets = ", ".join(t.path or "(unknown)" if t.word is not None else f"{t.path} (implicit)" for t in s.targets) or "stdin"
        pats = " ".join(repr(p) for p in s.patterns) or "-"
        words = " ".join(literal(a) for a in s.command.argv) if s.command is not None else s.tool
        lines.append(f"  {s.kind} [{s.tool}] pattern {pats} in {targets}   ({words})")
    return lines


@app.command(short_help="Explain what the hook would decide for a command.")
def check(
    command: Annotated[str, typer.Argument(help="The shell command; with --tool Grep or Glob, the pattern.")],
    cwd: Annotated[Path | None, typer.Option("--cwd", help="Directory the agent runs in (default: here).")] = None,
    tool: Annotated[str, typer.Option("--tool", help="Bash, Grep or Glob.")] = "Bash",
    path: Annotated[str | None, typer.Option("--path", help="Grep/Glob: the path argument.")] = None,
    glob: Annotated[str | None, typer.Option("--glob", help="Grep: the glob argument.")] = None,
    agent: Annotated[str | None, typer.Option("--agent", help="claude or codex: whose MCP registration the advice uses.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the decision as JSON.")] = False,
) -> None:
    """Explain what the hook would decide for COMMAND, without an agent (nothing is logged)."""
    if tool not in ("Bash", "Grep", "Glob"):
        raise typer.BadParameter("choose Bash, Grep or Glob", param_hint="--tool")
    where = str((cwd or Path.cwd()).absolute())
    kn, warnings = _knowledge()
    tool_input: dict[str, Any] = {"command": command} if tool == "Bash" else {"pattern": command}
    if path:
        tool_input["path"] = path
    if glob:
        tool_input["glob"] = glob
    decision = decide(kn, tool, tool_input, where, os.environ.get("QMD_GUARD_GLOB") == "deny")
    text = reason(kn, decision, command if tool == "Bash" else f"{tool} {json.dumps(tool_input)}", agent, where) if decision.deny and kn else None
    if json_:
        result = {"decision": "deny" if decision.deny else "allow", "rule": decision.rule, "folder": decision.folder.path if decision.folder else None,
                  "reason": text, "detail": decision.detail, "warnings": warnings}
        _out(json.dumps(result, indent=2))
        return
    for warning in warnings:
        _out(f"warning: {warning}")
    if decision.deny:
        _out(f"deny  ({decision.rule})  {decision.folder.label() if decision.folder else ''}")
    else:
        _out(f"allow ({decision.rule})  {decision.detail}")
    if tool == "Bash":
        found = _describe_searches(command, where)
        if found:
            _out("searches found:")
            _out("\n".join(found))
    if text:
        _out("reason shown to the agent:")
        _out("\n".join("  " + line for line in text.splitlines()))
    server = mcp_server(agent, where)
    _out(f"qmd MCP server registered: {server or 'no'} (checked {agent or 'claude and codex'})")


@app.command(short_help="Summarise the block log.")
def stats(
    days: Annotated[int | None, typer.Option("--days", help="Only the last N days.")] = None,
    json_: Annotated[bool, typer.Option("--json", help="Print the summary as JSON.")] = False,
) -> None:
    """Summarise the block log: by rule, by day, retries, the most blocked calls."""
    summary = blockstats.summarize(blockstats.records(), days)
    _out(json.dumps(summary, indent=2) if json_ else blockstats.render(summary))
    errors = str(harness.StateLayout.current().guard_errors)
    if not json_ and os.path.exists(errors):
        last = tail_lines(errors, 4096)
        if last:
            _out(f"\nlast hook error ({errors}): {last[-1]}")


@app.command(short_help="Show the latest blocks.")
def log(
    lines: Annotated[int, typer.Option("-n", "--lines", help="How many of the latest blocks.")] = 20,
    json_: Annotated[bool, typer.Option("--json", help="Raw JSON lines.")] = False,
    follow: Annotated[bool, typer.Option("-f", "--follow", help="Keep printing new blocks (Ctrl-C to stop).")] = False,
) -> None:
    """Show the latest blocks (the tail of blocks.jsonl)."""
    items = blockstats.records()
    if not items and not follow:
        _out(f"No blocks logged yet ({harness.StateLayout.current().guard_blocks}).")
        return
    for record in items[-lines:] if lines > 0 else []:
        _out(json.dumps(record, ensure_ascii=False) if json_ else blockstats.render_line(record))
    seen = len(items)
    while follow:
        time.sleep(1)
        items = blockstats.records()
        for record in items[seen:] if len(items) >= seen else items:
            _out(json.dumps(record, ensure_ascii=False) if json_ else blockstats.render_line(record))
        seen = len(items)


@app.command(short_help="Rebuild the folder cache the hook reads.")
def refresh() -> None:
    """Rebuild folders.json (the knowledge folders the hook reads) from every index config."""
    path = harness.refresh_folder_cache()
    data = json.loads(path.read_text(encoding="utf-8"))
    n = len(data.get("folders", []))
    scoped = len(data.get("project_allow", []))
    projects = f" (+{scoped} of trusted projects, for their own paths)" if scoped else ""
    _out(f"{path}: {n} knowledge folder{'' if n == 1 else 's'}, {len(data.get('protect', []))} guard.protect and {len(data.get('allow', []))} guard.allow globs{projects}")
    for error in data.get("errors", []):
        _out(f"warning: {error}")


def _agents(claude: bool, codex: bool) -> None:
    if not (claude or codex):
        raise typer.BadParameter("choose --claude, --codex or both", param_hint="--claude/--codex")


@app.command("install", short_help="Register qmd-guard as a PreToolUse hook.")
def install_cmd(
    claude: Annotated[bool, typer.Option("--claude", help="Claude Code: merge the hook into settings.json.")] = False,
    codex: Annotated[bool, typer.Option("--codex", help="Codex: write ~/.codex/hooks.json and enable hooks in config.toml.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Claude Code settings: user (~/.claude) or project (./.claude).")] = "user",
    print_: Annotated[bool, typer.Option("--print", help="Show each file that would be written, with its new content; change nothing.")] = False,
) -> None:
    """Register qmd-guard as a PreToolUse hook (idempotent; every changed file is backed up first)."""
    _agents(claude, codex)
    for line in installer.install(claude, codex, scope, dry_run=print_):
        _out(line)
    if print_:
        return
    try:
        refresh()
    except OSError as exc:
        _out(f"warning: could not write folders.json: {exc}")


@app.command("uninstall", short_help="Remove exactly what install added.")
def uninstall_cmd(
    claude: Annotated[bool, typer.Option("--claude", help="Claude Code settings.json.")] = False,
    codex: Annotated[bool, typer.Option("--codex", help="Codex hooks.json and the config.toml flag qmd added.")] = False,
    scope: Annotated[str, typer.Option("--scope", help="Claude Code settings: user or project.")] = "user",
) -> None:
    """Remove exactly what install added (a file install left untouched gets its original bytes back)."""
    _agents(claude, codex)
    for line in installer.uninstall(claude, codex, scope):
        _out(line)


@app.command("trust", short_help="Trust qmd's Codex hooks as Codex's /hooks does.")
def trust_cmd(
    codex: Annotated[bool, typer.Option("--codex", help="Trust qmd's hooks in Codex (PreToolUse guard, SessionStart health).")] = False,
    codex_bin: Annotated[str | None, typer.Option("--codex-bin", help="The codex executable (default: codex on PATH).")] = None,
) -> None:
    """Trust qmd's Codex hooks as Codex's /hooks screen does (through `codex app-server`): only qmd's
    own handlers, with the hashes Codex computes. Codex runs no untrusted hook."""
    from . import codex_trust

    if not codex:
        raise typer.BadParameter("choose --codex (Claude Code has no hook trust)", param_hint="--codex")
    for line in codex_trust.trust(codex_bin):
        _out(line)
