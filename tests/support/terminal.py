"""Run a command on a real pseudo-terminal, as a person at a terminal would."""

from __future__ import annotations

import fcntl
import os
import pty
import select
import struct
import subprocess
import termios
import time
from collections.abc import Mapping, Sequence
from pathlib import Path


def on_a_terminal(
    argv: Sequence[str], *, env: Mapping[str, str] | None = None, cwd: Path | str | None = None, answer: tuple[bytes, bytes] | None = None,
    only_stdout: bool = False, columns: int | None = None, timeout: float = 120,
) -> tuple[int, str]:
    """Run `argv` to the end on a pty; returns (exit code, everything it wrote there, as the
    terminal got it: `\\n` arrives as `\\r\\n`).

    stdin, stdout and stderr are the terminal, unless `only_stdout` (stdin and stderr are
    then /dev/null). `answer` = (prompt, reply): type the reply once the prompt shows.
    `columns`: the terminal's width. `env`: the child's whole environment (default: the
    test's). A command still running after `timeout` is killed.
    """
    master, slave = pty.openpty()
    if columns is not None:
        fcntl.ioctl(slave, termios.TIOCSWINSZ, struct.pack("HHHH", 24, columns, 0, 0))
    quiet = subprocess.DEVNULL if only_stdout else slave
    proc = subprocess.Popen(list(argv), env=None if env is None else dict(env), cwd=cwd, stdin=quiet, stdout=slave, stderr=quiet, start_new_session=True)
    os.close(slave)
    output = b""
    deadline = time.monotonic() + timeout
    try:
        while time.monotonic() < deadline:
            ready, _, _ = select.select([master], [], [], 0.2)
            if not ready:
                if proc.poll() is not None:
                    break
                continue
            try:
                chunk = os.read(master, 65536)
            except OSError:  # EIO: the child closed its end
                break
            if not chunk:
                break
            output += chunk
            if answer is not None and answer[0] in output:
                os.write(master, answer[1])
                answer = None
    finally:
        if proc.poll() is None and time.monotonic() >= deadline:
            proc.kill()
        proc.wait(timeout=30)
        os.close(master)
    return proc.returncode, output.decode("utf-8", "replace")
