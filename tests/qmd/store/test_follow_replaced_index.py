"""A long-running reader (the MCP server) follows the index at its path: when the file is
deleted and made again, or replaced by a rebuild, the next refresh reads the new one. Before,
the server kept answering from the file it had open, which nobody else could see any more."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

import qmd


def notes(root: Path, word: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    (root / "n.md").write_text(f"# Note\n\nthe {word} runbook\n")
    return root


def test_a_replaced_index_file_is_followed(tmp_path: Path) -> None:
    index, config = tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml"
    server = qmd.Store(index, config)
    server.add_collection(notes(tmp_path / "old", "walrus"), name="notes")
    assert [h.path for h in server.search("walrus")] == ["n.md"]
    assert server.refresh_config() is False  # nothing changed: nothing reopened

    # Another process deletes the index and builds a new one at the same path.
    shutil.rmtree(tmp_path / "idx")
    other = qmd.Store(index, config)
    other.add_collection(notes(tmp_path / "new", "narwhal"), name="notes")
    other.close()

    assert server.refresh_config() is True
    assert server.search("walrus") == []
    assert [h.path for h in server.search("narwhal")] == ["n.md"]
    server.close()


def test_a_deleted_index_is_not_answered_from_the_open_file(tmp_path: Path) -> None:
    index, config = tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml"
    server = qmd.Store(index, config)
    server.add_collection(notes(tmp_path / "old", "walrus"), name="notes")
    assert server.search("walrus")
    for path in tmp_path.joinpath("idx").glob("index.sqlite*"):
        path.unlink()
    server.refresh_config()
    with pytest.raises(qmd.QmdError):
        server.search("walrus")
    server.close()
