"""The build id covers every source file of the qmd package (doctor tells stale servers by it)."""

from __future__ import annotations

from pathlib import Path

import qmd
from qmd.core.buildinfo import _PACKAGE, source_digest


def test_the_digest_covers_the_whole_package(tmp_path: Path) -> None:
    assert _PACKAGE == Path(qmd.__file__).resolve().parent
    import shutil

    copy = tmp_path / "qmd"
    shutil.copytree(_PACKAGE, copy, ignore=shutil.ignore_patterns("__pycache__"))
    before = source_digest(copy)
    with open(copy / "serve" / "answers.py", "a") as fh:  # a room far from qmd/core
        fh.write("\n# changed\n")
    assert source_digest(copy) != before
