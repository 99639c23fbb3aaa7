"""`qmd teardown`: remove everything the installers added, with a summary first.

Hooks in every enrolled repository (legacy hooks restored), the guard and SessionStart
hooks, MCP registrations and running HTTP servers, the updater's service, the
~/.local/bin launcher. The index, config, models and harness state stay unless --purge.
qmd's Claude Code / Codex plugin stays too: a client's plugins are its own; one line names the
command that removes it.

Project-local indexes: the ones the harness serves (`qmd.harness.local_configs()`, which `init`,
`update` and config changes register), those of enrolled repositories and the one found
from the working directory are listed; --purge deletes their `.qmd/index.sqlite` (and its -wal, -shm, lock and backup
copies), never the `.qmd/index.yml` beside it, which belongs to the repository, and never
through a `.qmd` that links outside its project (it is kept and named).
"""

from __future__ import annotations

import os
import shutil
import signal
import sys
from collections.abc import Callable
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Annotated

import typer

import qmd
from qmd import harness
import qmd.agents
import qmd.serve

from .context import home_path

LAUNCHER_MARK = "# qmd launcher written by"


@dataclass
class Step:
    summary: str
    run: Callable[[], list[str]]
    keeps: bool = False  # a line saying what --purge leaves, not a removal
    unless_failed: str | None = None  # skipped, saying this, when a step before it failed (the backups: what it did not undo)


def launcher() -> Path | None:
    """~/.local/bin/qmd if install.sh wrote it (its marker line), else None."""
    path = Path.home() / ".local" / "bin" / "qmd"
    try:
        head = path.read_text(encoding="utf-8", errors="replace")[:400]
    except OSError:
        return None
    return path if LAUNCHER_MARK in head else None


def _remove(path: Path) -> list[str]:
    path.unlink(missing_ok=True)
    return [f"removed {path}"]


def _rmtree(path: Path) -> list[str]:
    if path.is_symlink() or path.is_file():
        path.unlink()
    elif path.exists():
        shutil.rmtree(path)
    else:
        return []
    return [f"removed {path}"]


def _stop_server(index: str) -> list[str]:
    report = qmd.serve.stop(index)
    # The server releases its lock a moment before its process exits: wait (bounded) for
    # the process to be gone before pruning the lock file it held.
    qmd.serve.prune_lock(index, report.info.pid if report.stopped and report.info else None)
    return [report.message]


def _unhook(repo: str) -> list[str]:
    from hooks import install as hook_install

    return hook_install.uninstall(repo).lines


def _stop_updater(pid: int) -> list[str]:
    try:
        os.kill(pid, signal.SIGTERM)
    except ProcessLookupError:
        return []
    return [f"stopped the updater daemon (pid {pid})"]


def _updater_daemon() -> int | None:
    from updater.lock import holder

    who = holder(harness.StateLayout.current())
    if not who or who.get("mode") != "daemon":
        return None
    argv = qmd.serve.process_argv(int(who["pid"])) or []
    return int(who["pid"]) if "updater" in argv and "daemon" in argv else None


def _backups(paths: list[Path]) -> list[Path]:
    """The `<file>.qmd-backup-*` copies qmd's installers made beside `paths`."""
    found = []
    for path in paths:
        try:
            found += sorted(path.parent.glob(f"{path.name}.qmd-backup-*"))
        except OSError:
            continue
    return found


def _prune(folders: list[Path]) -> list[str]:
    """Remove the folders installers create for their files (~/.claude, ~/.codex, the systemd user
    folder, ~/.local/bin) when teardown left them empty; never the home folder itself."""
    home = Path.home().resolve()
    out = []
    for folder in folders:
        while folder.resolve() != home and home in folder.resolve().parents:
            try:
                folder.rmdir()  # only when empty
            except OSError:
                break
            out.append(f"removed the empty folder {folder}")
            folder = folder.parent
            if folder.resolve() == home / ".config":
                break
    return out


def local_indexes() -> list[qmd.IndexPaths]:
    """The project-local indexes teardown knows of: those the harness serves (registered in
    the state dir), those at the top of a repository `qmd hooks install` enrolled, and the
    one found from the working directory; each once."""
    from updater import registry

    configs = list(harness.local_configs())
    for repo in sorted(registry.load()):
        configs += [c for c in (Path(repo) / ".qmd" / name for name in ("index.yaml", "index.yml")) if c.is_file()][:1]
    try:
        here = qmd.resolve_index()
    except qmd.QmdError:
        here = None
    if here is not None and here.local:
        configs.append(here.config_path)
    # One entry per real config; of several ways to it, the project whose own `.qmd` it is
    # (a project linking to another's `.qmd` must not hide the owner from --purge).
    by_real: dict[str, qmd.IndexPaths] = {}
    for config in configs:
        real = os.path.realpath(config)
        paths = qmd.resolve_index(str(config))
        if real not in by_real or (_outside_project(by_real[real]) is not None and _outside_project(paths) is None):
            by_real[real] = paths
    return list(by_real.values())


def _index_files(paths: qmd.IndexPaths) -> list[Path]:
    """A local index's files: `index.sqlite` and what qmd writes beside it under that name
    (-wal, -shm, .lock, .broken-*, .bak-*, .backup-*); never the config."""
    index = paths.index_path
    try:
        found = sorted(p for p in index.parent.glob(f"{index.name}*") if p.is_file() or p.is_symlink())
    except OSError:
        return []
    return [p for p in found if p != paths.config_path]


def _outside_project(paths: qmd.IndexPaths) -> str | None:
    """Where a local index's folder really is, when a link takes it outside its project
    (a `.qmd` linked to another project's, or to a shared folder); None when it is inside."""
    root = paths.project_root
    if root is None:
        return None
    real, project = Path(os.path.realpath(paths.index_path.parent)), Path(os.path.realpath(root))
    return None if real == project or project in real.parents else home_path(real)


def _remove_files(files: list[Path]) -> list[str]:
    for path in files:
        path.unlink(missing_ok=True)
    return [f"removed {home_path(files[0])}" + (f" and {len(files) - 1} file(s) beside it" if len(files) > 1 else "")] if files else []


def _local_summary(locals_: list[qmd.IndexPaths]) -> str:
    shown = ", ".join(home_path(p.index_path) for p in locals_[:3]) + (", …" if len(locals_) > 3 else "")
    return f"{len(locals_)} project-local ({shown})"


def plugins_kept() -> str | None:
    """One line naming qmd's Claude Code / Codex plugin when it is installed and enabled: teardown
    leaves a client's plugins to that client, so it says how to remove it."""
    found = [
        (name, qmd.agents.remove_command(plugin_id, client))
        for name, client, plugin_id in (("Claude Code", "claude", qmd.agents.claude_plugin(Path.cwd())), ("Codex", "codex", qmd.agents.codex_plugin()))
        if plugin_id
    ]
    if not found:
        return None
    return f"Kept: qmd's plugin in {' and '.join(name for name, _ in found)} (teardown leaves a client's plugins to it); to remove it: {' && '.join(command for _, command in found)}"


def plan(purge: bool) -> list[Step]:
    from guards import install as guard_install
    from updater import registry, service

    steps: list[Step] = []
    for index in qmd.serve.served_indexes():
        steps.append(Step(f"stop the MCP HTTP server of index '{index}'", partial(_stop_server, index)))
    for repo in sorted(registry.load()):
        steps.append(Step(f"remove qmd's git hooks from {home_path(repo)} (restoring any hook they chained)", partial(_unhook, repo)))
    guard_files = guard_install.installed_files()
    if guard_files:
        steps.append(Step("remove the agent guard and SessionStart hooks from " + ", ".join(home_path(p) for p in guard_files), guard_install.uninstall_all))
    registered = qmd.agents.registrations()
    if registered or shutil.which("claude") or shutil.which("codex"):
        what = ", ".join(home_path(r) for r in registered) or "Claude Code / Codex (asked through their CLIs)"
        steps.append(Step(f"remove MCP registrations: {what}", qmd.agents.unregister_all))
    units = [p for p in (service.systemd_dir() / f"{service.UNIT}.service", service.systemd_dir() / f"{service.UNIT}.timer", Path.home() / "Library" / "LaunchAgents" / f"{service.LABEL}.plist") if p.exists()]
    if units:
        platform = "macos" if units[0].suffix == ".plist" else "linux"
        steps.append(Step("stop and remove the updater service: " + ", ".join(home_path(u) for u in units), lambda: service.uninstall(platform)))
    pid = _updater_daemon()
    if pid:
        steps.append(Step(f"stop the updater daemon (pid {pid})", lambda: _stop_updater(pid)))
    script = launcher()
    if script:
        steps.append(Step(f"remove the launcher {home_path(script)}", lambda: _remove(script)))
    touched = list(dict.fromkeys(guard_files + [Path.home() / ".claude.json", Path.cwd() / ".mcp.json", qmd.agents.codex_home() / "config.toml"]))  # each file once
    copies = _backups(touched)
    if copies:
        steps.append(Step(
            f"remove {len(copies)} backup cop{'y' if len(copies) == 1 else 'ies'} qmd's installers made (" + ", ".join(home_path(c) for c in copies[:3]) + (", …" if len(copies) > 3 else "") + ")",
            lambda: [line for c in _backups(touched) for line in _remove(c)],
            unless_failed="kept the backup copies: a step above failed, and they hold what it left undone",
        ))
    parents = [qmd.agents.claude_config_dir(), qmd.agents.codex_home(), service.systemd_dir(), Path.home() / ".local" / "bin"]
    if steps:
        steps.append(Step("remove the folders above if that left them empty", lambda: _prune(parents)))
    if purge:
        for local in local_indexes():
            files = _index_files(local)
            outside = _outside_project(local)
            if files and outside is not None:
                steps.append(Step(
                    f"keep the index {home_path(local.index_path)}: {outside} lies outside the project {home_path(local.project_root or local.config_path.parent)}, so it may be another project's (delete it yourself if it is qmd's)",
                    partial(lambda path: [f"kept {path}"], home_path(local.index_path)),
                    keeps=True,
                ))
            elif files:
                steps.append(Step(
                    f"delete the project-local index {home_path(local.index_path)} (--purge; {home_path(local.config_path)} stays: it belongs to the repository)",
                    partial(_remove_files, files),
                ))
        folders = [harness.state_dir(), harness.config_dir(), harness.cache_dir()]
        if os.environ.get("QMD_MODELS_DIR"):
            folders.append(harness.models_dir())
        if os.environ.get("INDEX_PATH"):
            index_file = Path(os.environ["INDEX_PATH"])
            folders += [index_file, *(Path(f"{index_file}{s}") for s in ("-wal", "-shm", ".lock"))]
        for folder in folders:
            if folder.exists() or folder.is_symlink():
                steps.append(Step(f"delete {home_path(folder)} (--purge)", partial(_rmtree, folder)))
    return steps


def teardown(
    yes: Annotated[bool, typer.Option("--yes", "-y", help="Do it without asking.")] = False,
    purge: Annotated[bool, typer.Option("--purge", help="Also delete the indexes (a project-local index's .qmd/index.sqlite too, never its .qmd/index.yml), config, models and harness state.")] = False,
) -> None:
    """Remove what qmd's installers added: hooks, guard, MCP registrations, service, launcher (--purge: all data too, project-local indexes included)."""
    steps = plan(purge)
    locals_ = [] if purge else local_indexes()
    kept = (
        f"Kept: indexes in {home_path(harness.cache_dir())}" + (f" and {_local_summary(locals_)}" if locals_ else "")
        + f", config in {home_path(harness.config_dir())}, state in {home_path(harness.state_dir())} (--purge deletes them"
        + ("; a project's .qmd/index.yml always stays)" if locals_ else ")")
    )
    plugin = plugins_kept()
    if not steps:
        typer.echo("Nothing to remove: no hooks, guard, MCP registration, service or launcher of qmd's found" + ("" if purge or locals_ else " (data kept; --purge deletes it)"))
        for line in ([kept] if locals_ else []) + ([plugin] if plugin else []):
            typer.echo(line)
        return
    typer.echo("qmd teardown will:")
    for step in steps:
        typer.echo(f"  - {step.summary}")
    for line in ([] if purge else [kept]) + ([plugin] if plugin else []):
        typer.echo(line)
    if not yes:
        if not sys.stdin.isatty():
            raise qmd.QmdError("teardown asks before removing anything", "run again with --yes")
        typer.confirm("Proceed?", abort=True)
    failed = 0
    left = False  # a file left as it was (a project's link out of it): not "removed"
    for step in steps:
        if failed and step.unless_failed:
            typer.echo(step.unless_failed)
            continue
        try:
            for line in step.run():
                left = left or line.startswith("left ")
                typer.echo(line)
        except (qmd.QmdError, OSError) as exc:
            failed += 1
            refused = harness.denial(exc) if isinstance(exc, OSError) else None
            message, fix = (exc.message, exc.cli_hint) if isinstance(exc, qmd.QmdError) else refused or (str(exc), None)
            typer.echo(f"failed: {step.summary}: {message}" + (f"; fix: {fix}" if fix else ""), err=True)
    if failed:
        raise qmd.QmdError(f"{failed} step(s) of the teardown failed (see above)", "fix what they name, then run qmd teardown again")
    spared = any(step.keeps for step in steps)
    said = "qmd's integrations are removed, except the file(s) named 'left ... as it is' above." if left else "qmd's integrations are removed."
    typer.echo(said + ((" Its data is deleted, except the index(es) kept above." if spared else " All its data is deleted.") if purge else ""))
