"""Sweeps the guard must see, and code searches it must keep allowing (issue 25), run through
the real `qmd-guard` console script with a folders.json that qmd itself wrote from real
collection configs (`qmd collection add`, a project's `.qmd/index.yml`).

The tree (real folders under tmp_path):

    work/repo/            a code repository (.git) holding a knowledge folder
      notes/              collection `notes` (the default pattern **/*.md): a.md b.md sub/c.md
      src/ tests/ README.md
    work/code/            a code repository without notes: main.py lib/x.py README.md
    manual/               collection `manual` with pattern **/*.rst: intro.rst guide.rst api/ref.rst
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

import qmd
from qmd import harness
from tests.guards.test_guard_hook import GUARD, run_guard
from tests.support.guard_world import write_tree

def test_folder_cache_carries_the_collection_patterns(notes_world: Path) -> None:
    data = json.loads(harness.StateLayout.current().guard_folders.read_text())
    assert data["patterns"] == {str(notes_world / "work/repo/notes"): ["**/*.md"], str(notes_world / "manual"): ["**/*.rst"]}


def call(root: Path, tool: str, value: object, cwd: str) -> dict[str, object]:
    if isinstance(value, str):
        tool_input: object = {"command": value.replace("{root}", str(root))}
    else:
        tool_input = value
    return {"session_id": "s", "cwd": str(root / cwd), "hook_event_name": "PreToolUse", "tool_name": tool, "tool_input": tool_input}


def outcome(root: Path, tool: str, value: object, cwd: str) -> tuple[str, str]:
    """("deny", reason) or ("allow", "") as the real qmd-guard answers."""
    proc = run_guard(json.dumps(call(root, tool, value, cwd)).encode())
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    if not proc.stdout:
        return "allow", ""
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    return "deny", str(spec["permissionDecisionReason"])


B = "Bash"
NOTES = "work/repo/notes"
REPO = "work/repo"
CODE = "work/code"
# (tool, command or tool input, cwd, expected)
CASES: list[tuple[str, object, str, str]] = [
    # 1. the collections' own patterns decide what a file filter lets through
    (B, "grep -r --include=*.rst foo .", "manual", "deny"),
    (B, "grep -rn foo {src,notes}", REPO, "deny"),  # bash's brace expansion hands grep the notes folder
    (B, "rg foo {src,tests}", REPO, "allow"),
    (B, "grep -rn foo '{src,notes}'", REPO, "allow"),  # quoted: one (missing) folder named {src,notes}
    (B, "grep -r --include='*.rst' foo manual", ".", "deny"),
    (B, "rg -t rst foo", "manual", "deny"),
    (B, "rg --type=rst foo manual", ".", "deny"),
    (B, "rg -g '*.rst' foo", "manual", "deny"),
    (B, "find . -name '*.rst' | xargs grep foo", "manual", "deny"),
    (B, "rg --type-add 'doc:*.rst' -t doc foo", "manual", "deny"),
    (B, "rg -t mydocs foo", "manual", "deny"),  # a type the guard cannot know (a ripgrep config file may define it)
    (B, "rg -g '!*.md' foo", "manual", "deny"),
    ("Grep", {"pattern": "foo", "glob": "*.rst"}, "manual", "deny"),
    ("Grep", {"pattern": "foo", "type": "rst", "path": "manual"}, ".", "deny"),
    (B, "rg -g '!*.md' foo", REPO, "allow"),
    (B, "grep -r --exclude='*.md' foo .", REPO, "allow"),
    (B, "rg --type-not md foo", REPO, "allow"),
    (B, "rg -T markdown foo .", REPO, "allow"),
    ("Grep", {"pattern": "foo", "glob": "!*.md"}, REPO, "allow"),
    (B, "rg -t rst foo", REPO, "allow"),
    (B, "rg -t md foo", "manual", "allow"),
    (B, "grep -r --include=*.md foo .", "manual", "allow"),
    (B, "rg -t py foo", "manual", "allow"),
    (B, "rg -t md foo", REPO, "deny"),
    (B, "grep -r --include='*.md' foo .", REPO, "deny"),
    # 3. forms of the same sweep the shell reader must follow (cwd inside a collection)
    (B, "rg foo $(pwd)", NOTES, "deny"),
    (B, "rg foo `pwd`", NOTES, "deny"),
    (B, 'rg foo "$(pwd)"', NOTES, "deny"),
    (B, "rg foo ~+", NOTES, "deny"),
    (B, "bash <<EOF\ngrep -r foo .\nEOF", NOTES, "deny"),
    (B, "bash <<'EOF'\ngrep -r foo .\nEOF\necho done", NOTES, "deny"),
    (B, "bash -s <<-EOF\n\tgrep -r foo .\n\tEOF", NOTES, "deny"),
    (B, "bash <<< 'grep -r foo .'", NOTES, "deny"),
    (B, "bash <(echo grep -r foo .)", NOTES, "deny"),
    (B, "echo 'grep -r foo .' | sh", NOTES, "deny"),
    (B, "printf 'grep -r foo .\\n' | bash", NOTES, "deny"),
    (B, "cat <<EOF | sh\ngrep -r foo .\nEOF", NOTES, "deny"),
    (B, "grep foo **/*.md", NOTES, "deny"),
    (B, "grep foo **/*.md", REPO, "deny"),
    (B, "find . -name '*.md' | while read f; do grep foo \"$f\"; done", NOTES, "deny"),
    (B, "find . -name '*.md' | while IFS= read -r f; do grep -H foo \"$f\"; done", REPO, "deny"),
    (B, "while read -r f; do grep foo \"$f\"; done < <(find . -name '*.md')", NOTES, "deny"),
    (B, "xzgrep -r foo .", NOTES, "deny"),
    (B, "bzgrep foo *.md", NOTES, "deny"),
    (B, "busybox grep -r foo .", NOTES, "deny"),
    (B, "$'grep' -r foo .", NOTES, "deny"),
    (B, "$'\\x67rep' -r foo .", NOTES, "deny"),
    (B, "alias g=grep; g -r foo .", NOTES, "deny"),
    (B, "alias g='grep -r'\ng foo .", NOTES, "deny"),
    (B, "script -qc 'grep -r foo .'", NOTES, "deny"),
    (B, "script -q -c 'grep -r foo .' /dev/null", NOTES, "deny"),
    (B, "parallel grep foo ::: *.md", NOTES, "deny"),
    (B, "parallel 'grep foo {}' ::: *.md", NOTES, "deny"),
    (B, "find . -name '*.md' | parallel grep foo", NOTES, "deny"),
    # other spellings an agent might try
    (B, "command grep -r foo .", NOTES, "deny"),
    (B, "env grep -r foo .", NOTES, "deny"),
    (B, "\\grep -r foo .", NOTES, "deny"),
    (B, "/usr/bin/grep -r foo .", NOTES, "deny"),
    (B, 'eval "grep -r foo ."', NOTES, "deny"),
    (B, "sh -c 'grep -r foo .'", NOTES, "deny"),
    (B, "find . -type f | xargs grep foo", NOTES, "deny"),
    (B, "ls | xargs grep foo", NOTES, "deny"),
    (B, "grep foo $(ls)", NOTES, "deny"),
    (B, "sh -c 'grep -r foo \"$1\"' _ .", NOTES, "deny"),
    (B, 'bash -c "$(echo grep -r foo .)"', NOTES, "deny"),
    (B, 'eval "$(printf "grep -r foo .")"', NOTES, "deny"),
    (B, "source <(echo grep -r foo .)", NOTES, "deny"),
    (B, '"$(which grep)" -r foo .', NOTES, "deny"),
    (B, "G=grep; $G -r foo .", NOTES, "deny"),
    (B, "grep -r foo ${PWD:-.}", NOTES, "deny"),
    (B, "cat < <(grep -r foo .)", NOTES, "deny"),
    (B, "g() { grep \"$@\"; }; g -r foo .", NOTES, "deny"),
    (B, "function g { rg \"$@\"; }\ng foo", NOTES, "deny"),
    (B, "rg foo $(git rev-parse --show-toplevel)", "work/repo/src", "deny"),
    (B, "su -c 'grep -r foo .'", NOTES, "deny"),
    (B, "setsid grep -r foo .", NOTES, "deny"),
    (B, "runuser -u me -- grep -r foo .", NOTES, "deny"),
    (B, "$(echo grep) -r foo .", NOTES, "deny"),
    (B, "grep -r foo ${PWD%/}", NOTES, "deny"),
    (B, 'cd "$(dirname "$(pwd)")" && grep -r foo notes', NOTES, "deny"),
    (B, "bash -c 'grep -r foo \"$0\"' .", NOTES, "deny"),
    (B, "echo 'grep -r foo .' > s.sh; bash s.sh", NOTES, "deny"),
    (B, "cat > s.sh <<'EOF'\ngrep -r foo .\nEOF\nchmod +x s.sh && ./s.sh", NOTES, "deny"),
    (B, "xargs grep foo < <(find . -name '*.md')", NOTES, "deny"),
    (B, "xargs -a <(find . -name '*.md') grep foo", NOTES, "deny"),
    (B, "find . -name '*.md' | sort | head -50 | xargs grep foo", NOTES, "deny"),
    (B, "find . -type f | grep '\\.md$' | xargs grep foo", REPO, "deny"),
    (B, "git ls-files '*.md' | xargs grep foo", REPO, "deny"),
    (B, "rg foo $(ls -d */)", REPO, "deny"),
    (B, "echo notes | xargs grep -r foo", REPO, "deny"),
    (B, "cat $(find . -name '*.md') | grep foo", NOTES, "deny"),
    (B, "find . -name '*.md' -exec cat {} + | grep foo", NOTES, "deny"),
    (B, "find . -name '*.md' | xargs cat | grep foo", NOTES, "deny"),
    (B, "sed -n p *.md | grep foo", NOTES, "deny"),
    (B, "rg foo --iglob '*.MD'", NOTES, "deny"),
    (B, 'a=(-rn foo .); grep "${a[@]}"', NOTES, "deny"),
    # pattern programs over several notes (guards/scripted.py)
    (B, "awk '/retry/ {print FILENAME\": \"$0}' *.md", NOTES, "deny"),
    (B, "sed -n '/retry/p' *.md", NOTES, "deny"),
    (B, "perl -ne 'print \"$ARGV: $_\" if /retry/i' *.md", NOTES, "deny"),
    (B, "find . -name '*.md' -exec awk '/retry/' {} +", NOTES, "deny"),
    (B, "find . -name '*.md' | xargs perl -nle 'print if /x/'", NOTES, "deny"),
    # code searches stay allowed
    (B, "rg foo", CODE, "allow"),
    (B, "grep -rn foo .", CODE, "allow"),
    (B, "git grep foo", CODE, "allow"),
    (B, "grep foo main.py", CODE, "allow"),
    (B, "grep foo src/app.py", REPO, "allow"),
    (B, "grep foo a.md", NOTES, "allow"),
    (B, "rg -t py foo", REPO, "allow"),
    (B, "rg -g '*.py' foo", REPO, "allow"),
    (B, "rg foo src tests", REPO, "allow"),
    (B, "rg foo $(pwd)", CODE, "allow"),
    (B, "rg foo `pwd`/lib", CODE, "allow"),
    (B, "rg foo ~+", CODE, "allow"),
    (B, "bash <<EOF\ngrep -r foo .\nEOF", CODE, "allow"),
    (B, "echo 'grep -r foo .' | sh", CODE, "allow"),
    (B, "grep foo **/*.py", REPO, "allow"),
    (B, "grep foo **/*.md", CODE, "allow"),
    (B, "find . -name '*.py' | while read f; do grep foo \"$f\"; done", REPO, "allow"),
    (B, "parallel grep foo ::: *.py", CODE, "allow"),
    (B, "alias ll='ls -l'; ll", REPO, "allow"),
    (B, "g() { grep \"$@\"; }; g -rn foo src", REPO, "allow"),
    (B, "cat <<'EOF' > x.sh\ngrep -r foo .\nEOF", NOTES, "allow"),
    (B, "cat <<EOF\n$(date)\nEOF", NOTES, "allow"),
    (B, "echo grep -r foo .", NOTES, "allow"),
    (B, 'git commit -m "$(echo grep -r foo .)"', NOTES, "allow"),
    (B, "ps aux | grep python", NOTES, "allow"),
    (B, "ls | grep a", NOTES, "allow"),
    (B, "script -q /dev/null", NOTES, "allow"),
    (B, "busybox ls", NOTES, "allow"),
    (B, "xzgrep foo app.log.xz", CODE, "allow"),
    (B, "git ls-files | grep '\\.py$' | xargs grep foo", REPO, "allow"),
    (B, "find . -type f | grep -E '\\.(py|js)$' | xargs grep foo", REPO, "allow"),
    (B, "echo src | xargs grep -r foo", REPO, "allow"),
    (B, "find . -name '*.py' -exec cat {} + | grep foo", REPO, "allow"),
    (B, "cat src/*.py | grep foo", REPO, "allow"),
    (B, "echo 'rg foo src' > s.sh; bash s.sh", REPO, "allow"),
    (B, "grep foo < <(find . -name '*.md')", NOTES, "allow"),
    (B, "rg --files | rg foo", NOTES, "allow"),
    (B, "rg -Tmd foo", NOTES, "allow"),
    (B, "awk '/retry/' a.md", NOTES, "allow"),
    (B, "awk 'FNR==1 {print FILENAME}' *.md", NOTES, "allow"),
    (B, "sed -i 's/retry/Retry/' *.md", NOTES, "allow"),
    (B, "perl -pe 's/a/b/' *.md", NOTES, "allow"),
    (B, "awk '/def /' src/*.py", REPO, "allow"),
]


@pytest.mark.slow
def test_guard_decisions_through_the_hook(notes_world: Path) -> None:
    """One table, each row a real `qmd-guard` run; every wrong row is reported at once."""
    assert GUARD.exists()
    wrong = []
    for tool, value, cwd, expected in CASES:
        got, text = outcome(notes_world, tool, value, cwd)
        if got != expected:
            wrong.append(f"{expected} expected, got {got}: {tool} {value!r} in {cwd}")
        elif got == "deny":
            if not (text.startswith("qmd guard: ") and "qmd search" in text and "Reading a note you already know" in text):
                wrong.append(f"denied without the usual advice: {value!r}: {text!r}")
    assert not wrong, "\n" + "\n".join(wrong)


def test_old_folders_json_without_patterns_keeps_the_sample_names(notes_world: Path) -> None:
    """A folders.json written before patterns were cached: .md/.markdown/.mdx/.txt are notes."""
    path = harness.StateLayout.current().guard_folders
    data = json.loads(path.read_text())
    data.pop("patterns", None)
    path.write_text(json.dumps(data))
    assert outcome(notes_world, B, "rg -t rst foo", "manual")[0] == "allow"  # as before: .rst is no sample name
    assert outcome(notes_world, B, "rg -g '!*.md' foo", REPO)[0] == "deny"  # .txt notes could still be read
    assert outcome(notes_world, B, "rg -T md -T txt foo", REPO)[0] == "allow"
    assert outcome(notes_world, B, "grep -r foo .", NOTES)[0] == "deny"


# -- 2. a project's guard.allow: only inside that project, only once it is trusted -------------


def test_project_allow_applies_only_inside_a_trusted_project(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    from qmd.core.trust import record_trust
    from qmd.index.folder_cache import local_trust, refresh_folder_cache, register_local

    root = Path(os.path.realpath(tmp_path))
    write_tree(root, {
        "notes/a.md": "# A\n", "notes/b.md": "# B\n",
        "clone/docs/x.md": "# X\n", "clone/docs/y.md": "# Y\n", "clone/src/z.py": "",
    })
    assert cli("collection", "add", str(root / "notes"), "--name", "mine", "--no-index")[0] == 0
    config = root / "clone" / ".qmd" / "index.yml"
    config.parent.mkdir()
    config.write_text(
        "collections:\n  docs:\n    path: docs\n    update: git pull --ff-only\n"
        "guard:\n  allow:\n    - /**\n    - '*'\n    - /\n    - notes\n"
    )
    assert register_local(config)  # qmd's own bookkeeping: registers it and rewrites folders.json
    assert local_trust(config).allowed is False  # an update command nobody approved

    def decide(command: str, cwd: str) -> str:
        return outcome(root, B, command, cwd)[0]

    # untrusted: its allow globs exempt nothing, not the user's notes and not its own docs
    assert decide("grep -r foo .", "notes") == "deny"
    assert decide("rg foo notes", ".") == "deny"
    assert decide("rg foo docs", "clone") == "deny"
    data = json.loads(harness.StateLayout.current().guard_folders.read_text())
    assert data["allow"] == [] and data.get("project_allow") == []

    record_trust(config, local_trust(config).digest)  # what `qmd trust` records
    refresh_folder_cache()
    # trusted: its globs exempt paths inside the project only
    assert decide("rg foo docs", "clone") == "allow"
    assert decide("grep -r foo .", "clone/docs") == "allow"
    assert decide("grep -r foo .", "notes") == "deny"
    assert decide("rg foo notes", ".") == "deny"
    assert decide(f"rg foo {root}/notes", "clone") == "deny"
    data = json.loads(harness.StateLayout.current().guard_folders.read_text())
    assert data["allow"] == [] and {e["root"] for e in data["project_allow"]} == {str(root / "clone")}


def test_allow_everything_glob_in_the_users_own_config(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`/**` in the user's own config means every path (a trailing /** is a folder's content)."""
    root = Path(os.path.realpath(tmp_path))
    write_tree(root, {"notes/a.md": "# A\n", "notes/b.md": "# B\n"})
    assert cli("collection", "add", str(root / "notes"), "--name", "mine", "--no-index")[0] == 0
    assert outcome(root, B, "grep -r foo .", "notes")[0] == "deny"
    config = qmd.resolve_index(None).config_path
    config.write_text(config.read_text() + "guard:\n  allow:\n    - /**\n")
    assert cli("guard", "refresh")[0] == 0
    assert outcome(root, B, "grep -r foo .", "notes")[0] == "allow"


def test_a_project_with_only_guard_allow_needs_approval_and_its_protect_stays_inside(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`guard.allow` is itself a gated field (nothing else needs to be for the project to ask),
    and a cloned project's `guard.protect` globs cannot block searches outside the project."""
    from qmd.core.trust import record_trust
    from qmd.index.folder_cache import local_trust, refresh_folder_cache, register_local

    root = Path(os.path.realpath(tmp_path))
    write_tree(root, {
        "notes/a.md": "# A\n", "clone/docs/x.md": "# X\n", "clone/wiki/w.txt": "", "code/wiki/w.py": "", "code/src/m.py": "",
        "code/.git/HEAD": "ref: refs/heads/main\n",
    })
    assert cli("collection", "add", str(root / "notes"), "--name", "mine", "--no-index")[0] == 0
    config = root / "clone" / ".qmd" / "index.yml"
    config.parent.mkdir()
    config.write_text("collections:\n  docs:\n    path: docs\nguard:\n  allow:\n    - docs\n  protect:\n    - '*'\n    - wiki\n    - /\n    - ~/notes\n")
    assert register_local(config)
    decision = local_trust(config)
    assert not decision.allowed and decision.gated.guard_allow == ("docs",)

    def decide(command: str, cwd: str) -> str:
        return outcome(root, B, command, cwd)[0]

    assert decide("rg foo docs", "clone") == "deny"  # untrusted: no exemption
    assert decide("rg foo .", "code") == "allow"  # its protect globs stay in the project
    assert decide("grep -r foo src", "code") == "allow"
    assert decide("rg foo wiki", "code") == "allow"
    assert decide("rg foo wiki", "clone") == "deny"  # inside the project they protect
    record_trust(config, decision.digest)
    refresh_folder_cache()
    assert decide("rg foo docs", "clone") == "allow"
    assert decide("grep -r foo .", "notes") == "deny"


@pytest.mark.parametrize("command, expected", [
    ("grep -R foo .", "deny"),  # -R follows every symlink it meets: `docs` leads into the notes
    ("grep --dereference-recursive foo .", "deny"),
    ("rg -L foo", "deny"),
    ("rg --follow foo .", "deny"),
    ("grep -r foo .", "allow"),  # -r follows only the links named on its command line
    ("rg foo", "allow"),
    ("grep -R --exclude-dir=docs foo .", "allow"),
    ("grep -R foo src", "allow"),
])
def test_a_search_that_follows_symlinks_sees_a_link_into_the_notes(notes_world: Path, command: str, expected: str) -> None:
    """A code repository with a symlink to a knowledge folder (`docs -> ~/notes`, a common
    set-up): a search that follows symlinks (grep -R, rg -L) reads the notes through it, and
    the guard, judging the paths alone, let it through."""
    code = notes_world / CODE
    (code / "src").mkdir(exist_ok=True)
    (code / "docs").symlink_to(notes_world / NOTES)
    assert outcome(notes_world, B, command, CODE)[0] == expected
