"""Where a repository's hooks live: `git rev-parse --git-path hooks` (worktrees, core.hooksPath), husky."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from qmd import QmdError
from qmd.harness import within


def git(repo: Path | str, *args: str) -> str:
    """Run `git -C repo ARGS`, return stdout stripped; a QmdError with git's message on failure."""
    try:
        proc = subprocess.run(["git", "-C", str(repo), *args], capture_output=True, text=True, stdin=subprocess.DEVNULL, timeout=30)
    except FileNotFoundError as exc:
        raise QmdError("git is not installed (or not on PATH)", "install git, then run the command again") from exc
    if proc.returncode != 0:
        message = (proc.stderr.strip().splitlines() or [f"git {' '.join(args)} exited {proc.returncode}"])[-1]
        raise QmdError(f"{repo}: {message}", "give the path of a git work tree (or run the command inside one)")
    return proc.stdout.strip()


@dataclass(frozen=True)
class RepoHooks:
    """A work tree and the folder its hooks go into."""

    top: Path  # the work tree, resolved
    hooks_dir: Path  # where git looks for hooks (absolute)
    husky_dir: Path | None  # husky's user folder (`.husky`) when husky owns core.hooksPath
    husky_version: int | None  # 9 (`core.hooksPath=.husky/_`) or 8 (`core.hooksPath=.husky`)


def locate(path: Path | str) -> RepoHooks:
    """The work tree containing `path` and where its hooks live."""
    where = Path(path).expanduser()
    if not where.exists():
        raise QmdError(f"{where} does not exist", "give the path of a git work tree")
    if git(where, "rev-parse", "--is-bare-repository") == "true":
        raise QmdError(f"{where} is a bare repository: there is no work tree to index", "enrol a clone or a worktree of it")
    top = Path(os.path.realpath(git(where, "rev-parse", "--show-toplevel")))
    hooks = Path(git(top, "rev-parse", "--git-path", "hooks"))
    hooks_dir = Path(os.path.realpath(hooks if hooks.is_absolute() else top / hooks))
    if not hooks.is_absolute():
        _inside_work_tree(top, top / hooks, hooks_dir)
    husky_dir, version = _husky(hooks_dir)
    return RepoHooks(top, hooks_dir, husky_dir, version)


def _inside_work_tree(top: Path, named: Path, real: Path) -> None:
    """A relative `core.hooksPath` inside the work tree (`.githooks`, `.husky/_`) whose tracked
    folder is a link out of it (`.githooks -> ~/bin`): install created and renamed hooks there.
    The git dir's own hooks folder may be a link anywhere (a user's shared hooks)."""
    git_dir = os.path.realpath(git(top, "rev-parse", "--absolute-git-dir"))
    lexical = os.path.normpath(named)
    if within(str(real), git_dir) or not within(lexical, str(top)) or within(str(real), str(top)):
        return
    raise QmdError(
        f"the hooks folder {lexical} leads outside the repository ({real}) through a symbolic link in it: qmd writes hooks only inside it",
        f"make {lexical} a folder of the repository (or set core.hooksPath to an absolute path you chose), then run qmd hooks install again",
    )


def _husky(hooks_dir: Path) -> tuple[Path | None, int | None]:
    """husky 9 sets core.hooksPath to `.husky/_` (stubs that run `.husky/<hook>` through `_/h`);
    husky 4-8 set it to `.husky`, whose hook files git runs directly after sourcing `_/husky.sh`."""
    if hooks_dir.name == "_" and (hooks_dir / "h").is_file():
        return hooks_dir.parent, 9
    if (hooks_dir / "_" / "husky.sh").is_file():
        return hooks_dir, 8
    return None, None
