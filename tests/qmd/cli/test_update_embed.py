"""`qmd update --embed`: update then embed in one command (Store.refresh), both reports said."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import qmd

Cli = Callable[..., tuple[int, str, str]]


def _pending() -> int:
    with qmd.open_index() as store:
        return store.vector_status().pending_documents


def test_update_embed_indexes_then_embeds(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    (notes / "pager.md").write_text("# Pager\n\nThe pager rotation moves every Monday.\n")
    code, out, err = cli("update", "--embed")
    assert code == 0, err
    assert out == "" and "Done: 1 new, 0 updated, 4 unchanged" in err
    assert err.index("Done:") < err.index("Embedded 5 documents") and "tiny-embed" in err
    assert _pending() == 0
    code, _, err = cli("update", "--embed")
    assert code == 0 and "All 5 documents already have vectors for tiny-embed; nothing to embed" in err and "Embedded" not in err  # a no-op says so


def test_update_embed_says_which_documents_it_embeds_and_why(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_PROGRESS_S", "0")
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    code, _, err = cli("update", "--embed")
    assert code == 0 and "Embedding 4 documents of notes that were never embedded" in err, err
    (notes / "ideas.md").write_text("Some ideas about caching layers, rewritten.\n")
    (notes / "pager.md").write_text("# Pager\n\nThe pager rotation moves every Monday.\n")
    code, _, err = cli("update", "--embed")
    assert code == 0, err
    lines = err.splitlines()
    plan = lines.index("Embedding 2 documents of notes: 1 new, 1 changed")
    assert lines.index("Done: 1 new, 1 updated, 3 unchanged, 0 removed, 0 skipped") < plan < lines.index("Chunking 2 documents…")
    counts = [line for line in lines if line.startswith("Embedding: ")]
    assert counts and counts[-1].startswith("Embedding: ") and "\r" not in err
    (notes / "ideas.md").write_text("Some ideas about caching layers, rewritten again.\n")
    code, _, err = cli("update", "--embed")
    assert code == 0 and "Re-embedding 1 changed document of notes" in err.splitlines(), err


def test_update_embed_without_any_embedding_model_updates_and_says_it_skipped(cli: Cli, notes: Path) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    (notes / "pager.md").write_text("# Pager\n\nThe pager rotation moves every Monday.\n")
    code, _, err = cli("update", "--embed")
    assert code == 0, err
    assert "Done: 1 new" in err and "note: embedding skipped: no embedding model" in err and "qmd pull" in err
    assert "Embedded" not in err


def test_update_embed_with_a_missing_model_says_the_update_then_fails(cli: Cli, notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    (notes / "pager.md").write_text("# Pager\n\nThe pager rotation moves every Monday.\n")
    code, _, err = cli("update", "--embed")
    assert code == 1
    assert err.index("Done: 1 new") < err.index("Error:") and "missing.gguf" in err and "hint:" in err
    with qmd.open_index() as store:
        assert [h.uri for h in store.search("pager rotation")] == ["qmd://notes/pager.md"]  # the update stands


def test_update_help_names_embed(cli: Cli) -> None:
    code, out, _ = cli("update", "--help")
    assert code == 0 and "--embed" in out and "embedding model" in out


def test_embed_of_named_collections_reports_only_them(cli: Cli, notes: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`qmd embed -c notes` with nothing to do said how many of the whole index were embedded."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    other = tmp_path / "other"
    other.mkdir()
    for i in range(3):
        (other / f"o{i}.md").write_text(f"# Other {i}\n\nKafka consumer lag {i}.\n")
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("collection", "add", str(other), "--name", "other")[0] == 0
    assert cli("embed")[0] == 0
    code, _, err = cli("embed", "-c", "notes")
    assert code == 0, err
    assert "All 4 documents in notes already have vectors for " in err and "Embedded" not in err, err
    code, _, err = cli("embed", "-c", "other", "-c", "notes")
    assert "All 7 documents in other, notes already have vectors for " in err, err
    code, _, err = cli("embed")
    assert "All 7 documents already have vectors for " in err and "; nothing to embed" in err, err


def test_embed_of_collections_holding_no_documents_says_so(cli: Cli, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """An empty collection is a no-op too: not 'Embedded 0 documents (0 chunks, 0.0 chunks/s)…;
    0 were already embedded' (the line issue 27 retired for a no-op)."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    (tmp_path / "empty").mkdir()
    assert cli("collection", "add", str(tmp_path / "empty"), "--name", "empty")[0] == 0
    for args, said in ((["embed"], "No documents to embed; nothing to do"), (["embed", "-c", "empty"], "No documents in empty to embed; nothing to do")):
        code, out, err = cli(*args)
        assert code == 0 and out == "", err
        assert said in err and "Embedded 0" not in err and "0.0 chunks/s" not in err, err



def test_force_embed_with_the_model_file_gone_keeps_the_vectors(cli: Cli, notes: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`embed -f` whose model file went missing must fail before dropping anything (and name no 'None' model)."""
    import shutil

    model = tmp_path / "models" / "embed.gguf"
    model.parent.mkdir()
    shutil.copy(tiny_models["embed"], model)
    monkeypatch.setenv("QMD_EMBED_MODEL", str(model))
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("embed")[0] == 0
    with qmd.open_index() as store:
        before = store.vector_status()
    assert before.embedded_documents > 0
    model.unlink()
    code, out, err = cli("embed", "-f")
    assert code == 1 and "does not exist" in err and "None" not in err, err
    shutil.copy(tiny_models["embed"], model)  # the file is back: its vectors are all there
    with qmd.open_index() as store:
        after = store.vector_status()
    assert (after.chunks, after.embedded_documents) == (before.chunks, before.embedded_documents)


def test_an_index_embedded_before_section_units_says_why_it_re_embeds(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: section units became the default, which changes the fingerprint; a user with
    an older index is told that `qmd embed` replaces vectors cut otherwise, not that the
    documents were never embedded."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    (notes / "runbook.md").write_text("# Runbook\n\n" + "".join(f"## Step {i}\n\n" + "run the stage and check it " * 30 + "\n\n" for i in range(6)))
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "0")  # the windows alone, as qmd embedded before
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("embed")[0] == 0
    monkeypatch.delenv("QMD_CHUNK_SECTIONS")
    code, _, err = cli("vsearch", "rollout stage")
    assert code == 1 and "embedded with other chunk settings" in err and "qmd embed" in err
    code, _, err = cli("embed")
    assert code == 0, err
    assert "Re-embedding 5 documents of notes: the vectors they have were cut with other chunk settings or another build of the model" in err.splitlines(), err
    assert "never embedded" not in err and _pending() == 0
    code, out, _ = cli("vsearch", "rollout stage")
    assert code == 0 and "runbook.md" in out


def test_status_says_why_documents_are_pending(cli: Cli, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 29: after the switch to section units, `qmd status` gives `qmd embed`'s reason
    (vectors cut with other settings) and counts the never-embedded apart, in text and --json;
    the original's `Pending:` line and JSON keys stay as they were."""
    import json

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "0")  # the windows alone, as qmd embedded before
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("embed")[0] == 0
    monkeypatch.delenv("QMD_CHUNK_SECTIONS")
    (notes / "fresh.md").write_text("# Fresh\n\nwritten after the last embed\n")
    assert cli("update")[0] == 0
    code, out, err = cli("status")
    assert code == 0, err
    lines = out.splitlines()
    pending = next(i for i, line in enumerate(lines) if line.startswith("  Pending:"))
    total = int(lines[pending].split()[1])
    assert lines[pending] == f"  Pending:  {total} need embedding (run 'qmd embed')"
    assert lines[pending + 1].strip() == f"{total - 1} have vectors cut with other chunk settings or another build of the model, 1 never embedded", out
    code, out, err = cli("status", "--json")
    vectors = json.loads(out)["vectors"]
    assert {"model", "embedded_documents", "pending_documents"} <= set(vectors)
    assert (vectors["pending_documents"], vectors["pending_other_settings"], vectors["pending_never_embedded"]) == (total, total - 1, 1)
    assert cli("embed")[0] == 0
    code, out, _ = cli("status")
    assert "Pending:" not in out and "other chunk settings" not in out
