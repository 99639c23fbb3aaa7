"""The guard's decisions, table-driven and in-process: tool call + cwd + knowledge folders → allow/deny + rule.

The tree (real folders under tmp_path, tests/support/guard_world.py::build_tree):

    repo/            a code repository (.git) holding a knowledge folder
      notes/         collection `notes` (index `index`)      a.md b.md sub/c.md
      docs/adr/      protected by the absolute glob <repo>/docs/adr
      docs/guide.md
      vendor/wiki/   protected by the relative glob `wiki` ; vendor/lib/x.py
      src/ tests/ README.md
    kb/              collection `kb` of index `work`;  kb/public exempted by guard.allow
    other/           code only
    link -> repo/notes
    home/notes/      collection `home` (~/notes; HOME is tmp_path/home)
"""

from __future__ import annotations

import os
import shlex
from pathlib import Path

import pytest

from guards.decide import decide
from guards.knowledge import Knowledge, parse
from tests.support.guard_world import build_tree


@pytest.fixture
def world(tmp_path: Path) -> tuple[Path, Knowledge]:
    data = build_tree(tmp_path)
    return Path(os.path.realpath(tmp_path)), parse(data)


B = "Bash"
# (command or tool input, cwd relative to tmp root, expected "allow"/"deny", rule)
DENY: list[tuple[str, object, str, str]] = [
    (B, "grep -r foo notes", "repo", "shell-search"),
    (B, "grep -rn foo notes/", "repo", "shell-search"),
    (B, "grep -R foo ./notes", "repo", "shell-search"),
    (B, "grep --recursive foo notes", "repo", "shell-search"),
    (B, "grep -d recurse foo notes", "repo", "shell-search"),
    (B, "egrep -r 'retry|backoff' notes", "repo", "shell-search"),
    (B, "fgrep -r foo notes", "repo", "shell-search"),
    (B, "rgrep foo notes", "repo", "shell-search"),
    (B, "rg foo notes", "repo", "shell-search"),
    (B, "rga foo notes", "repo", "shell-search"),  # ripgrep-all: rg's options, and it reads the notes alike
    (B, "rga --rga-adapters=+pdf -i foo notes", "repo", "shell-search"),
    (B, 'rg -n -i "retry policy" notes/sub', "repo", "shell-search"),
    (B, "ag foo notes", "repo", "shell-search"),
    (B, "ack foo notes", "repo", "shell-search"),
    (B, "grep -r foo .", "repo", "shell-search-root"),
    (B, "rg foo", "repo", "shell-search-root"),
    (B, "ag foo", "repo", "shell-search-root"),
    (B, "ack foo", "repo", "shell-search-root"),
    (B, "grep -rn foo", "repo", "shell-search-root"),
    (B, "grep foo notes/*.md", "repo", "shell-search"),
    (B, "grep -l foo notes/*", "repo", "shell-search"),
    (B, "cd notes && grep -rn foo .", "repo", "shell-search"),
    (B, "cd notes; rg foo", "repo", "shell-search"),
    (B, "cd src && cd ../notes && rg foo", "repo", "shell-search"),
    (B, "cd /tmp && cd {root}/repo && rg foo", "other", "shell-search-root"),
    (B, "env LC_ALL=C grep -r foo notes", "repo", "shell-search"),
    (B, "LC_ALL=C rg foo notes", "repo", "shell-search"),
    (B, "bash -c 'grep -r foo notes'", "repo", "shell-search"),
    (B, 'sh -c "cd notes && grep -rn foo ."', "repo", "shell-search"),
    (B, "bash -lc 'rg foo'", "repo", "shell-search-root"),
    (B, 'eval "rg foo notes"', "repo", "shell-search"),
    (B, "timeout 10 rg foo notes", "repo", "shell-search"),
    (B, "sudo -u me rg foo notes", "repo", "shell-search"),
    (B, "nice -n 5 ionice -c 3 rg foo notes", "repo", "shell-search"),
    (B, "command grep -r foo notes", "repo", "shell-search"),
    (B, "\\grep -r foo notes", "repo", "shell-search"),
    (B, "/usr/bin/grep -r foo notes", "repo", "shell-search"),
    (B, "rg foo ~/notes", "repo", "shell-search"),
    (B, "grep -r foo $HOME/notes", "repo", "shell-search"),
    (B, "rg foo notes | head -20", "repo", "shell-search"),
    (B, "rg foo notes 2>/dev/null", "repo", "shell-search"),
    (B, "ls && rg foo notes", "repo", "shell-search"),
    (B, "false || grep -r foo notes", "repo", "shell-search"),
    (B, "echo start; grep -r foo notes; echo done", "repo", "shell-search"),
    (B, "echo start\ngrep -r foo notes\necho done", "repo", "shell-search"),
    (B, "(cd notes && rg foo)", "repo", "shell-search"),
    (B, "grep -c foo -r notes", "repo", "shell-search"),
    (B, "grep -e foo -e bar -r notes", "repo", "shell-search"),
    (B, "rg --json foo notes", "repo", "shell-search"),
    (B, "watch -n 5 rg foo notes", "repo", "shell-search"),
    (B, 'grep -r "foo" notes && echo ok', "repo", "shell-search"),
    (B, "rg -l foo notes | xargs sed -n 1p", "repo", "shell-search"),
    (B, "for f in notes/*.md; do grep foo \"$f\"; done", "repo", "shell-search"),
    (B, "D=notes; grep -r foo $D", "repo", "shell-search"),
    (B, 'export D=notes && rg foo "$D"', "repo", "shell-search"),
    (B, "cd src && rg foo ..", "repo", "shell-search-root"),
    (B, "rg foo ../notes", "repo/src", "shell-search"),
    (B, "rg foo {root}/link", "other", "shell-search"),
    (B, "rg foo kb", ".", "shell-search"),
    (B, "rg foo", ".", "shell-search-root"),
    (B, "rg foo docs", "repo", "shell-search-root"),
    (B, "rg foo docs/adr", "repo", "shell-search"),
    (B, "rg foo vendor", "repo", "shell-search-root"),
    (B, "rg foo vendor/wiki", "repo", "shell-search"),
    (B, "grep -r --include='*.md' foo .", "repo", "shell-search-root"),
    (B, "rg -t md foo", "repo", "shell-search-root"),
    (B, "rg -g '*.md' foo .", "repo", "shell-search-root"),
    (B, "rg foo -g '!src'", "repo", "shell-search-root"),
    (B, "find notes -name '*.md' | xargs grep foo", "repo", "file-list"),
    (B, "find notes -type f -print0 | xargs -0 grep -l foo", "repo", "file-list"),
    (B, "find . -name '*.md' | xargs grep foo", "repo", "file-list-root"),
    (B, "git ls-files | xargs grep -n foo", "repo", "file-list-root"),
    (B, "find notes -name '*.md' -exec grep foo {} +", "repo", "find-exec"),
    (B, "find notes -exec grep -H foo {} \\;", "repo", "find-exec"),
    (B, "find . -type f -exec grep -l foo {} +", "repo", "find-exec-root"),
    (B, "find notes -name '*.md' -exec sh -c 'grep foo \"$1\"' _ {} \\;", "repo", "find-exec"),
    (B, "fd -e md . notes -x grep foo", "repo", "find-exec"),
    (B, "git grep foo", "repo", "git-grep-root"),
    (B, "git grep -n foo -- notes", "repo", "git-grep"),
    (B, "git -C notes grep foo", "repo", "git-grep"),
    (B, "cd notes && git grep foo", "repo", "git-grep"),
    (B, "git --no-pager grep -e foo", "repo", "git-grep-root"),
    (B, "grep foo $(find notes -name '*.md')", "repo", "file-list"),
    (B, "rg foo `find notes -type d`", "repo", "file-list"),
    (B, "cat notes/*.md | grep foo", "repo", "cat-pipe"),
    # awk/sed/perl programs that print the lines a pattern selects (guards/scripted.py)
    (B, "awk '/retry/' notes/*.md", "repo", "shell-search"),
    (B, "awk -F: '$2 ~ /retry/ {print FILENAME}' notes/*.md", "repo", "shell-search"),
    (B, "gawk -e '/retry/' -- notes/*.md", "repo", "shell-search"),
    (B, "awk -v IGNORECASE=1 'tolower($0) ~ \"retry\"' notes/*.md", "repo", "shell-search"),
    (B, "awk '/x/' notes/**/*.md", "repo", "shell-search"),
    (B, "sed -n '/retry/p' notes/*.md", "repo", "shell-search"),
    (B, "sed '/retry/!d' notes/*.md", "repo", "shell-search"),
    (B, "sed -n 's/retry/X/p' notes/*.md", "repo", "shell-search"),
    (B, "sed '/retry/p' -n notes/*.md", "repo", "shell-search"),  # GNU sed reads options anywhere
    (B, "sed -En '\\%retry%p' notes/*.md", "repo", "shell-search"),
    (B, "perl -ne 'print if /retry/' notes/*.md", "repo", "shell-search"),
    (B, "perl -nle 'print $ARGV if /retry/' notes/*.md", "repo", "shell-search"),
    (B, "perl -0777 -ne 'print $ARGV if m{retry}i' notes/*.md", "repo", "shell-search"),
    (B, "perl -lane 'print $F[0] if $F[1] =~ /x/' notes/*.md", "repo", "shell-search"),
    (B, "perl -e 'while (<>) { print if /retry/ }' notes/*.md", "repo", "shell-search"),
    (B, "perl -ne 'print if/retry/' notes/*.md", "repo", "shell-search"),  # a regex right after a keyword
    (B, "perl -e 'print grep/retry/,<>' notes/*.md", "repo", "shell-search"),
    (B, "perl -ae 'print if /retry/' notes/*.md", "repo", "shell-search"),  # -a implies -n
    (B, "perl -pe '/retry/ or $_=\"\"' notes/*.md", "repo", "shell-search"),
    (B, "perl5.36.0 -ne 'print if /retry/' notes/*.md", "repo", "shell-search"),
    (B, "awk 'index($0, \"retry\")' notes/*.md", "repo", "shell-search"),
    (B, "sed --expr='/retry/p' -n notes/*.md", "repo", "shell-search"),  # GNU long options by a unique prefix
    (B, "find notes -name '*.md' -exec awk '/retry/' {} +", "repo", "find-exec"),
    (B, "find notes -name '*.md' | xargs sed -n '/retry/p'", "repo", "file-list"),
    # bash arrays: `a=(…)`, `a+=(…)`, `a[N]=…`, `declare -a`, then "${a[@]}", ${a[N]}
    (B, 'a=(-r foo notes); grep "${a[@]}"', "repo", "shell-search"),
    (B, 'args=(-rn foo); grep "${args[@]}" notes', "repo", "shell-search"),
    (B, 'dirs=(src notes); rg foo "${dirs[@]}"', "repo", "shell-search"),
    (B, 'declare -a d=(notes); rg foo "${d[@]}"', "repo", "shell-search"),
    (B, 'a=(src); a+=(notes); rg foo "${a[@]}"', "repo", "shell-search"),
    (B, 'a[1]=notes; rg foo "${a[1]}"', "repo", "shell-search"),
    (B, 'd=(src notes); for x in "${d[@]}"; do rg foo "$x"; done', "repo", "shell-search"),
    (B, 'cmd=(grep -r foo); "${cmd[@]}" notes', "repo", "shell-search"),
    (B, 'dirs=(\n  notes\n  src\n)\nrg foo "${dirs[@]}"', "repo", "shell-search"),  # newlines inside the parentheses
    (B, "(cd src; a=(\nx\n)\ncd ../notes; rg foo .)", "repo", "shell-search"),  # the array's `)` is not the subshell's
    (B, 'a=(src notes); rg foo "$PWD/${a[@]}"', "repo", "shell-search"),  # text around [@] joins the first and the last
    (B, 'a=([0]=notes); rg foo "${a[@]}"', "repo", "shell-search"),
    ("exec_command", {"cmd": "rg foo notes"}, "repo", "shell-search"),
    ("shell", {"command": ["bash", "-lc", "cd notes && rg foo"]}, "repo", "shell-search"),
    ("Grep", {"pattern": "foo"}, "repo", "grep-tool-root"),
    ("Grep", {"pattern": "foo", "path": "notes"}, "repo", "grep-tool"),
    ("Grep", {"pattern": "foo", "path": "{root}/repo/notes/sub"}, "other", "grep-tool"),
    ("Grep", {"pattern": "foo", "glob": "*.md"}, "repo", "grep-tool-root"),
    ("Grep", {"pattern": "foo", "type": "md", "path": "notes"}, "repo", "grep-tool"),
    ("Grep", {"pattern": "foo", "path": "~/notes", "output_mode": "content"}, "repo", "grep-tool"),
]

ALLOW: list[tuple[str, object, str, str]] = [
    (B, "grep -r foo src/ > notes/out.txt", "repo", "outside"),
    (B, "echo notes/", "repo", "not-a-search"),
    (B, "cat notes/a.md", "repo", "not-a-search"),
    (B, "grep foo notes/a.md", "repo", "named-file"),
    (B, "sed -n 1,20p notes/a.md", "repo", "not-a-search"),
    (B, "head -50 notes/a.md", "repo", "not-a-search"),
    (B, "rg foo notes/a.md", "repo", "named-file"),
    (B, "grep -n foo notes/a.md notes/b.md", "repo", "named-file"),
    (B, "grep -r foo notes/a.md", "repo", "named-file"),
    (B, "grep foo notes/sub/c*.md", "repo", "named-file"),
    (B, "grep foo notes", "repo", "outside"),
    (B, "rg foo src", "repo", "outside"),
    (B, "grep -rn foo src tests", "repo", "outside"),
    (B, "rg -uuu foo src", "repo", "outside"),
    (B, "rg -t py foo", "repo", "filtered"),
    (B, "rg --type=py foo .", "repo", "filtered"),
    (B, "grep -r --include='*.py' foo .", "repo", "filtered"),
    (B, "grep -r --include='*.{py,js}' foo .", "repo", "filtered"),
    (B, "rg -T md -T txt foo", "repo", "filtered"),
    (B, "grep -r --exclude-dir=notes --exclude-dir=docs --exclude-dir=vendor foo .", "repo", "outside"),
    (B, "rg foo -g '!notes/' -g '!docs/adr' -g '!wiki'", "repo", "outside"),
    (B, "ag --ignore-dir=notes --ignore-dir=adr --ignore-dir=wiki foo", "repo", "outside"),
    (B, "rg --files", "repo", "listing"),
    (B, "rg --files notes", "repo", "listing"),
    (B, "ag -g notes", "repo", "listing"),
    (B, "ack -f notes", "repo", "listing"),
    (B, "rg --version", "repo", "listing"),
    (B, "find notes -name '*.md'", "repo", "not-a-search"),
    (B, "ls -R notes", "repo", "not-a-search"),
    (B, "git log --grep foo", "repo", "not-a-search"),
    (B, "git grep foo -- src", "repo", "outside"),
    (B, "git grep foo -- '*.py'", "repo", "filtered"),
    (B, "git grep foo -- . ':!notes' ':!docs' ':!vendor'", "repo", "outside"),
    (B, "cat notes/a.md | grep foo", "repo", "stdin"),
    (B, "cat notes/a.md notes/b.md notes/sub/*.md | rg -c foo", "repo", "stdin"),
    (B, "ls notes | grep a", "repo", "stdin"),
    (B, "ps aux | grep python", "repo", "stdin"),
    (B, "rg foo < notes/a.md", "repo", "stdin"),
    (B, "echo foo | rg foo", "repo", "stdin"),
    (B, "grep foo", "repo", "stdin"),
    (B, "tail -f app.log | grep -i error", "repo", "stdin"),
    (B, "npm test 2>&1 | rg FAIL", "repo", "stdin"),
    (B, "find . -path ./notes -prune -o -path ./docs -prune -o -path ./vendor -prune -o -type f -exec grep foo {} +", "repo", "outside"),
    (B, "find . -name notes -prune -o -name adr -prune -o -name wiki -prune -o -type f -exec grep -l foo {} +", "repo", "outside"),
    (B, "find src -type f | xargs grep foo", "repo", "outside"),
    (B, "find src -name '*.py' | xargs grep foo", "repo", "filtered"),
    (B, "find . -name '*.py' | xargs grep foo", "repo", "filtered"),
    (B, "find . -name '*.py' -exec grep foo {} +", "repo", "filtered"),
    (B, "cat files.txt | xargs grep foo", "repo", "not-a-search"),
    (B, 'rg foo "$UNSET_VAR"', "repo", "unresolved"),
    (B, 'cd "$SOMEWHERE" && rg foo', "repo", "unresolved"),
    (B, "grep -r foo kb/public", ".", "exempt"),
    (B, "rg foo", "repo/src", "outside"),
    (B, "rg foo", "other", "outside"),
    (B, "python -c \"import os; os.system('grep -r foo notes')\"", "repo", "not-a-search"),
    (B, 'echo "grep -r foo notes"', "repo", "not-a-search"),
    (B, "cat <<'EOF' > x.sh\ngrep -r foo notes\nEOF", "repo", "not-a-search"),
    (B, "grep 'notes' -r src", "repo", "outside"),
    (B, "rg notes src", "repo", "outside"),
    (B, "git commit -m 'grep -r foo notes'", "repo", "not-a-search"),
    (B, "# grep -r foo notes", "repo", "not-a-search"),
    (B, "vim notes/a.md", "repo", "not-a-search"),
    (B, "grep -rl foo src | xargs sed -i s/foo/bar/", "repo", "outside"),
    (B, 'a=(src tests); rg foo "${a[@]}"', "repo", "outside"),
    (B, 'a=(src notes); rg foo "${a[0]}"', "repo", "outside"),
    (B, 'a[$i]=notes; rg foo "${a[0]}"', "repo", "unresolved"),
    (B, 'a[99999]=notes; rg foo "${a[99999]}"', "repo", "unresolved"),  # past MAX_INDEX: not filled in
    (B, 'a[010]=notes; rg foo "${a[8]}"', "repo", "unresolved"),  # 010 is octal: not followed
    (B, "awk '{print $1 / 1024 / 1024}' notes/*.md", "repo", "not-a-search"),  # divisions, not regexes
    (B, "awk '{ total += $2 / 1000 } END { print total / NR }' notes/*.md", "repo", "not-a-search"),
    (B, "awk '{gsub(/\\r/, \"\")}1' notes/*.md", "repo", "not-a-search"),  # rewrites every line
    (B, "awk '{sub(/^ +/, \"\"); print}' notes/*.md", "repo", "not-a-search"),
    (B, "gawk -i inplace '{gsub(/a/, \"b\")}1' notes/*.md", "repo", "not-a-search"),
    (B, "perl -ne '@f = split /,/; print $f[0]' notes/*.md", "repo", "not-a-search"),
    (B, "sed '/^---$/,/^---$/d' notes/*.md", "repo", "not-a-search"),  # a block removed, not lines selected
    (B, "sed -n '1,/^---$/p' notes/*.md", "repo", "not-a-search"),
    (B, "awk '/retry/' notes/a.md", "repo", "named-file"),
    (B, "sed -n '/retry/p' notes/a.md", "repo", "named-file"),
    (B, "perl -ne 'print if /x/' notes/a.md", "repo", "named-file"),
    (B, "awk 'NR==1' notes/*.md", "repo", "not-a-search"),
    (B, "awk '{print FILENAME}' notes/*.md", "repo", "not-a-search"),
    (B, "awk -f prog.awk notes/*.md", "repo", "not-a-search"),
    (B, "sed -n 1,20p notes/*.md", "repo", "not-a-search"),
    (B, "sed -i 's/retry/Retry/' notes/*.md", "repo", "not-a-search"),
    (B, "sed -i.bak '/draft/d' notes/*.md", "repo", "not-a-search"),
    (B, "sed 's/a/b/' notes/*.md", "repo", "not-a-search"),
    (B, "perl -pe 's/a/b/' notes/*.md", "repo", "not-a-search"),
    (B, "perl -i -ne 'print unless /draft/' notes/*.md", "repo", "not-a-search"),
    (B, "perl script.pl notes/*.md", "repo", "not-a-search"),
    (B, "perl -e 'print 1'", "repo", "not-a-search"),
    (B, "awk '/x/' src/*.py", "repo", "outside"),
    (B, "cat notes/a.md | awk '/x/'", "repo", "stdin"),
    (B, "sed -n '/x/p' < notes/a.md", "repo", "stdin"),
    ("Grep", {"pattern": "foo", "path": "src"}, "repo", "outside"),
    ("Grep", {"pattern": "foo", "path": "notes/a.md"}, "repo", "named-file"),
    ("Grep", {"pattern": "foo", "glob": "*.py"}, "repo", "filtered"),
    ("Grep", {"pattern": "foo", "type": "py"}, "repo", "filtered"),
    ("Grep", {"pattern": "foo"}, "other", "outside"),
    ("Glob", {"pattern": "**/*.md"}, "repo", "listing"),
    ("Glob", {"pattern": "*.md", "path": "notes"}, "repo", "listing"),
    ("Read", {"file_path": "notes/a.md"}, "repo", "unknown-tool"),
    (B, ["not", "a", "dict"], "repo", "malformed"),
    (B, {"description": "no command"}, "repo", "malformed"),
    # malformed input fails open (these were denied: the list was joined, the Grep searched the cwd)
    (B, {"command": ["grep", "-r", "foo", "notes"]}, "repo", "malformed"),
    (B, {"command": 42}, "repo", "malformed"),
    (B, {"command": "grep -r foo notes", "workdir": ["notes"]}, "repo", "malformed"),
    ("exec_command", {"cmd": ["rg", "foo", "notes"]}, "repo", "malformed"),
    ("shell", {"command": ["bash", "-lc", 5]}, "repo", "malformed"),
    ("Grep", {"path": "notes"}, "repo", "malformed"),
    ("Grep", {"pattern": None, "path": "notes"}, "repo", "malformed"),
    ("Grep", {"pattern": "foo", "path": 42}, "repo", "malformed"),
    ("Grep", {"pattern": "foo", "path": "notes", "type": ["md"]}, "repo", "malformed"),
    ("Glob", {"pattern": 3, "path": "notes"}, "repo", "malformed"),
    ("shell", {"command": ["bash", "-lc", "rg foo src"]}, "repo", "outside"),
]


def _input(tool: str, value: object, root: Path) -> object:
    if isinstance(value, str):
        return {"command": value.replace("{root}", str(root))}
    if isinstance(value, dict):
        return {k: (v.replace("{root}", str(root)) if isinstance(v, str) else v) for k, v in value.items()}
    return value


def _case_id(case: tuple[str, object, str, str]) -> str:
    tool, value, cwd, _rule = case
    text = value if isinstance(value, str) else repr(value)
    return f"{tool}:{cwd}:{text[:60]}"


@pytest.mark.parametrize("case", DENY, ids=[_case_id(c) for c in DENY])
def test_denied(world: tuple[Path, Knowledge], case: tuple[str, object, str, str]) -> None:
    root, kn = world
    tool, value, cwd, rule = case
    decision = decide(kn, tool, _input(tool, value, root), str(root / cwd))
    assert (decision.deny, decision.rule) == (True, rule), decision
    assert decision.folder is not None


@pytest.mark.parametrize("case", ALLOW, ids=[_case_id(c) for c in ALLOW])
def test_allowed(world: tuple[Path, Knowledge], case: tuple[str, object, str, str]) -> None:
    root, kn = world
    tool, value, cwd, rule = case
    decision = decide(kn, tool, _input(tool, value, root), str(root / cwd))
    assert (decision.deny, decision.rule) == (False, rule), decision


def test_table_is_large_enough() -> None:
    assert len(DENY) + len(ALLOW) >= 80


def test_folder_reported_is_the_knowledge_folder(world: tuple[Path, Knowledge]) -> None:
    root, kn = world
    assert decide(kn, B, {"command": "rg foo kb"}, str(root)).folder.path == f"{root}/kb"  # type: ignore[union-attr]
    via_link = decide(kn, B, {"command": f"rg foo {root}/link"}, str(root))
    assert via_link.folder is not None and via_link.folder.path == f"{root}/repo/notes"
    adr = decide(kn, B, {"command": "rg foo docs/adr"}, str(root / "repo"))
    assert adr.folder is not None and adr.folder.glob is not None


def test_no_knowledge_allows_everything(world: tuple[Path, Knowledge]) -> None:
    root, _kn = world
    assert decide(None, B, {"command": "grep -r foo ."}, str(root)).rule == "no-knowledge"
    assert decide(parse({"folders": []}), B, {"command": "grep -r foo ."}, str(root)).rule == "no-knowledge"


def test_glob_tool_denied_only_when_configured(world: tuple[Path, Knowledge]) -> None:
    root, kn = world
    listing = {"pattern": "**/*.md", "path": "notes"}
    assert decide(kn, "Glob", listing, str(root / "repo")).deny is False
    denied = decide(kn, "Glob", listing, str(root / "repo"), deny_glob=True)
    assert (denied.deny, denied.rule) == (True, "glob-tool")
    assert decide(kn, "Glob", {"pattern": "**/*.md"}, str(root / "repo"), deny_glob=True).rule == "glob-tool-root"
    assert decide(kn, "Glob", {"pattern": "src/**/*.py"}, str(root / "repo"), deny_glob=True).rule == "filtered"


def test_workdir_of_codex_exec_command(world: tuple[Path, Knowledge]) -> None:
    root, kn = world
    decision = decide(kn, "exec_command", {"cmd": "rg foo", "workdir": str(root / "repo" / "notes")}, str(root / "other"))
    assert (decision.deny, decision.rule) == (True, "shell-search")


# -- the narrowed command ---------------------------------------------------------------


@pytest.mark.parametrize(
    "command, cwd, expected",
    [
        ("grep -rn foo .", "repo", "grep -rn foo README.md docs/guide.md src tests vendor/lib"),
        ("rg foo", "repo", "rg foo README.md docs/guide.md src tests vendor/lib"),
        ("git grep foo", "repo", "git grep foo -- README.md docs/guide.md src tests vendor/lib"),
        ("find . -type f -exec grep -l foo {} +", "repo", "find README.md docs/guide.md src tests vendor/lib -type f -exec grep -l foo '{}' +"),
        ("find . -name '*.md' | xargs grep foo", "repo", "find README.md docs/guide.md src tests vendor/lib -name '*.md' | xargs grep foo"),
        ("cd src && rg foo ..", "repo", "cd {root}/repo/src && rg foo ../README.md ../docs/guide.md ../src ../tests ../vendor/lib"),
        ("rg foo", ".", "rg foo kb/public other repo/README.md repo/docs/guide.md repo/src repo/tests repo/vendor/lib"),
    ],
)
def test_narrowed_command_is_suggested_and_allowed(world: tuple[Path, Knowledge], command: str, cwd: str, expected: str) -> None:
    from guards.narrow import suggest

    root, kn = world
    where = str(root / cwd)
    decision = decide(kn, B, {"command": command}, where)
    assert decision.deny and decision.rule.endswith("-root")
    narrowed = suggest(kn, decision, where)
    assert narrowed == expected.replace("{root}", str(root))
    assert decide(kn, B, {"command": narrowed}, where).deny is False


def test_narrowed_falls_back_to_exclusions_when_too_many_entries(tmp_path: Path) -> None:
    from guards.narrow import suggest

    root = Path(os.path.realpath(tmp_path))
    for i in range(20):
        (root / f"pkg{i:02d}").mkdir()
    (root / "notes").mkdir()
    (root / "notes" / "n.md").write_text("x")
    kn = parse({"folders": [{"path": str(root / "notes"), "index": "index", "collection": "notes"}]})
    for command, expected in (
        ("grep -rn foo .", "grep --exclude-dir=notes -rn foo ."),
        ("rg foo", "rg -g '!notes' foo"),
        ("git grep foo", "git grep foo -- . ':!notes'"),
    ):
        decision = decide(kn, B, {"command": command}, str(root))
        narrowed = suggest(kn, decision, str(root))
        assert narrowed == expected
        assert decide(kn, B, {"command": narrowed}, str(root)).deny is False


def test_grep_tool_narrowing_names_paths(world: tuple[Path, Knowledge]) -> None:
    from guards.narrow import suggest

    root, kn = world
    decision = decide(kn, "Grep", {"pattern": "foo"}, str(root / "repo"))
    text = suggest(kn, decision, str(root / "repo"))
    assert text is not None and "path set to one of: README.md, docs/guide.md, src, tests, vendor/lib" in text


# -- the reason text ----------------------------------------------------------------------


def test_reason_names_folder_qmd_search_with_the_pattern_and_narrowed_command(world: tuple[Path, Knowledge]) -> None:
    from guards.advice import reason

    root, kn = world
    command = "grep -rn 'retry.*policy' ."
    decision = decide(kn, B, {"command": command}, str(root / "repo"))
    text = reason(kn, decision, command, "claude", str(root / "repo"))
    assert f"{root}/repo/notes (collection notes)" in text
    assert "qmd search 'retry policy' -c notes" in text
    assert "qmd query 'retry policy' -c notes" in text
    assert "grep -rn 'retry.*policy' README.md docs/guide.md src tests vendor/lib" in text
    assert "mcp__" not in text


def test_reason_quotes_the_pattern_for_the_shell(world: tuple[Path, Knowledge]) -> None:
    from guards.advice import query_text, reason

    root, kn = world
    command = """rg "it's \\$5; rm -rf /" notes"""
    decision = decide(kn, B, {"command": command}, str(root / "repo"))
    text = reason(kn, decision, command, "claude", str(root / "repo"))
    query = query_text(decision.search.patterns)  # type: ignore[union-attr]
    assert f"qmd search {shlex.quote(query)} -c notes" in text
    assert shlex.split(f"qmd search {shlex.quote(query)}")[2] == query


def test_reason_names_another_index(world: tuple[Path, Knowledge]) -> None:
    from guards.advice import reason

    root, kn = world
    decision = decide(kn, B, {"command": "rg deploy kb"}, str(root))
    text = reason(kn, decision, "rg deploy kb", "claude", str(root))
    assert "qmd --index work search deploy -c kb" in text


@pytest.mark.parametrize(
    "patterns, expected",
    [
        (["retry policy"], "retry policy"),
        (["retry.*policy"], "retry policy"),
        (["\\bdeploy\\b"], "deploy"),
        (["foo|bar"], "foo bar"),
        (["[Rr]ollback"], "Rollback"),
        (["def\\s+main"], "def main"),
        (["a", "b"], "a b"),
        ([".*"], ".*"),
    ],
)
def test_query_text(patterns: list[str], expected: str) -> None:
    from guards.advice import query_text

    assert query_text(patterns) == expected


def test_reason_uses_the_mcp_tool_when_claude_has_qmd_registered(world: tuple[Path, Knowledge], isolated_home: Path) -> None:
    import json

    from guards.advice import reason

    root, kn = world
    decision = decide(kn, B, {"command": "rg 'retry policy' notes"}, str(root / "repo"))
    (isolated_home / ".claude.json").write_text(json.dumps({"mcpServers": {"qmd": {"command": "qmd", "args": ["mcp"]}}}))
    text = reason(kn, decision, "rg 'retry policy' notes", "claude", str(root / "repo"))
    assert "mcp__qmd__query" in text and '{"query": "retry policy"}' in text
    assert "qmd search" not in text
    # Codex does not read Claude's registration
    codex_text = reason(kn, decision, "rg 'retry policy' notes", "codex", str(root / "repo"))
    assert "qmd search 'retry policy'" in codex_text


def test_reason_finds_project_mcp_json_and_codex_config(world: tuple[Path, Knowledge], isolated_home: Path) -> None:
    import json

    from guards.advice import mcp_server

    root, _kn = world
    assert mcp_server("claude", str(root / "repo" / "src")) is None
    (root / "repo" / ".mcp.json").write_text(json.dumps({"mcpServers": {"notes-search": {"command": "/opt/qmd/bin/qmd", "args": ["mcp"]}}}))
    assert mcp_server("claude", str(root / "repo" / "src")) == "notes-search"
    assert mcp_server("codex", str(root / "repo")) is None
    (isolated_home / ".codex").mkdir()
    (isolated_home / ".codex" / "config.toml").write_text('model = "o3"\n\n[mcp_servers.qmd]\ncommand = "qmd"\nargs = ["mcp"]\n')
    assert mcp_server("codex", str(root / "repo")) == "qmd"
