"""The lean entry path (qmd/cli/fast.py) and the typer app give the same stdout, stderr and
exit code for every command line; whatever the fast path does not understand goes to typer."""

from __future__ import annotations

import errno
import os
import re
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

import pytest

from qmd.cli import fast
from qmd.cli.main import main as typer_main
from qmd.core.errors import QmdError
from tests.support.run import qmd_env, run_qmd

Outcome = tuple[int, str, str]

# Command lines the fast path runs itself ({notes}: the notes folder).
ROUTED = [
    ["search", "rollback"],
    ["search", "--json", "rollback"],
    ["search", "rollback", "--csv"],
    ["search", "rollback", "--md"],
    ["search", "rollback", "--xml"],
    ["search", "rollback", "--files"],
    ["search", "rollback", "--format", "json"],
    ["search", "rollback", "--format=xml"],
    ["search", "--json", "--format", "json", "rollback"],  # the same format twice is one format
    ["search", "-n", "1", "back"],
    ["search", "-n1", "restore", "--json"],
    ["search", "-n", "007", "the"],
    ["search", "-n", "99999999999999", "the", "--files"],
    ["search", "--all", "the"],
    ["search", "--all", "-n", "1", "the", "--json"],
    ["search", "--min-score", "0.5", "rollback", "--json"],
    ["search", "--min-score", ".2", "rollback"],
    ["search", "--min-score", "1.", "rollback"],
    ["search", "--min-score", "5", "rollback"],  # a QmdError from the store: exit 1
    ["search", "--full", "rollback"],
    ["search", "--full", "--line-numbers", "rollback", "--json"],
    ["search", "--line-numbers", "restore"],
    ["search", "-c", "notes", "rollback"],
    ["search", "-cnotes", "rollback", "--json"],
    ["search", "--collection=notes", "--collection", "notes", "rollback"],
    ["search", "-c", "nope", "rollback"],  # unknown collection: exit 1 with a hint
    ["search", "--collection=", "rollback"],
    ["search", "--full-path", "rollback", "--json"],
    ["search", "--full-path", "rollback", "--files"],
    ["search", "how", "do", "we", "restore", "postgres?"],
    ["search", '"load balancer" -pg_dump'],
    ["search", "--", "-rollback"],
    ["search", "--", "--json", "rollback"],
    ["search", "pg_restore -kubernetes"],
    ["search", "roll\x00back"],
    ["search", "\udcff\udcfe"],  # undecodable bytes in argv (surrogateescape)
    ["search", "<&>\"'"],
    ["search", "-"],
    ["search", "x" * 5000, "--json"],
    ["search", "rollback", "--index", "other"],  # --index after the command: that index (empty)
    ["search", "--index=other", "rollback"],
    ["--index", "other", "search", "rollback"],
    ["--index=other", "search", "rollback"],
    ["--index", "", "search", "rollback"],
    ["--index", "bad name!", "search", "rollback"],  # invalid index name: exit 1
    ["search", "--index", "../x", "rollback"],
    ["get", "runbooks/deploy.md"],
    ["get", "qmd://notes/runbooks/deploy.md:2:2"],
    ["get", "notes/runbooks/deploy.md", "--json"],
    ["get", "runbooks/deploy.md", "--raw"],
    ["get", "runbooks/deploy.md", "--no-line-numbers", "--md"],
    ["get", "runbooks/deploy.md", "--line-numbers", "--xml", "--full-path"],
    ["get", "runbooks/deploy.md", "--from", "2", "-l", "1"],
    ["get", "runbooks/deploy.md", "--from=3", "--lines=2", "--files"],
    ["get", "runbooks/deploy.md", "--from", "0"],
    ["get", "runbooks/deploy.md", "-l0"],
    ["get", "runbooks/deplo.md"],  # not found: similar paths
    ["get", "#ffffff"],
    ["get", "{notes}/ideas.md"],
    ["get", "/etc/passwd"],
    ["get", "runbooks/deploy.md", "--index", "other"],
    ["status"],
    ["status", "--json"],
    ["--index", "other", "status"],
    ["search", "--local", "rollback"],
    ["vsearch", "rollback"],  # no embed model here: the same error both ways
    ["vsearch", "rollback", "--json", "--local", "-n", "2"],
    ["vsearch", "--expand", "rollback", "--files"],
    ["--index", "other", "vsearch", "rollback"],
    ["query", "rollback"],
    ["query", "rollback", "--json", "-n", "2"],
    ["query", "lex: rollback\nvec: undo a release", "--xml"],
    ["query", "-C", "5", "--no-rerank", "--no-expand", "restore", "--files"],
    ["query", "--expand", "--intent", "backups", "restore", "--md", "--local"],
    ["query", "--all", "--full", "--line-numbers", "restore"],
    ["query", "--candidates=3", "-c", "notes", "--full-path", "restore", "--csv"],
    ["query", "-c", "nope", "restore"],
    # the options the lean path reads from the table generated from typer (fastspec.json)
    ["vsearch", "rollback", "--filter", "{}"],
    ["search", "--filter", '{"key": "status", "operator": "eq", "value": "x"}', "rollback", "--json"],
    ["search", "--filter", "{not json", "rollback"],
    ["search", "--since", "7d", "--until", "2099-01-01", "rollback"],
    ["search", "--match", "all", "rollback back", "--json"],
    ["query", "--chunk-strategy", "auto", "--no-rerank", "restore"],
    ["query", "--filter", "{}", "--no-expand", "restore", "--json"],
    # --no-gpu anywhere: the original's scripts pass it; a note on stderr, as typer prints it
    ["--no-gpu", "search", "rollback"],
    ["search", "rollback", "--no-gpu", "--json"],
    ["status", "--no-gpu"],
    ["get", "runbooks/deploy.md", "--no-gpu", "--index", "other"],
    # what the completion scripts ask for while a word is completed
    ["completion", "--values", "collections"],
    ["completion", "--values=indexes"],
    ["--index", "other", "completion", "--values", "collections"],
    ["completion", "--values", "collections", "--index", "bad name!"],
]

# Command lines the fast path leaves to typer (help, usage errors, other commands, unusual forms).
FALLBACK = [
    [],
    ["--help"],
    ["-h"],
    ["--version"],
    ["search"],
    ["search", "--help"],
    ["search", "rollback", "-h"],
    ["search", "-n", "0", "rollback"],
    ["search", "-n", "-1", "rollback"],
    ["search", "-n", "abc", "rollback"],
    ["search", "-n", "\uff15", "rollback"],  # a fullwidth digit: click's int() takes it
    ["search", "-n", "1_0", "the"],
    ["search", "-n=3", "rollback"],
    ["search", "-n"],
    ["search", "rollback", "-n"],
    ["search", "--min-score", "nan", "rollback"],
    ["search", "--min-score", "1e-3", "rollback"],
    ["search", "--min-score", "-0.5", "rollback"],
    ["search", "--min-score"],
    ["search", "--bogus", "rollback"],
    ["search", "-x", "rollback"],
    ["search", "rollback", "-rollback"],
    ["search", "--all=1", "rollback"],
    ["search", "--json=yes", "rollback"],
    ["search", "rollback", "--json", "--csv"],
    ["search", "rollback", "--format", "yaml"],
    ["search", "rollback", "--format", "json", "--xml"],
    ["search", "-c", "-notes", "rollback"],
    ["search", "rollback", "--index"],
    ["--index", "a", "--index", "b", "search", "rollback"],
    ["--index", "a", "search", "rollback", "--index", "b"],
    ["--bogus", "search", "rollback"],
    ["search", "-n", "0", "rollback", "--no-gpu"],  # the note, then typer's usage error
    ["--no-gpu", "--no-gpu", "search", "rollback"],
    ["serach", "rollback"],
    ["vsearch"],
    ["vsearch", "--bogus", "rollback"],
    ["search", "--filter", "", "rollback"],  # an empty filter: the command's usage error, reported by typer
    ["search", "--match", "some", "rollback"],
    ["query", "--chunk-strategy", "ast", "rollback"],
    ["query"],
    ["search", "", "--json"],  # an empty query: the command's usage error, reported by typer
    ["search", " \t "],
    ["vsearch", ""],
    ["query", "\n"],
    ["query", "-C", "0", "rollback"],
    ["query", "--intent"],
    ["query", "--no-rerank=1", "rollback"],
    ["ls"],
    ["collection", "list"],
    ["get"],
    ["get", "a", "b"],
    ["get", "runbooks/deploy.md", "--from", "x"],
    ["get", "runbooks/deploy.md", "-l", "-1"],
    ["get", "runbooks/deploy.md", "--raw=1"],
    ["status", "extra"],
    ["status", "--json=1"],
    ["status", "--help"],
    ["completion", "bash"],
    ["completion"],
    ["completion", "--values", "docs"],
    ["completion", "--values", "collections", "bash"],
]


@pytest.fixture
def indexed(notes: Path, capsys: pytest.CaptureFixture[str]) -> Path:
    assert typer_main(["collection", "add", str(notes), "--name", "notes"]) == 0
    capsys.readouterr()
    return notes


def _run(entry: Callable[[list[str]], int], argv: list[str], capsys: pytest.CaptureFixture[str]) -> Outcome:
    capsys.readouterr()
    try:
        code = entry(list(argv))
    except SystemExit as exc:  # what the console script would turn into the exit status
        code = exc.code if isinstance(exc.code, int) else 1
    captured = capsys.readouterr()
    return code, captured.out, captured.err


def _comparable(outcome: Outcome) -> Outcome:
    """Ages ('3s ago') and crash-log names may differ between two runs a second apart."""
    code, out, err = outcome
    ages = re.compile(r"\b\d+[smhd] ago\b")
    logs = re.compile(r"crash-\d{8}-\d{6}-\d+\.log")
    return code, ages.sub("N ago", out), logs.sub("crash.log", ages.sub("N ago", err))


def _argv(argv: list[str], notes: Path) -> list[str]:
    return [a.replace("{notes}", str(notes)) for a in argv]


@pytest.mark.parametrize("argv", ROUTED, ids=repr)
def test_a_routed_command_line_prints_what_typer_prints(argv: list[str], indexed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(argv, indexed)
    assert fast.route(argv) is not None, "the fast path should run this command line itself"
    lean = _run(fast.main, argv, capsys)
    typer = _run(typer_main, argv, capsys)
    assert _comparable(lean) == _comparable(typer)


@pytest.mark.parametrize("argv", FALLBACK, ids=repr)
def test_anything_else_goes_to_typer(argv: list[str], indexed: Path, capsys: pytest.CaptureFixture[str]) -> None:
    argv = _argv(argv, indexed)
    assert fast.route(argv) is None, "the fast path must leave this command line to typer"
    assert _comparable(_run(fast.main, argv, capsys)) == _comparable(_run(typer_main, argv, capsys))


def test_the_same_before_any_index_exists(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["search", "rollback"], ["get", "x.md"], ["status"], ["status", "--json"]):
        assert fast.route(argv) is not None
        assert _comparable(_run(fast.main, argv, capsys)) == _comparable(_run(typer_main, argv, capsys)), argv


def test_errors_inside_a_routed_command_map_to_the_same_exit_codes(
    indexed: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Ctrl-C (130, silent inside a command), EOF (130, 'Interrupted.'), a bug (3, crash log)."""
    import qmd.store.store

    cases = [
        (KeyboardInterrupt(), 130), (EOFError(), 130), (RuntimeError("boom"), 3), (QmdError("nope", "try this"), 1),
        (BrokenPipeError(), 0), (BrokenPipeError(errno.EPIPE, "Broken pipe"), 1),  # typer: an EPIPE inside a command is exit 1
    ]
    for exc, expected in cases:
        def fail(*args: object, **kwargs: object) -> None:
            raise exc

        monkeypatch.setattr(qmd.store.store.Store, "answer", fail)
        lean = _comparable(_run(fast.main, ["search", "rollback"], capsys))
        typer = _comparable(_run(typer_main, ["search", "rollback"], capsys))
        assert lean == typer and lean[0] == expected, exc


def _subprocess(argv: list[str], *, fast_path: bool, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[bytes]:
    environ = qmd_env(env)
    environ["QMD_FAST"] = "1" if fast_path else "0"
    return run_qmd(*argv, env=environ, timeout=60, text=False)


def _timeless(out: bytes) -> bytes:
    """Output without its ages ("Updated: 3s ago"): a second may pass between the two runs."""
    import re

    return re.sub(rb"\b\d+(?:\.\d+)?\s?(?:s|m|h|d|min|mins|seconds?|minutes?|hours?|days?) ago\b", b"AGO", out)


@pytest.mark.parametrize(
    "argv",
    [["search", "rollback", "--json"], ["search", "restore", "-n", "1", "--index", "other"], ["search", "rollback", "--no-gpu"], ["search", "-n", "0", "x"], ["search"], ["get", "runbooks/deploy.md"], ["status"], ["search", "--help"]],
    ids=repr,
)
def test_the_console_script_with_and_without_the_fast_path(argv: list[str], indexed: Path) -> None:
    lean, typer = _subprocess(argv, fast_path=True), _subprocess(argv, fast_path=False)
    assert (lean.returncode, _timeless(lean.stdout), lean.stderr) == (typer.returncode, _timeless(typer.stdout), typer.stderr)


def test_a_routed_search_never_imports_typer_or_yaml(indexed: Path) -> None:
    code = (
        "import sys\n"
        "import qmd.core.stamps\n"
        "qmd.core.stamps.RACY_SECONDS = 0.0  # the config was written a moment ago\n"
        "from qmd.cli.fast import main\n"
        "assert main(['search', 'rollback', '--json']) == 0\n"
        "loaded = sorted(m for m in ('typer', 'click', 'yaml', 'typing', 'dataclasses', 'llama_cpp') if m in sys.modules)\n"
        "print('LOADED', loaded)\n"
    )
    env = qmd_env()
    subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, timeout=60)  # parses the config once
    proc = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert "LOADED []" in proc.stdout, proc.stdout  # each of these costs milliseconds of every search


@pytest.mark.parametrize(("argv", "collected"), [(["search", "rollback"], False), (["status"], False), (["update"], True), (["collection", "list"], True)], ids=repr)
def test_the_collector_is_off_only_for_a_routed_command(argv: list[str], collected: bool, indexed: Path) -> None:
    """The console script holds the cyclic collector off for a routed command (one search,
    get or status: ≈ 7% of its start-up); the typer commands, the long ones among them
    (update, embed, the HTTP server), run with it on."""
    code = (
        "import atexit, gc, sys\n"
        "atexit.register(lambda: sys.stderr.write(f'COLLECTED {gc.isenabled()}\\n'))\n"
        f"sys.argv = ['qmd', *{argv!r}]\n"
        "from qmd.cli.fast import run\n"
        "run()\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=qmd_env(), capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.rstrip().endswith(f"COLLECTED {collected}"), proc.stderr


@pytest.mark.parametrize("module", ["qmd", "qmd.store.store"])
def test_the_public_api_and_the_store_import_cheaply(module: str) -> None:
    """`import qmd` and the Store module (the MCP server's first status) load no typing,
    dataclasses, yaml or hashlib."""
    code = f"import sys, {module}; print(sorted(m for m in ('typing', 'dataclasses', 'yaml', 'hashlib', 'inspect', 'typer') if m in sys.modules))"
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0 and proc.stdout.strip() == "[]", proc.stdout + proc.stderr


def test_qmd_fast_0_turns_the_fast_path_off(monkeypatch: pytest.MonkeyPatch) -> None:
    called: list[list[str]] = []
    monkeypatch.setattr("qmd.cli.main.main", lambda argv: called.append(argv) or 0)
    monkeypatch.setenv("QMD_FAST", "0")
    assert fast.main(["status"]) == 0 and called == [["status"]]
    monkeypatch.delenv("QMD_FAST")
    assert os.environ.get("QMD_FAST") is None
