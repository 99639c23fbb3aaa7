"""The decision for one PreToolUse call: does it sweep a knowledge folder?

Dispatches on the tool (Bash-like shells, Grep, Glob), builds the searches in the call and
lets `evaluate` judge each one; the first deny wins. Commands that cannot contain a
search (no search tool named anywhere, no variable) are allowed before any shell parsing:
most agent shell calls take that path, so the parser is imported only when needed.

Malformed input (a Bash `command` that is not a string, a Grep without a string `pattern`,
a path that is not a string, …) is allowed with rule `malformed`: the guard fails open,
and the hook logs the detail. Every command is decided, however long: the shell reader
sees at most `MAX_COMMAND` characters of it (see `bounded`), and one decision has a
deadline and work budgets (`guards.budget`). Past them, or when a bound skipped a part of
the command, the decision is `fallback.judge`'s: a cheap judgement of the searches already
seen that denies what it cannot clear (running out of time never simply allows).
"""

from __future__ import annotations

import os

from .model import Decision, Search, Target

TYPE_CHECKING = False
if TYPE_CHECKING:
    from .knowledge import Knowledge

BASH_TOOLS = frozenset({"Bash", "bash", "shell", "exec_command", "local_shell", "container.exec", "unified_exec"})
# Codex tools whose command may be an argv list (`["bash", "-lc", "…"]`); for the rest it is a string.
ARGV_TOOLS = frozenset({"shell", "local_shell", "container.exec", "unified_exec"})
MAX_COMMAND = 64 * 1024  # characters of a (shortened) command the shell reader sees; real ones are a few KB
_LONG_RUN = 256  # a run of word characters this long cannot be a path component (NAME_MAX is 255)
_KEEP = 128
_SEARCH_WORDS = frozenset({"rg", "ripgrep", "rga", "ag", "ack", "ack-grep", "ug", "ugrep", "git", "find", "fd", "fdfind", "xargs", "eval",
                           "awk", "gawk", "mawk", "nawk", "sed", "gsed", "perl", "perl5"})  # the last: pattern programs (guards/scripted.py)
_WORD_CHARS = frozenset("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789_-")


def might_search(command: str) -> bool:
    """False when `command` cannot run a search: no search tool is named in it and nothing is expanded."""
    if "$" in command or "`" in command:
        return True
    text = command.replace("'", "").replace('"', "").replace("\\", "")
    words = "".join(ch if ch in _WORD_CHARS else " " for ch in text).split()
    return any("grep" in w or w in _SEARCH_WORDS for w in words)


def kind_of(value: object) -> str:
    """How a JSON value is named in an error line: `a list`, `a number`, `null`, …"""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "a list"
    if isinstance(value, dict):
        return "an object"
    return type(value).__name__


def _field_problem(tool: str, tool_input: dict[str, object], key: str, required: bool) -> str | None:
    if key not in tool_input or (tool_input[key] is None and not required):
        return f"{tool} tool_input.{key} is missing" if required else None
    value = tool_input[key]
    return None if isinstance(value, str) else f"{tool} tool_input.{key} is {kind_of(value)}, not a string"


def input_problem(tool: str, tool_input: object) -> str | None:
    """Why the input of a tool the guard inspects is malformed (the guard then allows it), or None."""
    if tool not in BASH_TOOLS and tool not in ("Grep", "Glob"):
        return None
    if not isinstance(tool_input, dict):
        return f"{tool} tool_input is {kind_of(tool_input)}, not an object"
    if tool in BASH_TOOLS:
        key = "command" if "command" in tool_input or "cmd" not in tool_input else "cmd"
        command = tool_input.get(key)
        if tool in ARGV_TOOLS and isinstance(command, list):
            odd = next((c for c in command if not isinstance(c, str)), "")
            return None if isinstance(odd, str) else f"{tool} tool_input.{key} holds {kind_of(odd)}, not only strings"
        return _field_problem(tool, tool_input, key, True) or _field_problem(tool, tool_input, "workdir", False)
    fields = ("path", "glob", "type") if tool == "Grep" else ("path",)
    for key, required in (("pattern", True),) + tuple((f, False) for f in fields):
        problem = _field_problem(tool, tool_input, key, required)
        if problem:
            return problem
    return None


def bounded(command: str) -> str:
    """The part of a huge `command` the shell reader sees: at most MAX_COMMAND characters.

    Filler is shortened first, so the command words after it stay in the prefix: a run of
    blanks longer than 256 keeps 128, and a run of letters, digits and `_` longer than 256
    keeps its first and last 128 characters around a digest of the whole run (still longer
    than any file name, and two different runs stay different). A shorter command is
    returned unchanged.
    """
    if len(command) <= MAX_COMMAND:
        return command
    import re

    run_start = re.compile(f"[A-Za-z0-9_]{{{_LONG_RUN + 1}}}|[ \t]{{{_LONG_RUN + 1}}}")
    word_rest, blank_rest = re.compile("[A-Za-z0-9_]*"), re.compile("[ \t]*")
    out: list[str] = []
    size = pos = 0
    while size < MAX_COMMAND and pos < len(command):
        limit = min(len(command), pos + MAX_COMMAND - size)
        found = run_start.search(command, pos, limit + _LONG_RUN)  # only runs that start before `limit`
        if found is None:
            out.append(command[pos:limit])
            break
        out.append(command[pos : found.start()])
        rest = (blank_rest if found.group()[0] in " \t" else word_rest).match(command, found.end())
        end = rest.end() if rest is not None else found.end()
        run = command[found.start() : end]
        short = run[:_KEEP] if run[0] in " \t" else f"{run[:_KEEP]}{hash(run) & 0xFFFFFFFFFFFF:015d}{run[-_KEEP:]}"
        out.append(short)
        size += found.start() - pos + len(short)
        pos = end
    return "".join(out)[:MAX_COMMAND]


def _first(kn: Knowledge, found: list[Search]) -> Decision:
    from .evaluate import evaluate

    if not found:
        return Decision(False, "not-a-search")
    from . import budget

    work = budget.current()
    if work is not None:
        work.walked, work.searches = True, list(found)  # every search is known: the fallback judges the rest
    first: Decision | None = None
    for k, search in enumerate(found):
        if work is not None:
            work.judged = k
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
        glob = tool_input.get("glob")
        if isinstance(glob, str) and glob:  # ripgrep's --glob: `!` excludes
            (search.file_excludes if glob.startswith("!") else search.includes).append(glob.lstrip("!"))
        if isinstance(tool_input.get("type"), str) and tool_input["type"]:
            search.types.append(str(tool_input["type"]))
    elif isinstance(pattern, str) and pattern:
        search.includes.append(pattern)
    return search


def decide(kn: Knowledge | None, tool: str, tool_input: object, cwd: str | None, deny_glob: bool = False) -> Decision:
    """The guard's decision for one PreToolUse call (`cwd`: the payload's working directory)."""
    from . import budget

    work = budget.begin()
    try:
        decision = _decide(kn, tool, tool_input, cwd, deny_glob)
        if decision.deny or not kn or work is None or not work.incomplete:
            return decision
    except (budget.Exhausted, RecursionError):  # out of time, work or stack: judged conservatively
        if not kn or work is None:
            raise
    finally:
        budget.end(work)
    from .fallback import judge

    return judge(kn, work)


def _decide(kn: Knowledge | None, tool: str, tool_input: object, cwd: str | None, deny_glob: bool = False) -> Decision:
    if not kn:
        return Decision(False, "no-knowledge")
    problem = input_problem(tool, tool_input)
    if problem is not None:
        return Decision(False, "malformed", detail=problem)
    if not isinstance(tool_input, dict):
        return Decision(False, "unknown-tool")
    if tool in BASH_TOOLS:
        command = tool_input.get("command", tool_input.get("cmd"))
        if isinstance(command, list):
            import shlex

            command = shlex.join(str(c) for c in command)
        if not isinstance(command, str):
            return Decision(False, "malformed")
        workdir = tool_input.get("workdir")
        if isinstance(workdir, str) and workdir:
            cwd = workdir if os.path.isabs(workdir) or cwd is None else os.path.join(cwd, workdir)
        command = bounded(command)
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
