"""A cloned repository's links and huge files, met by the commands a user runs inside it.

A repository can hold symbolic links (to /dev/zero, to a file or folder outside it) and sparse
files of gigabytes that its git blobs compress to nothing. Each case below once changed a
file outside the repository through a link, or read until the memory ran out (MemoryError,
exit 3 under the 3 GB limit these runs get); now each refuses in one line, or leaves the
outside file alone, and nothing outside changes (red team, 2026-12-04).
"""

from __future__ import annotations

import subprocess
from pathlib import Path

from tests.support.run import local_env, run_capped


def run(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    return run_capped(*args, cwd=cwd, env=local_env())


def refused(done: subprocess.CompletedProcess[str], *words: str) -> None:
    assert done.returncode == 1, (done.returncode, done.stderr)
    assert done.stderr.startswith("Error: ") and "\nhint: " in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert all(w in done.stderr for w in words), done.stderr


def repo(tmp_path: Path) -> tuple[Path, Path]:
    """(a git repository, a folder outside it holding existing.json)."""
    root, outside = tmp_path / "cloned", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    subprocess.run(["git", "init", "-q", str(root)], check=True)
    (outside / "existing.json").write_text('{"keep": 1}\n')
    return root, outside


def test_project_registration_through_a_link_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    root, outside = repo(tmp_path)
    (root / ".mcp.json").symlink_to(outside / "existing.json")
    refused(run(root, "mcp", "install", "--claude", "--scope", "project"), "leads outside the project", "rm ")
    assert (outside / "existing.json").read_text() == '{"keep": 1}\n'
    listed = '{"mcpServers": {"qmd": {"type": "stdio", "command": "qmd", "args": ["mcp"]}}}\n'
    (outside / "existing.json").write_text(listed)  # as the write-through left it
    done = run(root, "teardown", "--yes")  # teardown leaves it, says so, and goes on
    assert done.returncode == 0 and "as it is" in done.stdout + done.stderr, done.stdout + done.stderr
    assert "qmd's integrations are removed, except the file(s) named 'left ... as it is' above." in done.stdout, done.stdout  # not "removed" alone
    assert (outside / "existing.json").read_text() == listed


def test_teardown_names_a_project_file_it_cannot_read_when_nothing_else_is_registered(tmp_path: Path) -> None:
    """It said "Nothing to remove" and exited 0 past a `.mcp.json` it could not read (which may
    hold a registration); now that file is in the plan, and the teardown fails naming it."""
    root, _ = repo(tmp_path)
    (root / ".mcp.json").write_text('{"mcpServers": {"qmd": ')  # cut short: not JSON
    done = run(root, "teardown", "--yes")
    assert "Nothing to remove" not in done.stdout, done.stdout
    assert done.returncode == 1 and ".mcp.json" in done.stdout and "not valid JSON" in done.stderr, (done.stdout, done.stderr)


def test_project_guard_and_skills_through_a_linked_folder_are_refused(tmp_path: Path) -> None:
    root, outside = repo(tmp_path)
    (root / ".claude").symlink_to(outside)
    refused(run(root, "guard", "install", "--claude", "--scope", "project"), "leads outside the project")
    refused(run(root, "skill", "install", "--yes"), "leads outside the project")
    (root / ".claude").unlink()
    (root / ".agents").symlink_to(outside)
    refused(run(root, "skill", "install", "--yes"), "leads outside the project")
    assert sorted(p.name for p in outside.iterdir()) == ["existing.json"]


def test_init_never_writes_through_a_linked_qmd_folder_or_gitignore(tmp_path: Path) -> None:
    root, outside = repo(tmp_path)
    (root / ".qmd").symlink_to(outside)
    refused(run(root, "init"), "is a symbolic link")
    (root / ".qmd").unlink()
    (root / ".qmd").mkdir()
    (root / ".qmd" / ".gitignore").symlink_to(outside / "made-by-init")  # dangling: write_text created its target
    assert run(root, "init").returncode == 0
    assert sorted(p.name for p in outside.iterdir()) == ["existing.json"]


def test_huge_sparse_files_are_one_line(tmp_path: Path) -> None:
    root, _ = repo(tmp_path)
    (root / ".qmd").mkdir()
    with open(root / ".qmd" / "index.yml", "wb") as fh:
        fh.truncate(4 << 30)
    refused(run(root, "search", "hello"), "larger than", "index.yml")
    (root / ".qmd" / "index.yml").unlink()
    (root / ".qmd").rmdir()
    with open(root / ".mcp.json", "wb") as fh:
        fh.truncate(4 << 30)
    refused(run(root, "mcp", "install", "--claude", "--scope", "project"), "larger than", ".mcp.json")


def test_teardown_removes_what_it_can_past_an_unreadable_project_file(tmp_path: Path) -> None:
    """The user's own registration goes; the project's 4 GB `.mcp.json` is named, and the
    teardown exits 1 (it once stopped at that file: MemoryError, exit 3)."""
    import json

    from qmd.agents import claude_json

    root, _ = repo(tmp_path)
    assert run(tmp_path, "mcp", "install", "--claude").returncode == 0  # user scope: ~/.claude.json
    user = claude_json()
    assert "qmd" in json.loads(user.read_text())["mcpServers"]
    with open(root / ".mcp.json", "wb") as fh:
        fh.truncate(4 << 30)
    done = run(root, "teardown", "--yes")
    assert done.returncode == 1 and "larger than" in done.stderr and ".mcp.json" in done.stderr, done.stderr
    assert not user.exists() or "qmd" not in json.loads(user.read_text()).get("mcpServers", {})  # removed (the file too: qmd had made it)


def test_a_hooks_folder_linked_out_of_the_repository_is_refused(tmp_path: Path) -> None:
    """`core.hooksPath .githooks` with the tracked `.githooks -> ~/bin`: install created its three
    hooks there (executable) and would have renamed a file of that folder to `.legacy`."""
    root, outside = repo(tmp_path)
    (root / ".githooks").symlink_to(outside)
    subprocess.run(["git", "-C", str(root), "config", "core.hooksPath", ".githooks"], check=True)
    done = run(root, "hooks", "install", ".")
    assert done.returncode == 1 and "leads outside the repository" in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert sorted(p.name for p in outside.iterdir()) == ["existing.json"]


def test_a_cloned_configs_control_characters_reach_no_terminal(tmp_path: Path) -> None:
    """A collection named `"ok\\r\\e[2K…"`, or a path holding them: errors, hints and listings
    printed them raw, so a terminal showed what the config chose. The name is refused, and
    every error line shows them escaped."""
    root, _ = repo(tmp_path)
    (root / ".qmd").mkdir()
    config = root / ".qmd" / "index.yml"
    config.write_text('collections:\n  "evil\\r\\e[2Kok":\n    path: notes\n')
    done = run(root, "collection", "list")
    refused(done, "holds a control character", "evil\\r\\x1b[2Kok")
    assert "\x1b" not in done.stderr and "\r" not in done.stderr
    config.write_text('collections:\n  docs:\n    path: "notes\\r\\e[2K"\n')
    done = run(root, "update")
    assert "\x1b" not in done.stdout + done.stderr and "\r" not in done.stderr, done.stderr


def test_an_index_side_file_that_is_a_link_is_named_with_rm_and_its_target_left_alone(tmp_path: Path) -> None:
    """A cloned `.qmd/index.sqlite-wal`, `-shm` or `.lock` that is a link: it read as
    "permission denied" (chmod), "cannot create the index folder", or "unable to open" with
    `qmd doctor` offered to rebuild; SQLite would write its WAL into the link's target."""
    root, outside = repo(tmp_path)
    (root / "note.md").write_text("# Rollback\n\nThe rollback runbook.\n")
    assert run(root, "init").returncode == 0
    assert run(root, "collection", "add", ".", "--name", "notes").returncode == 0
    qmd = root / ".qmd"
    for name in ("index.sqlite-wal", "index.sqlite-shm", "index.sqlite.lock"):
        for target in (outside / "existing.json", outside / "missing"):
            for side in qmd.glob("index.sqlite?*"):
                side.unlink()
            (qmd / name).symlink_to(target)
            refused(run(root, "update"), f"{qmd / name} is a symbolic link", f"rm {qmd / name}")
            if not name.endswith(".lock"):  # a search takes no lock: only the WAL's files matter to it
                refused(run(root, "search", "rollback"), f"{qmd / name} is a symbolic link")
            (qmd / name).unlink()
    assert sorted(p.name for p in outside.iterdir()) == ["existing.json"] and (outside / "existing.json").read_text() == '{"keep": 1}\n'
    assert run(root, "update").returncode == 0 and "note.md" in run(root, "search", "rollback").stdout
