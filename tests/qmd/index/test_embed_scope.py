"""`embed -f -c NAME` re-embeds that collection only; long embeds report progress off a
terminal; Ctrl-C says what was kept. Real llama.cpp on the tiny test model, real processes."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import time
from pathlib import Path

import pytest

import qmd
from qmd.core.units import human_size
from tests.support.run import command, qmd_env, run_qmd
from tests.support.terminal import on_a_terminal

pytestmark = pytest.mark.usefixtures("index_backend")  # each test on SQLite and on PostgreSQL


def _notes(root: Path, n: int, word: str) -> Path:
    root.mkdir(parents=True, exist_ok=True)
    for i in range(n):
        (root / f"{word}{i:03d}.md").write_text(f"# {word} {i}\n\n" + f"{word} note number {i} about the release process " * 8 + "\n")
    return root


def _embedded_hashes(store: qmd.Store, collection: str) -> set[str]:
    conn = store.backend.connection()  # type: ignore[attr-defined]
    sql = "SELECT DISTINCT d.hash FROM documents d JOIN embedded e ON e.hash = d.hash WHERE d.collection = ? AND d.active = 1"
    return {row[0] for row in conn.execute(sql, (collection,))}


def _chunk_ids(store: qmd.Store, collection: str) -> set[int]:
    conn = store.backend.connection()  # type: ignore[attr-defined]
    sql = "SELECT c.id FROM chunks c JOIN documents d ON d.hash = c.hash WHERE d.collection = ?"
    return {row[0] for row in conn.execute(sql, (collection,))}


@pytest.mark.sqlite_only("reads chunk rows with SQLite SQL")
@pytest.mark.slow
def test_force_with_a_collection_keeps_the_vectors_of_the_others(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    big = _notes(tmp_path / "big", 30, "alpha")
    small = _notes(tmp_path / "small", 3, "beta")
    assert run_qmd("collection", "add", str(big), "--name", "big").returncode == 0
    assert run_qmd("collection", "add", str(small), "--name", "small").returncode == 0
    assert run_qmd("embed").returncode == 0
    with qmd.open_index() as store:
        big_chunks = _chunk_ids(store, "big")
        small_chunks = _chunk_ids(store, "small")
        assert len(_embedded_hashes(store, "big")) == 30 and len(_embedded_hashes(store, "small")) == 3

    proc = run_qmd("embed", "-f", "-c", "small")
    assert proc.returncode == 0, proc.stderr
    assert "dropping the tiny-embed vectors of small" in proc.stderr and "other collections keep theirs" in proc.stderr
    assert "Embedded 3 documents in small" in proc.stderr and "0 in small were already embedded" in proc.stderr  # -c: the counts are the named collection's (issue 27)
    with qmd.open_index() as store:
        assert _chunk_ids(store, "big") == big_chunks  # untouched: the same rows
        assert len(_embedded_hashes(store, "big")) == 30
        assert len(_chunk_ids(store, "small")) == len(small_chunks)
        assert len(_embedded_hashes(store, "small")) == 3
        assert store.vector_status().pending_documents == 0

    proc = run_qmd("embed", "-f")
    assert proc.returncode == 0, proc.stderr
    assert "dropping all" in proc.stderr and "(33 documents)" in proc.stderr and "every collection" in proc.stderr
    assert "Embedded 33 documents" in proc.stderr


@pytest.mark.slow
def test_embed_off_a_terminal_prints_progress_lines(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    notes = _notes(tmp_path / "notes", 80, "gamma")
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    proc = run_qmd("embed", env=qmd_env({"QMD_PROGRESS_S": "0"}))  # stderr is a pipe, not a terminal
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and "\033[" not in proc.stderr
    lines = proc.stderr.splitlines()
    size = human_size(tiny_models["embed"].stat().st_size)
    said = [
        "Embedding 80 documents of notes that were never embedded",
        f"Loading embedding model tiny-embed ({size})…",
        "Chunking 80 documents…",
    ]
    assert [line for line in lines if line in said] == said, proc.stderr
    headline = next(line for line in lines if re.fullmatch(r"Embedding \d+ chunks \([\d,]+ tokens\) of 80 documents", line))
    total = int(headline.split()[1])
    counts = [line for line in lines if line.startswith("Embedding: ")]
    assert len(counts) >= 2 and lines.index(headline) < lines.index(counts[0]), proc.stderr
    done = [int(re.match(r"Embedding: (\d+)/(\d+) chunks, ", line).group(1)) for line in counts]  # type: ignore[union-attr]
    assert done == sorted(done) and done[-1] == total and all(f"/{total} chunks, " in line for line in counts)
    assert all("tokens (" in line and "chunks/s" in line and "elapsed" in line for line in counts)
    assert f"Embedded 80 documents ({total} chunks" in lines[-1]


@pytest.mark.slow
def test_embed_on_a_terminal_draws_a_bar_and_says_each_phase_on_its_own_line(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    notes = _notes(tmp_path / "notes", 80, "gamma")
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    code, seen = on_a_terminal(command("embed"))
    assert code == 0, seen
    lines = seen.split("\r\n")  # the terminal's own line ends
    assert "Chunking 80 documents…" in lines and "Embedding 80 documents of notes that were never embedded" in lines
    assert "\rEmbedding [" in seen and "\033[K" in seen  # the bar, redrawn in place
    bar = [part for part in seen.split("\r") if part.startswith("Embedding [")]
    assert bar[-1].startswith("Embedding [########################] ") and " 100%" not in bar[0]
    assert "Embedded 80 documents" in lines[-2]


def _until_a_batch_is_written(proc: subprocess.Popen[str], deadline: float) -> str:
    """Read the embed's stderr (QMD_PROGRESS_S=0: a line per slice of chunks) until it has
    embedded two batches' worth of chunks (BATCH_CHUNKS each): the first batch is written."""
    from qmd.index.embedding import BATCH_CHUNKS

    assert proc.stderr is not None
    seen = ""
    while True:
        line = proc.stderr.readline()
        assert line and time.time() < deadline, f"the embed ended before reporting progress:\n{seen}"
        seen += line
        counted = re.match(r"Embedding: (\d+)/", line)
        if counted and int(counted.group(1)) >= 2 * BATCH_CHUNKS:
            return seen


@pytest.mark.slow
def test_ctrl_c_during_embed_says_what_was_kept_and_how_to_resume(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    total = 2000  # about 60 batches: far more than run between the first progress line and the signal
    notes = _notes(tmp_path / "notes", total, "delta")
    env = qmd_env({"QMD_PROGRESS_S": "0"})
    assert run_qmd("collection", "add", str(notes), "--name", "notes", env=env).returncode == 0
    # SIGINT as a terminal's Ctrl-C sends it: a shell running this suite in the background may
    # have left SIGINT ignored, which the child would inherit (and rightly keep ignoring).
    proc = subprocess.Popen(
        command("embed"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    assert proc.stderr is not None
    seen = _until_a_batch_is_written(proc, time.time() + 120)
    os.kill(proc.pid, signal.SIGINT)
    _, rest = proc.communicate(timeout=60)
    assert proc.returncode == 130, seen + rest
    assert "documents embedded so far are kept; run 'qmd embed' again to embed the rest" in rest
    with qmd.open_index() as store:
        status = store.vector_status()
    assert status.embedded_documents > 0 and status.pending_documents > 0
    assert status.embedded_documents + status.pending_documents == total


@pytest.mark.slow
@pytest.mark.sqlite_only("reads chunk rows with SQLite SQL")
def test_status_shows_a_running_embed_and_vector_coverage_per_collection(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import json

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    total = 600  # about 20 batches: held after the first, stopped with Ctrl-C, never run to the end
    big = _notes(tmp_path / "big", total, "epsilon")
    small = _notes(tmp_path / "small", 3, "zeta")
    assert run_qmd("collection", "add", str(big), "--name", "big").returncode == 0
    assert run_qmd("collection", "add", str(small), "--name", "small").returncode == 0
    assert run_qmd("embed", "-c", "small").returncode == 0
    proc = subprocess.Popen(
        command("embed", "-c", "big"), env=qmd_env({"QMD_PROGRESS_S": "0"}), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True,
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),  # Ctrl-C as a terminal sends it (see above)
    )
    assert proc.stderr is not None
    try:
        seen = _until_a_batch_is_written(proc, time.time() + 120)
        os.kill(proc.pid, signal.SIGSTOP)  # hold it mid-run while status looks
        status = json.loads(run_qmd("status", "--json").stdout)
        text = run_qmd("status").stdout
        os.kill(proc.pid, signal.SIGINT)  # then stop it: delivered when it runs again
        os.kill(proc.pid, signal.SIGCONT)
        _, rest = proc.communicate(timeout=60)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 130, seen + rest
    running = status["running"]
    assert running["pid"] == proc.pid and running["operation"] == "embed" and running["phase"] == "embedding" and running["documents"] == total
    assert running["unit"] == "chunks" and running["total"] == running["chunks"] >= total and 0 <= running["done"] < running["total"]  # written at most once a second
    assert f"Running:  qmd embed -c big (pid {proc.pid}" in text and f"): embedding {running['done']}/{running['total']} chunks, " in text
    coverage = {c["name"]: c["embedded_documents"] for c in status["collections"]}
    assert coverage["small"] == 3 and 0 <= coverage["big"] < total
    after = json.loads(run_qmd("status", "--json").stdout)
    kept = {c["name"]: c["embedded_documents"] for c in after["collections"]}
    assert after["running"] is None and kept["small"] == 3 and coverage["big"] <= kept["big"] < total
    assert "Vectors:  3 of 3 documents embedded" in run_qmd("status").stdout


@pytest.mark.sqlite_only("the activity record is a file beside the SQLite index")
def test_a_killed_embeds_record_never_shows_as_running_even_when_its_pid_is_reused(tmp_path: Path, tiny_models: dict[str, Path], isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """kill -9 leaves the activity record behind; status ignores it once the pid is gone, and
    also once the pid names another process (a restarted container's pid 1, a long uptime):
    it showed 'Running: qmd embed … ETA' for as long as that process lived."""
    import json

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert run_qmd("collection", "add", str(_notes(tmp_path / "big", 300, "theta")), "--name", "big").returncode == 0
    record = isolated_home / ".cache" / "qmd" / "index.sqlite.activity.json"
    proc = subprocess.Popen(command("embed"), env=qmd_env({"QMD_PROGRESS_S": "0"}), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    other = proc
    try:
        deadline = time.time() + 120
        while not record.exists() and proc.poll() is None and time.time() < deadline:
            time.sleep(0.05)
        os.kill(proc.pid, signal.SIGKILL)
        proc.wait(timeout=60)
        other = subprocess.Popen(["sleep", "120"])  # started later: a live process whose pid the record will name
        left = json.loads(record.read_text())
        assert left["pid"] == proc.pid and left["operation"] == "embed"  # the crash's leftover
        assert json.loads(run_qmd("status", "--json").stdout)["running"] is None
        record.write_text(json.dumps(left | {"pid": other.pid}))  # the pid given to another process
        assert json.loads(run_qmd("status", "--json").stdout)["running"] is None
        assert "Running:" not in run_qmd("status").stdout
    finally:
        for started in (proc, other):
            if started.poll() is None:
                started.kill()
            started.wait()
