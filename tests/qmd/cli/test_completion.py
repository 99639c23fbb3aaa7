"""`qmd completion bash|zsh|fish` completes the whole tree for real: commands, subcommands,
each command's own options, option values, collection names of the index in use (`--index`
honoured) and index names. Each script is loaded into the real shell: bash's function is
called with COMP_WORDS/COMP_CWORD set, fish answers `complete -C`, zsh completes a word
typed on a pseudo-terminal with TAB and runs the line."""

from __future__ import annotations

import json
import os
import pty
import select
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from qmd.cli.shared import FORMATS
from tests.support.run import qmd_env, qmd_on_path, run_qmd

COLLECTION_SUBCOMMANDS = ["add", "update-cmd", "list", "show", "remove", "rename", "include", "exclude"]


@pytest.fixture
def world(tmp_path: Path, notes: Path, isolated_home: Path) -> dict[str, str]:
    """Collection `notes` in the default index and `worknotes` in index `work`; the
    environment of a shell with this qmd on its PATH."""
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    assert run_qmd("--index", "work", "collection", "add", str(notes), "--name", "worknotes").returncode == 0
    folder = qmd_on_path(tmp_path / "bin")
    return qmd_env({"PATH": f"{folder}{os.pathsep}{os.environ['PATH']}"})


def _script(shell: str, env: dict[str, str], home: Path) -> Path:
    done = run_qmd("completion", shell, env=env)
    assert done.returncode == 0, done.stderr
    path = home / f"qmd.{shell}"
    path.write_text(done.stdout)
    return path


def _bash(script: Path, env: dict[str, str], home: Path, *words: str) -> list[str]:
    """COMPREPLY after the completion function ran for `qmd WORDS` (the last one being completed)."""
    code = 'source "$1"; shift; COMP_WORDS=("$@"); COMP_CWORD=$(($# - 1)); _qmd; printf "%s\\n" "${COMPREPLY[@]}"'
    done = subprocess.run(["bash", "--norc", "--noprofile", "-c", code, "_", str(script), "qmd", *words],
                          env=env, cwd=home, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and not done.stderr, done.stderr
    return [line for line in done.stdout.splitlines() if line]


BASH_CASES = [
    (["collection", ""], COLLECTION_SUBCOMMANDS),
    (["collection", "show", ""], ["notes"]),
    (["collection", "rename", "n"], ["notes"]),
    (["collection", "rename", "notes", ""], []),  # the new name: free text
    (["--index", "work", "collection", "show", ""], ["worknotes"]),
    (["ls", ""], ["notes"]),
    (["search", "-c", ""], ["notes"]),
    (["search", "x", "--index", "work", "-c", ""], ["worknotes"]),  # --index after the command counts too
    (["search", "--collection", "=", "no"], ["notes"]),  # bash splits --collection=no at the =
    (["search", "--collection", "="], ["notes"]),
    (["embed", "-c", "no"], ["notes"]),
    (["token", "add", "t", "-c", ""], ["notes"]),
    (["--index", ""], ["index", "work"]),
    (["search", "--index", "w"], ["work"]),
    (["search", "--format", ""], list(FORMATS)),
    (["search", "--match", ""], ["any", "all"]),
    (["search", "--ful"], ["--full", "--full-path"]),
    (["get", "--li"], ["--lines", "--line-numbers"]),
    (["search", "--", "-c", ""], []),  # after -- everything is query text
    (["search", "rollback", ""], []),
    (["mcp", ""], ["stop", "install"]),
    (["mcp", "install", "--scope", ""], ["user", "project"]),
    (["models", ""], ["list", "import"]),
    (["trust", ""], ["list", "revoke"]),
    (["hooks", ""], ["install", "uninstall", "status"]),
    (["updater", "install-service", "--ti"], ["--timer"]),
    (["health", "--"], ["--json", "--session-start", "--help", "--index"]),
    (["completion", ""], ["bash", "zsh", "fish"]),
]


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_commands_subcommands_options_and_names(world: dict[str, str], isolated_home: Path) -> None:
    script = _script("bash", world, isolated_home)
    top = _bash(script, world, isolated_home, "")
    for name in ("search", "query", "collection", "context", "health", "token", "trust", "guard", "hooks", "updater", "doctor", "completion"):
        assert name in top
    assert _bash(script, world, isolated_home, "-") == ["--index", "--version", "--skill", "--no-gpu", "-h", "--help"]
    wrong = {}
    for words, expected in BASH_CASES:
        got = _bash(script, world, isolated_home, *words)
        if sorted(got) != sorted(expected):
            wrong[" ".join(words)] = got
    assert not wrong, f"qmd WORDS<TAB> offered: {wrong}"


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_completes_paths_where_a_command_takes_a_folder(world: dict[str, str], isolated_home: Path, notes: Path) -> None:
    script = _script("bash", world, isolated_home)
    assert _bash(script, world, isolated_home, "collection", "add", str(notes)[:-1]) == [str(notes)]
    (isolated_home / "fixture.json").write_text("{}")
    assert _bash(script, world, isolated_home, "bench", str(isolated_home / "fix")) == [str(isolated_home / "fixture.json")]
    (isolated_home / "my notes").mkdir()
    assert _bash(script, world, isolated_home, "init", str(isolated_home / "my")) == [str(isolated_home / "my notes")]  # one word


@pytest.mark.skipif(shutil.which("bash") is None, reason="needs bash")
def test_bash_never_runs_what_a_collection_name_in_the_config_holds(world: dict[str, str], isolated_home: Path, notes: Path, tmp_path: Path) -> None:
    """A hand-edited config's names are offered literally, quoted for the line: compgen -W
    would expand $(...), `...`, $VAR, ~ and {a,b} in them, running commands on TAB."""
    ran = tmp_path / "ran"
    names = [f"$(touch {ran}1)", f"`touch {ran}2`", "$HOME", "a'quote", "with space", "{a,b}~", "line\nbreak"]
    body = "".join(f"  {json.dumps(name)}:\n    path: {notes}\n" for name in names)
    (isolated_home / ".config" / "qmd" / "index.yml").write_text(f"collections:\n{body}")
    script = _script("bash", world, isolated_home)
    offered = _bash(script, world, isolated_home, "search", "-c", "")
    assert not list(tmp_path.glob("ran*"))
    assert sorted(offered) == sorted(_bash_q(n, world) for n in names if "\n" not in n), offered
    assert _bash(script, world, isolated_home, "search", "-c", "with\\ s") == ["with\\ space"]


def _bash_q(word: str, env: dict[str, str]) -> str:
    """`word` as bash's printf %q writes it (what a reply must be to stand as one word)."""
    return subprocess.run(["bash", "-c", 'printf %q "$1"', "_", word], env=env, capture_output=True, text=True, timeout=30).stdout


@pytest.mark.skipif(shutil.which("shellcheck") is None, reason="needs shellcheck")
def test_the_bash_script_passes_shellcheck(world: dict[str, str], isolated_home: Path) -> None:
    script = _script("bash", world, isolated_home)
    done = subprocess.run(["shellcheck", "-s", "bash", str(script)], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stdout


@pytest.mark.skipif(shutil.which("fish") is None, reason="needs fish")
def test_fish_completes_the_same(world: dict[str, str], isolated_home: Path) -> None:
    script = _script("fish", world, isolated_home)

    def fish(line: str) -> list[str]:
        done = subprocess.run(["fish", "--no-config", "-c", f"source {script}; complete -C {line!r}"],
                              env=world, cwd=isolated_home, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0 and not done.stderr, done.stderr
        return sorted(line.split("\t")[0] for line in done.stdout.splitlines())

    top = fish("qmd ")
    assert {"search", "health", "token", "trust", "collection"} <= set(top)
    assert fish("qmd collection ") == sorted(COLLECTION_SUBCOMMANDS)
    assert fish("qmd collection show ") == ["notes"]
    assert fish("qmd --index work collection show ") == ["worknotes"]
    assert fish("qmd search x --index=work -c ") == ["worknotes"]
    assert fish("qmd search --collection=") == ["--collection=notes"]
    assert fish("qmd --index ") == ["index", "work"]
    assert fish("qmd search --format=j") == ["--format=json"]
    assert fish("qmd search -- -c ") == []
    assert fish("qmd mcp ") == ["install", "stop"]


def _zsh_session(env: dict[str, str], home: Path, lines: list[bytes]) -> str:
    """Type `lines` into an interactive zsh (no startup files) on a pseudo-terminal; its screen."""
    pid, fd = pty.fork()
    if pid == 0:
        os.chdir(home)
        os.execvpe("zsh", ["zsh", "-f", "-i"], env)
    screen = b""
    try:
        for line in lines:
            os.write(fd, line)
            deadline = time.monotonic() + 30
            seen = len(screen)
            while time.monotonic() < deadline:  # until the shell has been quiet for a moment after answering
                ready, _, _ = select.select([fd], [], [], 1.0)
                if not ready:
                    if len(screen) > seen:
                        break
                    continue
                try:
                    chunk = os.read(fd, 4096)
                except OSError:
                    chunk = b""
                if not chunk:
                    break
                screen += chunk
    finally:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
        os.close(fd)
    return screen.decode(errors="replace")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("zsh") is None, reason="needs zsh")
def test_zsh_completes_a_collection_name_with_tab(world: dict[str, str], isolated_home: Path) -> None:
    script = _script("zsh", world, isolated_home)
    screen = _zsh_session(world, isolated_home, [
        f"autoload -U compinit && compinit -u -D && source {script}\n".encode(),
        b"qmd --index work collection sh\tworkn\t\n",  # both words completed by TAB, then run
    ])
    assert "worknotes (qmd://worknotes/)" in screen, screen[-2000:]


def test_completion_values_read_the_config_without_opening_the_index(world: dict[str, str], isolated_home: Path) -> None:
    """What the scripts ask for: the lean path answers it (no typer), from the config alone."""
    database = isolated_home / ".cache" / "qmd" / "work.sqlite"
    for suffix in ("", "-wal", "-shm"):
        Path(f"{database}{suffix}").unlink(missing_ok=True)
    for fast in ("1", "0"):
        env = dict(world, QMD_FAST=fast)
        assert run_qmd("--index", "work", "completion", "--values", "collections", env=env).stdout == "worknotes\n"
        assert run_qmd("completion", "--values", "indexes", env=env).stdout == "index\nwork\n"
    assert not database.exists()
    (isolated_home / ".config" / "qmd" / "index.yml").write_text("collections: [broken\n")
    broken = run_qmd("completion", "--values", "collections", env=world)
    assert (broken.returncode, broken.stdout, broken.stderr) == (0, "", "")  # nothing offered, nothing said
    assert run_qmd("completion", "--values", "docs", env=world).returncode == 2


def test_each_named_argument_kind_names_a_real_argument() -> None:
    import typer.main

    from qmd.cli.completion import ARGUMENT_KINDS
    from qmd.cli.main import build_app

    root = typer.main.get_command(build_app([]))
    real = set()

    def visit(command: object, path: str) -> None:
        for param in getattr(command, "params", []):
            if param.param_type_name == "argument":
                real.add(f"{path} {param.name}".strip())
        for name, sub in getattr(command, "commands", {}).items():
            visit(sub, f"{path} {name}".strip())

    visit(root, "")
    assert set(ARGUMENT_KINDS) <= real, set(ARGUMENT_KINDS) - real
