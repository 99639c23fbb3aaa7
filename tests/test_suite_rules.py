"""The suite's own rules: one way to start qmd in a subprocess (tests/support/run.py), and shared
fixtures registered (pytest_plugins, conftest.py) rather than imported by name."""

from __future__ import annotations

import ast
from pathlib import Path
from typing import TypeGuard

from tests.support.paths import REPO

TESTS = REPO / "tests"
RUNNER = TESTS / "support" / "run.py"


def _sources() -> list[tuple[Path, str]]:
    return [(path, path.read_text(encoding="utf-8")) for path in sorted(TESTS.rglob("*.py")) if path != RUNNER]


def _starts_qmd(node: ast.AST) -> TypeGuard[ast.List | ast.Tuple]:
    """A list or tuple display `[sys.executable, …, "-m", "qmd", …]`."""
    if not isinstance(node, (ast.List, ast.Tuple)) or not node.elts:
        return False
    first = node.elts[0]
    if not (isinstance(first, ast.Attribute) and first.attr == "executable"):
        return False
    words = [e.value if isinstance(e, ast.Constant) else None for e in node.elts]
    return any(a == "-m" and b == "qmd" for a, b in zip(words, words[1:]))


def test_only_the_runner_spells_out_how_qmd_is_started() -> None:
    found = [f"{path.relative_to(REPO)}:{node.lineno}" for path, text in _sources() for node in ast.walk(ast.parse(text)) if _starts_qmd(node)]
    assert not found, f"start qmd through tests/support/run.py (run_qmd, qmd_at, command), not by hand: {found}"


def test_fixtures_are_registered_not_imported() -> None:
    signs = ("noqa: " + "F811", "from tests.conftest " + "import", "import tests." + "conftest")  # split: this file is read too
    found = []
    for path, text in _sources():
        for number, line in enumerate(text.splitlines(), 1):
            if any(sign in line for sign in signs):
                found.append(f"{path.relative_to(REPO)}:{number}")
    assert not found, f"register shared fixtures (pytest_plugins in tests/conftest.py, or a folder's conftest.py): {found}"
