"""A note edited since the last embed (issue 28): found first by `query` before `qmd embed`, and said.

Real index of examples/notes, embedded with all-MiniLM-L6-v2 (converted from the PyPI
package, as the rest of the suite does); no reranker or generate model, as a fresh install.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import REPO

Cli = Callable[..., tuple[int, str, str]]
EDITED = "runbooks/tls-cert-rotation.md"
OLD_LINE = "- The wildcard certificate on the legacy HAProxy hosts is the one that is NOT automated.\n"
NEW_LINE = "- Badge readers at the Lisbon office are rebooted by facilities every Friday night; call Priya.\n"
QUESTION = "when are the office badge readers rebooted"  # only the new line answers it


@pytest.fixture
def embedded_notes(cli: Cli, tmp_path: Path, minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """examples/notes as collection `notes`, embedded with MiniLM."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(minilm_gguf))
    for role in ("RERANK", "GENERATE"):
        monkeypatch.setenv(f"QMD_{role}_MODEL", str(tmp_path / "none.gguf"))
    notes = tmp_path / "notes"
    shutil.copytree(REPO / "examples" / "notes", notes)
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    code, _, err = cli("embed")
    assert code == 0, err
    return notes


def _first(cli: Cli, *args: str) -> tuple[str, str]:
    code, out, err = cli(*args, "--json", "-n", "5")
    assert code == 0, err
    return json.loads(out)[0]["file"], err


@pytest.mark.slow
def test_an_edited_note_is_first_for_its_new_line_before_embed(cli: Cli, embedded_notes: Path) -> None:
    path = embedded_notes / EDITED
    text = path.read_text()
    assert OLD_LINE in text
    path.write_text(text.replace(OLD_LINE, NEW_LINE))
    code, _, err = cli("update")
    assert code == 0 and err.splitlines()[-1] == "1 document changed since the last embed (run qmd embed)", err
    assert _first(cli, "search", QUESTION)[0] == f"qmd://notes/{EDITED}"
    first, err = _first(cli, "query", QUESTION)
    assert first == f"qmd://notes/{EDITED}"  # was an unrelated runbook: the edited note counted as a vector miss
    assert "Note: 1 document changed since the last embed (run qmd embed)" in err.splitlines()
    (embedded_notes / "parking.md").write_text("# Parking\n\nThe parking garage closes at 22:00.\n")
    assert cli("update")[2].splitlines()[-1] == "2 documents changed since the last embed (run qmd embed)"
    code, _, err = cli("vsearch", "parking garage")
    assert code == 0 and "Note: 2 documents changed since the last embed (run qmd embed)" in err.splitlines(), err  # one helper
    code, _, err = cli("embed")
    assert code == 0, err
    first, err = _first(cli, "query", QUESTION)
    assert first == f"qmd://notes/{EDITED}" and "changed since the last embed" not in err
    path.write_text(path.read_text() + "\nOne more line.\n")
    code, _, err = cli("update", "--embed")
    assert code == 0 and "changed since the last embed" not in err, err  # --embed did it
