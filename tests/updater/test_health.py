"""`qmd health`, `qmd health --session-start`, and the SessionStart hook `qmd guard install` registers."""

from __future__ import annotations

import json
import os
import shlex
import subprocess
import sys
import time
from pathlib import Path
from tests.support.run import command, run_qmd


HEALTH = shlex.quote(str(Path(sys.executable).parent / "qmd")) + " health --session-start"


def _raise_flag(state_dir: Path, repo: str = "/srv/notes") -> None:
    """A live failure record and the flag, as the updater writes them."""
    from qmd import harness
    from updater import records

    layout = harness.StateLayout(state_dir)
    records.Ledger(layout).record_failure(repo, "index", ["notes"], "embed", "the embed model file /m/x.gguf does not exist", "fix QMD_EMBED_MODEL")
    records.write_health(layout)


def test_healthy_prints_ok_and_nothing_at_session_start(state: Path) -> None:
    proc = run_qmd("health")
    assert proc.returncode == 0 and proc.stdout.startswith("health flag: not raised\n")
    assert " down" not in proc.stdout  # "down" reads as an outage
    status = run_qmd("updater", "status")
    assert status.returncode == 0 and status.stdout.startswith("health flag: not raised\n")
    assert "updater: not running (start one: qmd updater daemon" in proc.stdout  # what works without systemd comes first
    assert "install-service where systemd runs" in proc.stdout
    start = run_qmd("health", "--session-start")
    assert start.returncode == 0 and start.stdout == "" and start.stderr == ""


def test_raised_flag_exits_1_and_gives_the_agent_one_line(state: Path) -> None:
    _raise_flag(state)
    proc = run_qmd("health")
    assert proc.returncode == 1
    assert proc.stdout.startswith("health flag: raised since ") and "/m/x.gguf" in proc.stdout and "attempt 1/5" in proc.stdout
    assert proc.stderr.startswith("Error: the health flag is raised: 1 index update failure") and "hint:" in proc.stderr
    data = json.loads(run_qmd("health", "--json").stdout)
    assert data["health"]["raised"] is True and len(data["failures"]) == 1 and data["failures"][0]["step"] == "embed"
    start = run_qmd("health", "--session-start")
    assert start.returncode == 0
    [line] = start.stdout.splitlines()
    assert line.startswith("qmd: index updates have been failing since ") and "embed of /srv/notes into the default index" in line
    assert "qmd health" in line


def test_session_start_mentions_a_stale_queue_with_no_updater(state: Path) -> None:
    from qmd import harness
    from updater import spool

    path = spool.enqueue(harness.StateLayout(state), "/srv/notes", "post-commit")
    data = json.loads(path.read_text())
    data["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    path.write_text(json.dumps(data))
    start = run_qmd("health", "--session-start")
    assert start.returncode == 0
    assert start.stdout.startswith("qmd: 1 index update request has waited 1h and no updater is running")
    assert "Run: qmd updater run" in start.stdout and "install-service where systemd runs" in start.stdout  # an agent's shell may have no systemd
    assert run_qmd("health").returncode == 0  # not a failure: the flag is not raised


def test_unreadable_state_never_breaks_a_session(state: Path) -> None:
    state.mkdir(parents=True)
    (state / "failures").write_text("not a folder")
    (state / "queue").write_text("not a folder")
    start = run_qmd("health", "--session-start")
    assert start.returncode == 0 and start.stderr == ""
    assert start.stdout.startswith("qmd: the index freshness harness is broken: ") and str(state / "queue") in start.stdout
    shown = run_qmd("health")
    assert shown.returncode == 1 and "health flag: not raised, but the harness is broken" in shown.stdout and "hint: move it away" in shown.stderr


def test_guard_install_registers_the_session_start_hook(cli, state: Path, isolated_home: Path) -> None:  # type: ignore[no-untyped-def]
    settings = isolated_home / ".claude" / "settings.json"
    settings.parent.mkdir()
    user_hook = {"hooks": [{"type": "command", "command": "echo hello"}]}
    original = json.dumps({"hooks": {"SessionStart": [user_hook]}}, indent=2) + "\n"
    settings.write_text(original)
    code, out, err = cli("guard", "install", "--claude", "--codex")
    assert code == 0, err
    assert out.count("added SessionStart hook") == 2
    for path in (settings, isolated_home / ".codex" / "hooks.json"):
        starts = json.loads(path.read_text())["hooks"]["SessionStart"]
        assert starts[-1] == {"hooks": [{"type": "command", "command": HEALTH, "timeout": 10}]}
    assert json.loads(settings.read_text())["hooks"]["SessionStart"][0] == user_hook

    # the registered command really runs: silent when healthy, one line when raised
    env = dict(os.environ)
    assert subprocess.run(HEALTH, shell=True, capture_output=True, text=True, env=env, timeout=60).stdout == ""
    _raise_flag(state)
    run = subprocess.run(HEALTH, shell=True, capture_output=True, text=True, env=env, timeout=60)
    assert run.returncode == 0 and run.stdout.startswith("qmd: index updates have been failing")

    again = cli("guard", "install", "--claude")[1]
    assert "already installed" in again and "SessionStart" in again
    code, out, err = cli("guard", "uninstall", "--claude", "--codex")
    assert code == 0, err
    assert settings.read_text() == original
    assert not (isolated_home / ".codex" / "hooks.json").exists()


def test_guard_uninstall_after_user_edits_removes_the_session_hook_too(cli, state: Path, isolated_home: Path) -> None:  # type: ignore[no-untyped-def]
    assert cli("guard", "install", "--claude")[0] == 0
    settings = isolated_home / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["model"] = "opus"
    settings.write_text(json.dumps(data, indent=2) + "\n")
    assert cli("guard", "uninstall", "--claude")[0] == 0
    assert json.loads(settings.read_text()) == {"model": "opus"}


def test_a_dead_updaters_record_naming_a_reused_pid_is_not_a_running_updater(state: Path) -> None:
    """kill -9 leaves updater.lock.json behind; once its PID belongs to another process, that
    record must not pass for a running updater (health, doctor and the session line trust it)."""
    from qmd import harness
    from updater import spool

    daemon = subprocess.Popen(command("updater", "daemon"), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    record = state / "updater.lock.json"
    deadline = time.time() + 30
    while not record.exists():
        assert daemon.poll() is None and time.time() < deadline
        time.sleep(0.05)
    daemon.kill()
    daemon.wait(timeout=30)
    other = subprocess.Popen(["sleep", "60"])  # the dead updater's PID, reused by another process
    try:
        data = json.loads(record.read_text())
        data["pid"] = other.pid
        record.write_text(json.dumps(data))
        path = spool.enqueue(harness.StateLayout(state), "/srv/notes", "post-commit")
        queued = json.loads(path.read_text())
        queued["time"] = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
        path.write_text(json.dumps(queued))
        status = json.loads(run_qmd("updater", "status", "--json").stdout)
        assert status["updater"] is None
        assert "updater: not running" in run_qmd("health").stdout
        start = run_qmd("health", "--session-start")
        assert start.stdout.startswith("qmd: 1 index update request has waited 1h and no updater is running"), start.stdout
    finally:
        other.kill()
        other.wait()


def test_session_start_refreshes_a_guard_cache_older_than_a_hand_edited_config(state: Path, tmp_path: Path) -> None:
    """A collection added to the YAML by hand stayed unprotected by the guard until someone ran
    `qmd guard refresh`; each agent session now starts with the cache rewritten when a config
    is newer than it (and silently: the session line is unchanged)."""
    notes = tmp_path / "notes"
    notes.mkdir()
    config_dir = Path(os.environ["XDG_CONFIG_HOME"]) / "qmd"
    config_dir.mkdir(parents=True, exist_ok=True)
    (config_dir / "index.yml").write_text("collections: {}\n")
    assert run_qmd("guard", "refresh").returncode == 0
    cache = state / "guard" / "folders.json"
    assert str(notes) not in cache.read_text()
    config = config_dir / "index.yml"
    config.write_text(f"collections:\n  notes:\n    path: {notes}\n")
    later = cache.stat().st_mtime + 5
    os.utime(config, (later, later))
    start = run_qmd("health", "--session-start")
    assert start.returncode == 0 and start.stdout == "" and start.stderr == ""
    assert str(notes) in cache.read_text()
