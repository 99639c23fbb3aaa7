"""`qmd hooks install|uninstall|status` on real repositories: plain, an existing hook, pre-commit,
husky, core.hooksPath, a worktree; uninstall restores byte for byte; a commit never fails."""

from __future__ import annotations

import json
import os
import stat
import sys
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import commit, fake_systemctl, git, make_repo, queue_files

HOOKS = ("post-commit", "post-merge", "post-rewrite")


def snapshot(folder: Path) -> dict[str, tuple[bytes | str, int]]:
    """Every entry below `folder`: bytes (or a symlink's target) and mode, to compare byte for byte."""
    out: dict[str, tuple[bytes | str, int]] = {}
    for path in sorted(folder.rglob("*")):
        rel = str(path.relative_to(folder))
        if path.is_symlink():
            out[rel] = (os.readlink(path), 0)
        elif path.is_file():
            out[rel] = (path.read_bytes(), stat.S_IMODE(path.stat().st_mode))
    return out


def requests(state_dir: Path) -> list[dict[str, str]]:
    folder = state_dir / "queue" / "new"
    return [json.loads((folder / n).read_text()) for n in queue_files(state_dir, "new")]


def test_install_in_a_plain_repo_queues_one_request_per_commit(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    assert all(f"{h}: installed" in out for h in HOOKS)
    for hook in HOOKS:
        path = repo / ".git" / "hooks" / hook
        assert os.access(path, os.X_OK) and path.read_text().startswith("#!/bin/sh\n# qmd-hooks-v1")
        assert str(state) in path.read_text()  # the state dir is baked in at install time
    proc = commit(repo, "notes/a.md", "# A\n")
    assert proc.returncode == 0 and proc.stdout == "" and proc.stderr == ""  # nothing printed on the commit path
    [req] = requests(state)
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert req["repo"] == str(repo) and req["event"] == "post-commit" and req["commit"] == head
    assert time.time() - time.mktime(time.strptime(req["time"], "%Y-%m-%dT%H:%M:%SZ")) + time.timezone < 120
    assert queue_files(state, "tmp") == []
    log = (state / "logs" / "hooks.log").read_text().splitlines()
    assert len(log) == 1 and log[0].endswith(f"post-commit {repo} {head} queued")

    again = cli("hooks", "install", str(repo))
    assert again[0] == 0 and again[1].count("already installed") == 3
    git(repo, "checkout", "-q", "-b", "side")
    commit(repo, "notes/b.md", "# B\n")
    git(repo, "checkout", "-q", "main")
    git(repo, "merge", "-q", "--no-ff", "-m", "merge side", "side")
    git(repo, "commit", "-q", "--amend", "-m", "merge side (amended)")
    events = sorted(r["event"] for r in requests(state))
    assert events == ["post-commit", "post-commit", "post-commit", "post-merge", "post-rewrite"]  # merge --no-ff commits too


def test_existing_hook_is_chained_with_its_arguments_and_stdin_and_restored(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    marks = tmp_path / "marks"
    marks.mkdir()
    (hooks / "post-rewrite").write_text(f'#!/bin/sh\necho "$1" > {marks}/args\ncat > {marks}/stdin\n')
    (hooks / "post-rewrite").chmod(0o750)
    (hooks / "post-commit").write_text(f"#!/bin/sh\necho ran >> {marks}/post-commit\nexit 3\n")
    (hooks / "post-commit").chmod(0o700)
    (hooks / "post-merge").write_text("#!/bin/sh\necho not executable\n")  # git ignores it; so must we
    (hooks / "post-merge").chmod(0o644)
    before = snapshot(hooks)

    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    assert out.count("kept as") == 3
    assert (hooks / "post-rewrite.legacy").read_bytes() == before["post-rewrite"][0]
    old = git(repo, "rev-parse", "HEAD").stdout.strip()
    proc = git(repo, "commit", "-q", "--amend", "-m", "amended")
    assert proc.returncode == 0
    new = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert (marks / "args").read_text() == "amend\n"
    assert (marks / "stdin").read_text().split() == [old, new]  # the legacy hook got git's stdin
    assert (marks / "post-commit").read_text() == "ran\n"  # post-commit runs on --amend too
    assert sorted(r["event"] for r in requests(state)) == ["post-commit", "post-rewrite"]

    assert cli("hooks", "install", str(repo))[1].count("already installed") == 3  # idempotent: .legacy untouched
    code, out, err = cli("hooks", "uninstall", str(repo))
    assert code == 0, err
    assert out.count("restored the previous hook") == 3
    assert snapshot(hooks) == before


def test_foreign_hook_with_a_foreign_legacy_is_refused(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    (hooks / "post-commit").write_text("#!/bin/sh\n")
    (hooks / "post-commit.legacy").write_text("#!/bin/sh\n")
    code, _out, err = cli("hooks", "install", str(repo))
    assert code == 1 and "post-commit.legacy already exists" in err and "hint:" in err
    assert (hooks / "post-commit").read_text() == "#!/bin/sh\n"


def test_an_orphan_legacy_hook_is_refused_before_anything_changes(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A `post-rewrite.legacy` with no `post-rewrite` is run by nothing; qmd's hook runs
    `$0.legacy`, so installing used to start running it on every rewrite (and uninstall then
    restored it as the live hook). Refused, naming it, before any hook is written."""
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    marks = tmp_path / "marks"
    (hooks / "post-rewrite.legacy").write_text(f"#!/bin/sh\necho orphan >> {marks}\n")
    (hooks / "post-rewrite.legacy").chmod(0o755)
    before = snapshot(hooks)
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 1 and "post-rewrite.legacy exists but" in err and "git does not run it now" in err and "hint: delete" in err, err
    assert snapshot(hooks) == before  # post-commit and post-merge were not written either
    assert "no repositories are enrolled" in cli("hooks", "status")[1].lower() or str(repo) not in cli("hooks", "status")[1]
    git(repo, "commit", "-q", "--amend", "-m", "amended")
    assert not marks.exists()
    (hooks / "post-rewrite.legacy").rename(hooks / "post-rewrite")  # the hint's other way: keep running it
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0 and "post-rewrite: installed; the existing hook was kept as post-rewrite.legacy" in out, out + err


def test_a_leftover_copy_of_qmds_hook_as_legacy_is_not_run_twice(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """qmd's own script left as `post-commit.legacy` (installed after pre-commit's hook, which was
    removed since): installing again used to queue two requests per commit."""
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    assert cli("hooks", "install", str(repo))[0] == 0
    (hooks / "post-commit").rename(hooks / "post-commit.legacy")
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0 and "post-commit: installed (a copy of qmd's hook left as post-commit.legacy was removed)" in out, out + err
    assert not (hooks / "post-commit.legacy").exists()
    commit(repo, "a.md", "# A\n")
    assert [r["event"] for r in requests(state)] == ["post-commit"]


def test_a_legacy_that_appears_during_install_is_never_overwritten(state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Two installs at once (for two state dirs, which do not share a lock): one moves the user's
    hook to `post-commit.legacy` and writes its own while the other, which read the user's hook
    a moment before, moves what is now qmd's hook onto that `.legacy`, and the user's hook was
    gone. The move is now a hard link that fails when its target exists."""
    from hooks import install as hooks_install
    from hooks import script

    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    (hooks / "post-commit").write_text("#!/bin/sh\necho the user's hook\n")
    done: list[bool] = []

    def other_install_first(move: Callable[..., None]) -> Callable[..., None]:
        def moved(src: object, dst: object, *args: object, **kwargs: object) -> None:
            if not done:  # the other install moves the user's hook aside and writes its own, just before this one's move
                done.append(True)
                os.replace(hooks / "post-commit", hooks / "post-commit.legacy")
                (hooks / "post-commit").write_text(script.hook_script("post-commit", "/other/state"))
            move(src, dst, *args, **kwargs)
        return moved

    monkeypatch.setattr(os, "link", other_install_first(os.link))
    monkeypatch.setattr(hooks_install, "replace_file", other_install_first(hooks_install.replace_file))
    with pytest.raises(hooks_install.QmdError, match="appeared while qmd was installing"):
        hooks_install._install_plain(hooks, "post-commit", script.hook_script("post-commit", str(state)))
    assert done
    assert (hooks / "post-commit.legacy").read_text() == "#!/bin/sh\necho the user's hook\n"


def test_two_installs_at_once_keep_the_users_hook(state: Path, tmp_path: Path) -> None:
    """Real processes: two `qmd hooks install` of one repository over a foreign hook, started
    together, for one state dir (serialised) and for two (the link-based move): the user's hook
    ends up as post-commit.legacy, run by qmd's, every time."""
    import subprocess

    from tests.support.run import command, qmd_env

    user = "#!/bin/sh\necho the user's hook\n"
    for round_, states in enumerate([(state, state), (state, tmp_path / "state2")]):
        repo = make_repo(tmp_path / f"repo{round_}")
        hooks = repo / ".git" / "hooks"
        (hooks / "post-commit").write_text(user)
        (hooks / "post-commit").chmod(0o755)
        procs = [subprocess.Popen(command("hooks", "install", str(repo)), env={**qmd_env(), "QMD_STATE_DIR": str(s)},
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for s in states]
        results = [(p.wait(timeout=120), *p.communicate()) for p in procs]
        assert any(code == 0 for code, _, _ in results), results
        assert all(code == 0 or "appeared while qmd was installing" in err or "already exists" in err for code, _, err in results), results
        assert (hooks / "post-commit.legacy").read_text() == user, results
        assert "qmd-hooks-v1" in (hooks / "post-commit").read_text()


def test_an_install_for_another_state_dir_waits_for_one_half_done(state: Path, tmp_path: Path) -> None:
    """Another state dir's install has moved the user's hook to post-commit.legacy and not yet
    written its own (it holds the hooks folder): this one waits for it, instead of taking that
    .legacy for an orphan and refusing (CI's two-process run caught the refusal)."""
    import subprocess

    from hooks import script
    from qmd.harness import lock_folder
    from tests.support.run import command, qmd_env

    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    user = "#!/bin/sh\necho the user's hook\n"
    (hooks / "post-commit.legacy").write_text(user)  # the other install's move, already done
    (hooks / "post-commit.legacy").chmod(0o755)
    with lock_folder(hooks, timeout=5):
        proc = subprocess.Popen(command("hooks", "install", str(repo)), env={**qmd_env(), "QMD_STATE_DIR": str(tmp_path / "state2")},
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        deadline = time.monotonic() + 3
        while proc.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        waited = proc.poll() is None
        (hooks / "post-commit").write_text(script.hook_script("post-commit", str(state)))  # the other install finishes
        (hooks / "post-commit").chmod(0o755)
    code = proc.wait(timeout=120)
    out, err = proc.communicate()
    assert waited, (code, out, err)
    assert code == 0, err
    assert (hooks / "post-commit.legacy").read_text() == user
    assert str(tmp_path / "state2") in (hooks / "post-commit").read_text()


@pytest.mark.parametrize("mode", [0o300, 0o500], ids=["unreadable", "read-only"])
def test_a_hooks_folder_the_user_cannot_edit_is_refused_in_one_line(state: Path, tmp_path: Path, mode: int) -> None:
    """A hooks folder this user may not list (0300: flock needs it open) or write in (0500):
    install and uninstall say so in one line and exit 1, with nothing changed (both crashed with
    a traceback, exit 3, before); once it is writable again both work."""
    import subprocess

    from tests.support.run import bound_by_modes, command, qmd_env

    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"

    def run(*args: str) -> tuple[int, str, str]:
        proc = subprocess.run(bound_by_modes(command("hooks", *args, str(repo))), env=qmd_env(), capture_output=True, text=True, timeout=120)
        return proc.returncode, proc.stdout, proc.stderr

    hooks.chmod(mode)
    try:
        code, out, err = run("install")
        assert code == 1, (code, out, err)
        assert "the hooks folder" in err and "Permission denied" in err and f"chmod u+rwx {hooks}" in err, err
        assert "Traceback" not in err and "bug" not in err
        assert [line.split(":")[0] for line in err.strip().splitlines()] == ["Error", "hint"], err  # as every command's error
    finally:
        hooks.chmod(0o755)
    assert not any((hooks / h).exists() for h in HOOKS) and not [p.name for p in hooks.iterdir() if p.name.startswith(".")]
    code, out, err = run("install")
    assert code == 0, err
    hooks.chmod(mode)
    try:
        code, out, err = run("uninstall")
        assert code == 1 and "the hooks folder" in err and "Traceback" not in err, (code, out, err)
    finally:
        hooks.chmod(0o755)
    assert all("qmd-hooks-v1" in (hooks / h).read_text() for h in HOOKS)  # nothing half-removed
    code, out, err = run("uninstall")
    assert code == 0 and out.count("removed") == 3, (code, out, err)


PRE_COMMIT_HOOK = """#!/usr/bin/env bash
# File generated by pre-commit: https://pre-commit.com
# ID: 138fd403232d2ddd5efb44073f4a3cb2
# (a stand-in for pre-commit's template: it runs <hook>.legacy with the hook's args and stdin)
HERE="$(cd "$(dirname "$0")" && pwd)"
if [ -x "$HERE/post-commit.legacy" ]; then "$HERE/post-commit.legacy" "$@"; fi
echo pre-commit >> "$MARKS/calls"
"""


def test_pre_commit_generated_hook_is_chained_not_replaced(cli, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    marks = tmp_path / "marks"
    marks.mkdir()
    monkeypatch.setenv("MARKS", str(marks))
    (hooks / "post-commit").write_text(PRE_COMMIT_HOOK)
    (hooks / "post-commit").chmod(0o755)
    (hooks / "post-commit.legacy").write_text('#!/bin/sh\necho original >> "$MARKS/calls"\n')  # what pre-commit chained
    (hooks / "post-commit.legacy").chmod(0o755)
    before = snapshot(hooks)

    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    assert "pre-commit's hook runs" in out
    assert (hooks / "post-commit").read_text() == PRE_COMMIT_HOOK  # not replaced
    assert (hooks / "post-commit.legacy.legacy").read_bytes() == before["post-commit.legacy"][0]
    commit(repo, "a.md", "# A\n")
    assert (marks / "calls").read_text().split() == ["original", "pre-commit"]
    assert [r["event"] for r in requests(state)] == ["post-commit"]
    code, out, _ = cli("hooks", "status", str(repo))
    assert "post-commit: installed" in out

    assert cli("hooks", "install", str(repo))[0] == 0
    assert cli("hooks", "uninstall", str(repo))[0] == 0
    assert snapshot(hooks) == before


HUSKY_H = """#!/usr/bin/env sh
[ "$HUSKY" = "2" ] && set -x
n=$(basename "$0")
s=$(dirname "$(dirname "$0")")/$n

[ ! -f "$s" ] && exit 0
[ "${HUSKY-}" = "0" ] && exit 0

export PATH="node_modules/.bin:$PATH"
sh -e "$s" "$@"
c=$?

[ $c != 0 ] && echo "husky - $n script failed (code $c)"
exit $c
"""


def _husky9(repo: Path) -> Path:
    """husky 9's layout: core.hooksPath=.husky/_ with a stub per hook running .husky/<hook> through _/h."""
    folder = repo / ".husky" / "_"
    folder.mkdir(parents=True)
    (folder / "h").write_text(HUSKY_H)
    for hook in ("pre-commit", *HOOKS):
        (folder / hook).write_text('#!/usr/bin/env sh\n. "$(dirname "$0")/h"\n')
        (folder / hook).chmod(0o755)
    (folder / ".gitignore").write_text("*\n")
    git(repo, "config", "core.hooksPath", ".husky/_")
    return repo / ".husky"


def test_husky_owns_core_hooks_path(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    husky = _husky9(repo)
    marks = tmp_path / "marks"
    (husky / "post-commit").write_text(f"echo user-hook >> {marks}")  # no trailing newline, as people write them
    before = snapshot(husky)

    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    assert f"added to {husky / 'post-commit'}" in out and f"created {husky / 'post-merge'}" in out
    assert snapshot(husky / "_") == {k[2:]: v for k, v in before.items() if k.startswith("_/")}  # husky's own files untouched
    assert not (repo / ".git" / "hooks" / "post-commit").exists()
    assert cli("hooks", "install", str(repo))[1].count("already installed") == 3
    proc = commit(repo, "a.md", "# A\n")
    assert proc.returncode == 0 and "husky - " not in proc.stdout + proc.stderr
    assert marks.read_text() == "user-hook\n"
    assert [r["event"] for r in requests(state)] == ["post-commit"]

    code, out, err = cli("hooks", "uninstall", str(repo))
    assert code == 0, err
    assert snapshot(husky) == before


def test_core_hooks_path_folder_is_created_and_removed(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    git(repo, "config", "core.hooksPath", "tools/githooks")
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    assert f"hooks in {repo / 'tools' / 'githooks'}" in out
    commit(repo, "a.md", "# A\n")
    assert [r["repo"] for r in requests(state)] == [str(repo)]
    assert cli("hooks", "uninstall", str(repo))[0] == 0
    assert not (repo / "tools").exists()  # both folders install created are gone


def test_worktree_installs_into_the_shared_hooks_and_reports_its_own_path(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    main = make_repo(tmp_path / "main")
    hooks = main / ".git" / "hooks"
    before = snapshot(hooks)
    wt = tmp_path / "wt"
    git(main, "worktree", "add", "-q", "-b", "feature", str(wt))
    wt = wt.resolve()
    code, out, err = cli("hooks", "install", str(wt))
    assert code == 0, err
    assert f"hooks in {hooks}" in out
    commit(wt, "wt.md", "# In the worktree\n")
    commit(main, "main.md", "# In the main work tree\n")
    heads = {str(repo): git(repo, "rev-parse", "HEAD").stdout.strip() for repo in (wt, main)}
    assert {r["repo"]: r["commit"] for r in requests(state)} == heads  # each work tree's own HEAD

    code, out, _ = cli("hooks", "install", str(main))  # both enrolled: one shared hooks dir
    assert code == 0
    code, out, _ = cli("hooks", "uninstall", str(wt))
    assert "hooks kept" in out  # main still uses them
    assert (hooks / "post-commit").exists()
    assert cli("hooks", "uninstall", str(main))[0] == 0
    assert snapshot(hooks) == before


def test_a_commit_succeeds_when_the_queue_is_unusable(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    assert cli("hooks", "install", str(repo))[0] == 0
    (state / "queue").mkdir(parents=True, exist_ok=True)
    os.rename(state / "queue", tmp_path / "old-queue")
    (state / "queue").write_text("a regular file where the queue folder should be\n")
    proc = commit(repo, "a.md", "# A\n")
    assert proc.returncode == 0
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert proc.stderr == f"qmd: commit {head} was not queued for indexing: cannot write {state}/queue/tmp; once it can be written, run: qmd updater run --repo '{repo}'\n"
    assert git(repo, "log", "--format=%s", "-1").stdout.strip() == "add a.md"
    assert "NOT queued" in (state / "logs" / "hooks.log").read_text()

    (state / "queue").unlink()
    (state / "logs").rename(tmp_path / "old-logs")
    (state / "logs").write_text("not a folder either\n")
    assert commit(repo, "b.md", "# B\n").returncode == 0  # even the log cannot be written: still exit 0
    assert len(requests(state)) == 1  # the queue folder was re-created on the way


def test_qmd_hooks_0_skips_the_hook(cli, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    assert cli("hooks", "install", str(repo))[0] == 0
    monkeypatch.setenv("QMD_HOOKS", "0")
    commit(repo, "a.md", "# A\n")
    assert requests(state) == []


def test_status_reports_missing_hooks_and_deleted_repos(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    import shutil

    keep = make_repo(tmp_path / "keep")
    gone = make_repo(tmp_path / "gone")
    assert cli("hooks", "install", str(keep), str(gone))[0] == 0
    (keep / ".git" / "hooks" / "post-merge").unlink()
    shutil.rmtree(gone)
    code, out, _ = cli("hooks", "status")
    assert code == 0
    assert f"{keep}: NEEDS ATTENTION" in out and "post-merge: missing" in out
    assert f"{gone}: MISSING" in out
    data = json.loads(cli("hooks", "status", "--json")[1])
    assert {r["repo"]: r["exists"] for r in data["repos"]} == {str(keep): True, str(gone): False}
    code, out, _ = cli("hooks", "uninstall", str(gone))
    assert code == 0 and "forgotten" in out
    assert [r["repo"] for r in json.loads(cli("hooks", "status", "--json")[1])["repos"]] == [str(keep)]


def test_install_outside_a_repository_names_the_fix(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    plain = tmp_path / "plain"
    plain.mkdir()
    code, _out, err = cli("hooks", "install", str(plain))
    assert code == 1 and "not a git repository" in err.lower() and "hint:" in err


def test_husky_8_layout_gets_an_executable_hook_file(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "repo")
    husky = repo / ".husky"
    (husky / "_").mkdir(parents=True)
    (husky / "_" / "husky.sh").write_text("#!/usr/bin/env sh\n# husky 8 helper\n")
    (husky / "pre-commit").write_text('#!/usr/bin/env sh\n. "$(dirname -- "$0")/_/husky.sh"\n\ntrue\n')
    (husky / "pre-commit").chmod(0o755)
    git(repo, "config", "core.hooksPath", ".husky")
    before = snapshot(husky)
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    created = husky / "post-commit"
    assert f"created {created}" in out and os.access(created, os.X_OK)
    assert created.read_text().startswith('#!/usr/bin/env sh\n. "$(dirname -- "$0")/_/husky.sh"\n')
    assert commit(repo, "a.md", "# A\n").returncode == 0
    assert [r["event"] for r in requests(state)] == ["post-commit"]
    assert cli("hooks", "uninstall", str(repo))[0] == 0
    assert snapshot(husky) == before


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="systemd is Linux's")
@pytest.mark.parametrize("kind", ["container", "running"])
def test_install_names_what_drains_the_queue_here(cli, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, kind: str) -> None:  # type: ignore[no-untyped-def]
    """Where no systemd user manager answers, install-service would fail: the note names the daemon and cron instead."""
    repo = make_repo(tmp_path / "repo")
    fake_systemctl(tmp_path, monkeypatch, kind, tools=("git",))
    code, out, err = cli("hooks", "install", str(repo))
    assert code == 0, err
    [note] = [line for line in out.splitlines() if line.startswith("note: nothing drains the queue yet")]
    qmd = str(Path(sys.executable).absolute().parent / "qmd")
    if kind == "container":
        assert "install-service" not in note and f"{qmd} updater daemon" in note and "*/2 * * * * " in note
    else:
        assert "qmd updater install-service" in note


def test_a_file_where_the_hooks_folder_goes_is_one_error_line(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """`.git/hooks` as a file (or core.hooksPath naming one): exit 3 'this is a bug' before."""
    repo = make_repo(tmp_path / "repo")
    hooks = repo / ".git" / "hooks"
    for child in hooks.iterdir():
        child.unlink()
    hooks.rmdir()
    hooks.write_text("not a folder\n")
    code, _out, err = cli("hooks", "install", str(repo))
    assert code == 1 and f"cannot create the hooks folder {hooks}" in err and "hint:" in err, err
    assert hooks.read_text() == "not a folder\n"


def test_a_hook_linked_outside_the_repository_is_refused_not_copied(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """A repository's tracked hooks folder (husky) holding `post-commit -> ~/.ssh/id_rsa`: install
    replaced the link with a tracked file holding the secret's bytes and qmd's block, ready to
    be committed and pushed. A link to an existing file is refused now, and nothing changes."""
    repo = make_repo(tmp_path / "repo")
    husky = _husky9(repo)
    secret = tmp_path / "id_rsa"
    secret.write_text("SECRET-KEY-MATERIAL\n")
    (husky / "post-commit").symlink_to(secret)
    before = snapshot(husky)
    code, _out, err = cli("hooks", "install", str(repo))
    assert code == 1 and "is a symbolic link" in err and "\nhint: replace the link" in err and "(hint:" not in err, err  # the hint on its own line
    assert snapshot(husky) == before and secret.read_text() == "SECRET-KEY-MATERIAL\n"
    assert not any("SECRET" in p.read_text(errors="replace") for p in husky.rglob("*") if p.is_file() and not p.is_symlink())


def test_a_hook_linked_to_dev_zero_is_one_line_not_a_memory_error(state: Path, tmp_path: Path) -> None:
    """`core.hooksPath` naming a tracked folder whose `post-commit` links to /dev/zero: install,
    status and uninstall read it until MemoryError (exit 3 under a 3 GB limit)."""
    from tests.support.run import run_capped

    repo = make_repo(tmp_path / "repo")
    (repo / ".githooks").mkdir()
    git(repo, "config", "core.hooksPath", ".githooks")
    (repo / ".githooks" / "post-commit").symlink_to("/dev/zero")

    for args in (("hooks", "install", str(repo)), ("hooks", "status")):
        done = run_capped(*args, cwd=repo)
        assert done.returncode != 3 and "MemoryError" not in done.stderr + done.stdout, (args, done.stderr)
    assert (repo / ".githooks" / "post-commit").is_symlink()


def test_no_moment_of_install_or_uninstall_leaves_a_hook_missing(cli, state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    """Install moved the user's hook aside and then wrote qmd's; uninstall deleted qmd's and then
    renamed the user's back: a commit in either moment found no hook at all, so it ran neither
    (the user's hook skipped, no request queued; the red team saw 1 commit in 80). Each step is
    now one rename over the old name. Checked after every file operation of both commands."""
    import os

    import hooks.install as installer

    repo = make_repo(tmp_path / "repo")
    hook_dir = repo / ".git" / "hooks"
    for name in HOOKS:
        (hook_dir / name).write_text("#!/bin/sh\necho mine\n")
        (hook_dir / name).chmod(0o755)
    gaps: list[str] = []

    def checked(op):  # type: ignore[no-untyped-def]
        def run(*args, **kwargs):  # type: ignore[no-untyped-def]
            result = op(*args, **kwargs)
            gaps.extend(f"{op.__name__}{args[:2]}: {name} missing" for name in HOOKS if not os.path.lexists(hook_dir / name))
            return result
        return run

    monkeypatch.setattr(installer.os, "unlink", checked(os.unlink))
    monkeypatch.setattr(installer, "replace_file", checked(installer.replace_file))
    monkeypatch.setattr(Path, "unlink", checked(Path.unlink))
    assert cli("hooks", "install", str(repo))[0] == 0
    assert all("qmd-hooks-v1" in (hook_dir / name).read_text() for name in HOOKS)
    assert cli("hooks", "uninstall", str(repo))[0] == 0
    assert all((hook_dir / name).read_text() == "#!/bin/sh\necho mine\n" for name in HOOKS)
    assert gaps == []
