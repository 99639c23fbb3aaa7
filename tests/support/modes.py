"""qmd run with file modes binding, for the tests of a hostile environment of modes (design §7:
one clear line naming the fix, exit 1, nothing lost or half-written; exit 3 "this is a bug" is
for bugs only). As root (CI's user) modes bind only without the capabilities that override
them: `bound_by_modes` (tests/support/run.py) drops them through setpriv."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.support.run import bound_by_modes, command, qmd_env


def qmd_bound(*args: str, cwd: Path | None = None) -> tuple[int, str, str]:
    """`qmd ARGS` with file modes binding (no warm server to hand it to): (exit code, stdout, stderr)."""
    proc = subprocess.run(bound_by_modes(command(*args)), env=qmd_env({"QMD_SERVER": "off"}), cwd=cwd, capture_output=True, text=True, timeout=180)
    return proc.returncode, proc.stdout, proc.stderr


def one_clear_error(code: int, out: str, err: str, fix: str) -> str:
    """Exit 1, an `Error:` line and a `hint:` line naming `fix`; no traceback, no 'this is a
    bug'. Returns the Error line."""
    assert code == 1, (code, out, err)
    assert "Traceback" not in err and "bug" not in err and "Unexpected" not in err, err
    lines = err.strip().splitlines()
    assert len(lines) == 2 and lines[0].startswith("Error: ") and lines[1].startswith("hint: "), err
    assert fix in lines[1], err
    return lines[0]


def everything(folder: Path) -> dict[str, bytes]:
    """Every file under `folder` with its bytes (read as root: modes do not bind the test itself)."""
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def indexed_home(home: Path, notes: Path) -> Path:
    """`home` with its default index holding `notes` (collection 'notes'); returns the config folder."""
    code, out, err = qmd_bound("collection", "add", str(notes), "--name", "notes", cwd=home)
    assert code == 0, err
    return home / ".config" / "qmd"


@contextmanager
def moded(path: Path, mode: int, after: int) -> Iterator[Path]:
    """`path` at `mode` for the body, at `after` once it ends, whatever happens."""
    path.chmod(mode)
    try:
        yield path
    finally:
        path.chmod(after)
