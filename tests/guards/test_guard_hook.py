"""`qmd-guard` end to end: the real console script as a subprocess, fed PreToolUse payloads.

The payloads in tests/fixtures/guard/ follow the payload shapes documented for Claude Code
2.x hooks and Codex CLI 0.5x hooks (see the README there); they were written from that
documentation, not recorded from a live agent. Every failure path must allow: exit 0,
nothing on stdout, one line in <state>/guard/errors.log.
"""

from __future__ import annotations

import json
import os
import stat
import subprocess
import sys
from pathlib import Path

import pytest

import qmd
from qmd import harness
from guards import blocklog
from guards import paths as guard_paths
from tests.support.run import qmd_env

GUARD = Path(sys.executable).parent / "qmd-guard"
FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "guard"
BLOCK_KEYS = {"ts", "session_id", "cwd", "tool", "input", "rule", "folder", "retry"}


def run_guard(data: bytes, env: dict[str, str] | None = None, python_args: tuple[str, ...] = (), cwd: Path | None = None) -> subprocess.CompletedProcess[bytes]:
    """The real `qmd-guard` script fed `data` on stdin (the timeout only catches a hang)."""
    cmd = [sys.executable, *python_args, str(GUARD)] if python_args else [str(GUARD)]
    return subprocess.run(cmd, input=data, capture_output=True, env=qmd_env(env), timeout=120, cwd=cwd)


def guard_dir() -> Path:
    return harness.state_dir() / "guard"


def blocks() -> list[dict[str, object]]:
    path = guard_dir() / "blocks.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []


def errors() -> list[str]:
    path = guard_dir() / "errors.log"
    return path.read_text().splitlines() if path.exists() else []


def payload(name: str, root: Path) -> bytes:
    return (FIXTURES / name).read_text().replace("{{ROOT}}", str(root)).encode()


def test_guard_script_is_installed_next_to_the_interpreter() -> None:
    assert GUARD.exists(), "run: .venv/bin/pip install -e . (creates the qmd-guard console script)"


FIXTURE_CASES = [
    ("claude_bash_root_sweep.json", "shell-search-root"),
    ("claude_bash_mentions_notes.json", None),
    ("claude_grep_notes.json", "grep-tool"),
    ("claude_grep_code.json", None),
    ("claude_glob_notes.json", None),
    ("codex_bash_cd_grep.json", "shell-search"),
    ("codex_bash_read_note.json", None),
]


@pytest.mark.parametrize("name, rule", FIXTURE_CASES)
def test_fixture_payloads(world: Path, name: str, rule: str | None) -> None:
    proc = run_guard(payload(name, world))
    assert proc.returncode == 0
    assert proc.stderr == b""
    sent = json.loads(payload(name, world))
    if rule is None:
        assert proc.stdout == b""
        assert blocks() == []
        return
    out = json.loads(proc.stdout)
    assert list(out) == ["hookSpecificOutput"]
    spec = out["hookSpecificOutput"]
    assert spec["hookEventName"] == "PreToolUse" and spec["permissionDecision"] == "deny"
    text = spec["permissionDecisionReason"]
    assert "qmd search 'retry policy' -c notes" in text and f"{world}/repo/notes" in text
    [line] = blocks()
    assert set(line) == BLOCK_KEYS
    assert line["rule"] == rule and line["tool"] == sent["tool_name"] and line["session_id"] == sent["session_id"]
    assert line["cwd"] == sent["cwd"] and line["input"] == sent["tool_input"] and line["retry"] is False
    assert line["folder"] == f"{world}/repo/notes"
    assert errors() == []


def test_root_sweep_reason_offers_the_narrowed_command(world: Path) -> None:
    proc = run_guard(payload("claude_bash_root_sweep.json", world))
    text = json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "grep -rn 'retry policy' README.md docs/guide.md src tests vendor/lib" in text


def test_reason_points_to_the_mcp_tool_when_registered(world: Path, isolated_home: Path) -> None:
    (isolated_home / ".claude.json").write_text(json.dumps({"mcpServers": {"qmd": {"type": "stdio", "command": "qmd", "args": ["mcp"]}}}))
    text = json.loads(run_guard(payload("claude_grep_notes.json", world)).stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "mcp__qmd__query" in text and '{"query": "retry policy"}' in text
    codex = json.loads(run_guard(payload("codex_bash_cd_grep.json", world)).stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "qmd search 'retry policy'" in codex  # Claude's registration says nothing about Codex
    (isolated_home / ".codex").mkdir()
    (isolated_home / ".codex" / "config.toml").write_text('[mcp_servers.qmd]\ncommand = "qmd"\nargs = ["mcp"]\n')
    codex = json.loads(run_guard(payload("codex_bash_cd_grep.json", world)).stdout)["hookSpecificOutput"]["permissionDecisionReason"]
    assert "`query` tool of the qmd MCP server" in codex and "qmd search" not in codex


def test_folders_written_by_qmd_itself(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    project = tmp_path / "proj"
    notes = project / "kb"
    (notes / "runbooks").mkdir(parents=True)
    (notes / "runbooks" / "deploy.md").write_text("# Deploy\nretry policy\n")
    (project / "src").mkdir()
    code, _out, err = cli("collection", "add", str(notes), "--name", "kb")
    assert code == 0, err
    assert (guard_dir() / "folders.json").exists()
    data = {"session_id": "s", "cwd": str(project), "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rg -n deploy"}}
    proc = run_guard(json.dumps(data).encode())
    assert proc.returncode == 0 and b'"deny"' in proc.stdout
    assert "rg -n deploy src" in json.loads(proc.stdout)["hookSpecificOutput"]["permissionDecisionReason"]


def test_retry_is_flagged_for_the_same_session_and_input(world: Path) -> None:
    first = json.loads(payload("codex_bash_cd_grep.json", world))
    run_guard(json.dumps(first).encode())
    again = dict(first, tool_input={"command": "cd notes  &&  rg -n 'retry policy'"})  # same after whitespace folding
    run_guard(json.dumps(again).encode())
    other = dict(first, session_id="another-session")
    run_guard(json.dumps(other).encode())
    assert [b["retry"] for b in blocks()] == [False, True, False]


def test_block_log_is_private(world: Path) -> None:
    run_guard(payload("claude_grep_notes.json", world))
    mode = stat.S_IMODE((guard_dir() / "blocks.jsonl").stat().st_mode)
    assert mode == 0o600


# -- fail open ------------------------------------------------------------------------------


def _assert_allowed(proc: subprocess.CompletedProcess[bytes]) -> None:
    assert proc.returncode == 0
    assert proc.stdout == b""
    assert proc.stderr == b""


@pytest.mark.parametrize(
    "data, logged",
    [
        (b"{not json", "JSONDecodeError"),
        (b"", "JSONDecodeError"),
        (b"   \n", "JSONDecodeError"),
        (b'["PreToolUse"]', "not a JSON object"),
        (b'{"tool_name": "Bash", "tool_input": {"command": "grep -r \xff\xfe notes"}}', "UnicodeDecodeError"),
        (b"\x00\x01\x02\xff" * 64, "UnicodeDecodeError"),
        (b'{"hook_event_name": "PreToolUse", "tool_name": "Bash", "cwd": "/", "tool_input": {"command": 42}}', "Bash tool_input.command is a number"),
        (b'{"hook_event_name": "PreToolUse", "tool_name": "WebFetch", "tool_input": {"url": "x"}}', "unknown tool or input shape"),
    ],
)
def test_bad_input_is_allowed_and_logged(world: Path, data: bytes, logged: str) -> None:
    _assert_allowed(run_guard(data))
    lines = errors()
    assert len(lines) == 1 and logged in lines[0], lines
    assert blocks() == []


def _bash(root: Path, command: str, **extra: object) -> bytes:
    data: dict[str, object] = {"session_id": "s", "cwd": f"{root}/repo", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                               "tool_input": {"command": command}}
    data.update(extra)
    return json.dumps(data).encode()


# (name, payload fields replacing the defaults, the words the logged error names). Each of these was
# denied before: a list command was joined and parsed, a Grep without pattern or with an integer path
# searched the cwd, a missing or bad cwd fell back to the hook's own working directory.
MALFORMED: list[tuple[str, dict[str, object], str]] = [
    ("bash-command-list", {"tool_input": {"command": ["grep", "-r", "foo", "notes"]}}, "Bash tool_input.command is a list"),
    ("bash-command-shell-list", {"tool_input": {"command": ["bash", "-lc", "grep -r foo notes"]}}, "Bash tool_input.command is a list"),
    ("bash-command-object", {"tool_input": {"command": {"argv": "grep -r foo notes"}}}, "Bash tool_input.command is an object"),
    ("bash-workdir-int", {"tool_input": {"command": "grep -r foo .", "workdir": 7}}, "Bash tool_input.workdir is a number"),
    ("grep-no-pattern", {"tool_name": "Grep", "tool_input": {"path": "{root}/repo/notes"}}, "Grep tool_input.pattern is missing"),
    ("grep-pattern-list", {"tool_name": "Grep", "tool_input": {"pattern": ["foo"], "path": "{root}/repo/notes"}}, "Grep tool_input.pattern is a list"),
    ("grep-int-path", {"tool_name": "Grep", "tool_input": {"pattern": "foo", "path": 42}}, "Grep tool_input.path is a number"),
    ("grep-int-glob", {"tool_name": "Grep", "tool_input": {"pattern": "foo", "path": "{root}/repo/notes", "glob": 5}}, "Grep tool_input.glob is a number"),
    ("cwd-missing", {"cwd": None}, "cwd is missing"),
    ("cwd-int", {"cwd": 42}, "cwd is a number"),
    ("cwd-relative", {"cwd": "repo"}, "cwd is not an absolute path"),
]


@pytest.mark.parametrize("name, fields, logged", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_is_allowed_and_logged(world: Path, name: str, fields: dict[str, object], logged: str) -> None:
    """Fail open, as the README promises: allow (even from inside the notes' repo) and say why in errors.log."""
    data = json.loads(_bash(world, "grep -r foo notes"))
    for key, value in fields.items():
        if value is None:
            data.pop(key)
        else:
            data[key] = json.loads(json.dumps(value).replace("{root}", str(world)))
    sent = json.dumps(data).encode()
    _assert_allowed(run_guard(sent, cwd=world / "repo"))  # the hook's own cwd is the notes' repo
    lines = errors()
    assert len(lines) == 1 and logged in lines[0] and "allowed" in lines[0], lines
    assert blocks() == []
    _assert_allowed(run_guard(sent, cwd=world / "repo"))
    assert len(errors()) == 1, "the same error is logged once"


def test_distinct_malformed_errors_get_a_line_each(world: Path) -> None:
    for fields in ({"cwd": 42}, {"tool_input": {"command": ["grep", "-r", "x", "notes"]}}, {"cwd": 42}):
        data = dict(json.loads(_bash(world, "grep -r foo notes")), **fields)
        _assert_allowed(run_guard(json.dumps(data).encode()))
    assert [("cwd is a number" in e, "is a list" in e) for e in errors()] == [(True, False), (False, True), (True, False)]


def _denied(proc: subprocess.CompletedProcess[bytes], rule: str) -> None:
    assert proc.returncode == 0 and proc.stderr == b"", proc.stderr
    spec = json.loads(proc.stdout)["hookSpecificOutput"]
    assert spec["permissionDecision"] == "deny"
    assert blocks()[-1]["rule"] == rule


FILLER = "x" * (1024 * 1024 + 100 * 1024)  # 1.1 MB: over the old 1 MiB cut-off
# (command over 1 MiB, the rule that denies it or None for allowed)
HUGE: list[tuple[str, str, str | None]] = [
    ("comment-after-root-sweep", "grep -rn foo . # " + FILLER, "shell-search-root"),
    ("quoted-filler-before-the-path", 'grep -rn "' + FILLER + '" notes', "shell-search"),
    ("unquoted-filler-word-before-the-path", "grep -rn foo " + FILLER + " notes", "shell-search"),
    ("blank-filler-before-the-path", "grep -rn foo" + " " * len(FILLER) + "notes", "shell-search"),
    ("heredoc-then-sweep", "cat > big.txt <<'EOF'\n" + FILLER + "\nEOF\ngrep -r foo notes", "shell-search"),
    ("sweep-then-many-commands", "grep -r foo notes; " + "true; " * 200_000, "shell-search"),
    ("comment-after-code-search", "grep -rn foo src # " + FILLER, None),
    ("echo-filler", "echo " + FILLER, None),
    ("heredoc-mentioning-notes", "cat > big.txt <<'EOF'\n" + "grep -r foo notes\n" * 70_000 + "EOF\nls", None),
    ("many-named-files", "grep foo " + "src/app.py " * 100_000, None),
]


@pytest.mark.parametrize("name, command, rule", HUGE, ids=[h[0] for h in HUGE])
def test_payloads_over_one_megabyte_are_decided(world: Path, name: str, command: str, rule: str | None) -> None:
    """Before: anything over 1 MiB was allowed unparsed, so a comment of filler let a sweep through."""
    data = _bash(world, command)
    assert len(data) > 1024 * 1024
    proc = run_guard(data)
    if rule is None:
        _assert_allowed(proc)
        assert blocks() == []
    else:
        _denied(proc, rule)
    assert errors() == []


def test_ten_megabyte_sweep_is_denied(world: Path) -> None:
    _denied(run_guard(_bash(world, "grep -r foo notes # " + "x" * (10 * 1024 * 1024))), "shell-search")
    _denied(run_guard(_bash(world, "grep -r foo notes " + "a " * (5 * 1024 * 1024))), "shell-search")
    assert errors() == []


def test_payload_over_the_hard_cap_is_allowed_and_logged(world: Path) -> None:
    from guards.hook import MAX_INPUT

    data = _bash(world, "grep -r foo notes # " + "x" * MAX_INPUT)
    assert len(data) > MAX_INPUT
    _assert_allowed(run_guard(data))
    assert len(errors()) == 1 and f"input over {MAX_INPUT} bytes" in errors()[0]


def _deny_payload(root: Path) -> bytes:
    return json.dumps({"session_id": "s", "cwd": f"{root}/repo", "hook_event_name": "PreToolUse", "tool_name": "Bash",
                       "tool_input": {"command": "grep -r foo notes"}}).encode()


def test_folders_json_that_fails_to_parse(world: Path) -> None:
    (guard_dir() / "folders.json").write_text('{"folders": [')
    _assert_allowed(run_guard(_deny_payload(world)))
    assert len(errors()) == 1 and "JSONDecodeError" in errors()[0]


@pytest.mark.parametrize("kind", ["fifo", "device"])
def test_folders_json_that_is_not_a_regular_file_allows_at_once(world: Path, kind: str) -> None:
    """A FIFO nobody writes (or a link to /dev/zero) where folders.json goes: the hook blocked in
    open()/read() until the agent's hook timeout, on every shell call the agent made."""
    import os

    folders = guard_dir() / "folders.json"
    folders.unlink()
    if kind == "fifo":
        os.mkfifo(folders)
    else:
        folders.symlink_to("/dev/zero")
    proc = subprocess.run([str(GUARD)], input=_deny_payload(world), capture_output=True, env=qmd_env(), timeout=20)
    _assert_allowed(proc)
    assert len(errors()) == 1 and "folders.json" in errors()[0] and "not a regular file" in errors()[0], errors()


def test_missing_folders_json(world: Path) -> None:
    (guard_dir() / "folders.json").unlink()
    _assert_allowed(run_guard(_deny_payload(world)))
    assert len(errors()) == 1 and "folders.json is missing" in errors()[0]


def test_guard_dir_is_a_regular_file(world: Path) -> None:
    """Nothing under <state>/guard can be read or written (the fault works as root)."""
    for child in guard_dir().iterdir():
        child.unlink()
    guard_dir().rmdir()
    guard_dir().write_text("not a folder")
    _assert_allowed(run_guard(_deny_payload(world)))
    assert guard_dir().read_text() == "not a folder"


def test_state_dir_is_a_regular_file(world: Path, tmp_path: Path) -> None:
    blocker = tmp_path / "state-is-a-file"
    blocker.write_text("x")
    _assert_allowed(run_guard(_deny_payload(world), env={"QMD_STATE_DIR": str(blocker)}))


def test_error_lines_are_not_repeated_within_a_minute(world: Path) -> None:
    for _ in range(3):
        _assert_allowed(run_guard(b"{not json"))
    assert len(errors()) == 1


# -- lean --------------------------------------------------------------------------------------


HEAVY = {"typer", "click", "yaml", "apsw", "sqlite_vec", "llama_cpp", "numpy", "rich", "tomllib"}
# A deny may use qmd's clock (the block line's timestamp) and where the agents' files are (the advice);
# an allow imports nothing of qmd.
DENY_QMD = {"qmd", "qmd.harness", "qmd.core", "qmd.core.lazy", "qmd.core.clock", "qmd.core.errors", "qmd.agents", "qmd.agents.locations", "qmd.agents.plugin", "qmd.core.fileio"}  # plugin: json, pathlib and locations (os, pathlib, errors) only; fileio (errno, json, os, stat): the agents' files are read only when regular (a repository's link to /dev/zero or a FIFO)


def _check_lean(modules: set[str], denied: bool) -> None:
    assert not {m for m in modules if m.split(".")[0] in HEAVY}
    of_qmd = {m for m in modules if m.split(".")[0] == "qmd"}
    assert of_qmd <= (DENY_QMD if denied else set()), of_qmd


@pytest.mark.parametrize("name, denied", [("claude_bash_root_sweep.json", True), ("claude_bash_mentions_notes.json", False)])
def test_hook_imports_no_typer_yaml_apsw_or_qmd(world: Path, name: str, denied: bool) -> None:
    proc = run_guard(payload(name, world), python_args=("-X", "importtime"))
    assert proc.returncode == 0 and bool(proc.stdout) == denied
    imported = {line.split("|")[-1].strip() for line in proc.stderr.decode().splitlines() if line.startswith("import time:")}
    assert "guards.hook" in imported
    _check_lean(imported, denied)


@pytest.mark.parametrize("name, denied", [("claude_bash_root_sweep.json", True), ("codex_bash_read_note.json", False), ("claude_grep_notes.json", True)])
def test_hook_sys_modules_stay_lean(world: Path, name: str, denied: bool) -> None:
    """The same check through sys.modules after a full decision (deny or allow) in a fresh interpreter."""
    code = (
        "import io, json, sys\n"
        "sys.stdin = io.TextIOWrapper(io.BytesIO(sys.argv[1].encode()))\n"
        "from guards.hook import main\n"
        "assert main() == 0\n"
        "sys.stderr.write(json.dumps(sorted(sys.modules)))\n"
    )
    proc = subprocess.run([sys.executable, "-c", code, payload(name, world).decode()], capture_output=True, text=True, env=qmd_env(), timeout=60)
    assert proc.returncode == 0, proc.stderr
    modules = set(json.loads(proc.stderr))
    assert "guards.hook" in modules
    _check_lean(modules, denied)


# -- block log unit behaviour ------------------------------------------------------------------


def test_guard_paths_match_qmd_state_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert guard_paths.state_dir() == str(harness.state_dir())
    monkeypatch.delenv("XDG_STATE_HOME")
    assert guard_paths.state_dir() == str(harness.state_dir())
    monkeypatch.setenv("XDG_STATE_HOME", "")
    assert guard_paths.state_dir() == str(harness.state_dir())
    monkeypatch.setenv("QMD_STATE_DIR", str(tmp_path / "explicit"))
    assert guard_paths.state_dir() == str(harness.state_dir())
    assert guard_paths.guard_file(guard_paths.FOLDERS) == str(harness.StateLayout.current().guard_folders)
    assert guard_paths.guard_file(guard_paths.BLOCKS) == str(harness.StateLayout.current().guard_blocks)
    assert guard_paths.guard_file(guard_paths.ERRORS) == str(harness.StateLayout.current().guard_errors)


def test_retry_window_is_ten_minutes() -> None:
    t0 = 1_800_000_000.0
    first = blocklog.record_block("s", "/w", "Bash", {"command": "rg foo notes"}, "shell-search", "/w/notes", now=t0)
    near = blocklog.record_block("s", "/w", "Bash", {"command": "rg foo notes"}, "shell-search", "/w/notes", now=t0 + 599)
    late = blocklog.record_block("s", "/w", "Bash", {"command": "rg foo notes"}, "shell-search", "/w/notes", now=t0 + 599 + 601)
    other = blocklog.record_block("s", "/w", "Bash", {"command": "rg bar notes"}, "shell-search", "/w/notes", now=t0 + 1201)
    assert [first["retry"], near["retry"], late["retry"], other["retry"]] == [False, True, False, False]
    assert blocklog.parse_ts(first["ts"]) == pytest.approx(t0, abs=0.001)


def test_block_log_rotates_at_ten_megabytes() -> None:
    path = guard_dir() / "blocks.jsonl"
    path.parent.mkdir(parents=True)
    path.write_bytes(b'{"filler": true}\n' * (blocklog.MAX_BYTES // 17 + 1))
    size = path.stat().st_size
    assert size >= blocklog.MAX_BYTES
    blocklog.record_block("s", "/w", "Grep", {"pattern": "x"}, "grep-tool", "/w/notes")
    assert (guard_dir() / "blocks.jsonl.1").stat().st_size == size
    assert len(path.read_text().splitlines()) == 1
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_long_inputs_are_clipped_in_the_log() -> None:
    record = blocklog.record_block("s", "/w", "Bash", {"command": "rg " + "y" * 10_000}, "shell-search", "/w/notes")
    assert len(record["input"]["command"]) <= blocklog.MAX_FIELD + 1  # type: ignore[index]


def test_timestamp_parsing_agrees_with_datetime() -> None:
    from datetime import datetime

    for seconds in (0.0, 951_782_400.5, 1_700_000_000.123, 1_709_164_800.0, 4_102_444_799.999):
        ts = harness.now_iso(seconds, millis=True)
        assert blocklog.parse_ts(ts) == pytest.approx(datetime.fromisoformat(ts.replace("Z", "+00:00")).timestamp(), abs=1e-6)
    assert blocklog.parse_ts("2026-01-02T03:04:05+00:00") == pytest.approx(datetime.fromisoformat("2026-01-02T03:04:05+00:00").timestamp())
    assert blocklog.parse_ts("yesterday") is None and blocklog.parse_ts(None) is None


def test_guard_allow_in_the_config_exempts_code_of_a_repo_wide_collection(tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    repo = tmp_path / "repo"
    (repo / "docs").mkdir(parents=True)
    (repo / "docs" / "a.md").write_text("# A\n")
    (repo / "src").mkdir()
    (repo / "src" / "app.py").write_text("x = 1\n")
    assert cli("collection", "add", str(repo), "--name", "repo")[0] == 0
    call = {"session_id": "s", "cwd": str(repo), "hook_event_name": "PreToolUse", "tool_name": "Bash", "tool_input": {"command": "rg -n foo src"}}
    assert b'"deny"' in run_guard(json.dumps(call).encode()).stdout
    config = qmd.resolve_index(None).config_path
    config.write_text(config.read_text() + "guard:\n  allow:\n    - " + str(repo / "src") + "\n")
    code, out, err = cli("guard", "refresh")
    assert code == 0 and "1 guard.allow" in out, err
    assert run_guard(json.dumps(call).encode()).stdout == b""


FASTJSON_CHECK = r'''
import sys
preloaded = set(sys.modules)  # site may already have imported re; json must still not be needed
from guards.fastjson import loads
good = ['{"a": [1, 2.5, -3e2, true, false, null, "x\\u00e9\\n"]}', '  {}  ', '[]', '"s"', '12', 'NaN', '[Infinity, -Infinity]', '\n{"d": {"x": [[[]]]}}\n']
decoded = [loads(text) for text in good]
assert "json" not in sys.modules and ("re" in preloaded or "re" not in sys.modules), "the good path imported json or re"
import json
assert [repr(d) for d in decoded] == [repr(json.loads(t)) for t in good]
for bad in ["", "   ", "{", '{"a":1} x', "[1,]", "{'a':1}", '"\x01"', "\ufeff{}", "1 2", "tru", '{"a" 1}', "{not json"]:
    try:
        json.loads(bad)
    except json.JSONDecodeError as e:
        expected = (e.msg, e.pos)
    try:
        loads(bad)
    except json.JSONDecodeError as e:
        assert (e.msg, e.pos) == expected, bad
    else:
        raise AssertionError(bad)
'''


def test_fastjson_matches_json_loads_without_importing_json() -> None:
    proc = subprocess.run([sys.executable, "-I", "-c", "import sys; sys.path.insert(0, sys.argv[1])\n" + FASTJSON_CHECK, str(Path(__file__).resolve().parents[2])],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
