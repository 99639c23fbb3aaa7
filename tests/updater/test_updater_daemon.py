"""The daemon: wakes on a commit's request, batches, watches folders outside git, stops cleanly."""

from __future__ import annotations

import json
import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import qmd
from tests.support.harness import commit, make_repo, queue_files
from tests.support.run import command


def _store() -> qmd.Store:
    paths = qmd.resolve_index(None)
    return qmd.Store(paths.index_path, paths.config_path)


def _wait_for(word: str, timeout: float = 30) -> float:
    started = time.time()
    while time.time() - started < timeout:
        with _store() as store:
            if store.search(word):
                return time.time() - started
        time.sleep(0.05)
    raise AssertionError(f"{word} not searchable after {timeout}s")


@pytest.fixture
def daemon(state: Path) -> Iterator[subprocess.Popen[str]]:
    procs: list[subprocess.Popen[str]] = []

    def start(*args: str) -> subprocess.Popen[str]:
        proc = subprocess.Popen(command("updater", "daemon", *args), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        procs.append(proc)
        deadline = time.time() + 30
        log = state / "logs" / "updater.log"
        while not (log.exists() and "daemon started" in log.read_text()):
            assert proc.poll() is None and time.time() < deadline, proc.communicate()
            time.sleep(0.05)
        return proc

    yield start  # type: ignore[misc]
    for proc in procs:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)


@pytest.mark.slow
def test_daemon_indexes_a_commit_and_stops_on_sigterm(cli, daemon, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    proc = daemon()
    assert not proc.stdout.closed
    commit(repo, "a.md", "# A\n\nfirstword\n")
    assert _wait_for("firstword") < 15
    for n in range(5):  # a burst: coalesced into few runs
        commit(repo, f"b{n}.md", f"# B{n}\n\nburstword{n}\n")
    _wait_for("burstword4")
    time.sleep(0.3)
    assert queue_files(state, "new") == queue_files(state, "cur") == []
    stats = json.loads((state / "updater" / "stats.json").read_text())
    assert stats["runs"] <= 4 and stats["documents_updated"] == 6
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert "daemon stopped" in (state / "logs" / "updater.log").read_text()
    assert not (state / "updater.lock.json").exists()


@pytest.mark.slow
def test_daemon_watch_reindexes_a_folder_outside_git(daemon, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    folder = tmp_path / "plain-notes"
    folder.mkdir()
    (folder / "one.md").write_text("# One\n")
    with _store() as store:
        store.add_collection(folder, name="plain")
    proc = daemon("--watch")
    assert f"watching {folder}" in (state / "logs" / "updater.log").read_text()
    (folder / "sub").mkdir()
    (folder / "sub" / "two.md").write_text("# Two\n\nwatchedword\n")
    assert _wait_for("watchedword") < 15
    (folder / "sub" / "two.md").unlink()
    deadline = time.time() + 15
    while True:
        with _store() as store:
            if not store.search("watchedword"):
                break
        assert time.time() < deadline
        time.sleep(0.05)
    proc.send_signal(signal.SIGINT)
    assert proc.wait(timeout=30) == 0
