"""`Collections.overlaps` (status, doctor, `collection add`'s warning) against the pairwise
definition it replaced: every pair of collections whose folders are the same or one inside
the other, with the files both index. The pairwise loop took `qmd status` 40 s at 2,000
collections (the session 21 red team); the ancestor lookup is linear."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from qmd.core.results import Overlap
from qmd.store import collections as collections_module
from qmd.store.store import Store


def pairwise(store: Store, only: str | None = None) -> list[Overlap]:
    """The definition: each pair (in config order) compared directly."""
    colls = store.config.collections()
    roots = {n: Path(c.path).resolve() for n, c in colls.items()}
    names = list(colls)
    out = []
    for i, a in enumerate(names):
        for b in names[i + 1 :]:
            if only is not None and only not in (a, b):
                continue
            if roots[b] == roots[a] or roots[a] in roots[b].parents:
                outer, inner = a, b
            elif roots[b] in roots[a].parents:
                outer, inner = b, a
            else:
                continue
            under = roots[inner].relative_to(roots[outer]).as_posix()
            prefix = "" if under == "." else under + "/"
            outer_files = {e.path for e in store.ls(f"qmd://{outer}/")}
            shared = sum(1 for e in store.ls(f"qmd://{inner}/") if prefix + e.path in outer_files)
            out.append(Overlap(inner, outer, shared, roots[a] == roots[b]))
    return out


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_overlaps_are_the_pairwise_definition(tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    folders = [tmp_path / "n"]
    for _ in range(12):  # a tree: each new folder inside one made before, or beside
        parent = rng.choice(folders + [tmp_path])
        folders.append(parent / f"d{len(folders)}")
    for folder in folders:
        folder.mkdir(parents=True, exist_ok=True)
        (folder / f"{folder.name}.md").write_text(f"# {folder.name}\n\nA note in {folder.name}.\n")
    store = Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    try:
        for i in range(18):
            store.add_collection(rng.choice(folders), name=f"c{i}")  # some folders twice, nested ones too
        expected = pairwise(store)
        assert expected and any(not o.same_folder for o in expected) and any(o.same_folder for o in expected)
        assert any(o.files and not o.same_folder for o in expected)  # nested folders sharing files
        assert store.overlapping_collections() == expected
        for i in range(18):
            assert store.overlapping_collections(f"c{i}") == pairwise(store, f"c{i}")
    finally:
        store.close()


def test_at_most_max_overlaps_are_worked_out(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "notes").mkdir()
    (tmp_path / "notes" / "a.md").write_text("# a\n")
    store = Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    try:
        for i in range(6):
            store.add_collection(tmp_path / "notes", name=f"c{i}")
        assert len(store.overlapping_collections()) == 15
        monkeypatch.setattr(collections_module, "MAX_OVERLAPS", 4)
        assert store.overlapping_collections() == pairwise(store)[:4]
    finally:
        store.close()
