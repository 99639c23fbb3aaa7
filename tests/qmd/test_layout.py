"""The README's layout table is the tree: every package folder has its row, every row names
a folder that exists, and every module a row names by its file or module name is there."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
_ROW = re.compile(r"^\| `([^`]+/)` \| (.+) \|$")
_NAME = re.compile(r"`([a-z_]+)(\.py|/)?`")


def layout_rows(readme: str) -> dict[str, str]:
    """folder → description, from the README's layout table."""
    return {m.group(1): m.group(2) for line in readme.splitlines() if (m := _ROW.match(line))}


def packages() -> set[str]:
    """Every folder of Python code the project ships or runs: qmd/'s sub-packages and the top-level ones."""
    tops = {"hooks/", "updater/", "doctor/", "guards/", "tests/", "bench/"}
    subs = {p.relative_to(REPO).as_posix() + "/" for p in (REPO / "qmd").iterdir() if p.is_dir() and (p / "__init__.py").exists()}
    return tops | subs


def missing_names(folder: Path, description: str) -> list[str]:
    """Names in backticks (`fileio`, `backend.py`, `sqlite/`) that are neither a module nor a folder in `folder`."""
    gone = []
    for name, suffix in _NAME.findall(description):
        if suffix == "/" and not (folder / name).is_dir():
            gone.append(name + "/")
        elif suffix != "/" and not (folder / f"{name}.py").exists() and not (folder / name).is_dir():
            gone.append(name + suffix)
    return gone


def test_the_readme_layout_table_is_the_tree() -> None:
    rows = layout_rows((REPO / "README.md").read_text(encoding="utf-8"))
    assert sorted(packages() - set(rows)) == [], "a package folder without a row in the README's layout table"
    assert sorted(folder for folder in rows if not (REPO / folder).is_dir()) == [], "a layout row naming a folder that is not there"
    stale = {folder: gone for folder, text in rows.items() if (gone := missing_names(REPO / folder, text))}
    assert stale == {}, "a layout row naming a module that is not there"
    unnamed = [
        f"{folder}{sub.name}/" for folder, text in rows.items() if folder.startswith("qmd/")
        for sub in (REPO / folder).iterdir() if (sub / "__init__.py").exists() and f"`{sub.name}/`" not in text
    ]
    assert unnamed == [], "a sub-package its folder's row does not name"


def test_the_layout_check_sees_a_stale_row(tmp_path: Path) -> None:
    (tmp_path / "a.py").write_text("")
    (tmp_path / "sub").mkdir()
    assert missing_names(tmp_path, "one (`a`), `a.py`, `sub/`, `b`, `gone/`, `qmd guard`") == ["b", "gone/"]
    assert layout_rows("| `x/` | what it holds |\n| folder | text |") == {"x/": "what it holds"}
