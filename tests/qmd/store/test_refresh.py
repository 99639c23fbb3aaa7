"""Store.refresh: update then embed, with both reports; no embedding model at all skips the
embed; a broken model keeps the update's report and says the embed failed."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmd


def _store(tmp_path: Path, notes: Path) -> qmd.Store:
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(notes, name="notes", index=False)
    other = tmp_path / "other"
    other.mkdir()
    for name in ("pager.md", "oncall.md"):
        (other / name).write_text(f"# {name}\n\nThe pager rotation moves every Monday ({name}).\n")
    store.add_collection(other, name="quiet", index=False)
    return store


def test_refresh_updates_then_embeds_what_updated(tmp_path: Path, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    with _store(tmp_path, notes) as store:
        seen: list[int] = []
        report = store.refresh(["notes"], on_updated=lambda update: seen.append(update.totals["new"]))
        assert seen == [4] and report.update.totals["new"] == 4  # the update's report, before the embed
        assert report.embedded == ["notes"] and report.embed is not None and report.embed.documents == 4
        assert report.embed_skipped is None and report.embed_error is None
        assert store.vector_status(["notes"]).pending_documents == 0
        assert store.document_count() == 4  # quiet was not asked for: neither updated nor embedded
        again = store.refresh()
        assert again.update.totals["new"] == 2 and again.embedded == ["notes", "quiet"]
        assert again.embed is not None and again.embed.documents == 2 and again.embed.already == 4
        assert store.vector_status().pending_documents == 0


def test_no_embedding_model_at_all_skips_the_embed_and_says_why(tmp_path: Path, notes: Path) -> None:
    with _store(tmp_path, notes) as store:
        report = store.refresh()
        assert report.update.totals["new"] == 6 and report.embed is None and report.embedded == []
        assert report.embed_skipped is not None and "no embedding model" in report.embed_skipped
        assert [h.uri for h in store.search("balancer")] == ["qmd://notes/runbooks/deploy.md"]


def test_a_missing_configured_model_fails_the_embed_and_keeps_the_update(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    with _store(tmp_path, notes) as store:
        report = store.refresh(["notes"])
        assert report.update.totals["new"] == 4 and report.embed is None and report.embed_skipped is None
        assert isinstance(report.embed_error, qmd.QmdError) and "missing.gguf" in report.embed_error.message
        assert report.embedded == ["notes"]


def test_embed_false_collections_and_broken_ones_are_not_embedded(tmp_path: Path, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    with _store(tmp_path, notes) as store:
        config = store.config_path.read_text().replace("  quiet:\n", "  quiet:\n    embed: false\n")
        store.config_path.write_text(config)
        store.refresh_config()
        report = store.refresh()
        assert report.embedded == ["notes"] and report.embed is not None
