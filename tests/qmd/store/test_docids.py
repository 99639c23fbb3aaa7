"""Printed docids are unique: two documents sharing the first 6 hex digits of their content
hash are printed with as many digits as it takes, and `get '#docid'` accepts what was printed."""

from __future__ import annotations

import hashlib
import itertools
from collections.abc import Callable
from pathlib import Path

import pytest

import qmd

pytestmark = pytest.mark.usefixtures("index_backend")  # each test on SQLite and on PostgreSQL

Cli = Callable[..., tuple[int, str, str]]


def _colliding_texts() -> tuple[str, str]:
    """Two texts whose sha256 share the first 6 hex digits (a birthday search: some thousands of tries)."""
    seen: dict[str, str] = {}
    for i in itertools.count():
        text = f"# Note {i}\n\nzanzibar shared word {i}\n"
        prefix = hashlib.sha256(text.encode()).hexdigest()[:6]
        if prefix in seen:
            return seen[prefix], text
        seen[prefix] = text
    raise AssertionError("unreachable")


@pytest.fixture(scope="module")
def collision() -> tuple[str, str]:
    return _colliding_texts()


def test_a_shared_prefix_gets_more_digits_everywhere(cli: Cli, tmp_path: Path, collision: tuple[str, str]) -> None:
    a, b = collision
    root = tmp_path / "notes"
    root.mkdir()
    (root / "a.md").write_text(a)
    (root / "b.md").write_text(b)
    assert cli("collection", "add", str(root), "--name", "notes")[0] == 0
    ha, hb = (hashlib.sha256(t.encode()).hexdigest() for t in (a, b))
    shared = next(i for i, (x, y) in enumerate(zip(ha, hb)) if x != y)
    assert shared >= 6
    want = max(6, shared + 1)
    lines = cli("search", "zanzibar", "--files", "--all")[1].splitlines()
    docids = sorted(line.split(",")[0] for line in lines)
    assert docids == sorted([f"#{ha[:want]}", f"#{hb[:want]}"]), lines
    for docid in docids:
        code, out, err = cli("get", docid)
        assert code == 0, err
    assert {e.docid for e in qmd.open_index().ls("notes")} == {ha[:want], hb[:want]}


@pytest.mark.sqlite_only("calls the SQLite docid code directly")
def test_the_bulk_path_agrees_with_the_seek_path(cli: Cli, tmp_path: Path, collision: tuple[str, str]) -> None:
    """`ls` of a big collection computes all docids from one sorted read: the same answers."""
    from qmd.backends.sqlite.documents import docid_lengths

    a, b = collision
    root = tmp_path / "many"
    root.mkdir()
    (root / "a.md").write_text(a)
    (root / "b.md").write_text(b)
    for i in range(80):
        (root / f"n{i:02d}.md").write_text(f"# Filler {i}\n\ntext {i}\n")
    assert cli("collection", "add", str(root), "--name", "many")[0] == 0
    with qmd.open_index() as store:
        conn = store.backend.connection()  # type: ignore[attr-defined]
        hashes = [str(r[0]) for r in conn.execute("SELECT hash FROM documents")]
        bulk = docid_lengths(conn, hashes)
        seek = {h: docid_lengths(conn, [h])[h] for h in hashes}
        assert bulk == seek and max(bulk.values()) > 6
        assert {e.docid for e in store.ls("many")} == {h[: bulk[h]] for h in hashes}
