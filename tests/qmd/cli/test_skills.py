"""`qmd skill show|install`, `qmd skills list|get|path` and `qmd --skill`, as the original 2.8.3
offers them: the skill describes qmd's own commands (each one it shows runs), and install
writes only into the skill folders, never through a link standing where one goes."""

from __future__ import annotations

import json
import os
import re
import subprocess
from pathlib import Path

from qmd.cli.skills import SKILLS_DIR
from tests.support.run import command, qmd_env, qmd_on_path, qmd_on_terminal, run_qmd

SKILL = SKILLS_DIR / "qmd" / "SKILL.md"


def test_show_get_and_the_skill_flag_print_the_shipped_skill() -> None:
    text = SKILL.read_text()
    assert text.startswith("---\nname: qmd\ndescription: ")
    assert run_qmd("skill", "show").stdout == text
    assert run_qmd("--skill").stdout == text  # the original's alias for skill show
    assert run_qmd("skills", "get", "qmd").stdout == text
    assert json.loads(run_qmd("skills", "get", "qmd", "--json").stdout) == {"success": True, "data": [{"name": "qmd", "content": text}]}


def test_skills_list_and_path_in_the_originals_shapes() -> None:
    listed = run_qmd("skills", "list", "--json")
    assert listed.returncode == 0, listed.stderr
    data = json.loads(listed.stdout)
    assert data["success"] is True and [s["name"] for s in data["data"]] == ["qmd"] and data["data"][0]["description"].startswith("Search")
    assert run_qmd("skills").stdout == run_qmd("skills", "list").stdout  # `qmd skills` alone lists, as the original
    assert run_qmd("skills").stdout.startswith("  qmd  Search")
    assert json.loads(run_qmd("skills", "--json").stdout) == data
    folder = Path(run_qmd("skills", "path", "qmd").stdout.strip())
    assert (folder / "SKILL.md").read_text() == SKILL.read_text()
    assert json.loads(run_qmd("skills", "path", "--json").stdout) == {"success": True, "data": {"paths": [str(folder.parent)]}}


def test_skills_errors_are_one_line_or_the_originals_json() -> None:
    missing = run_qmd("skills", "get", "nope")
    assert missing.returncode == 1 and missing.stderr.startswith("Error: Skill not found: nope\n") and not missing.stdout
    as_json = run_qmd("skills", "get", "nope", "--json")
    assert as_json.returncode == 1 and json.loads(as_json.stdout) == {"success": False, "error": "Skill not found: nope"}
    nameless = run_qmd("skills", "get")
    assert nameless.returncode == 1 and "qmd skills get qmd" in nameless.stderr


def test_every_command_the_skill_shows_runs(tmp_path: Path, notes: Path) -> None:
    """Each `qmd …` line of SKILL.md, run by a real shell against an index of the notes
    (named `notes`, as the skill's examples): found or not found (exit 0 or 1), never a
    usage error (an option or form qmd does not have). A command named alone (`qmd query`)
    must exist: its --help."""
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    text = SKILL.read_text()
    blocks = "".join(re.findall(r"```(?:sh|bash)\n(.*?)```", text, flags=re.DOTALL))
    lines = re.findall(r"`(qmd [^`]+)`", text) + re.findall(r"^(qmd .+)$", blocks, flags=re.MULTILINE)
    lines = [line + " --help" if len(line.split()) == 2 and line != "qmd status" else line for line in lines]
    assert len(lines) >= 6, lines
    env = qmd_env({"PATH": f"{qmd_on_path(tmp_path / 'bin')}{os.pathsep}{os.environ['PATH']}", "QMD_SERVER": "off"})
    for line in lines:
        done = subprocess.run(["bash", "-c", line], env=env, cwd=tmp_path, capture_output=True, text=True, timeout=120)
        assert done.returncode in (0, 1) and "Usage:" not in done.stderr, f"{line}: exit {done.returncode}: {done.stderr[-500:]}"


def test_install_writes_for_codex_and_links_claude_only_when_asked(tmp_path: Path) -> None:
    project = tmp_path / "project"
    project.mkdir()
    done = run_qmd("skill", "install", cwd=project)
    assert done.returncode == 0, done.stderr
    skill = project / ".agents" / "skills" / "qmd" / "SKILL.md"
    assert skill.read_text() == SKILL.read_text()
    claude = project / ".claude" / "skills" / "qmd"
    assert not claude.exists() and "Tip:" in done.stdout and "--yes" in done.stdout  # nobody to ask: the original's tip
    linked = run_qmd("skill", "install", "--yes", cwd=project)  # again: same skill, fine
    assert linked.returncode == 0, linked.stderr
    assert claude.is_symlink() and os.readlink(claude) == "../../.agents/skills/qmd" and (claude / "SKILL.md").read_text() == skill.read_text()
    skill.write_text("---\nname: qmd\ndescription: someone else's\n---\n")
    again = run_qmd("skill", "install", cwd=project)
    assert again.returncode == 1 and "--force" in again.stderr
    assert run_qmd("skill", "install", "--force", "--no-claude", cwd=project).returncode == 0 and skill.read_text() == SKILL.read_text()


def test_install_global_writes_under_home(tmp_path: Path) -> None:
    home = tmp_path / "another-home"
    home.mkdir()
    done = run_qmd("skill", "install", "--global", "--yes", env=qmd_env({"HOME": str(home)}))
    assert done.returncode == 0, done.stderr
    assert (home / ".agents" / "skills" / "qmd" / "SKILL.md").is_file()
    assert (home / ".claude" / "skills" / "qmd" / "SKILL.md").is_file()


def _tree(folder: Path) -> dict[str, bytes]:
    return {str(p.relative_to(folder)): p.read_bytes() for p in sorted(folder.rglob("*")) if p.is_file()}


def test_install_never_writes_through_a_link_where_the_skill_goes(tmp_path: Path) -> None:
    project, elsewhere = tmp_path / "project", tmp_path / "elsewhere"
    (project / ".agents" / "skills").mkdir(parents=True)
    elsewhere.mkdir()
    (elsewhere / "notes.md").write_text("mine\n")
    before = _tree(elsewhere)
    target = project / ".agents" / "skills" / "qmd"
    target.symlink_to(elsewhere, target_is_directory=True)
    refused = run_qmd("skill", "install", "--yes", cwd=project)
    assert refused.returncode == 1 and refused.stderr.startswith(f"Error: {target} is a symbolic link")
    assert _tree(elsewhere) == before and target.is_symlink()
    forced = run_qmd("skill", "install", "--force", cwd=project)  # replaces the link itself
    assert forced.returncode == 0, forced.stderr
    assert not target.is_symlink() and (target / "SKILL.md").is_file() and _tree(elsewhere) == before

    skill = target / "SKILL.md"  # a link named SKILL.md is replaced, not written through
    skill.unlink()
    skill.symlink_to(elsewhere / "notes.md")
    assert run_qmd("skill", "install", "--force", "--no-claude", cwd=project).returncode == 0
    assert not skill.is_symlink() and skill.read_text() == SKILL.read_text() and _tree(elsewhere) == before

    claude = project / ".claude" / "skills" / "qmd"  # Claude's folder linked elsewhere by the user
    claude.parent.mkdir(parents=True)
    claude.symlink_to(elsewhere, target_is_directory=True)
    clash = run_qmd("skill", "install", "--yes", cwd=project)
    assert clash.returncode == 1 and f"{claude}" in clash.stderr and "--force" in clash.stderr
    assert _tree(elsewhere) == before and os.readlink(claude) == str(elsewhere)


def test_install_links_claude_through_a_linked_skills_folder_so_the_link_resolves(tmp_path: Path) -> None:
    """~/.claude/skills kept in a dotfiles repository and linked: the skill's link stands in
    the dotfiles folder, so its relative target counts from there (it dangled, said Linked)."""
    home = tmp_path / "home"
    (home / "dotfiles" / "claude" / "skills").mkdir(parents=True)
    (home / ".claude").mkdir()
    (home / ".claude" / "skills").symlink_to("../dotfiles/claude/skills", target_is_directory=True)
    done = run_qmd("skill", "install", "--global", "--yes", env=qmd_env({"HOME": str(home)}))
    assert done.returncode == 0 and "Linked Claude skill" in done.stdout, done.stderr
    assert (home / ".claude" / "skills" / "qmd" / "SKILL.md").read_text() == SKILL.read_text()
    again = run_qmd("skill", "install", "--global", "--yes", env=qmd_env({"HOME": str(home)}))
    assert again.returncode == 0 and (home / ".claude" / "skills" / "qmd" / "SKILL.md").is_file(), again.stderr


def test_install_keeps_the_users_files_in_a_copy_of_the_skill_for_claude(tmp_path: Path) -> None:
    """A real .claude/skills/qmd holding this SKILL.md and files of the user's: without --force
    it was removed whole (rmtree) to make room for the link; now it is left as it is."""
    project = tmp_path / "project"
    claude = project / ".claude" / "skills" / "qmd"
    (claude / "references").mkdir(parents=True)
    (claude / "SKILL.md").write_text(SKILL.read_text())
    (claude / "references" / "mine.md").write_text("my own notes\n")
    done = run_qmd("skill", "install", "--yes", cwd=project)
    assert done.returncode == 0, done.stderr
    assert (claude / "references" / "mine.md").read_text() == "my own notes\n" and not claude.is_symlink()
    assert "left as it is" in done.stdout
    (claude / "references" / "mine.md").unlink()
    (claude / "references").rmdir()
    relinked = run_qmd("skill", "install", "--yes", cwd=project)  # only the skill itself: the copy becomes the link
    assert relinked.returncode == 0 and claude.is_symlink(), relinked.stderr


def test_install_where_a_folder_cannot_be_made_says_so_in_one_line(tmp_path: Path) -> None:
    """A broken link, a file, or a folder where qmd writes: exit 1 naming it, not a traceback (exit 3)."""
    cases = {"dangling": lambda p: (p / ".agents").mkdir() or (p / ".agents" / "skills").symlink_to(p / "gone"),
             "file": lambda p: (p / ".agents").write_text("x"),
             "folder": lambda p: (p / ".agents" / "skills" / "qmd" / "SKILL.md").mkdir(parents=True)}
    for name, make in cases.items():
        project = tmp_path / name
        project.mkdir()
        make(project)
        done = run_qmd("skill", "install", "--force", "--yes", cwd=project)
        assert done.returncode == 1 and done.stderr.startswith("Error: cannot install the skill: "), (name, done.stderr)
        assert str(project / ".agents") in done.stderr.splitlines()[0] and ".tmp" not in done.stderr, (name, done.stderr)


def test_install_on_a_terminal_asks_before_linking_claude(tmp_path: Path) -> None:
    for answer, linked in (("n", False), ("y", True)):
        project = tmp_path / f"project-{answer}"
        project.mkdir()
        code, screen = qmd_on_terminal(project, "skill", "install", answer=answer)
        assert code == 0 and "Create a symlink in" in screen, screen
        assert (project / ".claude" / "skills" / "qmd").is_symlink() is linked


def test_installs_at_once_all_succeed(tmp_path: Path) -> None:
    """Six `skill install --global --claude` at once: five exited 1 saying "a different skill
    already exists", having found the folder another had just made, still empty. An empty
    folder (or one holding only another install's temporary file) holds no other skill."""
    home = tmp_path / "h1"
    (home / ".agents" / "skills" / "qmd").mkdir(parents=True)  # made by another install, SKILL.md not yet written
    done = run_qmd("skill", "install", "--global", "--claude", env=qmd_env({"HOME": str(home)}))
    assert done.returncode == 0, done.stderr
    env = qmd_env({"HOME": str(tmp_path / "h2")})
    (tmp_path / "h2").mkdir()
    procs = [subprocess.Popen(command("skill", "install", "--global", "--claude"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for _ in range(6)]
    results = [(p.wait(timeout=120), p.stderr.read() if p.stderr else "") for p in procs]
    for p in procs:
        for stream in (p.stdout, p.stderr):
            if stream:
                stream.close()
    assert [code for code, _ in results] == [0] * 6, results
    assert (tmp_path / "h2" / ".agents" / "skills" / "qmd" / "SKILL.md").read_text() == SKILL.read_text()
