"""`qmd skill`, `qmd init`, `--version`: what the original 2.8.3 offers beside search.

`qmd skill install` writes an agent skill (skill.md beside this file, in the Agent Skills
format both agents read) that teaches search-first and typed lex/vec/hyde sub-queries,
where the original installs its own: `./.agents/skills/qmd/` (Codex reads `.agents/skills`
from the working directory up to the repository root; `--global`: `~/.agents/skills/qmd/`,
Codex's user scope) and `.claude/skills/qmd` for Claude Code (`~/.claude/skills/qmd` with
`--global`): a symlink to the first, as the original makes, or a copy where no link can be made.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

from qmd.cli.shared import err, out

SKILL_FILE = Path(__file__).with_name("skill.md")

skill_app = typer.Typer(help="The agent skill that teaches Claude Code and Codex to search your notes with qmd.", no_args_is_help=True)


def skill_text() -> str:
    return SKILL_FILE.read_text(encoding="utf-8")


@skill_app.command("show", short_help="Print the qmd skill (SKILL.md).")
def skill_show() -> None:
    """Print the skill (SKILL.md)."""
    out(skill_text())


def skill_dirs(global_: bool, cwd: Path | None = None) -> tuple[Path, Path]:
    """(the Agent Skills folder Codex reads, Claude Code's) for qmd, in a project or for the user."""
    base = Path.home() if global_ else (cwd or Path.cwd())
    return base / ".agents" / "skills" / "qmd", base / ".claude" / "skills" / "qmd"


def _is_ours(folder: Path, text: str) -> bool:
    skill = folder / "SKILL.md"
    return skill.is_file() and skill.read_text(encoding="utf-8", errors="replace") == text


def _exists(path: Path) -> None:
    from qmd.core.errors import QmdError

    raise QmdError(f"a different skill already exists at {path}", "replace it with: qmd skill install --force")


@skill_app.command("install", short_help="Install the qmd skill for Codex and Claude Code.")
def skill_install(
    global_: Annotated[bool, typer.Option("--global", help="Install for the user (~/.agents/skills, ~/.claude/skills) instead of this project.")] = False,
    force: Annotated[bool, typer.Option("-f", "--force", help="Replace an existing, different qmd skill.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Accepted as the original's (which asks before linking Claude's folder): this qmd links it unless --no-claude.")] = False,
    claude: Annotated[bool, typer.Option("--claude/--no-claude", help="Also make it visible to Claude Code (.claude/skills/qmd).")] = True,
) -> None:
    """Install the qmd skill for Codex (.agents/skills/qmd) and Claude Code (.claude/skills/qmd)."""
    from qmd.core.fileio import write_text

    text = skill_text()
    agents, claude_dir = skill_dirs(global_)
    if agents.exists() and not force and not _is_ours(agents, text):
        _exists(agents)
    agents.mkdir(parents=True, exist_ok=True)
    write_text(agents / "SKILL.md", text)
    out(f"✓ Installed QMD skill to {agents}\n")
    if not claude:
        return
    if claude_dir.parent.exists() and os.path.realpath(claude_dir.parent) == os.path.realpath(agents.parent):
        out(f"✓ Claude already sees the skill via {claude_dir.parent}\n")
        return
    link = os.path.relpath(agents, claude_dir.parent)
    if claude_dir.is_symlink() and os.readlink(claude_dir) == link:
        out(f"✓ Linked Claude skill at {claude_dir}\n")
        return
    if claude_dir.exists() or claude_dir.is_symlink():
        if not (force or _is_ours(claude_dir, text)):
            _exists(claude_dir)
        if claude_dir.is_dir() and not claude_dir.is_symlink():
            shutil.rmtree(claude_dir)
        else:
            claude_dir.unlink()
    claude_dir.parent.mkdir(parents=True, exist_ok=True)
    try:
        claude_dir.symlink_to(link, target_is_directory=True)
        out(f"✓ Linked Claude skill at {claude_dir}\n")
    except OSError:
        claude_dir.mkdir()
        write_text(claude_dir / "SKILL.md", text)
        out(f"✓ Installed a copy for Claude at {claude_dir}\n")


def init(directory: Annotated[str | None, typer.Argument(help="The project folder (default: the working directory).")] = None) -> None:
    """Create a project-local index, as the original's `qmd init`: `.qmd/index.yml` (with the
    resolved model defaults) and `.qmd/index.sqlite`, used by every qmd command run inside."""
    import os
    from pathlib import Path

    from qmd.core.config import Config
    from qmd.core.errors import QmdError
    from qmd.core.paths import LOCAL_CONFIG_NAMES, LOCAL_DIR, local_index
    from qmd.index.folder_cache import register_local
    from qmd.llm.models import ROLES, resolve_model
    from qmd.store.store import Store

    root = Path(os.path.abspath(directory or os.getcwd()))
    if root.exists() and root.resolve() == Path.home().resolve():
        raise QmdError(
            "refusing to make a project-local index in your home folder",
            "run qmd init inside a project folder; your own index needs none (qmd collection add DIR)",
        )
    if not root.is_dir():
        raise QmdError(f"{root} is not a folder", "give the project folder: qmd init DIR")
    folder = root / LOCAL_DIR
    for path in (folder, *(folder / n for n in LOCAL_CONFIG_NAMES)):
        wrong = path.is_symlink() and not path.exists() or (path.exists() and path.is_dir() != (path == folder))
        if wrong:
            kind = "a broken link" if not path.exists() else "a folder" if path.is_dir() else "a file"
            raise QmdError(f"{path} is {kind}, not the {'folder' if path == folder else 'config file'} qmd init makes", f"move it aside, then: qmd init {root}")
    folder.mkdir(exist_ok=True)
    existing = [folder / n for n in LOCAL_CONFIG_NAMES if (folder / n).is_file()]
    config_path = existing[0] if existing else folder / "index.yml"
    if not existing:
        config = Config(config_path, {"collections": {}, "models": {role: resolve_model(role, None).spec for role in ROLES}})
        config.save()
        from qmd.core.trust import decide, record_trust

        decision = decide(config_path, config.raw)
        if decision.gated and not decision.allowed:  # your own custom defaults, written by you just now
            record_trust(config_path, decision.digest)
    ignore = folder / ".gitignore"
    if not ignore.exists():
        ignore.write_text("# the index is rebuilt from the notes; the config travels with the repository\nindex.sqlite*\n*.lock\n")
    paths = local_index(config_path)
    with Store(paths.index_path, paths.config_path) as store:
        store.backend.open(create=True)
    register_local(config_path)
    out("ready to go with new local index\n")
    out(f"  config: {config_path}\n  index:  {paths.index_path}\n")
    out("Add the project's notes with: qmd collection add . --name NAME (run inside the project)\n")


def version_string() -> str:
    """`qmd <version> (<commit>)`, as the original prints its version and build commit."""
    from qmd.core.version import __version__

    commit = _commit()
    return f"qmd {__version__}" + (f" ({commit})" if commit else "")


def _commit() -> str:
    """The commit of the checkout qmd runs from (`-dirty` with changes under qmd/), else
    `source <digest>` (the build id's hash of the installed sources)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists() and (root / "pyproject.toml").exists():
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL).stdout.strip()

        try:
            head = git("rev-parse", "--short", "HEAD")
            if head:
                return f"{head}-dirty" if git("status", "--porcelain", "--untracked-files=no", "--", "qmd") else head
        except (OSError, subprocess.SubprocessError):
            pass
    from qmd.core.buildinfo import source_digest

    return "source " + source_digest()[:12]
