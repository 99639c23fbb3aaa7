"""The layout table (docs/development.md) is the tree: every top-level entry and every package
folder has its row, every row names a folder or file that is there, every name a row gives in
backticks (`fileio`, `base.py`, `sqlite/`) is there, and a package's row names each of its
modules and sub-packages."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
LAYOUT = REPO / "docs" / "development.md"
_ROW = re.compile(r"^\| `([^`]+)` \| (.+) \|$")
_NAME = re.compile(r"`([a-z_]+|[a-z_][a-z_-]*(?=/`))(\.py|/)?`")  # a hyphen only in a folder name (`agent-skills/`)
_UNLISTED_TOP = {"README.md"}  # the README is the front page, not a room


def layout_rows(text: str) -> dict[str, str]:
    """folder or file → description, from the layout table's rows."""
    return {m.group(1): m.group(2) for line in text.splitlines() if (m := _ROW.match(line))}


def packages() -> set[str]:
    """Every folder of Python code the project ships or runs: qmd/ and its sub-packages, and the top-level ones."""
    tops = {"qmd/", "hooks/", "updater/", "doctor/", "guards/", "tests/", "bench/"}
    subs = {p.relative_to(REPO).as_posix() + "/" for p in (REPO / "qmd").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return tops | subs


def top_level(repo: Path) -> set[str]:
    """What the repository holds at its top (tracked or not ignored): `name/` for a folder, `name` for a file."""
    try:
        listed = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=repo, capture_output=True, text=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        pytest.skip("git cannot list the checkout's files")
    out = set()
    for path in listed.splitlines():
        first, sep, _ = path.partition("/")
        if (repo / path).exists():  # deleted but not yet committed: not there
            out.add(first + "/" if sep else first)
    return {name for name in out if name not in _UNLISTED_TOP and not (name.startswith(".") and not name.endswith("/"))}


def missing_names(folder: Path, description: str) -> list[str]:
    """Names in backticks (`fileio`, `backend.py`, `sqlite/`, `run`) that are neither a module, a file nor a folder in `folder`."""
    gone = []
    for name, suffix in _NAME.findall(description):
        if suffix == "/" and not (folder / name).is_dir():
            gone.append(name + "/")
        elif suffix != "/" and not (folder / f"{name}.py").exists() and not (folder / (name + suffix)).exists():
            gone.append(name + suffix)
    return gone


def unnamed(folder: Path, description: str, rows: set[str]) -> list[str]:
    """What `folder` holds that its row does not name: each sub-folder without a row of its own,
    and, in a Python package, each module (`__init__`, `__main__` aside)."""
    named = {name for name, _ in _NAME.findall(description)}
    out = []
    for entry in sorted(folder.iterdir()):
        rel = entry.relative_to(REPO).as_posix()
        if entry.is_dir() and not entry.name.startswith((".", "__")) and rel + "/" not in rows and entry.name not in named:
            out.append(rel + "/")
        elif entry.suffix == ".py" and (folder / "__init__.py").exists() and entry.stem not in ("__init__", "__main__") and entry.stem not in named:
            out.append(rel)
    return out


def test_the_layout_table_is_the_tree() -> None:
    rows = layout_rows(LAYOUT.read_text(encoding="utf-8"))
    assert sorted(packages() - set(rows)) == [], "a package folder without a row in the layout table (docs/development.md)"
    assert sorted(top_level(REPO) - set(rows)) == [], "a top-level folder or file without a row in the layout table"
    assert sorted(name for name in rows if not (REPO / name).exists()) == [], "a layout row naming what is not there"
    folders = {name: text for name, text in rows.items() if name.endswith("/")}
    stale = {folder: gone for folder, text in folders.items() if (gone := missing_names(REPO / folder, text))}
    assert stale == {}, "a layout row naming a module that is not there"
    left_out = {folder: names for folder, text in folders.items() if (names := unnamed(REPO / folder, text, set(rows)))}
    assert left_out == {}, "a module or sub-folder its folder's row does not name"


def test_the_layout_check_sees_a_stale_row(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "run").write_text("")
    (tmp_path / "sub").mkdir()
    assert missing_names(tmp_path, "one (`a`), `a.py`, `run`, `sub/`, `b`, `gone/`, `qmd guard`") == ["b", "gone/"]
    assert layout_rows("| `x/` | what it holds |\n| `setup.cfg` | a file |\n| folder | text |") == {"x/": "what it holds", "setup.cfg": "a file"}


def test_the_layout_check_sees_what_a_row_leaves_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(f"{__name__}.REPO", tmp_path)
    package = tmp_path / "pkg"
    (package / "inner").mkdir(parents=True)
    for name in ("__init__.py", "named.py", "new.py"):
        (package / name).write_text("")
    (package / "__pycache__").mkdir()
    assert unnamed(package, "`named`", set()) == ["pkg/inner/", "pkg/new.py"]
    assert unnamed(package, "`named`, `new`, `inner/`", set()) == []
    assert unnamed(package, "`named`, `new`", {"pkg/inner/"}) == []
    (package / "__init__.py").unlink()  # not a package: its modules need no names (tests/, bench/)
    assert unnamed(package, "`inner/`", set()) == []


def test_the_layout_check_sees_a_new_top_level_folder(tmp_path: Path) -> None:
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    for path in ("README.md", ".gitignore", "tool.sh", "src/x.py", ".ci/run"):
        (tmp_path / path).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / path).write_text("")
    assert top_level(tmp_path) == {"tool.sh", "src/", ".ci/"}
