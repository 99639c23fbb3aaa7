"""The decision when the guard ran out of time or work: a cheap, conservative judgement.

The guard runs under the agent's hook timeout, and a timeout lets the command run: a slow
prefix (`<hang>; grep -rn foo notes`) must not buy an allow. So when a decision passes its
deadline or its work budget (`guards.budget`), or a bound made the shell reader skip a part
of the command, the guard judges what it has already seen, from paths alone: no wildcard
expansion, no walk of the file system, no file filters. A search whose target path lies in
a knowledge folder or holds one (after `realpath`), or that names a wildcard at all, is
denied. Allowing is possible only when every command was read and the searches left to
judge were few and all stayed clear; a command that was not read in full is denied with rule
`too-complex` (its unread part may sweep the notes, and no real command is that large or
slow: the bounds keep ordinary ones far from these limits).
"""

from __future__ import annotations

import os

from .budget import Work
from .knowledge import Folder, Knowledge, _literal_prefix, is_under
from .lexer import literal
from .model import DENY_RULES, Decision, Search

MAX_TARGETS = 256  # targets the quick judgement looks at (realpath each) before it gives up and denies
MAX_WORDS = 4096  # words of commands already seen it parses when the command was not read in full


class _GaveUp(Exception):
    """More targets than MAX_TARGETS were left to judge."""


def _reaches(kn: Knowledge, search: Search, looked: list[int]) -> Decision | None:
    """A deny when a target of `search` may read a knowledge folder, judged on its path alone."""
    rule = DENY_RULES[search.kind]
    for t in search.targets:
        if t.path is None:
            continue  # as evaluate: a path the guard cannot know
        looked[0] += 1
        if looked[0] > MAX_TARGETS:
            raise _GaveUp()
        if t.glob:  # matches may be links anywhere: only expanding it could tell
            return Decision(True, "too-complex", search=search, target=t, detail=f"no time left to expand {literal(t.word or '')[:80]}")
        real = os.path.realpath(t.path)
        folder = kn.folder_of(real)
        if folder is not None:
            return Decision(True, rule, folder, search, target=t)
        if not (search.recursive if t.recursive is None else t.recursive) or not os.path.isdir(real):
            continue
        inside = [f for f in kn.folders if f.path != real and is_under(f.path, real) and not (kn.exemptions and kn.allowed(f.path))]
        inside += [Folder(real, glob=g) for g in kn.protect if not g.startswith("/") or is_under(_literal_prefix(g), real) or is_under(real, _literal_prefix(g))]
        if inside:
            return Decision(True, rule + "-root", inside[0], search, root=real, target=t)
    return None


def _seen_searches(work: Work) -> list[Search]:
    """The searches of the commands read so far (direct ones only), up to MAX_WORDS words."""
    from .searches import parse

    out: list[Search] = []
    words = 0
    for cmd in work.seen:
        words += len(cmd.argv)
        if words > MAX_WORDS:
            break
        found = parse(cmd)
        if found is not None:
            out.append(found)
    return out


def judge(kn: Knowledge, work: Work) -> Decision:
    """The decision once `work` (ended: no deadline applies) ran out: see the module docstring."""
    complete = work.walked and not work.incomplete
    pending = work.searches[work.judged :] if complete else _seen_searches(work)
    looked = [0]
    try:
        for search in pending:
            if not (search.listing or search.stdin):
                found = _reaches(kn, search, looked)
                if found is not None:
                    return found
    except _GaveUp:
        complete = False
    if complete:
        return Decision(False, "quick-check")
    return Decision(True, "too-complex", detail=f"{work.incomplete} exceeded" if work.incomplete else "out of time or work")
