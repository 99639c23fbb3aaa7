"""The updater on real repositories and real processes: parallel commits, one lock, gone repos."""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import time
from pathlib import Path

import pytest

import qmd
from tests.support.harness import commit, make_repo, queue_files
from tests.support.run import command, run_qmd


def _store() -> qmd.Store:
    paths = qmd.resolve_index(None)
    return qmd.Store(paths.index_path, paths.config_path)


def test_fifty_commits_from_ten_processes_are_all_searchable_after_one_run(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repos = [make_repo(tmp_path / f"repo{i}") for i in range(10)]
    with _store() as store:
        for i, repo in enumerate(repos):
            store.add_collection(repo, name=f"r{i}")
    assert cli("hooks", "install", *map(str, repos))[0] == 0
    script = 'for n in 1 2 3 4 5; do printf "# Note $n\\n\\nword%sx$n\\n" "$1" > "note$n.md" && git add "note$n.md" && git commit -q -m "note $n" || exit 1; done'
    procs = [subprocess.Popen(["sh", "-c", script, "sh", f"repo{i}"], cwd=repo) for i, repo in enumerate(repos)]
    assert [p.wait(timeout=120) for p in procs] == [0] * 10
    assert len(queue_files(state, "new")) == 50  # no request lost, none half-written
    log = (state / "logs" / "hooks.log").read_text().splitlines()
    assert len(log) == 50 and all(line.endswith(" queued") for line in log)

    proc = run_qmd("updater", "run", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["requests"] == 50 and sorted(result["succeeded_repos"]) == sorted(map(str, repos))
    assert result["documents_updated"] == 50 and "index" in result["embed_skipped"]  # no embedding model at all
    assert queue_files(state, "new") == queue_files(state, "cur") == queue_files(state, "failed") == []
    with _store() as store:
        for i in range(10):
            for n in range(1, 6):
                hits = store.search(f"wordrepo{i}x{n}")
                assert [h.uri for h in hits] == [f"qmd://r{i}/note{n}.md"]
    health = json.loads((state / "health.json").read_text())
    assert health["raised"] is False and health["failures"] == [] and health["last_success"]
    status = json.loads(run_qmd("updater", "status", "--json").stdout)
    assert status["stats"]["runs"] == 1 and status["stats"]["documents_updated"] == 50 and status["queue"]["pending"] == 0


def test_a_second_updater_exits_at_once_naming_the_holder(state: Path, tmp_path: Path) -> None:
    daemon = subprocess.Popen(command("updater", "daemon"), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.time() + 30
        while not (state / "updater.lock.json").exists():
            assert daemon.poll() is None and time.time() < deadline, daemon.communicate()
            time.sleep(0.05)
        started = time.time()
        proc = run_qmd("updater", "run")
        assert time.time() - started < 5
        assert proc.returncode == 1
        assert f"pid {daemon.pid} (daemon, started" in proc.stderr and "hint:" in proc.stderr
        assert run_qmd("updater", "run", "--if-idle").returncode == 0
        status = json.loads(run_qmd("updater", "status", "--json").stdout)
        assert status["updater"]["pid"] == daemon.pid and status["updater"]["mode"] == "daemon"
    finally:
        daemon.send_signal(signal.SIGTERM)
        _, err = daemon.communicate(timeout=30)
    assert daemon.returncode == 0, err
    assert not (state / "updater.lock.json").exists()
    assert run_qmd("updater", "run").returncode == 0  # the lock is free again


def test_a_repo_deleted_after_enrolment_is_dropped_and_does_not_pin_the_flag(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "gone")
    with _store() as store:
        store.add_collection(repo, name="gone")
    assert cli("hooks", "install", str(repo))[0] == 0
    commit(repo, "a.md", "# A\n")
    commit(repo, "b.md", "# B\n")
    shutil.rmtree(repo)
    proc = run_qmd("updater", "run")
    assert proc.returncode == 0, proc.stderr
    assert f"dropped: {repo} no longer exists" in proc.stdout
    assert len(queue_files(state, "failed")) == 2 and queue_files(state, "cur") == []
    [record] = [json.loads(p.read_text()) for p in (state / "failures").glob("*.json")]
    assert record["repo"] == str(repo) and record["dropped"] is True and "no longer exists" in record["error"]
    assert json.loads((state / "health.json").read_text())["raised"] is False
    health = run_qmd("health")
    assert health.returncode == 0 and "dropped" in health.stdout and str(repo) in health.stdout
    assert run_qmd("health", "--session-start").stdout == ""
    code, out, _ = cli("hooks", "uninstall", str(repo))
    assert code == 0 and "removed 1 dropped-request record" in out
    assert list((state / "failures").glob("*.json")) == []


def test_requests_for_a_repo_without_collections_are_deleted(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "code")
    code, out, _ = cli("hooks", "install", str(repo))
    assert "warning: no collection of any index lies in" in out
    commit(repo, "a.md", "# A\n")
    proc = run_qmd("updater", "run")
    assert proc.returncode == 0 and "nothing to do: no collection lies in" in proc.stdout
    assert queue_files(state, "new") == queue_files(state, "cur") == []


def test_routing_reaches_every_index_and_nested_collections(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "mono", {"docs/intro.md": "# Intro\n", "src/x.py": "print(1)\n"})
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "o.md").write_text("# Outside\n")
    with _store() as store:
        store.add_collection(repo / "docs", name="docs")
        store.add_collection(outside, name="outside")
    work = qmd.resolve_index("work")
    with qmd.Store(work.index_path, work.config_path) as store:
        store.add_collection(tmp_path, name="everything")  # contains the repo
    assert cli("hooks", "install", str(repo))[0] == 0
    commit(repo, "docs/new.md", "# New\n\nfreshword\n")
    (outside / "o2.md").write_text("# Outside two\n\nfreshword\n")
    proc = run_qmd("updater", "run")
    assert proc.returncode == 0, proc.stderr
    with _store() as store:
        assert [h.uri for h in store.search("freshword")] == ["qmd://docs/new.md"]  # "outside" was not touched
    with qmd.Store(work.index_path, work.config_path) as store:
        assert {h.uri for h in store.search("freshword")} == {"qmd://everything/mono/docs/new.md", "qmd://everything/elsewhere/o2.md"}


def test_junk_in_the_spool_never_hangs_the_updater_health_or_doctor(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A FIFO (or a link to /dev/zero) among the requests or the failure records: reading it
    blocked forever, so the updater held its lock for good and `qmd health --session-start`
    (an agent's SessionStart hook) and `qmd doctor` hung. It is unreadable junk: moved to failed/."""
    import os

    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    commit(repo, "a.md", "# A\n\nzebrafish\n")
    for folder in ("failures", "queue/cur"):
        (state / folder).mkdir(parents=True, exist_ok=True)
    for path in (state / "queue" / "new" / "fifo", state / "queue" / "cur" / "fifo2", state / "failures" / "x.json"):
        os.mkfifo(path)
    os.symlink("/dev/zero", state / "queue" / "new" / "zero")
    for args in (("health", "--session-start"), ("health",), ("updater", "status", "--json")):  # doctor's queue check is this snapshot
        proc = run_qmd(*args, timeout=30)
        assert proc.returncode in (0, 1) and "Traceback" not in proc.stderr, (args, proc.stderr)
    proc = run_qmd("updater", "run", "--json", timeout=30)
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["invalid"] == 3 and result["succeeded_repos"] == [str(repo)]
    assert sorted(queue_files(state, "failed")) == ["fifo", "fifo2", "zero"]
    assert queue_files(state, "new") == queue_files(state, "cur") == []
    with _store() as store:
        assert [h.uri for h in store.search("zebrafish")] == ["qmd://notes/a.md"]


def test_an_updater_killed_mid_update_raises_the_flag_and_backs_off(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """SIGKILL (the OOM killer during an embed, say) left no failure record: the flag stayed down
    and a supervisor restarting the updater repeated the fatal step at once, forever. The next
    updater records the death as a failed attempt of that step (flag up, backoff, dead after 5);
    the request is kept, and a later success clears it all."""
    from qmd.core.locks import lock_file, lock_path

    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
        index_path = qmd.resolve_index(None).index_path
    assert cli("hooks", "install", str(repo))[0] == 0
    commit(repo, "a.md", "# A\n\nzebrafish\n")
    log = state / "logs" / "updater.log"
    with lock_file(lock_path(index_path)):  # the update waits on the index's writer lock: mid-update
        victim = subprocess.Popen(command("updater", "run"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        deadline = time.time() + 60
        while "waiting for its writer lock" not in (log.read_text() if log.exists() else ""):
            assert victim.poll() is None and time.time() < deadline
            time.sleep(0.05)
        victim.kill()
        victim.wait(timeout=30)
    assert len(queue_files(state, "cur")) == 1  # claimed, not lost
    said = run_qmd("health")  # at once, before any run records it (it said "not raised", exit 0)
    assert said.returncode == 1 and f"the updater (pid {victim.pid}) died during an update" in said.stdout + said.stderr, said.stdout + said.stderr
    assert said.stderr.strip().endswith("hint: qmd updater run") and "move it away" not in said.stderr, said.stderr  # not the state folder's hint

    proc = run_qmd("updater", "run", "--respect-backoff", "--json")  # what a restarted daemon or the timer does
    assert proc.returncode == 0, proc.stderr
    [failure] = [json.loads(p.read_text()) for p in (state / "failures").iterdir()]
    assert failure["repo"] == str(repo) and failure["step"] == "update" and failure["attempts"] == 1
    assert f"pid {victim.pid}" in failure["error"] and "died" in failure["error"]
    assert json.loads(proc.stdout)["deferred"] == [str(repo)]  # backoff: not retried at once
    assert json.loads((state / "health.json").read_text())["raised"] is True
    assert run_qmd("health").returncode == 1
    assert len(queue_files(state, "cur")) == 1

    proc = run_qmd("updater", "run", "--json")  # a manual run retries now, succeeds, clears
    assert proc.returncode == 0, proc.stderr
    assert json.loads((state / "health.json").read_text())["raised"] is False
    assert not list((state / "failures").iterdir()) and queue_files(state, "cur") == []
    with _store() as store:
        assert [h.uri for h in store.search("zebrafish")] == ["qmd://notes/a.md"]


def test_a_death_during_the_embed_is_recorded_as_an_embed_failure(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """What a SIGKILL during the embed leaves (working.json naming the embed step) becomes a
    failed embed attempt; a malformed working.json is removed and records nothing."""
    from qmd import harness

    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    layout = harness.StateLayout(state)
    layout.working.parent.mkdir(parents=True, exist_ok=True)
    layout.working.write_text(json.dumps({"pid": 4242, "started_at": "2026-01-01T00:00:00Z", "index": "index", "step": "embed", "repos": {str(repo): ["notes"]}}))
    assert run_qmd("updater", "run").returncode == 0
    [failure] = [json.loads(p.read_text()) for p in (state / "failures").iterdir()]
    assert failure["step"] == "embed" and failure["collections"] == ["notes"] and "pid 4242" in failure["error"]
    assert not layout.working.exists() and run_qmd("health").returncode == 1
    layout.working.write_text("[not what a run writes")
    assert run_qmd("updater", "run").returncode == 0
    assert not layout.working.exists() and len(list((state / "failures").iterdir())) == 1


def test_a_folder_where_the_updater_lock_goes_is_one_error_line_not_a_crash(state: Path) -> None:
    (state / "updater.lock").mkdir(parents=True)
    proc = run_qmd("updater", "run")
    assert proc.returncode == 1 and "Traceback" not in proc.stderr and "this is a bug" not in proc.stderr, proc.stderr
    assert f"cannot take the updater lock {state / 'updater.lock'}" in proc.stderr and "hint: mv " in proc.stderr, proc.stderr


def test_a_request_naming_no_absolute_path_is_junk_not_a_crash_of_every_run(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A request whose repo held a NUL made every `updater run` and daemon start exit 3 on it
    (`embedded null byte`), forever: the file stayed in cur/, the commit after it was never
    indexed, and health and doctor said all was well. A relative path named a folder of the
    updater's working directory. Both are junk now, moved to failed/."""
    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    new = state / "queue" / "new"
    new.mkdir(parents=True, exist_ok=True)
    (new / "nul.json").write_text(json.dumps({"repo": f"{repo}\u0000zzz", "event": "post-commit"}))
    (new / "relative.json").write_text(json.dumps({"repo": "notes", "event": "post-commit"}))
    (new / "surrogate.json").write_text(json.dumps({"repo": "/tmp/\ud800x", "event": "post-commit"}))  # no bytes name it
    (new / "undecodable.json").write_text(json.dumps({"repo": f"{tmp_path}/gone-\udc80", "event": "post-commit"}))  # a byte 0x80: a path, gone
    commit(repo, "a.md", "# A\n\nzebrafish\n")
    proc = run_qmd("updater", "run", "--json", cwd=tmp_path, timeout=60)  # cwd: tmp_path/notes is the enrolled repository
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result["invalid"] == 3 and result["succeeded_repos"] == [str(repo)], result
    assert sorted(queue_files(state, "failed")) == ["nul.json", "relative.json", "surrogate.json", "undecodable.json"] and queue_files(state, "cur") == []
    with _store() as store:
        assert [h.uri for h in store.search("zebrafish")] == ["qmd://notes/a.md"]


@pytest.mark.slow
def test_an_error_of_the_drain_s_own_raises_the_flag_and_a_later_run_clears_it(cli, state: Path, tmp_path: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """An error no update or embed met (a request the drain could not handle) was exit 3 with
    the flag down: health and doctor said "ok" while nothing was indexed. Now it raises the
    flag, says so in one line (exit 1), and the next run that completes clears it."""
    from updater import routing

    repo = make_repo(tmp_path / "notes")
    with _store() as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    commit(repo, "a.md", "# A\n\nzebrafish\n")
    real = routing.load

    def broken() -> routing.Indexes:
        raise ValueError("embedded null byte")

    monkeypatch.setattr(routing, "load", broken)
    code, out, err = cli("updater", "run")
    assert code == 1 and "the updater stopped on an error of its own: ValueError: embedded null byte (the health flag is raised)" in err, (code, err)
    assert "Traceback" not in err and "\nhint: report this" in err
    health = run_qmd("health")
    assert health.returncode == 1 and "stopped on an error of its own" in health.stdout + health.stderr, health.stdout
    monkeypatch.setattr(routing, "load", real)
    assert cli("updater", "run")[0] == 0
    assert run_qmd("health").returncode == 0
    with _store() as store:
        assert [h.uri for h in store.search("zebrafish")] == ["qmd://notes/a.md"]


def test_the_daemon_goes_on_after_an_error_of_the_drain_s_own(state: Path, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    """The daemon exited 3 on such an error, and its service restarted it into the same error,
    forever; now the drain's record raises the flag and the daemon waits for the next request."""
    import logging

    from qmd import harness
    from updater import routing
    from updater.daemon import Daemon

    def broken() -> routing.Indexes:
        raise ValueError("embedded null byte")

    monkeypatch.setattr(routing, "load", broken)
    daemon = Daemon(harness.StateLayout.current(), logging.getLogger("qmd-test-daemon"))
    daemon._drain()  # no exception: logged, recorded
    assert not daemon.draining
    assert run_qmd("health").returncode == 1


def test_a_working_record_left_by_hand_or_damaged_never_splits_a_line(state: Path) -> None:
    """A dead updater is named from its working.json: a `started_at` holding a newline split the
    Error line (and the agents' one line) in two, and `pid: true` read as "pid True"."""
    (state / "updater").mkdir(parents=True, exist_ok=True)
    working = state / "updater" / "working.json"
    working.write_text(json.dumps({"pid": 4242, "step": "embed", "started_at": "2026-12-04T10:00:00Z\nfake: line", "index": "index", "repos": {}}))
    said = run_qmd("health")
    assert said.returncode == 1 and "the updater (pid 4242) died during an embed: killed" in said.stderr, said.stderr
    assert "fake: line" not in said.stdout + said.stderr
    line = run_qmd("health", "--session-start").stdout
    assert line.count("\n") == 1 and "pid 4242" in line and "qmd updater run" in line, line
    working.write_text(json.dumps({"pid": True, "step": "update"}))
    assert run_qmd("health").returncode == 0
