"""Inputs that once made the guard's work explode (time or memory), run through the real
`qmd-guard` console script: each is decided within bounded work, and a sweep placed after the
expensive part is still denied (a guard killed by the hook's timeout lets the command run).

The table runs each command from a repository holding the collection folder `notes/` (the
world of test_guard_sweeps: a folders.json written by `qmd collection add`). The script must
answer within a generous timeout (the suite runs on loaded CI machines: no timing is asserted)
with a peak memory under MAX_RSS_MB, read from the kernel's accounting of that one child
(`os.wait4`, the per-child form of getrusage(RUSAGE_CHILDREN)). The same table runs in
process with the deadline pushed far away, so that the deterministic limits alone decide:
`budget` rows must spend the work budget (and be denied), the others must not.
"""

from __future__ import annotations

import json
import os
import random
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from tests.guards.test_guard_hook import GUARD
from tests.guards.test_guard_sweeps import call
from tests.support.run import qmd_env

REPO = "work/repo"  # holds notes/ (collection `notes`), src/ and tests/
TIMEOUT_S = 10.0
MAX_RSS_MB = 300
SWEEP = "grep -rn foo notes"
CODE = "grep -rn foo src"


def _nest(text: str, times: int) -> str:
    for _ in range(times):
        text = "bash -c " + shlex.quote(text)
    return text


_X54K = "X='" + ": " * 27_000 + "'; "  # a value whose every eval lexes 54 000 characters

# (name, command, expected): "deny" / "allow" as decided normally, "budget" when the work budget
# runs out (a conservative deny: the guard cannot afford to read the rest).
CASES: list[tuple[str, str, str]] = [
    # the red-team inputs
    ("double-28", "x=1; " + 'x="$x $x"; ' * 28 + SWEEP, "deny"),
    ("double-30", "x=1; " + 'x="$x $x"; ' * 30 + SWEEP, "deny"),
    ("double-30-code", "x=1; " + 'x="$x $x"; ' * 30 + CODE, "allow"),
    ("concat-26", "a=$a$a; " * 26 + SWEEP, "deny"),
    ("concat-26-set", "a=1; " + "a=$a$a; " * 26 + SWEEP, "deny"),
    ("concat-26-code", "a=1; " + "a=$a$a; " * 26 + "grep foo $a; " + CODE, "allow"),
    ("for-40", "x=1; " + "for x in $x $x; do :; done; " * 40 + SWEEP, "deny"),
    ("for-40-code", "for x in $x $x; do :; done; " * 40 + CODE, "allow"),
    ("trim-2500", "x=" + "a" * 4000 + "; grep foo" + " ${x#*b}" * 2500, "allow"),
    ("trim-2500-sweep", "x=" + "a" * 4000 + "; grep foo" + " ${x#*b}" * 2500 + "; " + SWEEP, "deny"),
    ("glob-deep", "grep foo /*/*/*/*/*/*/*/*/nomatchzz", "allow"),
    ("glob-deep-sweep", "grep foo /*/*/*/*/*/*/*/*/nomatchzz; " + SWEEP, "deny"),
    ("glob-200", "grep foo" + " /usr/*/*/*" * 200, "allow"),
    ("glob-200-sweep", "grep foo" + " /usr/*/*/*" * 200 + "; " + SWEEP, "deny"),
    # variants found along the way
    ("subst-double-30", "x=1; " + "x=$(echo $x $x); " * 30 + SWEEP, "deny"),
    ("subst-double-30-code", "x=1; " + "x=$(echo $x $x); " * 30 + CODE, "allow"),
    ("printf-double-30", "x=1; " + 'x="$(printf %s "$x$x")"; ' * 30 + SWEEP, "deny"),
    ("trim-star-pieces", "x=" + "a" * 4000 + "; grep foo" + " ${x%%*a*a*a*b}" * 50, "allow"),
    ("trim-long-pattern", "x=" + "a" * 60_000 + "; grep foo ${x#*" + "a?" * 2000 + "b}; " + SWEEP, "deny"),
    ("script-double-13", 'X="grep -rn foo notes;"; ' + 'X="$X$X"; ' * 13 + 'eval "$X"', "deny"),
    ("file-append-3000", "x=" + "b" * 4000 + "; echo 'grep -rn foo notes' > s.sh; " + "echo $x >> s.sh; " * 3000 + "bash s.sh", "deny"),
    ("glob-1200-parts", "grep foo /" + "*/" * 1200 + "x; " + SWEEP, "deny"),  # the stdlib glob recursed past Python's limit
    ("digits-5000", "f() { echo ${" + "9" * 5000 + ":-a}; }; f x; " + SWEEP, "deny"),  # int() refuses 4300 digits
    ("nested-8", _nest(SWEEP, 8), "deny"),  # past the nesting depth
    ("calls-300", "g() { :; }; " + "g; " * 300 + "f() { " + SWEEP + "; }; f", "deny"),  # past the function calls
    ("lexing-budget", _X54K + 'eval "$X"; ' * 7 + 'eval "$X; ' + SWEEP + '"', "deny"),  # past the characters lexed
    ("pipe-1500-greps", "find . | " + "grep a | " * 1500 + "xargs grep foo; " + SWEEP, "deny"),  # the stack ran out
    ("unclosed-quote-backslash", SWEEP + '\n" ${x} \\', "deny"),  # shlex raised on the lexer's closing quote
    ("tilde-unknown-user", "eval ~+${x%%*/}; " + SWEEP, "deny"),  # expanduser raised on the NUL of an unknown value
    ("function-walks", "f() { : " + "$a " * 5000 + "; }; " + "f; " * 256 + SWEEP, "budget"),
    ("function-targets", "f() { grep foo " + "a " * 8000 + "; }; " + "f; " * 256, "budget"),
    ("list-times-10000", "for x in " + "w " * 4000 + "; do :; done; grep foo" + " $x" * 10_000, "budget"),
    ("word-times-10000", "x=" + "c" * 4000 + "; grep foo" + " a$x" * 10_000, "budget"),
    # sed/awk/perl programs (guards/scripted.py): each of a backslash's two readings doubled a regex's work
    ("sed-backslashes", "sed -n 's/" + "\\(\\w\\+\\)\\s\\+" * 8 + "$/\\1/;T;p' src/a.txt; " + SWEEP, "deny"),
    ("sed-backslashes-code", "sed -n 's/" + "\\(\\w\\+\\)\\s\\+" * 8 + "$/\\1/;T;p' src/a.txt", "allow"),
    ("sed-16000-newlines", "sed -n '" + "\n" * 16_000 + "p' notes/*.md; " + SWEEP, "deny"),  # a quadratic address pattern
    ("awk-divisions", "awk '{ print " + "$1 / 2 " * 5000 + "}' notes/*.md", "allow"),
    ("array-20000", "a=(" + "x " * 20_000 + "); grep foo \"${a[@]}\" \"${a[@]}\"; " + SWEEP, "deny"),  # under the 64 KiB read
    ("many-includes", "grep -r " + " ".join(f"--include=*.a{i}" for i in range(4000)) + " foo src", "allow"),
]


# The guard runs as the child of a small interpreter that reports its children's peak memory:
# measured from this (large) test process, a child would carry the parent's size in its count.
_MEASURE = """
import resource, subprocess, sys
try:
    code = subprocess.run(sys.argv[2:], timeout=float(sys.argv[1])).returncode
except subprocess.TimeoutExpired:
    code = "timeout"
sys.stderr.write(f"\\n{resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss} {code}\\n")
"""


def _run(data: bytes) -> tuple[bytes, bytes, str, float]:
    """(stdout, stderr, exit status or "timeout", peak RSS in MB) of the real qmd-guard fed `data`."""
    proc = subprocess.run([sys.executable, "-S", "-c", _MEASURE, str(TIMEOUT_S), str(GUARD)], input=data, capture_output=True,
                          env=qmd_env(), timeout=120)
    err, _, last = proc.stderr.rstrip(b"\n").rpartition(b"\n")
    rss, code = last.decode().split()
    return proc.stdout, err, code, int(rss) / (1024 * 1024 if sys.platform == "darwin" else 1024)


@pytest.mark.parametrize("name, command, expected", CASES, ids=[c[0] for c in CASES])
def test_pathological_commands_are_decided_within_bounds(notes_world: Path, name: str, command: str, expected: str) -> None:
    out, err, code, rss_mb = _run(json.dumps(call(notes_world, "Bash", command, REPO)).encode())
    assert code == "0", f"{name}: killed after {TIMEOUT_S} s or crashed ({code}): {err[-300:]!r}"
    assert err == b"", err[-300:]
    assert rss_mb < MAX_RSS_MB, f"{name}: peak memory {rss_mb:.0f} MB"
    decision = "deny" if out else "allow"
    if out:
        assert json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert decision == ("deny" if expected == "budget" else expected), name
    errors = qmd_state_errors()
    assert not errors, errors  # decided, not failed open


def qmd_state_errors() -> list[str]:
    from qmd import harness

    path = harness.state_dir() / "guard" / "errors.log"
    return path.read_text().splitlines() if path.exists() else []


@pytest.mark.parametrize("name, command, expected", CASES, ids=[c[0] for c in CASES])
def test_the_deterministic_limits_decide_without_the_deadline(notes_world: Path, name: str, command: str, expected: str,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """In process, with no deadline to speak of: the value, list, glob and work bounds alone
    decide, so the table's answers do not depend on the machine's speed."""
    from guards import budget
    from guards.decide import decide
    from guards.knowledge import load
    from guards.paths import FOLDERS, guard_file

    monkeypatch.setattr(budget, "DEADLINE_S", 600.0)
    works: list[budget.Work] = []
    real_begin = budget.begin

    def recording() -> budget.Work | None:
        work = real_begin()
        if work is not None:
            works.append(work)
        return work

    monkeypatch.setattr(budget, "begin", recording)
    kn = load(guard_file(FOLDERS))
    decision = decide(kn, "Bash", {"command": command}, str(notes_world / REPO))
    work = works[0]
    assert decision.deny == (expected != "allow"), (name, decision, decision.detail)
    if expected == "budget":
        assert work.left < 0 and decision.rule == "too-complex", (name, decision)
    else:
        assert work.left >= 0, f"{name}: the work budget ran out"
        assert work.lexed <= budget.MAX_LEXED + len(command)


def test_lone_surrogates_do_not_make_the_guard_fail_open(notes_world: Path) -> None:
    """A JSON `\\ud800` escape (no UTF-8 text holds it) raised in path calls and in the block log."""
    for command in (SWEEP + " # \ud800", "grep foo \udfffx; " + SWEEP, "rg foo ~\ud800; " + SWEEP):
        payload = call(notes_world, "Bash", command, REPO)
        payload["session_id"] = "s\udc80"
        out, err, code, _rss = _run(json.dumps(payload).encode())
        assert code == "0" and err == b"" and b'"deny"' in out, (command, err)
    assert not qmd_state_errors()


# -- the fallback when time runs out ------------------------------------------------------------
def _decide_with(notes_world: Path, command: str, monkeypatch: pytest.MonkeyPatch, fail: str | None = None):  # type: ignore[no-untyped-def]
    from guards import budget, evaluate
    from guards.decide import decide
    from guards.knowledge import load
    from guards.paths import FOLDERS, guard_file

    if fail == "walk":
        monkeypatch.setattr(budget, "DEADLINE_S", -1.0)  # past before the first command is read
    elif fail == "evaluate":  # every command read, the deadline passes while judging the searches
        def late(*_args: object) -> None:
            raise budget.Exhausted("deadline passed")

        monkeypatch.setattr(evaluate, "_dir", late)
        monkeypatch.setattr(evaluate, "_glob", late)
    return decide(load(guard_file(FOLDERS)), "Bash", {"command": command}, str(notes_world / REPO))


def test_running_out_of_time_while_reading_denies(notes_world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decision = _decide_with(notes_world, "x=1; " + CODE, monkeypatch, fail="walk")
    assert decision.deny and decision.rule == "too-complex", decision


@pytest.mark.parametrize("command, deny, rule", [
    (CODE, False, "quick-check"),  # every command read; its only path holds no notes
    ("grep -rn foo .", True, "shell-search-root"),  # the repository holds notes/
    (SWEEP, True, "shell-search"),
    ("grep foo src/*.py", True, "too-complex"),  # a wildcard: only expanding it could tell
    ('grep -r foo "$UNSET" src', False, "quick-check"),  # a path nobody can know is skipped, as evaluate does
    (CODE + "; " + SWEEP, True, "shell-search"),
])
def test_running_out_of_time_while_judging_falls_back_to_the_paths(notes_world: Path, monkeypatch: pytest.MonkeyPatch, command: str,
                                                                    deny: bool, rule: str) -> None:
    decision = _decide_with(notes_world, command, monkeypatch, fail="evaluate")
    assert (decision.deny, decision.rule) == (deny, rule), decision


def test_a_skipped_part_denies_when_the_rest_is_clear(notes_world: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    decision = _decide_with(notes_world, _nest(CODE, 8), monkeypatch)
    assert decision.deny and decision.rule == "too-complex" and decision.detail == "nesting depth exceeded", decision
    assert not _decide_with(notes_world, _nest(CODE, 5), monkeypatch).deny


def test_the_deny_reason_says_the_command_was_too_complex(notes_world: Path) -> None:
    out, _err, _code, _rss = _run(json.dumps(call(notes_world, "Bash", _nest(CODE, 8), REPO)).encode())
    reason = json.loads(out)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "is too large or too slow for the guard to check in full (nesting depth exceeded); it may search the notes" in reason, reason


# -- the bounded pieces -------------------------------------------------------------------------
def test_bounded_glob_finds_what_glob_finds(tmp_path: Path) -> None:
    import glob

    from guards import budget

    rng = random.Random(1)
    for _ in range(80):
        path = tmp_path.joinpath(*[rng.choice(["a", "b", ".h", "c.md", "d"]) for _ in range(rng.randint(1, 4))])
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.touch() if rng.random() < 0.5 else path.mkdir(exist_ok=True)
        except OSError:
            continue
    (tmp_path / "link").symlink_to(tmp_path / "a")
    for pattern in ["*", "*/*", "*/*/*.md", "a/*/", ".h/*", "*/.h", "a/[bc]*", "[!a]*/*", "a//b", "nope/*", "**", "**/*.md", "a/**/b",
                    "link/*", "[*]", "?/?"]:
        full = f"{tmp_path}/{pattern}"
        want = sorted(os.path.normpath(p) for p in glob.glob(full, recursive=True))
        assert sorted(os.path.normpath(p) for p in budget.iglob(full)) == want, pattern


def test_bounded_glob_stops_at_its_budget(tmp_path: Path) -> None:
    from guards import budget

    for i in range(40):
        (tmp_path / f"d{i}" / "e").mkdir(parents=True)
    work = budget.begin()
    assert work is not None
    try:
        assert list(budget.iglob(f"{tmp_path}/" + "*/" * 1500 + "x")) == []  # iterative: no RecursionError
        spent = budget.MAX_GLOB - work.glob_left
        assert 40 < spent < 100  # the folders listed, not the components
        work.glob_left = 10
        with pytest.raises(budget.GlobSpent):
            list(budget.iglob(f"{tmp_path}/*/*/x"))
    finally:
        budget.end(work)


def test_pattern_removal_matches_the_naive_search() -> None:
    from fnmatch import fnmatchcase

    from guards.expand import _trim

    def naive(value: str, op: str, pattern: str) -> str:
        cuts = range(len(value) + 1)
        if op[0] == "%":
            ends = list(cuts)[::-1] if op == "%" else list(cuts)
            return next((value[:k] for k in ends if fnmatchcase(value[k:], pattern)), value)
        starts = list(cuts) if op == "#" else list(cuts)[::-1]
        return next((value[k:] for k in starts if fnmatchcase(value[:k], pattern)), value)

    rng = random.Random(7)
    atoms = ["a", "b", "/", ".", "*", "*", "?", "[ab]", "[!a]", "[", "]", "[]a]", "[!]b]", "[a-c]", "**", "[."]
    for _ in range(5_000):
        value = "".join(rng.choice("ab/.][") for _ in range(rng.randint(0, 9)))
        pattern = "".join(rng.choice(atoms) for _ in range(rng.randint(0, 5)))
        for op in ("#", "##", "%", "%%"):
            assert _trim(value, op, pattern) == naive(value, op, pattern), (value, op, pattern)


@pytest.mark.parametrize("agent_file", [".mcp.json", ".codex/config.toml"])
def test_a_repository_linking_an_agents_file_to_dev_zero_is_still_denied(notes_world: Path, agent_file: str) -> None:
    """The deny's advice reads the repository's `.mcp.json` (Claude Code) or `.codex/config.toml`
    to name qmd's MCP server; linked to /dev/zero they were read until MemoryError, so the
    guard failed open (the sweep ran) after filling memory. Now they are no registration."""
    link = notes_world / REPO / agent_file
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to("/dev/zero")
    payload = call(notes_world, "Bash", SWEEP, REPO)
    if agent_file.startswith(".codex"):
        payload["turn_id"] = "t"  # a Codex payload
    out, err, code, rss_mb = _run(json.dumps(payload).encode())
    assert code == "0" and err == b"", err[-300:]
    assert rss_mb < MAX_RSS_MB, f"peak memory {rss_mb:.0f} MB"
    assert out and json.loads(out)["hookSpecificOutput"]["permissionDecision"] == "deny"
    assert not qmd_state_errors()
