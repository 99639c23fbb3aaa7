"""install.sh says up front what the first install does and how long it takes here, then how
far it is: whole lines off a terminal (a log gets no carriage return), one line redrawn on a
terminal. Run for real with bash, against a fake venv whose `python -m pip` builds slowly (no
compiler runs) and a fake `nproc` on PATH."""

from __future__ import annotations

import os
import re
import subprocess
from pathlib import Path

import pytest

from tests.support.paths import REPO
from tests.support.terminal import on_a_terminal

FAKE_PYTHON = r"""#!/bin/sh
# python for install.sh's tests: llama_cpp is missing, pip "builds" it slowly, the rest succeeds
case "$*" in
  *"import llama_cpp"*) exit 1 ;;
  *"-m pip"*"cache list"*) if [ -n "$FAKE_CACHED" ]; then echo "/c/wheels/ab/llama_cpp_python-0.3.36-py3-none-linux_x86_64.whl"; fi; exit 0 ;;
  *"-m pip"*"install llama-cpp-python=="*)
    echo "Collecting llama-cpp-python==0.3.36"
    echo "Building wheel for llama-cpp-python (pyproject.toml): started"
    i=0
    while [ "$i" -lt "$FAKE_BUILD_S" ]; do sleep 1; echo "Building wheel for llama-cpp-python (pyproject.toml): still running..."; i=$((i + 1)); done
    echo "Successfully installed llama-cpp-python-0.3.36"
    exit "${FAKE_BUILD_RC:-0}" ;;
esac
exit 0
"""


def _setup(tmp_path: Path, cores: int) -> dict[str, str]:
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    python = venv / "bin" / "python"
    python.write_text(FAKE_PYTHON)
    python.chmod(0o755)
    tools = tmp_path / "tools"
    tools.mkdir()
    (tools / "nproc").write_text(f"#!/bin/sh\necho {cores}\n")
    (tools / "nproc").chmod(0o755)
    env = dict(os.environ)
    env.update(QMD_VENV=str(venv), PYTHON=str(python), PATH=f"{tools}:{os.environ['PATH']}", QMD_INSTALL_PROGRESS_S="1", FAKE_BUILD_S="3", TMPDIR=str(tmp_path))
    return env


def _install(env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(["bash", str(REPO / "install.sh"), "--no-demo", "--no-launcher"], env=env, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)


@pytest.mark.parametrize(("cores", "estimate"), [(2, "about 5-14 minutes on this machine's 2 cores"), (16, "about 1-2 minutes on this machine's 16 cores"), (1, "on this machine's 1 core")])
def test_the_first_build_says_what_it_does_and_how_long_it_takes_here(tmp_path: Path, cores: int, estimate: str) -> None:
    env = _setup(tmp_path, cores)
    env["FAKE_BUILD_S"] = "0"
    proc = _install(env)
    assert proc.returncode == 0, proc.stderr
    first = proc.stderr.splitlines()[0]
    assert first.startswith("==> Building llama-cpp-python==0.3.36: pip downloads it and compiles llama.cpp (C/C++) from source") and estimate in first
    assert "later installs take seconds, from pip's cache" in first


def test_off_a_terminal_progress_is_whole_lines(tmp_path: Path) -> None:
    proc = _install(_setup(tmp_path, 2))
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\033" not in proc.stderr
    ticks = [line for line in proc.stderr.splitlines() if line.startswith("    compiling llama.cpp… ")]
    assert len(ticks) >= 2, proc.stderr
    seconds = [int(m.group(1)) * 60 + int(m.group(2)) for m in (re.match(r"    compiling llama\.cpp… (\d+)m (\d\d)s", t) for t in ticks) if m]
    assert len(seconds) == len(ticks) and seconds == sorted(set(seconds)) and seconds[0] >= 1
    assert all(t.endswith(": Building wheel for llama-cpp-python (pyproject.toml): still running...") or "started" in t for t in ticks)
    assert "==> Installing qmd into" in proc.stderr  # and on it went


def test_a_wheel_in_pips_cache_is_said_to_take_seconds(tmp_path: Path) -> None:
    env = _setup(tmp_path, 2)
    env.update(FAKE_CACHED="1", FAKE_BUILD_S="0")
    proc = _install(env)
    assert proc.returncode == 0, proc.stderr
    assert proc.stderr.splitlines()[0] == "==> Installing llama-cpp-python==0.3.36 from pip's cache (the wheel built here before: a few seconds)"
    assert "compiling" not in proc.stderr and "minutes" not in proc.stderr


def test_a_failed_build_shows_pips_last_lines_and_the_log(tmp_path: Path) -> None:
    env = _setup(tmp_path, 2)
    env.update(FAKE_BUILD_S="0", FAKE_BUILD_RC="1")
    proc = _install(env)
    assert proc.returncode == 1
    assert "Successfully installed llama-cpp-python-0.3.36" in proc.stderr  # the log's tail
    assert re.search(r"install\.sh: building llama-cpp-python==0\.3\.36 failed \(full log: .*qmd-llama-build\.\w+\)", proc.stderr)


def test_on_a_terminal_progress_is_one_line_redrawn(tmp_path: Path) -> None:
    env = _setup(tmp_path, 2)  # told every second
    code, seen = on_a_terminal(["bash", str(REPO / "install.sh"), "--no-demo", "--no-launcher"], env=env)
    assert code == 0, seen
    assert re.search(r"\r    compiling llama\.cpp… 0m 0[1-3]s: Building wheel for llama-cpp-python \(pyproject\.toml\): still running\.\.\.\033\[K\r\n==> Installing qmd", seen), seen
