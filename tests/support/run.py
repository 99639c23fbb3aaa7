"""The one way a test runs the real `qmd` in a subprocess (`python -m qmd`, the interpreter
running the tests, so the checkout on PYTHONPATH is what runs).

`run_qmd(*args)` runs it to the end and returns the CompletedProcess (text, unless text=False);
`qmd_at(cwd, *args)` runs it from a project folder in `local_env()` (no warm server, no trust
granted by the environment); `command(*args)` is the argv for a test that needs a Popen (a
server, a process to signal); `qmd_on_pty(*args)` runs it with stdout on a terminal of a given
width (colours, wrapping); `qmd_on_terminal(cwd, *args, answer=)` runs it on a terminal (stdin
too) and answers its `[y/N]` question; `qmd_on_path(folder)` writes a `qmd` executable there,
for a shell that runs `qmd` itself (the completion scripts).
`env` is the child's whole environment; by default the test's own, which the autouse
`isolated_home` fixture has pointed inside tmp_path. The working directory is by default the
child's HOME (the isolated home), never the checkout: a `.qmd/` there would be adopted, and
`python -m qmd` would import the checkout's `qmd` ahead of a PYTHONPATH the test set.
stdin is /dev/null unless `input` is given; `timeout` only catches a hang.
"""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Literal, overload

QMD = (sys.executable, "-m", "qmd")


def command(*args: str) -> list[str]:
    """The argv that starts `qmd ARGS`."""
    return [*QMD, *args]


def bound_by_modes(argv: list[str]) -> list[str]:
    """`argv` run so that file modes bind it: as root (CI's user), without the capabilities that
    override them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH), through util-linux's setpriv; as anyone
    else, unchanged. Skips the calling test where root has no setpriv."""
    import shutil

    if os.geteuid() != 0:
        return argv
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        import pytest

        pytest.skip("running as root without setpriv: file modes cannot be made to bind")
    drop = "-dac_override,-dac_read_search"
    return [setpriv, f"--bounding-set={drop}", f"--inh-caps={drop}", *argv]


def qmd_on_path(folder: Path) -> Path:
    """A `qmd` executable in `folder` running this qmd (put `folder` first on PATH); returns `folder`."""
    import shlex

    folder.mkdir(parents=True, exist_ok=True)
    script = folder / "qmd"
    script.write_text("#!/bin/sh\nexec " + shlex.join(command()) + ' "$@"\n')
    script.chmod(0o755)
    return folder


def qmd_env(extra: Mapping[str, str] | None = None) -> dict[str, str]:
    """The test's (isolated) environment, plus `extra`."""
    env = dict(os.environ)
    env.update(extra or {})
    return env


def local_env(**extra: str) -> dict[str, str]:
    """The test's environment for project-local indexes: no warm server to hand the call to
    (QMD_SERVER=off), no trust granted through QMD_TRUST*, a git identity for commits; plus `extra`."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("QMD_TRUST")}
    env.update(QMD_SERVER="off", GIT_AUTHOR_NAME="t", GIT_AUTHOR_EMAIL="t@e", GIT_COMMITTER_NAME="t", GIT_COMMITTER_EMAIL="t@e")
    env.update(extra)
    return env


@overload
def run_qmd(*args: str, env: Mapping[str, str] | None = ..., cwd: Path | str | None = ..., input: str | None = ...,
        timeout: float = ..., text: Literal[True] = ...) -> subprocess.CompletedProcess[str]: ...
@overload
def run_qmd(*args: str, env: Mapping[str, str] | None = ..., cwd: Path | str | None = ..., input: str | None = ...,
        timeout: float = ..., text: Literal[False]) -> subprocess.CompletedProcess[bytes]: ...
def run_qmd(*args: str, env: Mapping[str, str] | None = None, cwd: Path | str | None = None, input: str | None = None,
        timeout: float = 300, text: bool = True) -> subprocess.CompletedProcess[str] | subprocess.CompletedProcess[bytes]:
    """Run `qmd ARGS` to the end; stdout and stderr captured."""
    environ = qmd_env() if env is None else dict(env)
    if cwd is None and os.path.isdir(environ.get("HOME", "")):
        cwd = environ["HOME"]
    stdin = None if input is not None else subprocess.DEVNULL
    return subprocess.run(command(*args), env=environ, cwd=cwd, input=input, stdin=stdin, capture_output=True, text=text, timeout=timeout)


MEMORY_CAP = 3 << 30  # what run_capped gives qmd: a read that never ends fails fast (MemoryError) instead of filling the machine


def run_capped(*args: str, cwd: Path | str, env: Mapping[str, str] | None = None, timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """`qmd ARGS` run from `cwd` with its address space capped at MEMORY_CAP (stdin empty): for
    inputs that once made qmd read without end (a link to /dev/zero, a sparse file of gigabytes)."""
    import resource

    def capped() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (MEMORY_CAP, MEMORY_CAP))

    environ = qmd_env() if env is None else dict(env)
    return subprocess.run(command(*args), env=environ, cwd=cwd, capture_output=True, text=True, timeout=timeout, preexec_fn=capped, stdin=subprocess.DEVNULL)


def qmd_at(cwd: Path | str, *args: str, input: str | None = None, timeout: float = 300, **extra: str) -> subprocess.CompletedProcess[str]:
    """`qmd ARGS` run from the project folder `cwd`, in `local_env(**extra)`."""
    return run_qmd(*args, env=local_env(**extra), cwd=cwd, input=input, timeout=timeout)


def local_project(root: Path) -> Path:
    """A project at `root`: docs/a.md, `qmd init`, its `docs` collection added and indexed; returns `root`."""
    (root / "docs").mkdir(parents=True)
    (root / "docs" / "a.md").write_text("# A\n\nalpha words\n")
    for argv in (("init",), ("collection", "add", "docs", "--name", "docs"), ("update",)):
        done = qmd_at(root, *argv)
        assert done.returncode == 0, done.stderr
    return root


def qmd_on_pty(*args: str, env: Mapping[str, str] | None = None, columns: int = 80, timeout: float = 300) -> tuple[int, str]:
    """Run `qmd ARGS` with its stdout on a pseudo-terminal `columns` wide (what a person's
    terminal gives it: isatty, a window size); returns (exit code, what it printed there,
    with the terminal's \\r\\n read back as \\n). stderr is dropped."""
    from tests.support.terminal import on_a_terminal

    environ = qmd_env() if env is None else dict(env)
    cwd = environ["HOME"] if os.path.isdir(environ.get("HOME", "")) else None
    code, output = on_a_terminal(command(*args), env=environ, cwd=cwd, only_stdout=True, columns=columns, timeout=timeout)
    return code, output.replace("\r\n", "\n")


def qmd_on_terminal(cwd: Path, *args: str, answer: str, env: Mapping[str, str] | None = None, timeout: float = 60) -> tuple[int, str]:
    """Run `qmd ARGS` from `cwd` on a real pseudo-terminal, answer its `[y/N]` question with
    `answer`; returns (exit code, everything it printed). `env`: as for run_qmd."""
    from tests.support.terminal import on_a_terminal

    environ = qmd_env() if env is None else dict(env)
    return on_a_terminal(command(*args), env=environ, cwd=cwd, answer=(b"[y/N]", answer.encode() + b"\n"), timeout=timeout)
