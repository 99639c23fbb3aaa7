"""The guard's shell reader: lexing (quotes, operators, substitutions, here-docs) and the walk (cwd, wrappers)."""

from __future__ import annotations

import pytest

from guards.lexer import OP, has_glob, literal, tokenize
from guards.shell import commands


def words(command: str) -> list[str]:
    tokens, _subs = tokenize(command)
    return [("OP " + t[1:]) if t.startswith(OP) else literal(t) for t in tokens]


@pytest.mark.parametrize(
    "command, expected",
    [
        ("grep -r 'a;b|c' notes", ["grep", "-r", "a;b|c", "notes"]),
        ('grep "x && y" f', ["grep", "x && y", "f"]),
        ("a&&b||c;d|e", ["a", "OP &&", "b", "OP ||", "c", "OP ;", "d", "OP |", "e"]),
        ("grep x f 2>/dev/null >out", ["grep", "x", "f", "OP >", "/dev/null", "OP >", "out"]),
        ("grep x f 2>&1 | wc", ["grep", "x", "f", "OP >&", "1", "OP |", "wc"]),
        ("echo a#b # comment", ["echo", "a#b"]),
        ("a \\\n  b", ["a", "b"]),
        ("a |\n b\nc", ["a", "OP |", "b", "OP ;", "c"]),
        ("cat <<EOF\ngrep -r x notes\nEOF\nls", ["cat", "OP <<", "EOF", "OP ;", "ls"]),
        ("cat <<-'END' >f\n\tgrep -r x .\n\tEND\nls", ["cat", "OP <<-", "END", "OP >", "f", "OP ;", "ls"]),
        ("find . -exec grep x {} \\;", ["find", ".", "-exec", "grep", "x", "{}", ";"]),
    ],
)
def test_tokenize(command: str, expected: list[str]) -> None:
    assert words(command) == expected


def test_substitutions_are_cut_out() -> None:
    tokens, subs = tokenize('grep x $(find notes -name "*.md") "$(ls)" `pwd` <(cat a) $((1+2))')
    assert list(subs.values()) == ['find notes -name "*.md"', "ls", "pwd", "cat a"]
    assert tokens[-1] == "0"


def test_heredoc_bodies_and_ansi_c_strings() -> None:
    from guards.lexer import heredoc_key

    tokens, subs = tokenize("bash <<EOF\ngrep -r x .\nEOF\ncat <<-'END'\n\tls $HOME\n\tEND\necho $'\\x67rep\\tx' $\"a b\"")
    assert subs[heredoc_key(0)] == "grep -r x .\n" and subs[heredoc_key(1, quoted=True)] == "ls $HOME\n"
    assert [literal(t) for t in tokens[-3:]] == ["echo", "grep\tx", "a b"]
    _tokens, subs = tokenize("cat <(ls) $(pwd)")
    assert len(subs.procsubs) == 1 and subs[next(iter(subs.procsubs))] == "ls"


@pytest.mark.parametrize(
    "command, argv",
    [
        ("rg x $(pwd)", ["rg", "x", "/w"]),
        ("rg x `pwd`/sub", ["rg", "x", "/w/sub"]),
        ("rg x ~+ ${PWD:-.} ${PWD%/w}", ["rg", "x", "/w", "/w", ""]),
        ("alias g='rg -n'; g x", ["rg", "-n", "x"]),
        ("f() { rg \"$@\"; }; f x y", ["rg", "x", "y"]),
        ("sh -c 'rg \"$1\" \"$0\"' . x", ["rg", "x", "."]),
        ("bash <<< 'rg x'", ["rg", "x"]),
        ("echo 'rg x' | sh", ["rg", "x"]),
        ("script -qc 'rg x' /dev/null", ["rg", "x"]),
        ("busybox rg x", ["rg", "x"]),
    ],
)
def test_walk_follows_what_the_shell_runs(command: str, argv: list[str]) -> None:
    found = [c for c in commands(command, "/w") if literal(c.argv[0]) == "rg"]
    assert found, commands(command, "/w")
    assert [literal(a) for a in found[-1].argv] == argv


def test_quoted_wildcards_are_not_globs() -> None:
    tokens, _ = tokenize("ls notes/*.md 'notes/*.md' notes/\\*.md \"*\"")
    assert [has_glob(t) for t in tokens[1:]] == [True, False, False, False]
    assert [literal(t) for t in tokens[1:]] == ["notes/*.md", "notes/*.md", "notes/*.md", "*"]


@pytest.mark.parametrize(
    "command, argv, cwd",
    [
        ("cd notes && grep -r x .", ["grep", "-r", "x", "."], "/w/notes"),
        ("cd /a; cd b; cd -; rg x", ["rg", "x"], "/a"),
        ("pushd notes >/dev/null; popd; rg x", ["rg", "x"], "/w"),
        ("(cd notes; true); rg x", ["rg", "x"], "/w"),
        ("cd notes | rg x", ["rg", "x"], "/w"),
        ("env -C /srv FOO=1 rg x", ["rg", "x"], "/srv"),
        ("sudo -D /srv -u me rg x", ["rg", "x"], "/srv"),
        ("bash -euo pipefail -c 'cd sub && rg x'", ["rg", "x"], "/w/sub"),
        ("timeout -s KILL 5 nohup nice rg x", ["rg", "x"], "/w"),
        ("X=notes; Y=$X/sub; rg x $Y", ["rg", "x", "notes/sub"], "/w"),
        ("time rg x", ["rg", "x"], "/w"),
        ("time -p rg x", ["rg", "x"], "/w"),  # bash's keyword takes -p (POSIX output): it was read as a command `-p`
        ("time -p -- rg x", ["rg", "x"], "/w"),
        ("rg x {src,notes}", ["rg", "x", "src", "notes"], "/w"),  # brace expansion: bash hands rg two folders
        ("rg x notes/{a,b{c,d}}.md", ["rg", "x", "notes/a.md", "notes/bc.md", "notes/bd.md"], "/w"),
        ("rg 'x{1,2}' \"{a,b}\" \\{c,d} {e} {} a{,}", ["rg", "x{1,2}", "{a,b}", "{c,d}", "{e}", "{}", "a", "a"], "/w"),
        ("D=notes; rg x {$D,src}", ["rg", "x", "notes", "src"], "/w"),
        ("if true; then rg x; fi", ["rg", "x"], "/w"),
        ("cd ~ && rg x", ["rg", "x"], "HOME"),
    ],
)
def test_walk_tracks_cwd_and_unwraps(command: str, argv: list[str], cwd: str, isolated_home) -> None:  # type: ignore[no-untyped-def]
    found = [c for c in commands(command, "/w") if literal(c.argv[0]) == argv[0]]
    assert found, commands(command, "/w")
    assert [literal(a) for a in found[-1].argv] == argv
    assert found[-1].cwd == (str(isolated_home) if cwd == "HOME" else cwd)


def test_pipeline_knows_its_producer() -> None:
    producer, consumer = commands("find notes | xargs grep x", "/w")
    assert consumer.producer is producer and producer.producer is None


def test_unknown_values_are_marked() -> None:
    [cmd] = commands('rg x "$1" $UNSET', "/w")
    assert all("\x00" in a for a in cmd.argv[2:])
    [cmd] = commands('cd "$DIR" && rg x', "/w")
    assert cmd.cwd is None


# -- bounded work on huge commands ---------------------------------------------------------------

TEN_MB = 10 * 1024 * 1024
# Shapes that make a shell reader slow or large: long words, many words, many operators, deep or
# unclosed substitutions and quotes, line continuations, here-documents, loops over variables.
HOSTILE = {
    "long-word": "grep -r foo notes " + "x" * TEN_MB,
    "many-words": "grep -r foo notes " + "a " * (TEN_MB // 2),
    "many-commands": "grep -r foo notes; " + "true; " * (TEN_MB // 6),
    "many-assignments-then-commands": "".join(f"v{i}=1; " for i in range(6000)) + "grep x f; " * (TEN_MB // 10),
    "nested-substitutions": "grep -r foo notes $(" * (TEN_MB // 20),
    "unclosed-single-quote": "grep -r foo notes '" + "a b " * (TEN_MB // 4),
    "unclosed-double-quote": 'grep -r foo notes "' + "$(a) " * (TEN_MB // 5),
    "backticks": "grep -r foo notes `" * (TEN_MB // 20),
    "subshells": "( " * 20_000 + "grep x f; " * (TEN_MB // 10),
    "continuations": "grep -r foo notes " + "\\\n" * (TEN_MB // 2),
    "heredocs": "grep -r foo notes <<A\n" * (TEN_MB // 20),
    "loops": "for f in notes/*.md; do grep -r foo $f; done; " * (TEN_MB // 45),
}


@pytest.mark.parametrize("name", list(HOSTILE))
def test_huge_commands_are_decided_with_bounded_lexing(name: str, tmp_path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """However large the command, the shell reader sees a bounded amount of text (counted, not timed)."""
    import os

    import guards.shell as shell
    from guards.decide import MAX_COMMAND, decide
    from guards.knowledge import parse
    from tests.support.guard_world import build_tree

    kn = parse(build_tree(tmp_path))
    lexed: list[int] = []
    tokens: list[int] = []
    real_tokenize = shell.tokenize

    def counting(text: str) -> tuple[list[str], dict[str, str]]:
        lexed.append(len(text))
        out = real_tokenize(text)
        tokens.append(len(out[0]))
        return out

    monkeypatch.setattr(shell, "tokenize", counting)
    command = HOSTILE[name]
    assert len(command) >= 9 * 1024 * 1024
    decision = decide(kn, "Bash", {"command": command}, os.path.realpath(tmp_path / "repo"))
    assert lexed, "the command was not read at all"
    assert sum(lexed) <= 8 * MAX_COMMAND, (len(lexed), sum(lexed))
    assert sum(tokens) <= 8 * MAX_COMMAND
    if command.startswith("grep -r foo notes"):
        assert decision.deny, decision
