"""Doctor: each collection's chunk strategy can run (auto needs the grammars of its source files)."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmd
from doctor.index import _chunking
from doctor.results import Status
from qmd.index import code_chunks


def _store(tmp_path: Path, strategy: str) -> qmd.Store:
    root = tmp_path / "src"
    root.mkdir()
    (root / "app.py").write_text("def one():\n    return 1\n")
    (root / "main.go").write_text("package main\n\nfunc main() {}\n")
    (root / "notes.md").write_text("# Notes\n\nrestore the backup\n")
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(root, name="src", pattern="**/*")
    store.update()
    coll = store.config.collections()["src"]
    coll.chunk_strategy = strategy
    store.config.set_collection(coll)
    store.config.save()
    return store


def test_regex_collections_need_no_check(tmp_path: Path) -> None:
    with _store(tmp_path, "regex") as store:
        assert _chunking(store, "index") == []


@pytest.mark.skipif(not all(why is None for why in code_chunks.grammar_status().values()), reason="needs qmd[code]")
def test_auto_with_its_grammars_is_ok(tmp_path: Path) -> None:
    with _store(tmp_path, "auto") as store:
        [check] = _chunking(store, "index")
    assert check.status == Status.OK and "go (1), python (1)" in check.detail, check


def test_auto_with_a_missing_grammar_for_files_it_holds_warns_with_the_install_command(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    code_chunks._load.cache_clear()
    monkeypatch.setitem(code_chunks.GRAMMARS, "go", ("tree_sitter_go_not_installed", "language", "tree-sitter-go"))
    monkeypatch.setitem(code_chunks.GRAMMARS, "rust", ("tree_sitter_rust_not_installed", "language", "tree-sitter-rust"))
    try:
        with _store(tmp_path, "auto") as store:
            [check] = _chunking(store, "index")
    finally:
        code_chunks._load.cache_clear()
    # rust is missing too, but the collection holds no .rs file: only go is named
    assert check.status == Status.WARN and check.fix == code_chunks.GRAMMARS_INSTALL, check
    assert "tree-sitter-go is not installed" in check.detail and "1 source files are cut by regex" in check.detail and "rust" not in check.detail, check
