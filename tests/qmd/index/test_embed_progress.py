"""What a running embed says: its plan per collection, its phases (loading, chunking,
embedding) with counts in chunks and tokens, whole lines off a terminal, and `qmd status`
from the first moment. Real llama.cpp on the tiny test model, a real index on each backend."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

import qmd
from qmd.index.embed_progress import CollectionPlan, EmbedProgress, ProgressLines, short_count
from tests.support.run import run_qmd

PHASES = ["loading", "chunking", "embedding"]


@pytest.mark.parametrize(
    ("done", "total", "said"),
    [(950, 950, "950"), (7_000, 423_000, "7k"), (48_213, 7_600_000, "48k"), (512, 7_600_000, "512"), (3_800_000, 7_600_000, "3.8M"), (7_600_000, None, "7.6M")],
)
def test_a_token_count_moves_from_its_first_thousand(done: int, total: int | None, said: str) -> None:
    """A first-hour embed of 7.6M tokens showed `0.0M/7.6M tokens` for minutes: it must move."""
    assert short_count(done, total) == said


@pytest.mark.parametrize(
    ("plan", "said"),
    [
        (CollectionPlan("gitnotes", 12), "embedding 12 documents of gitnotes that were never embedded"),
        (CollectionPlan("gitnotes", 1), "embedding 1 document of gitnotes that was never embedded"),
        (CollectionPlan("notes", 3, embedded=40, changed=3), "re-embedding 3 changed documents of notes"),
        (CollectionPlan("notes", 1, embedded=40, new=1), "embedding 1 new document of notes"),
        (CollectionPlan("notes", 9, embedded=40, new=2, changed=3), "embedding 9 documents of notes: 2 new, 3 changed, 4 not yet embedded"),
        (CollectionPlan("notes", 4, embedded=40), "embedding 4 documents of notes not yet embedded"),
        (CollectionPlan("notes", 2, embedded=40, new=5, changed=5), "re-embedding 2 changed documents of notes"),  # the update's counts never inflate it
        (CollectionPlan("notes", 43, embedded=43, forced=True), "re-embedding 43 documents of notes"),
        (CollectionPlan("notes", 5, embedded=0, forced=True), "embedding 5 documents of notes that were never embedded"),
    ],
)
def test_the_plan_says_what_is_about_to_happen(plan: CollectionPlan, said: str) -> None:
    assert plan.describe() == said


def _step(phase: str, **counts: int) -> EmbedProgress:
    return EmbedProgress(phase, "tiny", 1_200_000, (CollectionPlan("notes", 3),), 3, **counts)


def test_progress_lines_are_whole_lines_at_a_sane_rate() -> None:
    now = [0.0]
    lines: list[str] = []
    say = ProgressLines(lines.append, every_s=10, clock=lambda: now[0])
    say(_step("loading"))
    now[0] = 4.0
    say(_step("chunking"))
    for second, done in ((5.0, 1), (6.0, 2), (7.0, 3)):
        now[0] = second
        say(_step("chunking", documents_done=done))
    now[0] = 8.0
    say(_step("embedding", chunks=30, tokens=3000))
    for second in range(9, 40):  # a chunk a second
        now[0] = float(second)
        say(_step("embedding", chunks=30, tokens=3000, chunks_done=second - 9 + 1, tokens_done=100 * (second - 8)))
    now[0] = 40.0
    say(_step("embedding", chunks=30, tokens=3000, chunks_done=30, tokens_done=3000, documents_done=3))  # the last batch written
    assert lines[:4] == [
        "embedding 3 documents of notes that were never embedded",
        "loading embedding model tiny (1.1 MB)…",
        "chunking 3 documents…",
        "chunking: 3/3 documents (100%), 0s elapsed",  # the phase's last count, said at once
    ]
    assert lines[4] == "embedding 30 chunks (3,000 tokens) of 3 documents"
    counts = [line for line in lines if line.startswith("embedding: ")]
    assert [c.split(" chunks")[0] for c in counts] == ["embedding: 10/30", "embedding: 20/30", "embedding: 30/30"]  # every 10 s, the last once
    assert all("\r" not in line and "\n" not in line for line in lines)


def _notes(root: Path, n: int, words: int) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"n{i:03d}.md").write_text(f"# Note {i}\n\n" + " ".join(f"word{j} release{i}" for j in range(words)) + "\n")
    return root


@pytest.mark.usefixtures("index_backend")
def test_an_embed_tells_its_plan_phases_and_counts_in_chunks(store: qmd.Store, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    store.add_collection(str(_notes(tmp_path / "small", 3, 5)), name="small")
    store.add_collection(str(_notes(tmp_path / "big", 1, 900)), name="big")  # one file of many chunks (many batches' worth)
    seen: list[EmbedProgress] = []
    report = store.embed(progress=seen.append)
    phases = [step.phase for step in seen]
    assert sorted(set(phases), key=phases.index) == PHASES and phases == sorted(phases, key=PHASES.index)
    assert {p.name: (p.documents, p.embedded) for p in seen[0].plan} == {"small": (3, 0), "big": (1, 0)}
    assert seen[0].model == "tiny-embed" and seen[0].model_bytes == tiny_models["embed"].stat().st_size
    embedding = [step for step in seen if step.phase == "embedding"]
    last = embedding[-1]
    assert last.chunks == last.chunks_done == report.chunks and last.tokens == last.tokens_done > last.chunks
    assert last.documents == last.documents_done == report.documents == 4
    for key in ("chunks_done", "tokens_done", "documents_done", "elapsed_s"):
        values = [getattr(step, key) for step in embedding]
        assert values == sorted(values), key
    big = report.chunks - 3  # the small notes are a chunk each
    assert big > 3 * 32  # the big note alone is several batches' worth of chunks
    inside = [step.chunks_done for step in embedding if step.documents_done == 0 and step.chunks_done]
    assert len(inside) >= 3, "progress inside one large file, before its vectors are written"
    assert seen[-1].share == 1.0 and all(step.eta_s is None or step.eta_s >= 0 for step in seen)


@pytest.mark.sqlite_only("reads the activity record beside the index file")
@pytest.mark.usefixtures("index_backend")
def test_status_shows_the_embed_from_its_first_moment(store: qmd.Store, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """`qmd status` (another process) while the embed loads its model, while it chunks and while it embeds."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("INDEX_PATH", str(store.index_path))
    monkeypatch.setenv("QMD_CONFIG_DIR", str(store.config_path.parent))
    store.add_collection(str(_notes(tmp_path / "notes", 4, 200)), name="notes")
    shown: dict[str, tuple[dict[str, object], str]] = {}

    def look(step: EmbedProgress) -> None:
        if step.phase not in shown:
            running = json.loads(run_qmd("status", "--json").stdout)["running"]
            shown[step.phase] = (running, run_qmd("status").stdout)

    store.embed(progress=look)
    assert list(shown) == PHASES
    for phase, (running, text) in shown.items():
        assert running["operation"] == "embed" and running["phase"] == phase, running
        assert f": {running['detail']}" in text
    assert shown["loading"][0]["detail"] == f"loading embedding model tiny-embed ({qmd_size(tiny_models['embed'])})"
    assert shown["chunking"][0]["detail"] == "chunking 0/4 documents"
    running = shown["embedding"][0]
    assert running["unit"] == "chunks" and running["done"] == 0 and isinstance(running["total"], int) and running["total"] > 4
    assert re.fullmatch(rf"embedding 0/{running['total']} chunks, 0/[\d,]+ tokens \(0%\)", str(running["detail"])), running
    assert json.loads(run_qmd("status", "--json").stdout)["running"] is None  # gone when done


def qmd_size(path: Path) -> str:
    from qmd.core.units import human_size

    return human_size(path.stat().st_size)
