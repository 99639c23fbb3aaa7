"""Where a repository's hooks live: `git rev-parse --git-path hooks` (worktrees, core.hooksPath), husky."""

from __future__ import annotations

import os
import subprocess
from dataclasses import dataclass
from pathlib import Path

from qmd import QmdError


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
    husky_dir, version = _husky(hooks_dir)
    return RepoHooks(top, hooks_dir, husky_dir, version)


def _husky(hooks_dir: Path) -> tuple[Path | None, int | None]:
    """husky 9 sets core.hooksPath to `.husky/_` (stubs that run `.husky/<hook>` through `_/h`);
    husky 4-8 set it to `.husky`, whose hook files git runs directly after sourcing `_/husky.sh`."""
    if hooks_dir.name == "_" and (hooks_dir / "h").is_file():
        return hooks_dir.parent, 9
    if (hooks_dir / "_" / "husky.sh").is_file():
        return hooks_dir, 8
    return None, None
