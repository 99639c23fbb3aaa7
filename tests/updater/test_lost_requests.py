"""A request the hook could not finish writing (a full disk) is not lost silently: the file it
leaves in queue/tmp counts as pending, `qmd health` names the fix, and the next updater run,
once space is back, queues it again and indexes the commit. A fresh file is never touched."""

from __future__ import annotations

import json
import os
import shutil
import time
from pathlib import Path

import qmd
from qmd import harness
from tests.support.diskfull import fill, small_disk, use_every_inode
from tests.support.harness import commit, git, make_repo, queue_files
from tests.support.run import run_qmd
from updater import lost


def _store() -> qmd.Store:
    paths = qmd.resolve_index(None)
    return qmd.Store(paths.index_path, paths.config_path)


def _age(path: Path, seconds: float) -> None:
    """Make `path` look `seconds` old (the grace period is measured on its mtime)."""
    then = time.time() - seconds
    os.utime(path, (then, then))


def test_a_commit_made_while_the_disk_is_full_is_indexed_once_space_is_back(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The red-team's case: the commit succeeded, the hook left a 0-byte queue/tmp file and
    nothing else (hooks.log could not be written); `updater run` said `0 request(s)`, status
    0 pending, health fine, and the change was never indexed."""
    repo = make_repo(tmp_path / "notes repo")
    other = make_repo(tmp_path / "other repo")  # enrolled too: the leftover's commit says which repo it was
    with _store() as store:
        store.add_collection(repo, name="notes")
        store.add_collection(other, name="other")
    with small_disk(state, 2):
        assert cli("hooks", "install", str(repo), str(other))[0] == 0
        assert run_qmd("updater", "run").returncode == 0  # the queue folders, health.json: a used state dir
        filler = fill(state)
        proc = commit(repo, "lost.md", "# Lost\n\nzebracrossing of the full disk\n")
        head = git(repo, "rev-parse", "HEAD").stdout.strip()
        assert proc.returncode == 0, proc.stderr  # fail-open: the commit is not failed, and the user is told
        assert proc.stderr == f"qmd: commit {head} was not queued for indexing: cannot write {state}/queue/tmp; once it can be written, run: qmd updater run --repo '{repo}'\n", proc.stderr
        [left] = queue_files(state, "tmp")
        assert left.endswith(f".post-commit.{head}") and (state / "queue" / "tmp" / left).stat().st_size == 0
        assert queue_files(state, "new") == []
        _age(state / "queue" / "tmp" / left, 120)

        # still full: the read-only reports say it (nothing can be written yet)
        health = run_qmd("health")
        assert health.returncode == 1, health.stdout + health.stderr
        assert "could not finish writing" in health.stdout and "qmd updater run" in health.stderr and "qmd update" in health.stderr
        session = run_qmd("health", "--session-start")
        assert session.returncode == 0 and "may be stale" in session.stdout and "qmd updater run" in session.stdout, session.stdout
        status = json.loads(run_qmd("updater", "status", "--json").stdout)
        assert status["queue"]["pending"] == 1 and status["queue"]["lost"] == [left], status["queue"]

        filler.unlink()  # space is back
        proc = run_qmd("updater", "run", "--json")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result.get("lost") == {left: [str(repo)]}, result  # only the repository that has the commit
        assert result["requests"] == 1 and result["succeeded_repos"] == [str(repo)], result
        assert queue_files(state, "tmp") == queue_files(state, "new") == queue_files(state, "cur") == []
        with _store() as store:
            assert [h.uri for h in store.search("zebracrossing")] == ["qmd://notes/lost.md"]
        assert run_qmd("health").returncode == 0
        assert json.loads(run_qmd("updater", "status", "--json").stdout)["queue"]["pending"] == 0


def test_a_tmp_file_younger_than_the_grace_period_is_left_alone(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A hook writes then renames within milliseconds: a fresh file in queue/tmp may be one being
    written, so neither a run nor status touches or counts it; one past the grace period is a
    lost request, queued again for the enrolled repository (its name's commit unknown: `0`)."""
    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    layout = harness.StateLayout(state)
    layout.ensure_queue()
    fresh = layout.q("tmp") / f"{os.getpid()}.post-commit.0"
    old = layout.q("tmp") / "4242.post-merge.0"
    fresh.write_bytes(b"")
    old.write_bytes(b'{"repo":"')  # cut short: its repository is unknown
    _age(old, lost.LOST_GRACE_S + 30)

    proc = run_qmd("updater", "run", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result.get("lost") == {old.name: [str(repo)]} and result["succeeded_repos"] == [str(repo)], result
    assert queue_files(state, "tmp") == [fresh.name] and fresh.read_bytes() == b""  # untouched
    status = json.loads(run_qmd("updater", "status", "--json").stdout)
    assert status["queue"]["pending"] == 0 and status["queue"]["lost"] == [], status["queue"]
    assert run_qmd("health").returncode == 0
    now = time.time()
    assert lost.leftovers(layout, now) == []
    assert [left.path for left in lost.leftovers(layout, now + lost.LOST_GRACE_S + 5)] == [fresh]  # a minute on, it is one


def test_a_commit_whose_request_has_no_room_at_all_is_told_on_the_terminal(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """Not even an empty file could be made (no inode left): the hook left no request, no
    hooks.log line, nothing for the updater or health to find, and said nothing; the commit's
    change was never indexed. Now git shows the hook's one line naming the fix, and the fix works."""
    repo = make_repo(tmp_path / "notes repo")
    with _store() as store:
        store.add_collection(repo, name="notes")
    with small_disk(state, 2, inodes=64):
        assert cli("hooks", "install", str(repo))[0] == 0
        assert run_qmd("updater", "run").returncode == 0
        use_every_inode(state)
        proc = commit(repo, "gone.md", "# Gone\n\nplatypusmarch on a disk without inodes\n")
        head = git(repo, "rev-parse", "HEAD").stdout.strip()
        assert proc.returncode == 0, proc.stderr
        assert queue_files(state, "tmp") == queue_files(state, "new") == []  # no trace on disk: the terminal is the only one
        [line] = proc.stderr.splitlines()
        assert line.startswith(f"qmd: commit {head} was not queued for indexing") and line.endswith(f"run: qmd updater run --repo '{repo}'"), proc.stderr
        shutil.rmtree(state / ".inodes")  # room again
        assert run_qmd("updater", "run", "--repo", str(repo)).returncode == 0  # the fix it names
        with _store() as store:
            assert [h.uri for h in store.search("platypusmarch")] == ["qmd://notes/gone.md"]
