"""`qmd doctor`: inject each silent failure for real, see doctor catch it and `--fix` repair it.

Most tests run doctor's runner in this process (a fresh Context on the isolated
environment the fixtures set up, rendered as --json); a few run the real `qmd doctor`
end to end: exit codes (0, 1 under --strict, 2, 3), the --json shape and text output, a
--fix that restarts a server running older code, and teardown.
"""

from __future__ import annotations

import io
import json
import os
import shutil
import shlex
import signal
import subprocess
from collections.abc import Callable, Iterator
from contextlib import contextmanager, redirect_stderr, redirect_stdout
from pathlib import Path
from typing import Any

import apsw
import pytest

from tests.support.harness import commit, make_repo
from qmd.serve import process_alive, wait_gone
from tests.support.mcp import free_port
from tests.support.paths import REPO
from tests.support.run import qmd_env, run_qmd

STATUSES = {"ok", "warn", "fail"}
GROUPS = {"native", "models", "index", "mcp", "queue", "hooks", "services"}
pytestmark = pytest.mark.usefixtures("in_home")  # in-process runs see the cwd a subprocess gets


def qmd_in(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """`qmd ARGS` through the CLI's real entry point, in this process (setup steps: no interpreter start)."""
    from qmd.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with _environ(env or {}), redirect_stdout(out), redirect_stderr(err):
        code = main(list(args))
    return subprocess.CompletedProcess(["qmd", *args], code, out.getvalue(), err.getvalue())


def doctor_cli(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """The real `qmd doctor --json` in a subprocess: (exit code, report)."""
    proc = run_qmd("doctor", "--json", *args, env=qmd_env(env))
    assert proc.returncode in (0, 1, 2), proc.stdout + proc.stderr
    return proc.returncode, json.loads(proc.stdout)


@contextmanager
def _environ(extra: dict[str, str]) -> Iterator[None]:
    saved = {key: os.environ.get(key) for key in extra}
    os.environ.update(extra)
    try:
        yield
    finally:
        for key, value in saved.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value


def doctor(*args: str, env: dict[str, str] | None = None) -> tuple[int, dict[str, Any]]:
    """Doctor in this process: the runner on a fresh Context, as `qmd doctor --json ARGS` reports it."""
    from doctor.context import Context
    from doctor.render import as_json
    from doctor.runner import run

    unknown = set(args) - {"--quick", "--fix", "--strict"}
    assert not unknown, f"doctor() takes --quick, --fix and --strict, not {unknown}"
    with _environ(env or {}):
        report = run(Context.create(None, quick="--quick" in args, fix="--fix" in args))
    data = json.loads(json.dumps(as_json(report, "--strict" in args)))
    return data["exit_code"], data


def find(report: dict[str, Any], prefix: str) -> dict[str, Any]:
    found: list[dict[str, Any]] = [c for c in report["checks"] if c["name"].startswith(prefix)]
    assert found, f"no check named {prefix!r} in {[c['name'] for c in report['checks']]}"
    return found[0]


def failing(report: dict[str, Any]) -> list[str]:
    return [c["name"] for c in report["checks"] if c["status"] == "fail"]


def index_file() -> Path:
    return Path(os.environ["XDG_CACHE_HOME"]) / "qmd" / "index.sqlite"


def test_healthy_setup_exits_0_and_the_json_has_its_documented_shape(indexed: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert run_qmd("embed").returncode == 0
    code, report = doctor_cli("--strict")
    assert code == 0, [c for c in report["checks"] if c["status"] != "ok"]
    assert set(report) == {"version", "status", "exit_code", "build_id", "seconds", "checks"}
    assert report["version"] == 1 and report["status"] == "ok" and report["exit_code"] == 0 and report["build_id"].startswith("0.1.0+")
    for check in report["checks"]:
        assert set(check) == {"group", "name", "status", "detail", "fix", "ms", "repaired"}
        assert check["group"] in GROUPS and check["status"] in STATUSES and isinstance(check["detail"], str) and check["detail"]
        assert isinstance(check["ms"], (int, float)) and check["ms"] >= 0 and check["repaired"] is None
    assert {c["group"] for c in report["checks"]} == GROUPS
    shake = find(report, "stdio handshake")
    assert "protocol 2025-11-25" in shake["detail"] and "get, multi_get, query, status" in shake["detail"]
    assert "server/discover + tools/list" in shake["detail"] and shake["detail"].endswith("speaks 2026-07-28, 2025-11-25, 2025-06-18, 2025-03-26, 2024-11-05")
    assert "6 documents embedded" in find(report, "vectors")["detail"]
    text = run_qmd("doctor")
    assert text.returncode == 0 and "✓ apsw" in text.stdout and "Next steps" not in text.stdout and "0 failed" in text.stdout


def test_sqlite_vec_that_cannot_load_fails_with_the_knob_named(indexed: Path, tmp_path: Path) -> None:
    code, report = doctor("--quick", env={"QMD_SQLITE_VEC_PATH": str(tmp_path / "missing-vec0.so")})
    check = find(report, "sqlite-vec")
    assert code == 2 and check["status"] == "fail" and "missing-vec0" in check["detail"]
    assert check["fix"].startswith("unset QMD_SQLITE_VEC_PATH")
    assert find(report, "apsw")["status"] == "ok"  # one broken module does not hide the others
    code, report = doctor("--quick", "--fix", env={"QMD_SQLITE_VEC_PATH": str(tmp_path / "missing-vec0.so")})
    assert code == 2 and find(report, "sqlite-vec")["status"] == "fail"  # nothing doctor may repair


def test_llama_cpp_that_fails_to_import_in_a_fresh_process(indexed: Path, tmp_path: Path) -> None:
    empty = tmp_path / "no-libllama"
    empty.mkdir()
    code, report = doctor("--quick", env={"LLAMA_CPP_LIB_PATH": str(empty)})
    check = find(report, "llama_cpp")
    assert code == 2 and check["status"] == "fail" and "fresh process" in check["detail"] and "install" in check["fix"]
    assert failing(report) == ["llama_cpp"]


def _daemon(env: dict[str, str] | None = None) -> dict[str, Any]:
    port = free_port()
    proc = run_qmd("mcp", "--http", "--daemon", "--port", str(port), env=qmd_env(env))
    assert proc.returncode == 0, proc.stderr
    info: dict[str, Any] = json.loads((Path(os.environ["QMD_STATE_DIR"]) / "mcp-index.json").read_text())
    return info


@pytest.mark.slow
def test_a_server_running_older_code_is_stale_and_fix_restarts_it(indexed: Path, tmp_path: Path) -> None:
    src = tmp_path / "src"
    shutil.copytree(REPO / "qmd", src / "qmd", ignore=shutil.ignore_patterns("__pycache__"))
    env = {"PYTHONPATH": os.pathsep.join(filter(None, [str(src), os.environ.get("PYTHONPATH")]))}
    old = _daemon(env)
    try:
        with open(src / "qmd" / "serve" / "answers.py", "a") as f:  # an upgrade of the editable checkout
            f.write("\n# upgraded\n")
        code, report = doctor_cli("--quick", env=env)
        check = find(report, "HTTP server")
        assert code == 2 and check["status"] == "fail" and "stale" in check["detail"] and old["build_id"] in check["detail"]
        code, report = doctor_cli("--fix", env=env)
        check = find(report, "HTTP server")
        assert check["status"] == "ok" and "restarted" in check["repaired"] and "MCP handshake ok" in check["detail"], check
        new = json.loads((Path(os.environ["QMD_STATE_DIR"]) / "mcp-index.json").read_text())
        assert new["pid"] != old["pid"] and new["build_id"] != old["build_id"] and new["port"] == old["port"]
        assert not process_alive(old["pid"])
    finally:
        run_qmd("mcp", "stop", env=qmd_env(env))


@pytest.mark.slow
def test_a_pid_file_whose_process_is_gone(indexed: Path) -> None:
    info = _daemon()
    try:
        os.kill(info["pid"], signal.SIGKILL)
        assert wait_gone(info["pid"], 10)
        code, report = doctor("--quick")
        check = find(report, "HTTP server")
        assert code == 2 and "stale PID file" in check["detail"] and str(info["pid"]) in check["detail"]
        code, report = doctor("--quick", "--fix")
        check = find(report, "HTTP server")
        assert code == 0 and check["status"] == "ok" and check["repaired"].startswith("restarted")
    finally:
        run_qmd("mcp", "stop")


def _set_doctor_config(text: str) -> None:
    config = Path(os.environ["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"
    config.write_text(config.read_text() + text)


@pytest.mark.slow
def test_requests_stuck_past_the_threshold(indexed: Path, state: Path) -> None:
    assert qmd_in("hooks", "install", str(indexed)).returncode == 0
    _set_doctor_config("doctor:\n  queue_warn_minutes: 0\n  queue_fail_hours: 0\n")  # any pending request is stuck
    commit(indexed, "new.md", "# New\n\nA fresh note about canary deploys.\n")
    code, report = doctor("--quick")
    queue = find(report, "queue")
    assert code == 2 and queue["status"] == "fail" and queue["detail"].startswith("stuck: 1 request(s) pending") and "no updater is running" in queue["detail"]
    assert find(report, "updater")["status"] == "warn"  # enrolled, and nothing drains the queue
    code, report = doctor("--quick", "--fix")
    queue = find(report, "queue")
    assert queue["status"] == "ok" and queue["detail"].startswith("empty") and "ran the updater once (succeeded" in queue["repaired"]
    assert "canary" in qmd_in("search", "canary").stdout


@pytest.mark.slow
def test_a_failed_updater_run_raises_the_flag_and_only_a_successful_run_clears_it(indexed: Path, state: Path, tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    assert qmd_in("hooks", "install", str(indexed)).returncode == 0
    broken = {"QMD_EMBED_MODEL": str(tmp_path / "gone.gguf")}
    commit(indexed, "x.md", "# X\n\nSomething to embed.\n")
    assert run_qmd("updater", "run", env=qmd_env(broken)).returncode == 1
    code, report = doctor("--quick", env=broken)
    flag = find(report, "health flag")
    assert code == 2 and flag["status"] == "fail" and "raised since" in flag["detail"] and "gone.gguf" in flag["detail"]
    code, report = doctor("--quick", "--fix", env=broken)  # the cause is still there: the flag stays up
    assert code == 2 and find(report, "health flag")["status"] == "fail" and "failed" in find(report, "health flag")["repaired"]
    assert json.loads((state / "health.json").read_text())["raised"] is True
    fixed = {"QMD_EMBED_MODEL": str(tiny_models["embed"])}
    code, report = doctor("--quick", "--fix", env=fixed)
    flag = find(report, "health flag")
    assert flag["status"] == "ok" and "succeeded" in flag["repaired"] and "last success" in flag["detail"]
    assert json.loads((state / "health.json").read_text())["raised"] is False


def test_an_enrolled_repo_whose_hook_was_deleted_or_made_non_executable(indexed: Path, state: Path) -> None:
    assert qmd_in("hooks", "install", str(indexed)).returncode == 0
    hook = indexed / ".git" / "hooks" / "post-commit"
    hook.unlink()
    (indexed / ".git" / "hooks" / "post-merge").chmod(0o644)
    code, report = doctor("--quick")
    check = find(report, "git hooks")
    assert code == 2 and check["status"] == "fail" and "post-commit: missing" in check["detail"] and "post-merge: not-executable" in check["detail"]
    assert check["fix"] == f"qmd hooks install {indexed}"
    code, report = doctor("--quick", "--fix")
    check = find(report, "git hooks")
    assert code == 0 and check["status"] == "ok" and check["repaired"].startswith("reinstalled")
    assert hook.exists() and os.access(hook, os.X_OK) and (indexed / ".git" / "hooks" / "post-merge").stat().st_mode & 0o111
    commit(indexed, "after.md", "# After\n\nqueued again.\n")
    assert list((state / "queue" / "new").iterdir())  # the repaired hook queues a request


def _corrupt_pages(path: Path) -> None:
    size = path.stat().st_size
    assert size > 4 * 4096
    with open(path, "r+b") as f:
        f.seek(4096 * 2)
        f.write(b"\xde\xad\xbe\xef" * (1024 * 2))


@pytest.mark.slow
def test_a_corrupted_index_is_rebuilt_into_a_new_file_and_the_broken_one_kept(indexed: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert qmd_in("embed").returncode == 0
    path = index_file()
    qmd_in("cleanup")  # checkpoint: every page in the main file
    _corrupt_pages(path)
    code, report = doctor()
    check = find(report, "index [index]")
    assert code == 2 and check["status"] == "fail" and "corrupted" in check["detail"] and check["fix"] == "qmd rebuild"
    code, report = doctor("--fix")
    check = find(report, "index [index]")
    assert check["status"] == "ok" and "rebuilt from the config: 6 documents" in check["repaired"], check
    assert "re-embedded 6 documents" in check["repaired"]
    assert "6 documents embedded" in find(doctor("--quick")[1], "vectors")["detail"]
    kept = sorted(path.parent.glob("index.sqlite.broken-*"))
    assert kept and kept[0].stat().st_size > 0
    assert "qmd://notes/note3.md" in qmd_in("search", "rollback", "--json").stdout
    assert code == 0, failing(report)


def test_qmd_rebuild_on_an_unreadable_header(indexed: Path) -> None:
    path = index_file()
    qmd_in("cleanup")
    with open(path, "r+b") as f:
        f.write(b"not a database at all, sorry" * 4)
    code, report = doctor("--quick")
    assert code == 2 and "corrupted" in find(report, "index [index]")["detail"]
    proc = qmd_in("rebuild")
    assert proc.returncode == 0, proc.stderr
    assert "6 documents" in proc.stderr and "kept at" in proc.stderr
    assert doctor("--quick")[0] == 0


_HOLD_LOCK = """
import sys, apsw
conn = apsw.Connection(sys.argv[1])
conn.execute("PRAGMA locking_mode = EXCLUSIVE")
conn.execute("BEGIN EXCLUSIVE")
conn.execute("UPDATE documents SET active = active")
print("locked", flush=True)
sys.stdin.read()
"""


@contextmanager
def _locked_by_another_process(path: Path) -> Iterator[None]:
    """Another program (an SQLite browser, a script) holding the index file locked exclusively."""
    import sys

    holder = subprocess.Popen([sys.executable, "-c", _HOLD_LOCK, str(path)], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "locked"
        yield
    finally:
        holder.kill()
        holder.wait(10)


@pytest.mark.slow
def test_an_index_another_process_holds_locked_is_busy_not_corrupted_and_never_rebuilt(indexed: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """A lock past the busy timeout was read as damage: doctor said "corrupted", offered
    `qmd rebuild`, and a rebuild moved the sound file aside as .broken with its vectors."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    assert qmd_in("embed").returncode == 0
    path = index_file()
    with _locked_by_another_process(path):
        code, report = doctor("--quick", "--fix")
        check = find(report, "index [index]")
        assert code == 2 and check["status"] == "fail" and "locked by another process" in check["detail"], check
        assert "corrupted" not in check["detail"] and "rebuild" not in (check["fix"] or "") and not check.get("repaired"), check
        assert "6 documents" in find(report, "collection notes")["detail"] or find(report, "collection notes")["status"] == "ok"
        proc = qmd_in("rebuild")
        assert proc.returncode not in (0, 3) and "locked by another process" in proc.stderr, proc.stderr
    assert not list(path.parent.glob("index.sqlite.b*")), list(path.parent.iterdir())  # nothing moved aside
    code, report = doctor("--quick")
    assert code == 0, failing(report)
    assert "6 documents embedded" in find(report, "vectors")["detail"]


def _documents_page(data: bytes) -> int:
    """The byte offset of the documents table's b-tree page in a sound index's bytes."""
    copy = index_file().with_name("sound-copy.sqlite")
    copy.write_bytes(data)
    conn = apsw.Connection(str(copy), flags=apsw.SQLITE_OPEN_READONLY)
    page = int(conn.execute("SELECT rootpage FROM sqlite_master WHERE name = 'documents'").fetchall()[0][0])
    conn.close()
    copy.unlink()
    return (page - 1) * 4096


DAMAGE: dict[str, Callable[[bytes], bytes]] = {
    "0-byte file": lambda data: b"",
    "truncated file": lambda data: data[: len(data) - 3 * 4096],
    "random bytes in a b-tree page": lambda data: data[: _documents_page(data)] + os.urandom(4096) + data[_documents_page(data) + 4096 :],
    "random bytes in the middle": lambda data: data[: 2 * 4096] + b"\xde\xad\xbe\xef" * 2048 + data[4 * 4096 :],
    "overwritten header": lambda data: b"not a database at all, sorry" * 4 + data[112:],
    "a text file in its place": lambda data: b"# shopping\n\n- milk\n",
}


@pytest.mark.parametrize("kind", list(DAMAGE))
@pytest.mark.slow
def test_a_damaged_index_fails_quick_and_fix_rebuilds_it(indexed: Path, kind: str) -> None:
    path = index_file()
    assert qmd_in("cleanup").returncode == 0  # checkpoint: every page in the main file
    for side in (Path(f"{path}-wal"), Path(f"{path}-shm")):
        side.unlink(missing_ok=True)
    damaged = DAMAGE[kind](path.read_bytes())
    path.write_bytes(damaged)
    code, report = doctor("--quick")
    check = find(report, "index [index]")
    assert code == 2 and check["status"] == "fail" and "corrupted" in check["detail"] and check["fix"] == "qmd rebuild", check
    code, report = doctor("--quick", "--fix")
    check = find(report, "index [index]")
    assert check["status"] == "ok" and "rebuilt from the config: 6 documents" in check["repaired"], check
    assert "the broken file is kept at" in check["repaired"]
    assert code == 0, [c for c in report["checks"] if c["status"] == "fail"]
    kept = [p for p in path.parent.glob("index.sqlite.broken-*") if not p.name.endswith(("-wal", "-shm"))]
    assert len(kept) == 1 and kept[0].read_bytes() == damaged  # the damaged file is kept as it was
    assert "qmd://notes/note3.md" in qmd_in("search", "rollback", "--json").stdout


def _conn() -> apsw.Connection:
    return apsw.Connection(str(index_file()))


def test_fts_rows_that_drifted_are_rewritten(indexed: Path) -> None:
    with _conn() as conn:
        conn.execute("DELETE FROM documents_fts WHERE rowid IN (SELECT id FROM documents LIMIT 2)")
    assert len(json.loads(qmd_in("search", "rollback", "--json", "-n", "20").stdout)) == 4
    code, report = doctor("--quick")
    check = find(report, "full-text rows")
    assert code == 2 and "2 documents unsearchable" in check["detail"]
    code, report = doctor("--quick", "--fix")
    check = find(report, "full-text rows")
    assert code == 0 and check["status"] == "ok" and "rewrote 6 full-text rows" in check["repaired"]
    assert len(json.loads(qmd_in("search", "rollback", "--json", "-n", "20").stdout)) == 6


@pytest.mark.slow
def test_a_schema_behind_is_named_and_fix_migrates(indexed: Path) -> None:
    with _conn() as conn:
        conn.execute("DROP TABLE llm_cache; DELETE FROM schema_migrations WHERE name = '0003_llm_cache'")
    code, report = doctor("--quick")
    check = find(report, "schema")
    assert code == 0 and check["status"] == "warn" and "pending 0003_llm_cache" in check["detail"]
    code, report = doctor_cli("--quick", "--strict")
    assert code == 1 and report["exit_code"] == 1  # warnings fail only under --strict (the real exit code)
    assert doctor("--quick", "--strict")[0] == 1
    code, report = doctor("--quick", "--fix")
    assert find(report, "schema")["status"] == "ok" and find(report, "schema")["repaired"] == "applied the pending migrations"


def test_orphans_are_cleaned_after_a_verified_backup(indexed: Path) -> None:
    for i in range(60):
        (indexed / f"bulk{i}.md").write_text(f"# Bulk {i}\n\nversion one {i}\n")
    assert qmd_in("update").returncode == 0
    for i in range(60):
        (indexed / f"bulk{i}.md").write_text(f"# Bulk {i}\n\nversion two {i}\n")
    assert qmd_in("update").returncode == 0
    code, report = doctor("--quick")
    check = find(report, "orphans")
    assert check["status"] == "warn" and "60 of 126 contents" in check["detail"] and check["fix"] == "qmd cleanup"
    code, report = doctor("--quick", "--fix")
    check = find(report, "orphans")
    assert check["status"] == "ok" and "0 of 66 contents" in check["detail"] and "verified backup" in check["repaired"]
    [backup] = index_file().parent.glob("index.sqlite.backup-*")
    with apsw.Connection(str(backup)) as conn:
        assert conn.execute("SELECT count(*) FROM content").fetchall()[0][0] == 126


@pytest.mark.slow
def test_new_guard_errors_warn_once_then_the_watermark_moves(indexed: Path, state: Path) -> None:
    log = state / "guard" / "errors.log"
    log.parent.mkdir(parents=True, exist_ok=True)
    log.write_text("2026-11-30T00:00:00Z qmd-guard: KeyError: 'tool_input'\n")
    code, report = doctor("--quick")
    check = find(report, "guard errors")
    assert code == 0 and check["status"] == "warn" and "1 new line" in check["detail"] and "KeyError" in check["detail"]
    assert doctor("--quick")[1]["checks"] and find(doctor("--quick")[1], "guard errors")["status"] == "ok"
    with open(log, "a") as f:
        f.write("2026-11-30T00:01:00Z qmd-guard: second\n")
    assert "second" in find(doctor("--quick")[1], "guard errors")["detail"]


def test_a_guard_hook_removed_from_the_settings_fails_loudly(indexed: Path, state: Path) -> None:
    assert qmd_in("guard", "install", "--claude").returncode == 0
    assert find(doctor("--quick")[1], "agent guard")["status"] == "ok"
    settings = Path(os.environ["HOME"]) / ".claude" / "settings.json"
    data = json.loads(settings.read_text())
    data["hooks"].pop("PreToolUse")
    settings.write_text(json.dumps(data))
    code, report = doctor("--quick")
    check = find(report, "agent guard")
    assert code == 2 and "no qmd-guard PreToolUse hook" in check["detail"] and check["fix"] == "qmd guard install --claude"


@pytest.mark.parametrize("index", ["no/such name", "a b", "/etc/passwd"])
def test_doctor_that_cannot_start_is_one_line_and_exit_2(indexed: Path, index: str) -> None:
    """A bad --index is bad input: one line, exit 2 (it was 3, qmd's code for its own bugs)."""
    proc = run_qmd("doctor", "--quick", "--index", index)
    assert proc.returncode == 2 and "doctor could not run" in proc.stderr and len(proc.stderr.strip().splitlines()) <= 2, proc.stderr


def _tree(root: Path, skip: Path | None = None) -> dict[str, bytes]:
    out = {}
    for path in sorted(root.rglob("*")):
        if skip and (path == skip or skip in path.parents):
            continue
        if path.is_file() and "__pycache__" not in path.parts:
            out[str(path.relative_to(root))] = path.read_bytes()
        elif path.is_dir() and not any(path.iterdir()):
            out[str(path.relative_to(root)) + "/"] = b""
    return out


@pytest.mark.slow
def test_teardown_round_trip_leaves_no_trace(indexed: Path, state: Path, tmp_path: Path) -> None:
    home = Path(os.environ["HOME"])
    (indexed / ".git" / "hooks" / "post-merge").write_text("#!/bin/sh\necho mine\n")
    (indexed / ".git" / "hooks" / "post-merge").chmod(0o755)
    before_home, before_repo = _tree(home), _tree(indexed)
    before_state = set(_tree(state)) if state.exists() else set()
    assert run_qmd("hooks", "install", str(indexed)).returncode == 0
    assert run_qmd("guard", "install", "--claude", "--codex").returncode == 0
    assert run_qmd("mcp", "install", "--claude").returncode == 0
    assert run_qmd("mcp", "install", "--codex").returncode == 0
    assert run_qmd("updater", "install-service", "--no-start").returncode == 0
    _daemon()
    launcher = home / ".local" / "bin" / "qmd"
    launcher.parent.mkdir(parents=True)
    launcher.write_text(f"#!/bin/sh\n# qmd launcher written by {REPO}/install.sh\nexec qmd \"$@\"\n")
    assert _tree(home) != before_home and _tree(indexed) != before_repo

    refused = run_qmd("teardown")
    assert refused.returncode == 1 and "--yes" in refused.stderr and "will:" in refused.stdout
    proc = run_qmd("teardown", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    for word in ("git hooks", "agent guard", "MCP registrations", "updater service", "launcher", "MCP HTTP server"):
        assert word in proc.stdout
    # Kept like the index they sit beside: the parsed copy of the config and the MCP server's
    # instructions, which any qmd command may write (they are data, not installed files).
    derived = (".cache/qmd/config/", ".cache/qmd/mcp/")
    after_home = {k: v for k, v in _tree(home).items() if not k.startswith(derived)}
    before_home = {k: v for k, v in before_home.items() if not k.startswith(derived)}
    assert after_home == before_home, set(after_home) ^ set(before_home)
    assert _tree(indexed) == before_repo
    assert not list(state.glob("mcp-*.json")) and not (state / "guard" / "installed.json").exists()
    assert run_qmd("search", "rollback").returncode == 0  # the index and config stay
    assert set(_tree(state)) - before_state <= {p for p in _tree(state) if p.startswith(("logs/", "queue/", "hooks/", "health", "stats", "doctor/"))}

    again = run_qmd("teardown", "--yes", "--purge")
    assert again.returncode == 0
    assert not (home / ".cache" / "qmd").exists() and not (home / ".config" / "qmd").exists() and not state.exists()


@pytest.mark.slow
def test_teardown_restores_files_the_user_already_had(indexed: Path, state: Path) -> None:
    home = Path(os.environ["HOME"])
    claude_json = home / ".claude.json"
    claude_json.write_text(json.dumps({"mcpServers": {"other": {"type": "stdio", "command": "other-server"}}, "theme": "dark"}, indent=2) + "\n")
    settings = home / ".claude" / "settings.json"
    settings.parent.mkdir()
    settings.write_text(json.dumps({"hooks": {"PreToolUse": [{"matcher": "Bash", "hooks": [{"type": "command", "command": "my-hook"}]}]}}) + "\n")
    codex = home / ".codex" / "config.toml"
    codex.parent.mkdir()
    codex.write_text('model = "o3"\n\n[mcp_servers.other]\ncommand = "other"\n')
    before = _tree(home)
    for argv in (("guard", "install", "--claude", "--codex"), ("mcp", "install", "--claude"), ("mcp", "install", "--codex")):
        assert run_qmd(*argv).returncode == 0
    assert "qmd" in json.loads(claude_json.read_text())["mcpServers"] and "[mcp_servers.qmd]" in codex.read_text()
    proc = run_qmd("teardown", "--yes")
    assert proc.returncode == 0, proc.stdout + proc.stderr
    after = _tree(home)
    assert set(after) == set(before), set(after) ^ set(before)
    assert json.loads(claude_json.read_text()) == json.loads(before[".claude.json"])
    assert json.loads(settings.read_text()) == json.loads(before[".claude/settings.json"])
    assert codex.read_text().strip() == before[".codex/config.toml"].decode().strip()


@pytest.mark.slow
def test_models_a_switched_embed_model_and_a_file_that_is_not_gguf(indexed: Path, tiny_models: dict[str, Path], tmp_path: Path) -> None:
    assert qmd_in("embed", env={"QMD_EMBED_MODEL": str(tiny_models["embed"])}).returncode == 0
    code, report = doctor("--quick", env={"QMD_EMBED_MODEL": str(tiny_models["embed_b"])})
    vectors = find(report, "vectors")
    assert code == 0 and vectors["status"] == "warn" and "6 documents need re-embedding" in vectors["detail"] and vectors["fix"] == "qmd embed"
    fake = tmp_path / "reranker.gguf"
    fake.write_bytes(b"<html>not a model</html>")
    code, report = doctor("--quick", env={"QMD_EMBED_MODEL": str(tiny_models["embed"]), "QMD_RERANK_MODEL": str(fake)})
    rerank = find(report, "rerank model")
    assert code == 2 and rerank["status"] == "fail" and "is not a GGUF file" in rerank["detail"]
    assert find(report, "vectors")["status"] == "ok"
    code, report = doctor("--quick", env={"QMD_GENERATE_MODEL": str(tmp_path / "gone.gguf")})
    assert code == 2 and "is configured but" in find(report, "generate model")["detail"]


def _config_file() -> Path:
    return Path(os.environ["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"


def _gone(folder: Path) -> None:
    shutil.rmtree(folder)


def _made_a_file(folder: Path) -> None:
    shutil.rmtree(folder)
    folder.write_text("the notes folder became a file\n")


@pytest.mark.parametrize("damage", [_gone, _made_a_file], ids=["folder gone", "folder made a file"])
def test_a_collection_whose_folder_is_gone_fails_with_both_ways_out(indexed: Path, damage: Callable[[Path], None]) -> None:
    damage(indexed)
    code, report = doctor("--quick")
    check = find(report, "collection notes")
    assert code == 2 and check["status"] == "fail", check
    index_group = [c for c in report["checks"] if c["group"] in ("index", "models")]  # why the counts were not read, when they were not
    assert str(indexed) in check["detail"] and "6 documents" in check["detail"], index_group
    assert "qmd collection remove notes" in check["fix"] and "restore" in check["fix"], check


def test_a_collection_whose_folder_is_there_is_ok(indexed: Path) -> None:
    check = find(doctor("--quick")[1], "collection notes")
    assert check["status"] == "ok" and str(indexed) in check["detail"]


def test_unknown_config_keys_are_warnings_in_the_index_group(indexed: Path) -> None:
    config = _config_file()
    config.write_text(config.read_text().replace("    pattern:", "    patern: '*.txt'\n    pattern:") + "modles:\n  embed: x\n")
    code, report = doctor("--quick")
    warned = [c for c in report["checks"] if c["group"] == "index" and c["status"] == "warn" and "unknown key" in c["detail"]]
    details = " | ".join(c["detail"] for c in warned)
    assert code == 0 and len(warned) == 2, report["checks"]
    assert "unknown key 'patern'; did you mean 'pattern'?" in details and "'modles'" in details and "'models'" in details
    assert all(str(config.name) in c["fix"] for c in warned), warned
    assert doctor("--quick", "--strict")[0] == 1


def test_a_collection_removed_from_the_config_by_hand_is_reported_as_orphaned(indexed: Path, tmp_path: Path) -> None:
    other = make_repo(tmp_path / "other", {"secret.md": "# Secret\n\nThe other collection's rollback.\n"})
    assert qmd_in("collection", "add", str(other), "--name", "other").returncode == 0
    config = _config_file()
    text = config.read_text()
    start = text.index("  other:")
    config.write_text(text[:start] + "\n".join(line for line in text[start:].splitlines()[1:] if not line.startswith("    ")) + "\n")
    assert "other" not in config.read_text()
    code, report = doctor("--quick")
    check = find(report, "orphaned collections")
    assert code == 0 and check["status"] == "warn" and "'other'" in check["detail"] and check["fix"] == "qmd cleanup", check
    code, report = doctor("--quick", "--fix")
    check = find(report, "orphaned collections")
    assert check["status"] == "ok" and "other" in check["repaired"], check
    with apsw.Connection(str(index_file())) as conn:
        assert conn.execute("SELECT count(*) FROM documents WHERE collection = 'other'").fetchall() == [(0,)]


def test_two_collections_over_the_same_folder_are_a_warning(indexed: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    """The same folder added twice: every hit twice. Doctor names both and how to keep one."""
    assert find(doctor("--quick")[1], "index [")["status"] == "ok"
    assert not [c for c in doctor("--quick")[1]["checks"] if c["name"].startswith("collections ")]
    assert cli("collection", "add", str(indexed), "--name", "twice")[0] == 0
    code, report = doctor("--quick")
    check = find(report, "collections twice, notes")
    assert code == 0 and check["status"] == "warn", check
    assert "'twice' indexes the same folder as 'notes': 6 files are in both" in check["detail"] and check["fix"] == "qmd collection remove twice", check


def test_a_model_file_that_is_not_gguf_names_the_file_and_not_qmd_pull(indexed: Path, tmp_path: Path) -> None:
    fake = tmp_path / "reranker.gguf"
    fake.write_bytes(b"<html>not a model</html>")
    code, report = doctor("--quick", env={"QMD_RERANK_MODEL": str(fake)})
    check = find(report, "rerank model")
    assert code == 2 and check["status"] == "fail" and "qmd pull" not in check["fix"], check
    assert str(fake) in check["fix"] and "qmd models import" in check["fix"], check


def test_a_state_folder_that_became_a_file_names_the_whole_path_and_the_fix(indexed: Path, state: Path) -> None:
    queue_dir = state / "queue"
    shutil.rmtree(queue_dir, ignore_errors=True)
    state.mkdir(parents=True, exist_ok=True)
    queue_dir.write_text("not a folder\n")
    code, report = doctor("--quick")
    check = find(report, "state folder")
    assert code == 2 and check["status"] == "fail", check
    assert "…" not in check["fix"] and "..." not in check["fix"], check
    assert shlex.quote(str(queue_dir)) in check["fix"] and check["fix"].startswith("mv "), check
    subprocess.run(check["fix"].split("#")[0], shell=True, check=True)
    assert queue_dir.with_name("queue.moved-aside").is_file() or any(p.name.startswith("queue.") for p in state.iterdir())


@pytest.mark.slow
def test_vectors_embedded_before_section_units_warn_with_qmd_embed(indexed: Path, tiny_models: dict[str, Path]) -> None:
    """Issue 29: an index embedded with the windows alone (before section units became the
    default) is named as vectors of other settings, with `qmd embed` as the fix."""
    env = {"QMD_EMBED_MODEL": str(tiny_models["embed"])}
    assert qmd_in("embed", env=env | {"QMD_CHUNK_SECTIONS": "0"}).returncode == 0
    code, report = doctor("--quick", env=env)
    vectors = find(report, "vectors")
    assert code == 0 and vectors["status"] == "warn" and vectors["fix"] == "qmd embed", vectors
    assert "come from another model or settings" in vectors["detail"] and "6 documents need re-embedding" in vectors["detail"]
    assert qmd_in("embed", env=env).returncode == 0
    assert find(doctor("--quick", env=env)[1], "vectors")["status"] == "ok"


def test_a_broken_second_config_fails_its_own_index_and_hides_no_other_models_check(indexed: Path) -> None:
    """A second index whose YAML is broken: its index row fails with the file named; the models
    group still checks the healthy index (it read 'the check itself failed … report this',
    a doctor bug, and dropped every index's model rows)."""
    broken = _config_file().with_name("work.yml")
    broken.write_text("collections:\n  notes: [unclosed\n")
    code, report = doctor("--quick")
    models = [c for c in report["checks"] if c["group"] == "models"]
    assert not any("the check itself failed" in c["detail"] for c in report["checks"]), models
    assert any(c["name"] == "embed model" for c in models), models
    [row] = [c for c in models if c["name"] == "models [work]"]
    assert row["status"] == "fail" and "not valid YAML" in row["detail"] and str(broken) in row["fix"]
    assert code == 2


@pytest.mark.parametrize("sub", ["tmp", "cur", "failed"])
def test_a_queue_subfolder_in_the_way_is_a_failure_not_a_quiet_loss(indexed: Path, state: Path, sub: str) -> None:
    """queue/tmp as a file (or a dangling link): every hook logs 'NOT queued' and the updater
    cannot start, while health said 'not raised' and doctor's queue row was ✓ (only the root,
    queue/, queue/new and failures/ were looked at)."""
    from updater import health

    folder = state / "queue" / sub
    folder.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(folder, ignore_errors=True)
    if sub == "cur":
        folder.symlink_to(state / "nowhere")
    else:
        folder.write_text("not a folder\n")
    assert health.snapshot(__import__("qmd").harness.StateLayout(state))["problems"]
    code, report = doctor("--quick")
    check = find(report, "state folder")
    assert code == 2 and check["status"] == "fail" and str(folder) in check["detail"], check
    assert check["fix"].startswith("mv " + shlex.quote(str(folder))), check


def _commit_not_queued(repo: Path, state: Path) -> Path:
    """Hooks installed in `repo`, then a commit whose request cannot be queued (a file where
    queue/tmp goes, removed after): returns queue/tmp."""
    assert run_qmd("hooks", "install", str(repo)).returncode == 0
    tmp = state / "queue" / "tmp"
    tmp.parent.mkdir(parents=True, exist_ok=True)
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.write_text("in the way\n")
    assert commit(repo, "lost.md", "# Lost\n").returncode == 0
    tmp.unlink()  # the cause is gone, the request is still lost
    return tmp


def test_a_commit_the_hook_could_not_queue_fails_until_a_later_commit_queues(indexed: Path, state: Path) -> None:
    """The hook's only trace of a lost request is 'NOT queued' in hooks.log (a state dir a
    `sudo qmd …` left root-owned, a full disk, a folder in the way): doctor reads the latest
    line of each repository there, and a later commit that queues clears it."""
    tmp = _commit_not_queued(indexed, state)
    code, report = doctor("--quick")
    check = find(report, "hook queueing")
    assert code == 2 and check["status"] == "fail", check
    assert str(indexed) in check["detail"] and "NOT queued" in check["detail"] and check["fix"].startswith("qmd doctor --fix"), check
    code, report = doctor("--quick", "--fix")  # queues the lost request again
    assert find(report, "hook queueing")["status"] == "ok", report["checks"]
    [request] = [json.loads(p.read_text()) for p in (state / "queue" / "new").iterdir()]
    assert request["repo"] == str(indexed) and request["event"] == "doctor"
    shutil.rmtree(tmp)
    tmp.write_text("in the way again\n")
    assert commit(indexed, "lost.md", "# Lost again\n").returncode == 0
    tmp.unlink()
    assert find(doctor("--quick")[1], "hook queueing")["status"] == "fail"
    assert commit(indexed, "kept.md", "# Kept\n").returncode == 0  # a later commit that queues clears it
    assert find(doctor("--quick")[1], "hook queueing")["status"] == "ok"


def test_a_repository_path_with_a_newline_keeps_its_hooks_log_line_whole(indexed: Path, state: Path, tmp_path: Path) -> None:
    """A newline in a repository's path split the hook's hooks.log line in two, so neither half
    was read as a hook call and doctor never reported that repository's lost request. Now the
    hook writes the path's newlines as `\\n` (and backslashes as `\\\\`), doctor reads them
    back, and --fix queues the request for the real path."""
    repo = make_repo(tmp_path / "odd\nname\\x")
    _commit_not_queued(repo, state)
    lines = (state / "logs" / "hooks.log").read_text().split("\n")
    assert lines[-1] == "" and len(lines) == 2 and "NOT queued" in lines[0], lines
    assert f" post-commit {tmp_path}/odd\\nname\\\\x " in lines[0], lines
    code, report = doctor("--quick")
    check = find(report, "hook queueing")
    assert code == 2 and check["status"] == "fail" and "odd\\nname\\\\x: cannot write" in check["detail"], check
    assert "\n" not in check["detail"]
    code, report = doctor("--quick", "--fix")
    assert find(report, "hook queueing")["status"] == "ok", report["checks"]
    [request] = [json.loads(p.read_text()) for p in (state / "queue" / "new").iterdir()]
    assert request["repo"] == str(repo) and request["event"] == "doctor"
    assert commit(repo, "kept.md", "# Kept\n").returncode == 0  # the hook queues for the real path too
    assert sorted(json.loads(p.read_text())["repo"] for p in (state / "queue" / "new").iterdir()) == [str(repo)] * 2


def test_a_config_edited_by_hand_leaves_the_guard_cache_stale_until_fix_refreshes_it(indexed: Path, state: Path, tmp_path: Path) -> None:
    """The guard reads folders.json only, which qmd rewrites when it saves a config: a collection
    added to the YAML by hand went unprotected (and one removed stayed blocked) with nothing
    saying so, though the cache's own docstring promised doctor would."""
    config = _config_file()

    def add_by_hand(name: str) -> Path:
        folder = tmp_path / name
        folder.mkdir()
        config.write_text(config.read_text() + f"  {name}:\n    path: {folder}\n    pattern: '**/*.md'\n")
        return folder

    add_by_hand("first")
    assert find(doctor("--quick")[1], "guard folder cache")["status"] == "ok"  # no guard installed: the cache is unused
    assert run_qmd("guard", "install", "--claude").returncode == 0  # rewrites the cache from the configs
    assert find(doctor("--quick")[1], "guard folder cache")["status"] == "ok"
    second = add_by_hand("second")
    code, report = doctor("--quick")
    check = find(report, "guard folder cache")
    assert code == 2 and check["status"] == "fail" and f"not protected: {second}" in check["detail"] and check["fix"] == "qmd guard refresh", check
    code, report = doctor("--quick", "--fix")
    assert find(report, "guard folder cache")["status"] == "ok", report["checks"]
    assert str(second) in (state / "guard" / "folders.json").read_text()
