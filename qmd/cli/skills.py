"""`qmd skill show|install`, `qmd skills list|get|path`, `qmd --skill`: qmd's agent skill,
as the original 2.8.3 offers its own.

The skill (agent-skills/qmd/SKILL.md beside this file, package data, in the Agent Skills
format both agents read) teaches search-first and typed lex/vec/hyde sub-queries with qmd's
own commands. `qmd skill install` writes it to `./.agents/skills/qmd/` (Codex reads
`.agents/skills` from the working directory up to the repository root; `--global`:
`~/.agents/skills/qmd/`, Codex's user scope) and, with `--yes` or a yes on the terminal,
links `.claude/skills/qmd` to it for Claude Code (`~/.claude/skills/qmd` with `--global`),
as the original does; a copy where no link can be made. It writes only inside those two
folders, never through a link standing where the skill folder goes (`--force` replaces the
link itself). `qmd skills` lists and prints the bundled skills, with the original's
`{"success": …, "data": …}` JSON.
"""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Annotated

import typer

from qmd.cli.shared import out
from qmd.core.errors import QmdError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable

SKILLS_DIR = Path(__file__).with_name("agent-skills")  # one folder per skill, each with its SKILL.md
SUPPORT_FOLDERS = ("references", "templates", "scripts")  # a skill's extra files, printed by `skills get --full`

skill_app = typer.Typer(help="The agent skill that teaches Claude Code and Codex to search your notes with qmd.", no_args_is_help=True)
skills_app = typer.Typer(
    help="The agent skills qmd ships: list them, print one (get), or show where they are (path).",
    invoke_without_command=True,
    no_args_is_help=False,
)


# --- the bundled skills -------------------------------------------------------------


def _front_matter(text: str) -> dict[str, str]:
    """`name`, `description` (continued on indented lines) and `hidden` of a SKILL.md."""
    body = text.lstrip()
    if not body.startswith("---"):
        return {}
    head, found, _ = body[3:].partition("\n---")
    if not found:
        return {}
    fields: dict[str, str] = {}
    key = ""
    for line in head.splitlines():
        if line[:1] in (" ", "\t") and key == "description":
            fields[key] += " " + line.strip()
            continue
        key, sep, value = line.partition(":")
        key = key.strip() if sep else ""
        if key in ("name", "description", "hidden"):
            fields[key] = value.strip()
    return fields


def bundled() -> dict[str, Path]:
    """Each bundled skill's name → its folder (holding SKILL.md), sorted by name."""
    found: dict[str, Path] = {}
    for folder in sorted(SKILLS_DIR.iterdir()):
        skill = folder / "SKILL.md"
        if skill.is_file():
            fields = _front_matter(skill.read_text(encoding="utf-8"))
            if fields.get("name") and fields.get("hidden", "").lower() not in ("true", "yes"):
                found[fields["name"]] = folder
    return dict(sorted(found.items()))


def _skill(name: str) -> Path:
    folder = bundled().get(name)
    if folder is None:
        raise QmdError(f"Skill not found: {name}", f"the skills qmd ships: {', '.join(bundled()) or 'none'} (qmd skills list)")
    return folder


def skill_text(name: str = "qmd") -> str:
    """The SKILL.md of bundled skill `name`."""
    return (_skill(name) / "SKILL.md").read_text(encoding="utf-8")


def _support_files(folder: Path) -> list[tuple[str, str]]:
    """(relative path, text) of a skill's references/templates/scripts files."""
    files = []
    for sub in SUPPORT_FOLDERS:
        if (folder / sub).is_dir():
            files += [(f"{sub}/{p.name}", p.read_text(encoding="utf-8")) for p in sorted((folder / sub).iterdir()) if p.is_file()]
    return files


def _ended(text: str) -> str:
    return text if text.endswith("\n") else text + "\n"


def _json(data: object, success: bool = True) -> None:
    import json

    key = "data" if success else "error"
    out(json.dumps({"success": success, key: data}, ensure_ascii=False, separators=(",", ":")) + "\n")  # the original's JSON.stringify


def _answer(json_: bool, produce: Callable[[], None]) -> None:
    """Run `produce()`; with --json a QmdError is the original's `{"success": false, "error"}` (exit 1)."""
    try:
        produce()
    except QmdError as exc:
        if not json_:
            raise
        _json(exc.message, success=False)
        raise typer.Exit(1) from exc


JsonFlag = Annotated[bool, typer.Option("--json", help="Print the original's JSON: {\"success\": true, \"data\": ...}.")]


@skills_app.callback()
def skills_root(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """The agent skills qmd ships (`qmd skills` alone lists them)."""
    ctx.meta["qmd.skills.json"] = json_
    if ctx.invoked_subcommand is None:
        skills_list(ctx, json_)


def _wants_json(ctx: typer.Context, json_: bool) -> bool:
    return json_ or bool(ctx.meta.get("qmd.skills.json"))


@skills_app.command("list", short_help="List the skills qmd ships.")
def skills_list(ctx: typer.Context, json_: JsonFlag = False) -> None:
    """List the skills qmd ships, with their descriptions."""
    skills = {name: _front_matter((folder / "SKILL.md").read_text(encoding="utf-8")).get("description", "") for name, folder in bundled().items()}
    if _wants_json(ctx, json_):
        _json([{"name": name, "description": text} for name, text in skills.items()])
        return
    width = max((len(name) for name in skills), default=0)
    out("".join(f"  {name.ljust(width)}  {text}\n" for name, text in skills.items()) or "No skills found\n")


@skills_app.command("get", short_help="Print a skill's SKILL.md.")
def skills_get(
    ctx: typer.Context,
    names: Annotated[list[str] | None, typer.Argument(metavar="[NAME]...", help="The skills to print (qmd skills list).", show_default=False)] = None,
    full: Annotated[bool, typer.Option("--full", help="Also print its references, templates and scripts.")] = False,
    all_: Annotated[bool, typer.Option("--all", help="Print every skill.")] = False,
    json_: JsonFlag = False,
) -> None:
    """Print skills (their SKILL.md), as agents load them: qmd skills get qmd."""
    as_json = _wants_json(ctx, json_)

    def produce() -> None:
        chosen = list(bundled()) if all_ else list(names or [])
        if not chosen:
            raise QmdError("No skill name provided", "name one: qmd skills get qmd (or --all)")
        folders = {name: _skill(name) for name in chosen}
        if as_json:
            _json([
                {"name": name, "content": skill_text(name)} | ({"files": [{"path": p, "content": t} for p, t in _support_files(folder)]} if full else {})
                for name, folder in folders.items()
            ])
            return
        parts = []
        for name, folder in folders.items():
            part = _ended(skill_text(name))
            if full:
                part += "".join(f"\n--- {path} ---\n\n{_ended(text)}" for path, text in _support_files(folder))
            parts.append(part)
        out("\n---\n\n".join(parts))

    _answer(as_json, produce)


@skills_app.command("path", short_help="Print where the skills are installed.")
def skills_path(
    ctx: typer.Context,
    name: Annotated[str | None, typer.Argument(help="A skill: its folder (none: the folder of all).", show_default=False)] = None,
    json_: JsonFlag = False,
) -> None:
    """Print the folder of the bundled skills, or of one of them."""
    as_json = _wants_json(ctx, json_)

    def produce() -> None:
        folder = SKILLS_DIR if name is None else _skill(name)
        if not as_json:
            out(f"{folder}\n")
        elif name is None:
            _json({"paths": [str(folder)]})
        else:
            _json({"name": name, "path": str(folder)})

    _answer(as_json, produce)


# --- qmd skill show / install -------------------------------------------------------


@skill_app.command("show", short_help="Print the qmd skill (SKILL.md).")
def skill_show() -> None:
    """Print the qmd skill (SKILL.md): what an agent should know to search your notes."""
    out(skill_text())


def skill_dirs(global_: bool, cwd: Path | None = None) -> tuple[Path, Path]:
    """(the Agent Skills folder Codex reads, Claude Code's) for qmd, in a project or for the user."""
    base = Path.home() if global_ else (cwd or Path.cwd())
    return base / ".agents" / "skills" / "qmd", base / ".claude" / "skills" / "qmd"


def _is_ours(folder: Path, text: str) -> bool:
    """Whether `folder` holds this skill, or no skill yet: empty, or only another install's
    temporary file (six installs at once: five said "a different skill already exists")."""
    skill = folder / "SKILL.md"
    if skill.is_file():
        return skill.read_text(encoding="utf-8", errors="replace") == text
    try:
        return not skill.is_symlink() and all(p.name.startswith(".SKILL.md.") and p.name.endswith(".tmp") for p in folder.iterdir())
    except OSError:
        return False


def _clear(path: Path, text: str, force: bool) -> None:
    """Make room for the skill at `path`: a link there is refused (never written through)
    unless --force, which removes the link itself; a different skill needs --force too."""
    if path.is_symlink():
        if not force:
            raise QmdError(f"{path} is a symbolic link; qmd writes the skill only into a real folder", "remove the link, or replace it: qmd skill install --force")
        path.unlink()
    elif path.exists() and not path.is_dir():
        if not force:
            raise QmdError(f"{path} is a file, not a skill folder", "move it aside, or replace it: qmd skill install --force")
        path.unlink()
    elif path.is_dir() and not force and not _is_ours(path, text):
        raise QmdError(f"a different skill already exists at {path}", "replace it with: qmd skill install --force")


def _ask_claude(link: Path) -> bool:
    """Whether to link Claude's folder when neither --yes nor --no-claude was given: asked on
    a terminal, as the original asks; with nobody to ask, a tip and no link."""
    from qmd.cli.trustask import interactive

    if not interactive():
        out(f"Tip: make the skill visible to Claude Code too: qmd skill install --yes (links {link})\n")
        return False
    try:
        answer = input(f"Create a symlink in {link}? [y/N] ")
    except EOFError:
        answer = ""
    return answer.strip().lower() in ("y", "yes")


def _ready_for_claude(agents: Path, claude_dir: Path, text: str, force: bool) -> None:
    """Raise what `_link_claude` would meet, changing nothing: a different skill standing at
    `claude_dir` (without --force), or a folder qmd may not create the link in."""
    from qmd.core.fileio import check_writable

    if claude_dir.parent.exists() and os.path.realpath(claude_dir.parent) == os.path.realpath(agents.parent):
        return  # Claude sees the skill through a linked folder: nothing to make
    for above in claude_dir.parents:  # the folders to make: a file standing where one goes stops mkdir
        if os.path.lexists(above):
            if not above.is_dir():
                raise QmdError(f"cannot install the skill for Claude: {above} is a file where a folder goes", f"move {above} aside, then run this again")
            break
    ours = claude_dir.is_symlink() and os.path.realpath(claude_dir) == os.path.realpath(agents)
    if (claude_dir.is_symlink() or claude_dir.exists()) and not (ours or force or _is_ours(claude_dir, text)):
        _claude_taken(claude_dir)
    if claude_dir.is_dir() and not claude_dir.is_symlink() and (force or all(p.name == "SKILL.md" for p in claude_dir.iterdir())):
        check_writable(claude_dir / "SKILL.md", make_folders=False)  # a copy to be replaced by the link: emptied first
    check_writable(claude_dir, make_folders=False)


def _claude_taken(claude_dir: Path) -> None:
    raise QmdError(f"Claude skill path already exists: {claude_dir}", "replace it with: qmd skill install --yes --force")


def _link_claude(agents: Path, claude_dir: Path, text: str, force: bool) -> None:
    from qmd.core.fileio import write_text

    if claude_dir.parent.exists() and os.path.realpath(claude_dir.parent) == os.path.realpath(agents.parent):
        out(f"✓ Claude already sees the skill via {claude_dir.parent}\n")
        return
    claude_dir.parent.mkdir(parents=True, exist_ok=True)
    # relative from where the link really stands: a linked .claude or .claude/skills (dotfiles) puts it elsewhere
    link = os.path.relpath(os.path.realpath(agents), os.path.realpath(claude_dir.parent))
    if claude_dir.is_symlink() and os.readlink(claude_dir) == link:
        out(f"✓ Linked Claude skill at {claude_dir}\n")
        return
    if claude_dir.is_symlink() or claude_dir.exists():
        if not (force or _is_ours(claude_dir, text)):
            _claude_taken(claude_dir)
        if claude_dir.is_dir() and not claude_dir.is_symlink():
            if not force and any(p.name != "SKILL.md" for p in claude_dir.iterdir()):
                out(f"✓ Claude has this skill at {claude_dir} (a folder holding files of its own too: left as it is)\n")
                return
            shutil.rmtree(claude_dir)
        else:
            claude_dir.unlink()  # the link (or file) itself, never what it points to
    try:
        claude_dir.symlink_to(link, target_is_directory=True)
        out(f"✓ Linked Claude skill at {claude_dir}\n")
    except OSError:
        claude_dir.mkdir()
        write_text(claude_dir / "SKILL.md", text, keep_read_only=True)
        out(f"✓ Installed a copy for Claude at {claude_dir}\n")


@skill_app.command("install", short_help="Install the qmd skill for Codex and Claude Code.")
def skill_install(
    global_: Annotated[bool, typer.Option("--global", help="Install for the user (~/.agents/skills, ~/.claude/skills) instead of this project.")] = False,
    force: Annotated[bool, typer.Option("-f", "--force", help="Replace an existing, different skill, or a link standing where it goes.")] = False,
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Also link .claude/skills/qmd for Claude Code, without asking.")] = False,
    claude: Annotated[bool | None, typer.Option("--claude/--no-claude", help="Link it for Claude Code (as --yes), or neither link nor ask.", show_default=False)] = None,
) -> None:
    """Install the qmd skill for Codex (.agents/skills/qmd) and, with --yes or a yes on the
    terminal, link it for Claude Code (.claude/skills/qmd)."""
    from qmd.core.fileio import write_text

    from qmd.agents import claude_plugin

    text = skill_text()
    agents, claude_dir = skill_dirs(global_)
    if not global_:  # a cloned repository's `.claude -> /elsewhere` had the skill installed there
        from qmd.agents import inside_project

        for folder in (agents, claude_dir):  # the skill's own folder, a link, is refused by _clear (never written through)
            inside_project(folder.parent, Path.cwd())
    plugin_id = None if claude is False else claude_plugin(Path.cwd())
    try:
        if (yes or claude) and plugin_id is None:  # both or neither: Claude's side is checked before anything is written
            _ready_for_claude(agents, claude_dir, text, force)
        _clear(agents, text, force)
        agents.mkdir(parents=True, exist_ok=True)
        write_text(agents / "SKILL.md", text, keep_read_only=True)  # replaces a link named SKILL.md, never writes through it
        out(f"✓ Installed QMD skill to {agents}\n")
        if claude is False:
            return
        if plugin_id is not None:  # Claude Code lists the plugin's copy already
            out(f"✓ Claude Code has this skill from qmd's plugin ({plugin_id}): not linking a second copy\n")
            return
        if yes or claude or _ask_claude(claude_dir):
            _link_claude(agents, claude_dir, text, force)
    except OSError as exc:  # a file or a broken link where a folder goes, a folder where SKILL.md goes, no permission
        from qmd.core.fileio import denial

        if (refused := denial(exc, "cannot install the skill")) is not None:
            raise QmdError(*refused) from None
        where = exc.filename2 or exc.filename or agents  # a rename's target, not its temporary file
        raise QmdError(f"cannot install the skill: {exc.strerror or exc}: {where}", f"move {where} aside (or make it a folder qmd may write in), then run this again") from None
