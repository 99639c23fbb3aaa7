"""Codex hook trust: the hash and key qmd computes (unit tests, on vectors the real Codex 0.171.0
answered), checked against the real `codex app-server`, and doctor's warning through the whole
user path: `qmd guard install --codex` → warning → `qmd guard trust --codex` → clean → edit → warning.

HOME, CODEX_HOME and every XDG dir are under tmp_path (the autouse fixture plus CODEX_HOME here).
The real Codex comes from tests/support/npm_clients (skipped, saying why, where npm is missing).
"""

from __future__ import annotations

import json
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from guards import codex_trust
from guards.codex_trust import AppServer, CodexHook, hook_hash, hook_key, qmd_hooks, source_path, states
from tests.support.npm_clients import npm_bin

GUARD = shlex.quote(str(Path(sys.executable).parent / "qmd-guard"))
HEALTH = f"{shlex.quote(str(Path(sys.executable).parent / 'qmd'))} health --session-start"

# hooks.json with traps: an invalid matcher group before ours (Codex skips it but still counts
# it), a status message with non-ASCII and a newline, timeout 0, async, additionalContextLimit,
# an unknown field, a matcher with spaces, and a matcher on an event that takes none.
TRICKY: dict[str, Any] = {"hooks": {
    "PreToolUse": [
        {"matcher": "[", "hooks": [{"type": "command", "command": "x"}]},
        {"matcher": "^Bash$", "hooks": [
            {"type": "command", "command": "a b", "statusMessage": "hi ünï\n"},
            {"type": "command", "command": "c", "timeout": 0, "async": True, "additionalContextLimit": 7, "foo": 1},
        ]},
    ],
    "SessionStart": [{"matcher": "  startup ", "hooks": [{"type": "command", "command": "s"}]}],
    "Stop": [{"matcher": "zz", "hooks": [{"type": "command", "command": "t"}]}],
}}


@pytest.fixture
def codex_home(isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    home = isolated_home / ".codex"
    home.mkdir()
    monkeypatch.setenv("CODEX_HOME", str(home))
    return home


# --- the computation, without Codex ----------------------------------------------------------


@pytest.mark.parametrize(("event", "matcher", "handler", "expected"), [
    # each expected value is the currentHash Codex 0.171.0's hooks/list gave for that handler
    ("PreToolUse", "^Bash$", {"type": "command", "command": "/work/main/.venv/bin/qmd-guard", "timeout": 5},
     "sha256:c43e26563cdf5047282402bb2cf220b5bef62cdbe4d42c740268349e9eaf25de"),
    ("SessionStart", None, {"type": "command", "command": "/work/main/.venv/bin/qmd health --session-start", "timeout": 10},
     "sha256:c516bf5e73b63fda33d496b06ca5e11d235c97b9260dcca660491939eead63e0"),
    ("PreToolUse", "^Bash$", TRICKY["hooks"]["PreToolUse"][1]["hooks"][0],
     "sha256:57fa5aeb133f44cfffebdea631e14212c557f3bdc1d8cf48302cf858efadfd87"),
    ("PreToolUse", "^Bash$", TRICKY["hooks"]["PreToolUse"][1]["hooks"][1],
     "sha256:6594da234def8298378a222d2f8df1d5c14647e6f3147b937f8740104c54b12b"),
    ("SessionStart", "  startup ", {"type": "command", "command": "s"},
     "sha256:5207b17707f032d3a02fc055d0c226923ac40f90c9c5931f46f3ea619924aa67"),
    ("Stop", "zz", {"type": "command", "command": "t"},
     "sha256:9a34aef76106e08ae0a9c25d4b2e03aaf8373e2bc4ca2511ef00bb053d71bf1c"),
])
def test_hash_matches_what_codex_computed(event: str, matcher: str | None, handler: dict[str, Any], expected: str) -> None:
    assert hook_hash(event, matcher, handler) == expected


def test_what_changes_the_hash_and_what_does_not() -> None:
    base = {"type": "command", "command": "qmd-guard", "timeout": 5}
    h = hook_hash("PreToolUse", "^Bash$", base)
    assert hook_hash("PreToolUse", "^Bash$", {**base, "unknown": 1}) == h  # fields Codex does not know
    assert hook_hash("PreToolUse", "^Bash$", {**base, "statusMessage": None}) == h
    assert hook_hash("PreToolUse", "^Bash$", {**base, "async": False}) == h
    for other in ({**base, "timeout": 6}, {**base, "command": "qmd-guard2"}, {**base, "async": True}):
        assert hook_hash("PreToolUse", "^Bash$", other) != h
    assert hook_hash("PreToolUse", "Bash", base) != h and hook_hash("SessionStart", "^Bash$", base) != h
    no_timeout = {"type": "command", "command": "x"}
    assert hook_hash("Stop", None, no_timeout) == hook_hash("Stop", None, {**no_timeout, "timeout": 600})


def test_key_names_the_resolved_codex_home(tmp_path: Path) -> None:
    real = tmp_path / "real"
    real.mkdir()
    (tmp_path / "link").symlink_to(real)
    assert source_path(tmp_path / "link" / "hooks.json") == str(real / "hooks.json")
    assert hook_key("/h/hooks.json", "PreToolUse", 1, 0) == "/h/hooks.json:pre_tool_use:1:0"
    assert hook_key("/h/hooks.json", "SessionStart", 0, 2) == "/h/hooks.json:session_start:0:2"


def _install(codex_home: Path, before: dict[str, Any] | None = None) -> Path:
    path = codex_home / "hooks.json"
    data = json.loads(json.dumps(before or {"hooks": {}}))
    data["hooks"].setdefault("PreToolUse", []).append({"matcher": "^Bash$", "hooks": [{"type": "command", "command": GUARD, "timeout": 5}]})
    data["hooks"].setdefault("SessionStart", []).append({"hooks": [{"type": "command", "command": HEALTH, "timeout": 10}]})
    path.write_text(json.dumps(data, indent=2) + "\n")
    return path


def test_qmd_hooks_finds_ours_after_other_groups_and_reads_their_trust(codex_home: Path) -> None:
    path = _install(codex_home, TRICKY)
    pre, start = qmd_hooks()
    src = str(codex_home.resolve() / "hooks.json")
    assert (pre.event, pre.key, pre.command) == ("PreToolUse", f"{src}:pre_tool_use:2:0", GUARD)
    assert (start.event, start.key, start.command) == ("SessionStart", f"{src}:session_start:1:0", HEALTH)
    assert pre.status == start.status == "untrusted" and pre.enabled and start.enabled

    (codex_home / "config.toml").write_text(
        '[features]\nhooks = true\n\n[hooks.state]\n\n'
        f'[hooks.state.{json.dumps(pre.key)}]\ntrusted_hash = "{pre.current_hash}"\n\n'
        f'[hooks.state.{json.dumps(start.key)}]\ntrusted_hash = "sha256:{"0" * 64}"\nenabled = false\n'
        '[hooks.state."junk"]\nenabled = "not a bool"\n'
    )
    assert set(states(codex_home / "config.toml")) == {pre.key, start.key}
    pre, start = qmd_hooks()
    assert pre.status == "trusted" and start.status == "modified" and start.enabled is False
    assert qmd_hooks(path.with_name("missing.json")) == []


def test_no_config_or_a_broken_one_means_untrusted(codex_home: Path) -> None:
    _install(codex_home)
    (codex_home / "config.toml").write_text("this is = = not toml")
    assert [h.status for h in qmd_hooks()] == ["untrusted", "untrusted"]


def test_doctor_reads_each_state(codex_home: Path) -> None:
    from doctor.hooks import _codex_trust
    from doctor.results import Status

    path = _install(codex_home)
    check = _codex_trust(path)
    assert check.status is Status.WARN and "PreToolUse and SessionStart not trusted yet" in check.detail
    assert check.fix is not None and check.fix.startswith("qmd guard trust --codex") and "/hooks" in check.fix
    assert check.repair is None  # doctor --fix must never trust: that is the user's act
    hooks = qmd_hooks()
    lines = ["[hooks.state]"] + [f'[hooks.state.{json.dumps(h.key)}]\ntrusted_hash = "{h.current_hash}"' for h in hooks]
    (codex_home / "config.toml").write_text("\n".join(lines) + "\n")
    assert _codex_trust(path).status is Status.OK
    data = json.loads(path.read_text())
    data["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 6
    path.write_text(json.dumps(data))
    check = _codex_trust(path)
    assert check.status is Status.WARN and "PreToolUse changed since trusted" in check.detail and "SessionStart" not in check.detail
    (codex_home / "config.toml").write_text("[features]\nhooks = false\n" + "\n".join(lines) + "\n")
    check = _codex_trust(path)
    assert check.status is Status.WARN and "turned off" in check.detail and check.fix is not None and "hooks = true" in check.fix


# --- against the real Codex --------------------------------------------------------------------


def _listed(server: AppServer) -> dict[str, dict[str, Any]]:
    return {h["key"]: h for h in codex_trust.listed(server)}


def _agree(server: AppServer, ours: list[CodexHook]) -> dict[str, dict[str, Any]]:
    """Codex's hooks/list and qmd's own reading name the same keys, hashes and states."""
    listed = _listed(server)
    for hook in ours:
        got = listed[hook.key]
        assert (got["currentHash"], got["trustStatus"], got["command"], got["enabled"]) == (hook.current_hash, hook.status, hook.command, hook.enabled), hook
    return listed


@pytest.mark.slow
def test_computation_agrees_with_codex_app_server(codex_home: Path, monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    codex = str(npm_bin("codex"))
    link = tmp_path / "codex-link"
    link.symlink_to(codex_home)
    monkeypatch.setenv("CODEX_HOME", str(link))  # Codex names hooks.json by the resolved path; so must qmd
    path = _install(codex_home, TRICKY)
    with AppServer(codex) as server:
        listed = _agree(server, qmd_hooks())
        for key, got in listed.items():  # every other handler too, the skipped-group index included
            event = {"preToolUse": "PreToolUse", "sessionStart": "SessionStart", "stop": "Stop"}[got["eventName"]]
            assert key.startswith(source_path(path) + ":")
            group, handler = map(int, key.rsplit(":", 2)[1:])
            written = json.loads(path.read_text())["hooks"][event][group]
            assert hook_hash(event, written.get("matcher"), written["hooks"][handler]) == got["currentHash"], key
        # trust exactly as Codex's /hooks screen does, then read it back both ways
        ours = qmd_hooks()
        value = {h.key: {"trusted_hash": listed[h.key]["currentHash"]} for h in ours}
        server.request("config/batchWrite", {"edits": [{"keyPath": "hooks.state", "value": value, "mergeStrategy": "upsert"}], "reloadUserConfig": True})
        assert {h.status for h in qmd_hooks()} == {"trusted"}
        _agree(server, qmd_hooks())
        data = json.loads(path.read_text())
        data["hooks"]["SessionStart"][-1]["hooks"][0]["command"] += " --quiet"
        path.write_text(json.dumps(data))
        after = {h.event: h for h in qmd_hooks()}
        assert after["SessionStart"].status == "modified" and after["PreToolUse"].status == "trusted"
        assert _agree(server, list(after.values()))[after["SessionStart"].key]["trustStatus"] == "modified"
    assert server.proc.poll() is not None


def _trust_check(cli: Callable[..., tuple[int, str, str]]) -> dict[str, Any]:
    code, out, err = cli("doctor", "--json", "--quick")
    assert code in (0, 2), err
    checks: list[dict[str, Any]] = json.loads(out)["checks"]
    [check] = [c for c in checks if c["name"].startswith("codex hook trust")]
    return check


@pytest.mark.slow
def test_doctor_warns_until_the_user_trusts_and_again_after_an_edit(codex_home: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    codex = str(npm_bin("codex"))
    code, out, err = cli("guard", "install", "--codex")
    assert code == 0, err
    assert "qmd guard trust --codex" in out
    check = _trust_check(cli)
    assert check["status"] == "warn" and "PreToolUse and SessionStart not trusted yet" in check["detail"] and "skips" in check["detail"]
    assert check["fix"].startswith("qmd guard trust --codex") and "/hooks" in check["fix"]
    assert _trust_check(cli)["status"] == "warn"  # doctor changed nothing
    code, _out, err = cli("doctor", "--fix", "--quick")
    assert _trust_check(cli)["status"] == "warn"  # nor does --fix: trusting is the user's act
    config_before = (codex_home / "config.toml").read_text()

    code, out, err = cli("guard", "trust", "--codex", "--codex-bin", codex)
    assert code == 0, err
    assert out.count("trusted ") == 2 and "PreToolUse" in out and "SessionStart" in out
    config = (codex_home / "config.toml").read_text()
    assert config.startswith(config_before.rstrip("\n")) and "[hooks.state." in config and "trusted_hash" in config
    check = _trust_check(cli)
    assert check["status"] == "ok" and "trusted" in check["detail"]
    with AppServer(codex) as server:
        assert {h["trustStatus"] for k, h in _listed(server).items() if k in {x.key for x in qmd_hooks()}} == {"trusted"}
    code, out, err = cli("guard", "trust", "--codex", "--codex-bin", codex)
    assert code == 0 and out.count("already trusted") == 2

    hooks_json = codex_home / "hooks.json"
    data = json.loads(hooks_json.read_text())
    data["hooks"]["PreToolUse"][0]["hooks"][0]["timeout"] = 30  # the user edits the hook's definition
    hooks_json.write_text(json.dumps(data, indent=2) + "\n")
    check = _trust_check(cli)
    assert check["status"] == "warn" and "PreToolUse changed since trusted" in check["detail"] and check["fix"].startswith("qmd guard trust --codex")
    with AppServer(codex) as server:
        assert _listed(server)[qmd_hooks()[0].key]["trustStatus"] == "modified"


def test_trust_without_codex_or_without_our_hooks_says_what_to_do(codex_home: Path, cli: Callable[..., tuple[int, str, str]], monkeypatch: pytest.MonkeyPatch) -> None:
    code, _out, err = cli("guard", "trust", "--codex")
    assert code == 1 and "qmd guard install --codex" in err
    _install(codex_home)
    monkeypatch.setattr(codex_trust.shutil, "which", lambda name: None)
    code, _out, err = cli("guard", "trust", "--codex")
    assert code == 1 and "codex is not on PATH" in err and "--codex-bin" in err
    code, _out, err = cli("guard", "trust")
    assert code == 2 and "--codex" in err


# --- uninstall takes the trust with it ---------------------------------------------------------


def test_remove_hook_states_drops_only_the_named_entries(tmp_path: Path) -> None:
    from qmd.agents import remove_hook_states

    config = tmp_path / "config.toml"
    mine = '/h/hooks.json:pre_tool_use:0:0'
    theirs = '/h/hooks.json:stop:0:0'
    text = (
        '# my settings\nmodel = "gpt"\n\n[hooks.state]\n\n'
        f'[hooks.state."{mine}"]\ntrusted_hash = "sha256:aa"\n\n'
        f'[hooks.state."{theirs}"]\ntrusted_hash = "sha256:bb"\nenabled = false\n\n'
        '[profiles.x]\nmodel = "y"\n'
    )
    config.write_text(text)
    assert remove_hook_states(config, [mine, "/h/hooks.json:session_start:0:0"]) == [mine]
    left = config.read_text()
    assert mine not in left and theirs in left and 'enabled = false' in left and left.startswith('# my settings\nmodel = "gpt"\n')
    assert '[profiles.x]\nmodel = "y"\n' in left and "[hooks.state]" in left
    assert remove_hook_states(config, [mine]) == []  # nothing left of ours: the file is untouched
    assert config.read_text() == left
    assert remove_hook_states(config, [theirs]) == [theirs]
    assert "hooks.state" not in config.read_text()  # the empty header Codex wrote goes with them
    only = tmp_path / "only.toml"
    only.write_text(f'[hooks.state]\n\n[hooks.state."{mine}"]\ntrusted_hash = "sha256:aa"\n')
    assert remove_hook_states(only, [mine]) == [mine] and not only.exists()


def test_uninstall_removes_the_trust_codex_recorded(codex_home: Path, cli: Callable[..., tuple[int, str, str]]) -> None:
    codex = str(npm_bin("codex"))
    config = codex_home / "config.toml"
    config.write_text('# mine\nmodel = "gpt"\n')
    assert cli("guard", "install", "--codex")[0] == 0
    code, _out, err = cli("guard", "trust", "--codex", "--codex-bin", codex)
    assert code == 0, err
    assert "trusted_hash" in config.read_text()
    code, out, err = cli("guard", "uninstall", "--codex")
    assert code == 0, err
    assert "removed Codex's trust of qmd's hooks (2 entries)" in out
    assert config.read_text() == '# mine\nmodel = "gpt"\n'
