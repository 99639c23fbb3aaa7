"""`open_regular` (qmd/core/fileio.py) under a Ctrl-C: an interrupt that arrives inside
`os.fdopen`, once the file object holds the descriptor, stays an interrupt. Closing the
descriptor again raised EBADF, and that OSError replaced the KeyboardInterrupt: the indexer
listed the file as unreadable ("cannot read: Bad file descriptor") and the interrupted
`qmd collection add` went on and exited 0 (found by the session 21 red team)."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

from qmd.core import fileio
from qmd.store.store import Store


def _interrupting_fdopen(name: str) -> Any:
    """os.fdopen, interrupted when it opens the file called `name`."""
    real = os.fdopen

    def fdopen(fd: int, *args: Any, **kwargs: Any) -> Any:
        opened = os.readlink(f"/proc/self/fd/{fd}")
        handle = real(fd, *args, **kwargs)
        if os.path.basename(opened) == name:
            # A SIGINT handled inside io.open once its FileIO held the descriptor: the object
            # is dropped as the interrupt unwinds, closing the descriptor with it.
            del handle
            raise KeyboardInterrupt
        return handle

    return fdopen


def test_an_interrupt_inside_fdopen_stays_an_interrupt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    target = tmp_path / "a.md"
    target.write_text("# a\n")
    monkeypatch.setattr(fileio.os, "fdopen", _interrupting_fdopen("a.md"))
    with pytest.raises(KeyboardInterrupt):
        fileio.open_regular(target)


def test_an_update_interrupted_while_it_opens_a_note_stops_instead_of_skipping_it(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(5):
        (notes / f"n{i}.md").write_text(f"# note {i}\n\nbody {i}\n")
    store = Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    try:
        monkeypatch.setattr(fileio.os, "fdopen", _interrupting_fdopen("n2.md"))
        with pytest.raises(KeyboardInterrupt):
            store.add_collection(notes, "notes")
    finally:
        monkeypatch.undo()
        store.close()
