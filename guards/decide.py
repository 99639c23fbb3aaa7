"""The decision for one PreToolUse call: does it sweep a knowledge folder?

Dispatches on the tool (Bash-like shells, Grep, Glob), builds the searches in the call and
lets `evaluate` judge each one; the first deny wins. Commands that cannot contain a
search (no search tool named anywhere, no variable) are allowed before any shell parsing:
most agent shell calls take that path, so the parser is imported only when needed.
"""

from __future__ import annotations

import os

from .model import Decision, Search, Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .knowledge import Knowledge

BASH_TOOLS = frozenset({"Bash", "bash", "shell", "exec_command", "local_shell", "container.exec", "unified_exec"})
_SEARCH_WORDS = frozenset({"rg", "ripgrep", "ag", "ack", "ack-grep", "ug", "ugrep", "git", "find", "fd", "fdfind", "xargs", "eval"})
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def might_search(command: str) -> bool:
    """False when `command` cannot run a search: no search tool is named in it and nothing is expanded."""
    if "$" in command or "`" in command:
        return True
    text = command.replace("'", "").replace('"', "").replace("\\", "")
    words = "".join(ch if ch in _WORD_CHARS else " " for ch in text).split()
    return any("grep" in w or w in _SEARCH_WORDS for w in words)


def _first(kn: Knowledge, found: list[Search]) -> Decision:
    from .evaluate import evaluate

    if not found:
        return Decision(False, "not-a-search")
    first: Decision | None = None
    for search in found:
        decision = evaluate(kn, search)
        if decision.deny:
            return decision
        first = first or decision
    assert first is not None
    return first


def _tool_search(kind: str, tool_input: dict[str, object], cwd: str | None) -> Search:
    search = Search(kind, "Grep" if kind == "grep-tool" else "Glob", None)
    search.recursive = True
    search.implicit = "none"
    path = tool_input.get("path")
    word = path if isinstance(path, str) and path else None
    if word is not None:
        word = os.path.expanduser(word)
    base = cwd if word is None else (word if os.path.isabs(word) else (os.path.join(cwd, word) if cwd else None))
    search.targets = [Target(word, None, os.path.normpath(os.path.expanduser(base)) if base else None)]
    pattern = tool_input.get("pattern")
    if isinstance(pattern, str):
        search.patterns.append(pattern)
    if kind == "grep-tool":
        if isinstance(tool_input.get("glob"), str) and tool_input["glob"]:
            search.includes.append(str(tool_input["glob"]))
        if isinstance(tool_input.get("type"), str) and tool_input["type"]:
            search.types.append(str(tool_input["type"]))
    elif isinstance(pattern, str) and pattern:
        search.includes.append(pattern)
    return search


def decide(kn: Knowledge | None, tool: str, tool_input: object, cwd: str | None, deny_glob: bool = False) -> Decision:
    """The guard's decision for one PreToolUse call (`cwd`: the payload's working directory)."""
    if not kn:
        return Decision(False, "no-knowledge")
    if not isinstance(tool_input, dict):
        return Decision(False, "unknown-tool")
    if tool in BASH_TOOLS:
        command = tool_input.get("command", tool_input.get("cmd"))
        if isinstance(command, list):
            import shlex

            command = shlex.join(str(c) for c in command)
        if not isinstance(command, str):
            return Decision(False, "unknown-tool")
        workdir = tool_input.get("workdir")
        if isinstance(workdir, str) and workdir:
            cwd = workdir if os.path.isabs(workdir) or cwd is None else os.path.join(cwd, workdir)
        if not might_search(command):
            return Decision(False, "not-a-search")
        from .evaluate import shell_searches

        return _first(kn, shell_searches(command, cwd))
    if tool == "Grep":
        return _first(kn, [_tool_search("grep-tool", tool_input, cwd)])
    if tool == "Glob":
        if not deny_glob:
            return Decision(False, "listing")
        return _first(kn, [_tool_search("glob-tool", tool_input, cwd)])
    return Decision(False, "unknown-tool")
