"""The narrowed command: the same search without the knowledge folders, which the guard allows.

For a recursive search started from a folder that holds a knowledge folder, name the
folder's other entries instead (`grep -rn foo .` → `grep -rn foo src tests README.md`),
descending into entries that themselves hold a knowledge folder. When that would list too
many entries, exclude the knowledge folders with the tool's own option instead.
"""

from __future__ import annotations

import os
import shlex

from .evaluate import excluded
from .knowledge import Knowledge
from .lexer import literal
from .model import Decision
from .searches import GREP, RG, TOOLS

MAX_ENTRIES = 12
MAX_DEPTH = 3


class _TooMany(Exception):
    pass


def entries(kn: Knowledge, decision: Decision) -> list[str] | None:
    """Absolute paths under the decision's root that hold no knowledge folder; None if too many or none."""
    root, search, target = decision.root, decision.search, decision.target
    if root is None or search is None or target is None:
        return None
    out: list[str] = []

    def visit(folder: str, depth: int) -> None:
        try:
            names = sorted(os.listdir(folder))
        except OSError:
            return
        for name in names:
            if name.startswith("."):
                continue
            path = os.path.join(folder, name)
            real = os.path.realpath(path)
            is_dir = os.path.isdir(real)
            if kn.folder_of(real) is not None:
                if is_dir and depth < MAX_DEPTH and kn.has_allow_inside(real):
                    visit(path, depth + 1)
                continue
            if is_dir and kn.inside(real, lambda p: excluded(search, target, root, p)):
                if depth < MAX_DEPTH:
                    visit(path, depth + 1)
                continue
            out.append(path)
            if len(out) > MAX_ENTRIES:
                raise _TooMany

    try:
        visit(root, 0)
    except _TooMany:
        return None
    return out or None


def _exclusions(kn: Knowledge, decision: Decision) -> list[str] | None:
    search, root, target = decision.search, decision.root, decision.target
    assert search is not None and root is not None and target is not None
    rels = [os.path.relpath(f.path, root) for f in kn.inside(root, lambda p: excluded(search, target, root, p))]
    if not rels:
        return None
    spec = TOOLS.get(search.tool)
    if spec is GREP:
        return [f"--exclude-dir={os.path.basename(r)}" for r in rels]
    if spec is RG:
        return [w for r in rels for w in ("-g", f"!{r}")]
    if search.tool in ("ag", "ack", "ack-grep"):
        return [f"--ignore-dir={os.path.basename(r)}" for r in rels]
    if search.kind == "git-grep":
        return [f":!{r}" for r in rels]
    return None


def suggest(kn: Knowledge, decision: Decision, payload_cwd: str | None) -> str | None:
    """A command (or, for the Grep tool, a path list) that does the same search minus the notes."""
    search, target, root = decision.search, decision.target, decision.root
    if not decision.deny or root is None or search is None or target is None or target.glob:
        return None
    paths = entries(kn, decision)
    if search.kind == "grep-tool":
        if not paths:
            return None
        return "the Grep tool with path set to one of: " + ", ".join(os.path.relpath(p, payload_cwd or root) for p in paths)
    cmd = search.command
    if cmd is None:
        return None
    argv = [literal(a) for a in cmd.argv]
    if paths is None:
        extra = _exclusions(kn, decision)
        if extra is None:
            return None
        if search.kind == "git-grep":
            argv += ([] if "--" in argv else ["--"]) + ([] if target.index is not None else ["."]) + extra
        else:
            argv[1:1] = extra
    else:
        if target.index is not None and target.word:
            base = literal(target.word)
            words = [os.path.relpath(p, root) if base in (".", "./") else os.path.join(base, os.path.relpath(p, root)) for p in paths]
            argv[target.index : target.index + 1] = words
        else:
            words = [os.path.relpath(p, cmd.cwd) if cmd.cwd else p for p in paths]
            if search.implicit == "append":
                argv += words
            elif search.implicit == "pathspec":
                argv += ([] if "--" in argv else ["--"]) + words
            elif search.implicit == "after-name":
                argv[1:1] = words
            else:
                return None
    text = shlex.join(argv) + search.suffix
    if cmd.cwd and payload_cwd and os.path.realpath(cmd.cwd) != os.path.realpath(payload_cwd):
        text = f"cd {shlex.quote(cmd.cwd)} && {text}"
    return text
