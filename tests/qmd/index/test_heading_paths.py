"""Each chunk embedded with its heading path (`Title › Section`), as contextual retrieval
prepends a chunk's context (issue 29; off by default, QMD_CHUNK_HEADINGS=1, measured in
docs/ranking.md): the chunks' spans stay as they were, only the model's input changes, and
the fingerprint with it."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from qmd.index import embedding
from qmd.index.chunking import heading_trail
from qmd.llm.families import Family

DOC = "# Blue/Green runbook\n\nWhy we deploy twice.\n\n" + "\n".join(
    f"## {name}\n\n" + " ".join(f"{name.lower()}{i}" for i in range(40)) + "\n\n### Check\n\n" + "word " * 30 + "\n"
    for name in ("Rollout", "Rollback")
)


@dataclass
class WordEmbedder:
    """What `embedding.prepare` needs of a model, counting words as tokens."""

    family: Family = Family("bert", "{q}", "{title}\n\n{chunk}", 48, 6)
    n_ctx: int = 512

    def count_tokens(self, text: str) -> int:
        return max(1, len(text.split()))

    def fit(self, text: str, limit: int) -> str:
        return " ".join(text.split()[:limit])


def test_the_path_above_a_position_skips_fences_and_closes_siblings() -> None:
    text = "# Top\n\nintro\n## A\n\na\n```\n# not a heading\n```\n### A1\nx\n## B\ny\n"
    trail = heading_trail(text)
    at = lambda s: [h for *_, h in trail.path_at(text.index(s))]  # noqa: E731
    assert at("# Top") == []
    assert at("intro") == ["Top"]
    assert at("## A") == ["Top"]  # the heading a chunk starts with is in its text
    assert at("a\n```") == ["Top", "A"]
    assert at("x\n") == ["Top", "A", "A1"]
    assert at("## B") == ["Top"]
    assert at("y\n") == ["Top", "B"]


def test_chunks_carry_their_headings_and_keep_their_spans(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "0")
    before = embedding.prepare(WordEmbedder(), DOC, "Blue/Green runbook", "h")  # type: ignore[arg-type]
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "1")
    after = embedding.prepare(WordEmbedder(), DOC, "Blue/Green runbook", "h")  # type: ignore[arg-type]
    assert after.starts == before.starts and len(after.starts) > 2
    inputs = after.inputs(WordEmbedder().family, DOC)
    assert inputs[0] == before.inputs(WordEmbedder().family, DOC)[0]  # the first chunk: nothing above it
    titles = {i.split("\n\n", 1)[0] for i in inputs}
    assert "Blue/Green runbook › Rollback" in titles or "Blue/Green runbook › Rollback › Check" in titles
    assert not any("runbook › Blue/Green" in t for t in titles)  # the top heading repeats the title: left out
    assert sum(after.costs) > sum(before.costs)  # the progress counts the path's tokens too


def test_a_source_file_gets_no_heading_path(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "1")
    code = "# a comment, not a heading\n" + "".join(f"def f{i}():\n    return {i}\n\n" for i in range(60))
    doc = embedding.prepare(WordEmbedder(), code, "tool.py", "h", "python")  # type: ignore[arg-type]
    assert doc.titles is None


def test_the_path_never_overflows_the_context(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "1")
    tight = WordEmbedder(n_ctx=48)  # the chunk budget fills the context: little room for a path
    doc = embedding.prepare(tight, DOC, "Blue/Green runbook", "h")  # type: ignore[arg-type]
    assert doc.extra and max(doc.costs) <= tight.n_ctx
    for text, cost in zip(doc.inputs(tight.family, DOC), doc.costs):
        assert tight.count_tokens(text) + 4 <= cost  # what the model reads (+ its special tokens) is counted


def test_vectors_with_and_without_heading_paths_never_mix(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import qmd

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "0")
    root = tmp_path / "notes"
    root.mkdir()
    (root / "runbook.md").write_text(DOC)
    (root / "short.md").write_text("# Short\n\nredis cache eviction\n")
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(root, name="notes")
    assert store.embed().documents == 2
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "1")
    now = qmd.Store(store.index_path, store.config_path)
    assert now.vector_status().pending_documents == 2
    with pytest.raises(qmd.QmdError, match="embedded with other chunk settings") as caught:
        now.vsearch("rollback")
    assert "qmd embed" in str(caught.value.hint)
    again = now.embed()
    assert (again.documents, now.vector_status().pending_documents) == (2, 0)
    assert now.vsearch("rollback check").hits


def test_a_chunk_starting_on_the_blank_line_before_its_heading_is_not_under_the_sibling_above() -> None:
    text = "# Guide\n\n## Install\n\nsteps\n\n## Upgrade\n\nmore steps\n"
    cut = text.index("\n## Upgrade")  # the blank line's position: the chunk's text starts "\n## Upgrade"
    doc = embedding._Doc("h", [(0, 0, cut, 5), (1, cut, len(text), 5)], "Guide", 3)
    titles, _ = embedding.chunk_titles(WordEmbedder(), text, 0, "Guide", doc)  # type: ignore[arg-type]
    assert titles == ["Guide", "Guide"]  # not "Guide › Install": the chunk's own heading is in its text


def test_the_switches_read_1_as_on_0_as_off_and_default_sections_alone(monkeypatch: pytest.MonkeyPatch) -> None:
    """Section units are the default (issue 29), heading paths are not."""
    for value, headings, sections in (("1", True, True), ("0", False, False), ("", False, True), ("yes", False, True)):
        monkeypatch.setenv("QMD_CHUNK_HEADINGS", value)
        monkeypatch.setenv("QMD_CHUNK_SECTIONS", value)
        assert (embedding.heading_paths(), embedding.section_units()) == (headings, sections)


def test_sections_are_embedded_beside_the_windows(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "0")
    windows = embedding.prepare(WordEmbedder(), DOC, "Blue/Green runbook", "h")  # type: ignore[arg-type]
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "1")
    both = embedding.prepare(WordEmbedder(), DOC, "Blue/Green runbook", "h")  # type: ignore[arg-type]
    assert both.starts[: len(windows.starts)] == windows.starts
    extra = both.starts[len(windows.starts) :]
    assert [seq for seq, *_ in both.starts] == list(range(len(both.starts)))
    # "## Rollout" with its Check is over the budget; the second Check is a window already
    assert [DOC[s:e].split("\n", 1)[0] for _, s, e, _ in extra] == ["### Check"]
    assert all(DOC[s:e] == DOC[s:e].rstrip() and t <= 48 for _, s, e, t in extra)


def test_a_note_that_is_one_window_gets_no_section_copy_of_itself(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "1")
    note = "\n# Short note\n\n" + "word " * 20 + "\n\n"
    doc = embedding.prepare(WordEmbedder(), note, "Short note", "h")  # type: ignore[arg-type]
    assert len(doc.starts) == 1


@pytest.mark.parametrize("name", ["deploy.py", "deploy.sh", "deploy.yml"])
def test_a_source_file_cut_by_regex_has_comments_not_headings(name: str, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """Under the default chunk strategy (regex, no syntax tree) a `# ...` line of a Python,
    shell or YAML file is a comment: no heading path, no section unit, as a Markdown note
    with the same text gets both."""
    import qmd

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_CHUNK_HEADINGS", "1")
    monkeypatch.setenv("QMD_CHUNK_SECTIONS", "1")
    seen: dict[str, embedding._Doc] = {}
    real = embedding.prepare

    def spy(embedder, text, title, content_hash, language=None, markdown=True):  # type: ignore[no-untyped-def]
        doc = real(embedder, text, title, content_hash, language, markdown)
        seen[content_hash] = doc
        return doc

    monkeypatch.setattr(embedding, "prepare", spy)
    text = "# Deploy\n\n" + "".join(f"## Step {i}\n\nrun the stage {i} of the rollout\n\n### Check\n\nsee that stage {i} is healthy\n\n" for i in range(12))
    root = tmp_path / "repo"
    root.mkdir()
    (root / name).write_text(text)
    (root / "runbook.md").write_text(text + "\n")  # other content, the same headings
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(root, name="repo", pattern="**/*")
    assert store.embed().documents == 2
    by_path = {row.path: row.hash for row in store.backend.find(collection="repo")}
    note, source = seen[by_path["runbook.md"]], seen[by_path[name]]
    windows = len(real(store.embedder(), text, source.title, "h", markdown=False).starts)
    assert note.titles and any(" › " in t for t in note.titles)  # the control: headings read in the note
    assert len(note.starts) > windows > 1  # ... and its sections embedded
    assert source.titles is None and len(source.starts) == windows
