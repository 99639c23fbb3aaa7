"""Update then embed, failures and the flag: a missing model, kill -9 mid-run, the dead letter, backoff."""

from __future__ import annotations

import json
import logging
import signal
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest

import qmd
from qmd import harness
from tests.support.harness import commit, make_repo, queue_files
from qmd.core.units import human_size
from tests.support.run import command, qmd_env, run_qmd


def _store() -> qmd.Store:
    paths = qmd.resolve_index(None)
    return qmd.Store(paths.index_path, paths.config_path)


def _records(state_dir: Path) -> list[dict[str, Any]]:
    return [json.loads(p.read_text()) for p in sorted((state_dir / "failures").glob("*.json"))]


@pytest.fixture
def enrolled(cli, state: Path, tmp_path: Path) -> Path:  # type: ignore[no-untyped-def]
    """A repo holding a collection of the default index, with our hooks installed."""
    repo = make_repo(tmp_path / "notes", {"intro.md": "# Intro\n\nWelcome to the notes.\n"})
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    return repo


def test_a_failing_embed_raises_the_flag_and_fixing_it_clears_it(enrolled: Path, state: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    missing = tmp_path / "models" / "nowhere.gguf"
    monkeypatch.setenv("QMD_EMBED_MODEL", str(missing))
    commit(enrolled, "rollback.md", "# Rollback\n\nFlip the load balancer back to blue.\n")
    proc = run_qmd("updater", "run")
    assert proc.returncode == 1, proc.stdout + proc.stderr
    assert "failed: embed of" in proc.stdout and str(missing) in proc.stdout and "hint:" in proc.stderr
    [record] = _records(state)
    assert {k: record[k] for k in ("repo", "index", "collections", "step", "attempts")} == {
        "repo": str(enrolled), "index": "index", "collections": ["notes"], "step": "embed", "attempts": 1,
    }
    assert str(missing) in record["error"] and record["first_at"] == record["last_at"] and record["log"].endswith("updater.log")
    assert record["dead"] is False and record["next_at"]
    health = json.loads((state / "health.json").read_text())
    assert health["raised"] is True and health["failures"] == [record["id"]] and health["since"] == record["first_at"]
    assert len(queue_files(state, "cur")) == 1  # kept for retry
    with _store() as store:
        assert [h.uri for h in store.search("balancer")] == ["qmd://notes/rollback.md"]  # the update step did succeed

    shown = run_qmd("health")
    assert shown.returncode == 1 and "health flag: raised since" in shown.stdout and str(missing) in shown.stdout and "hint:" in shown.stderr
    line = run_qmd("health", "--session-start")
    assert line.returncode == 0 and len(line.stdout.splitlines()) == 1
    assert line.stdout.startswith("qmd: index updates have been failing since") and str(missing) in line.stdout

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    proc = run_qmd("updater", "run", "--json")
    assert proc.returncode == 0, proc.stderr
    assert json.loads(proc.stdout)["chunks_embedded"] > 0
    assert _records(state) == []
    health = json.loads((state / "health.json").read_text())
    assert health["raised"] is False and health["failures"] == [] and health["since"] is None
    assert queue_files(state, "cur") == queue_files(state, "new") == []
    assert run_qmd("health").returncode == 0 and run_qmd("health", "--session-start").stdout == ""
    with _store() as store:
        assert store.vector_status().pending_documents == 0
        assert store.vsearch("load balancer blue", limit=5).hits


def test_a_run_says_what_it_embeds_and_how_far_it_is_on_stderr_and_in_its_log(enrolled: Path, state: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    commit(enrolled, "rollback.md", "# Rollback\n\n" + "Flip the load balancer back to blue. " * 60 + "\n")
    proc = run_qmd("updater", "run", env=qmd_env({"QMD_PROGRESS_S": "0"}))
    assert proc.returncode == 0, proc.stderr
    assert "\r" not in proc.stderr and proc.stdout.startswith("1 request(s), 1 repo(s) updated")  # the result on stdout, as before
    log = (state / "logs" / "updater.log").read_text()
    assert "\r" not in log
    for said in (proc.stderr.splitlines(), [line.split("] ", 1)[1] for line in log.splitlines() if "] index: " in line]):
        lines = [line.removeprefix("index: ") for line in said if line.startswith("index: ")]
        assert lines[1:4] == [
            "embedding 2 documents of notes that were never embedded",
            f"loading embedding model tiny-embed ({human_size(tiny_models['embed'].stat().st_size)})…",
            "chunking 2 documents…",
        ], said
        headline = next(line for line in lines if line.startswith("embedding ") and " chunks (" in line)
        total = int(headline.split()[1])
        counts = [int(line.split()[1].split("/")[0]) for line in lines if line.startswith("embedding: ")]
        assert counts and counts == sorted(counts) and counts[-1] == total, lines
        assert lines.index(headline) < lines.index(f"embedded notes: 2 documents, {total} chunks in " + lines[-1].rsplit(" in ", 1)[1])

    commit(enrolled, "rollback.md", "# Rollback\n\nFlip the load balancer back to green.\n")
    proc = run_qmd("updater", "run")
    assert proc.returncode == 0 and "index: re-embedding 1 changed document of notes" in proc.stderr.splitlines(), proc.stderr


BULK = 240  # enough batches (32 chunks each) that a stopped run is always caught between two of them


def _stop_between_batches(proc: subprocess.Popen[bytes], deadline: float) -> qmd.VectorStatus:
    """Freeze the run (SIGSTOP) as soon as the index shows a partial embed, and return what it shows.

    The state is read while the process is stopped, so what the test sees is what the kill
    leaves (at most one batch whose commit was under way may still land). Between two looks
    the run continues for a few milliseconds.
    """
    with _store() as store:
        while True:
            assert proc.poll() is None and time.time() < deadline, "the run ended before it committed a first batch of vectors"
            proc.send_signal(signal.SIGSTOP)
            status = store.vector_status()
            if status.chunks > 0:
                return status
            proc.send_signal(signal.SIGCONT)
            time.sleep(0.005)


@pytest.mark.slow
def test_kill_9_mid_run_then_another_run_loses_nothing_and_embeds_nothing_twice(enrolled: Path, state: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    words = " ".join(f"term{j}" for j in range(90))
    for i in range(BULK):
        (enrolled / "bulk" / f"n{i:03d}.md").parent.mkdir(exist_ok=True)
        (enrolled / "bulk" / f"n{i:03d}.md").write_text(f"# Bulk {i}\n\nuniq{i}word {words}\n")
    commit(enrolled, "last.md", "# Last\n\nthe final note\n")
    proc = subprocess.Popen(command("updater", "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        seen = _stop_between_batches(proc, time.time() + 120)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
    assert seen.pending_documents > 64, f"the first look came too late: {seen}"  # more than one batch still to do
    assert len(queue_files(state, "cur")) == 1  # claimed, not lost
    with _store() as store:
        before = store.vector_status()
    assert before.chunks >= seen.chunks and before.pending_documents > 0, (seen, before)

    again = run_qmd("updater", "run", "--json")
    assert again.returncode == 0, again.stderr
    result = json.loads(again.stdout)
    with _store() as store:
        after = store.vector_status()
        assert after.pending_documents == 0
        assert result["chunks_embedded"] == after.chunks - before.chunks  # only what was missing
        for i in range(BULK):
            assert [h.uri for h in store.search(f"uniq{i}word")] == [f"qmd://notes/bulk/n{i:03d}.md"]
    assert queue_files(state, "cur") == queue_files(state, "new") == []
    assert _records(state) == []


def _drain(**kwargs: bool):  # type: ignore[no-untyped-def]
    from updater.run import drain

    return drain(harness.StateLayout.current(), logging.getLogger("test-updater"), **kwargs)


def test_five_failed_attempts_make_a_dead_record_and_retry_revives_it(cli, enrolled: Path, state: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    commit(enrolled, "a.md", "# A\n")
    for attempt in range(1, 6):
        result = _drain()
        assert [f["attempts"] for f in result.failures] == [attempt]
    [record] = _records(state)
    assert record["dead"] is True and record["next_at"] is None
    assert queue_files(state, "cur") == [] and len(queue_files(state, "failed")) == 1  # dead-lettered
    assert json.loads((state / "health.json").read_text())["raised"] is True  # dead is still loud
    assert _drain().requests == 0  # nothing retries a dead request by itself

    code, out, _ = cli("updater", "retry")
    assert code == 0 and "1 request(s) queued again" in out
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    result = _drain()
    assert result.failures == [] and result.succeeded_repos == [str(enrolled)]
    assert _records(state) == [] and queue_files(state, "failed") == []
    assert json.loads((state / "health.json").read_text())["raised"] is False


def test_a_new_commit_after_the_fix_clears_a_dead_record_and_its_dead_letters(enrolled: Path, state: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    commit(enrolled, "a.md", "# A\n")
    for _ in range(5):
        _drain()
    assert [r["dead"] for r in _records(state)] == [True] and len(queue_files(state, "failed")) == 1
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    commit(enrolled, "b.md", "# B\n")  # a dead repo gets one attempt per new request
    result = _drain()
    assert result.failures == [] and result.succeeded_repos == [str(enrolled)]
    assert _records(state) == [] and queue_files(state, "failed") == []  # the update covered the old request too
    assert json.loads((state / "health.json").read_text())["raised"] is False


def test_backoff_defers_automatic_retries_but_a_commit_retries_at_once(enrolled: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    commit(enrolled, "a.md", "# A\n")
    assert len(_drain(respect_backoff=True).failures) == 1
    deferred = _drain(respect_backoff=True)
    assert deferred.deferred == [str(enrolled)] and deferred.failures == []
    assert [r["attempts"] for r in _records(state)] == [1]
    commit(enrolled, "b.md", "# B\n")
    assert [f["attempts"] for f in _drain(respect_backoff=True).failures] == [2]  # fresh request: tried now
    assert [f["attempts"] for f in _drain().failures] == [3]  # a manual run does not wait either


def test_a_broken_index_config_raises_the_flag_until_it_is_fixed(enrolled: Path, state: Path) -> None:
    config = qmd.resolve_index("broken").config_path
    config.write_text("collections: [this is: not valid\n")
    commit(enrolled, "a.md", "# A\n")
    result = _drain()
    assert [(f["index"], f["repo"]) for f in result.failures] == [("broken", None)]
    assert json.loads((state / "health.json").read_text())["raised"] is True
    assert result.succeeded_repos == [str(enrolled)]  # the other index still updates
    config.unlink()
    _drain()
    assert _records(state) == [] and json.loads((state / "health.json").read_text())["raised"] is False


def test_a_deleted_repo_with_a_live_failure_does_not_pin_the_flag(enrolled: Path, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    commit(enrolled, "a.md", "# A\n")
    _drain()
    assert json.loads((state / "health.json").read_text())["raised"] is True
    shutil.rmtree(enrolled)
    _drain()  # its request is dropped, its live record becomes a dropped one
    assert json.loads((state / "health.json").read_text())["raised"] is False
    assert [r["dropped"] for r in _records(state)] == [True]
