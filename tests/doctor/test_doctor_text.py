"""`qmd doctor`'s text as a person sees it: ✓/⚠/✗ in colour on a terminal (none with NO_COLOR or
when piped), and lines that fit the terminal's width (long ones wrapped with an indent)."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import fake_systemctl
from tests.support.run import qmd_env, qmd_on_pty, run_qmd

ANSI = re.compile(r"\x1b\[[0-9;]*m")
Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def long_lines(cli: Cli, indexed: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """A setup whose doctor report has lines far over 80 columns (an enrolled repository with no
    systemd to run the updater: the fix names the daemon and a crontab line); returns that fix."""
    assert cli("hooks", "install", str(indexed))[0] == 0
    fake_systemctl(tmp_path, monkeypatch, "container", tools=("git",))
    from updater import service

    return service.run_elsewhere()


def test_piped_output_is_neither_coloured_nor_wrapped(long_lines: str) -> None:
    proc = run_qmd("doctor", "--quick", env=qmd_env({"COLUMNS": ""}))
    assert proc.returncode == 0, proc.stderr
    assert not ANSI.search(proc.stdout)
    assert f"      fix: {long_lines}\n" in proc.stdout  # one line a script can grep


def test_lines_fit_80_columns(long_lines: str) -> None:
    proc = run_qmd("doctor", "--quick", env=qmd_env({"COLUMNS": "80"}))
    assert proc.returncode == 0, proc.stderr
    too_long = [line for line in proc.stdout.splitlines() if len(line) > 80]
    assert not too_long, too_long
    assert not ANSI.search(proc.stdout)  # COLUMNS alone does not make a pipe a terminal
    block = proc.stdout.split("updater: no updater is running", 1)[1].split("\n\n", 1)[0]
    fix = block.split("\n      fix: ", 1)[1]
    lines = fix.splitlines()
    assert len(lines) > 1 and all(line.startswith(" " * 11) for line in lines[1:])  # wrapped under its own start
    assert "".join(fix.split()) == "".join(long_lines.split())  # nothing lost (a word longer than a line is cut)


def test_marks_are_coloured_on_a_terminal_and_lines_fit_it(long_lines: str) -> None:
    code, out = qmd_on_pty("doctor", "--quick", env=qmd_env({"COLUMNS": "", "NO_COLOR": "", "TERM": "xterm"}), columns=72)
    assert code == 0, out
    assert "\x1b[32m✓\x1b[0m apsw" in out and "\x1b[33m⚠\x1b[0m updater" in out
    plain = ANSI.sub("", out)
    too_long = [line for line in plain.splitlines() if len(line) > 72]
    assert not too_long, too_long


def test_no_color_turns_colour_off_on_a_terminal(long_lines: str) -> None:
    code, out = qmd_on_pty("doctor", "--quick", env=qmd_env({"COLUMNS": "", "NO_COLOR": "1", "TERM": "xterm"}), columns=72)
    assert code == 0, out
    assert not ANSI.search(out) and "  ✓ apsw" in out
