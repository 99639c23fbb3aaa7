"""`qmd hooks install|uninstall|status`: put our hook beside whatever hooks a repository has.

Like pre-commit's install_uninstall.py: our script is recognised by a marker line; a
foreign hook is renamed to `<hook>.legacy` and still run (same arguments, same stdin);
pre-commit's own generated hook is left in place and our script becomes the `.legacy`
it runs (a `.legacy` pre-commit already chains moves to `.legacy.legacy`, which ours
runs); when husky owns core.hooksPath our block goes into `.husky/<hook>`. Uninstall
renames back, so what was there returns byte for byte. Idempotent.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from qmd import QmdError
from qmd.harness import StateLayout, lock_folder, now_iso, read_regular, replace_file, write_text
from updater import registry

from . import script
from .gitrepo import RepoHooks, locate

HUSKY8_PREAMBLE = '#!/usr/bin/env sh\n. "$(dirname -- "$0")/_/husky.sh"\n\n'


@dataclass
class Outcome:
    """What install/uninstall did in one repository: lines for people, data for the registry."""

    repo: Path
    lines: list[str] = field(default_factory=list)
    entry: dict[str, Any] = field(default_factory=dict)


MAX_HOOK = 1024 * 1024  # a hook script is kilobytes; a repository's hooks folder may hold a sparse file of gigabytes


def _read(path: Path) -> str | None:
    """The text of a hook file; None when there is none; "" for a dangling symlink.

    A link to an existing file is refused: a repository whose tracked hooks folder
    (`core.hooksPath`, husky) holds `post-commit -> ~/.ssh/id_rsa` had that file's bytes copied
    into the hook qmd wrote there, ready to be committed; one to /dev/zero was read until the
    memory ran out. So is anything but a regular file of at most MAX_HOOK bytes."""
    if os.path.islink(path):
        if not os.path.exists(path):
            return ""
        raise QmdError(
            f"{path} is a symbolic link (to {os.readlink(path)}): qmd reads and replaces only a regular hook file",
            "replace the link with a copy of the file it names, or move it away, then run the command again",
        )
    try:
        return read_regular(path, MAX_HOOK).decode("utf-8", "replace")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise QmdError(f"cannot read the hook {path}: {exc.strerror or exc}", "move it away, then run the command again") from exc


def _write(path: Path, text: str, mode: int = 0o755, *, fresh: bool = False) -> bool:
    """Atomically replace `path` with `text` (keeping an existing file's mode unless `fresh`:
    the file there is another hook's, kept aside); False when unchanged.

    A symlink (dangling or not) is replaced by a regular file, never written through.
    """
    if _read(path) == text and not os.path.islink(path):
        return False
    keep = path.exists() and not os.path.islink(path) and not fresh
    write_text(path, text, mode=None if keep else mode)
    return True


def _ensure_executable(path: Path) -> bool:
    """chmod +x a hook git would otherwise skip; True if it had to."""
    mode = path.stat().st_mode
    if mode & 0o111:
        return False
    os.chmod(path, (mode & 0o7777) | 0o755)
    return True


def _move_aside(src: Path, dst: Path, *, replaced: bool = False) -> None:
    """Rename `src` to `dst`, never replacing a `dst` that appeared meanwhile (a second install
    running at once, for another state dir): a hard link, then an unlink of `src`. Where the
    file system has no hard links, a check then a rename. `replaced`: the caller writes a new
    `src` at once (atomically, over the old name), so `src` is left for that write to replace:
    git never finds the hook missing (a commit in that moment ran neither hook)."""
    appeared = QmdError(f"{dst} appeared while qmd was installing its hook (another qmd hooks install at once?)", "run qmd hooks install again")
    try:
        os.link(src, dst, follow_symlinks=False)
    except FileExistsError:
        raise appeared from None
    except OSError:
        if os.path.lexists(dst):
            raise appeared from None
        replace_file(src, dst)
        return
    if not replaced:
        os.unlink(src)


def _plain_problem(hooks_dir: Path, name: str) -> QmdError | None:
    """Why installing `name` in `hooks_dir` must not go ahead, checked for every hook before any
    is changed: a `.legacy` that qmd would overwrite, or an orphan one (no hook runs it now;
    qmd's hook runs `$0.legacy`, so installing would start running it)."""
    target, legacy = hooks_dir / name, hooks_dir / f"{name}.legacy"
    current, previous = _read(target), _read(legacy)
    ours = previous is not None and script.is_ours(previous)
    if current is None and previous is not None and not ours:
        return QmdError(
            f"{legacy} exists but {target} does not: git does not run it now, and qmd's hook would (it runs {legacy.name})",
            f"delete {legacy} (or rename it to {name} to keep running it), then run qmd hooks install again",
        )
    if current is not None and not script.is_ours(current) and not script.is_pre_commit(current) and os.path.lexists(legacy):
        return QmdError(
            f"{target} is not qmd's and {legacy.name} already exists: qmd will not overwrite it",
            f"merge {legacy} into {target} (or move it away), then run qmd hooks install again",
        )
    if current is not None and script.is_pre_commit(current) and not ours:
        older = hooks_dir / f"{name}.legacy.legacy"
        if previous is not None and os.path.lexists(older):
            return QmdError(f"{legacy} and {older} both exist: qmd will not overwrite either", "merge them into one, then run qmd hooks install again")
        found = _read(older) if previous is None else None
        if found is not None and not script.is_ours(found):
            return QmdError(
                f"{older} exists but {legacy} does not: nothing runs it now, and qmd's hook would (as {legacy.name}, which pre-commit's hook runs)",
                f"delete {older} (or rename it to {legacy.name} to keep running it), then run qmd hooks install again",
            )
    return None


def _check_writable(folder: Path) -> None:
    """Refuse, before anything is changed, a hooks folder this user cannot create files in
    (each hook is written beside itself, then renamed into place)."""
    probe = folder / f".qmd-probe.{os.getpid()}.tmp"
    try:
        os.close(os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0), 0o600))
        os.unlink(probe)
    except OSError as exc:
        raise QmdError(f"cannot write in the hooks folder {folder}: {exc.strerror or exc}", f"make it writable to you (chmod u+rwx {folder}), or run as its owner") from None


def _install_plain(hooks_dir: Path, name: str, text: str) -> tuple[str, dict[str, Any]]:
    target, legacy = hooks_dir / name, hooks_dir / f"{name}.legacy"
    if (problem := _plain_problem(hooks_dir, name)) is not None:
        raise problem
    current = _read(target)
    if current is None and (left := _read(legacy)) is not None and script.is_ours(left):
        legacy.unlink()  # a copy of qmd's own hook left as .legacy (pre-commit's hook removed since): ours runs once
        _write(target, text)
        return f"installed (a copy of qmd's hook left as {legacy.name} was removed)", {"how": "created"}
    if current is not None and script.is_ours(current):
        changed = _write(target, text)
        return ("updated" if _ensure_executable(target) or changed else "already installed"), {}
    if current is not None and script.is_pre_commit(current):
        previous = _read(legacy)
        if previous is not None and script.is_ours(previous):
            return ("updated" if _write(legacy, text) else "already installed") + " (after pre-commit's hook)", {}
        note = ""
        if previous is not None:
            older = hooks_dir / f"{name}.legacy.legacy"
            _move_aside(legacy, older, replaced=True)
            note = f"; the hook pre-commit chained moved to {older.name} and still runs"
        elif (left := _read(hooks_dir / f"{name}.legacy.legacy")) is not None and script.is_ours(left):
            (hooks_dir / f"{name}.legacy.legacy").unlink()  # qmd's own, left behind: ours runs once
        _write(legacy, text, fresh=True)
        return f"installed as {legacy.name}, which pre-commit's hook runs{note}", {"how": "pre-commit"}
    if current is not None:
        _move_aside(target, legacy, replaced=True)
        _write(target, text, fresh=True)
        return f"installed; the existing hook was kept as {legacy.name} and still runs", {"how": "chained"}
    _write(target, text)
    return "installed", {"how": "created"}


def _remove_plain(hooks_dir: Path, name: str) -> str:
    target, legacy = hooks_dir / name, hooks_dir / f"{name}.legacy"
    current = _read(target)
    if current is not None and script.is_ours(current):
        if os.path.lexists(legacy):  # renamed over ours: git finds one hook or the other, never none
            replace_file(legacy, target)
            return f"removed; restored the previous hook from {legacy.name}"
        target.unlink()
        return "removed"
    previous = _read(legacy)
    if previous is not None and script.is_ours(previous):
        older = hooks_dir / f"{name}.legacy.legacy"
        if os.path.lexists(older):
            replace_file(older, legacy)
            return f"removed from after pre-commit's hook; {older.name} is {legacy.name} again"
        legacy.unlink()
        return "removed from after pre-commit's hook"
    return "not installed"


def _block_span(text: str) -> tuple[int, int] | None:
    start = text.find(script.BLOCK_BEGIN)
    if start < 0 or (start > 0 and text[start - 1] != "\n"):
        return None
    end = text.find(script.BLOCK_END, start)
    if end < 0:
        return None
    end += len(script.BLOCK_END)
    return start, end + 1 if text[end : end + 1] == "\n" else end


def _install_husky(repo: RepoHooks, name: str, block: str) -> tuple[str, dict[str, Any]]:
    assert repo.husky_dir is not None
    path = repo.husky_dir / name
    text = _read(path)
    stub = repo.hooks_dir / name
    warn = f"; warning: husky has no {stub} stub, so git will not run it (run `npx husky`)" if repo.husky_version == 9 and not stub.exists() else ""
    if text is not None and (span := _block_span(text)):
        new = text[: span[0]] + block + text[span[1] :]
        return ("updated" if _write(path, new) else "already installed") + f" in {path}{warn}", {}
    if text is None:
        content = block if repo.husky_version == 9 else HUSKY8_PREAMBLE + block
        _write(path, content)
        return f"created {path}{warn}", {"how": "husky", "created": True}
    sep = "" if not text or text.endswith("\n") else "\n"
    _write(path, text + sep + block)
    return f"added to {path}{warn}", {"how": "husky", "created": False, "added_newline": bool(sep)}


def _remove_husky(husky_dir: Path, name: str, entry: dict[str, Any]) -> str:
    path = husky_dir / name
    text = _read(path)
    span = _block_span(text) if text else None
    if text is None or span is None:
        return "not installed"
    rest = text[: span[0]] + text[span[1] :]
    if entry.get("added_newline") and span[1] == len(text) and rest.endswith("\n"):
        rest = rest[:-1]
    if entry.get("created") and rest in ("", HUSKY8_PREAMBLE, HUSKY8_PREAMBLE.rstrip("\n") + "\n"):
        path.unlink()
        return f"removed {path} (qmd created it)"
    _write(path, rest)
    return f"removed our block from {path}"


@contextmanager
def _editing_folder(repo: RepoHooks) -> Iterator[None]:
    """Hold the folder whose hooks qmd edits (husky's, or git's hooks folder): installs and
    uninstalls of one repository for other state dirs, whose registry locks differ, take turns
    too, so none sees another's half-done move (the user's hook already `.legacy`, ours not yet
    written) as an orphan `.legacy`. Taken before the registry's lock, always in that order."""
    folder = repo.husky_dir or repo.hooks_dir
    if not folder.is_dir():
        yield
        return
    with ExitStack() as held:
        try:
            held.enter_context(lock_folder(folder, timeout=registry.EDIT_TIMEOUT_S))
        except TimeoutError:
            raise QmdError(f"{folder} stayed locked by another qmd hooks install or uninstall for {registry.EDIT_TIMEOUT_S:.0f}s", "run the command again when the other one has finished") from None
        except OSError as exc:  # unreadable to this user (flock needs the folder open)
            raise QmdError(f"cannot open the hooks folder {folder}: {exc.strerror}", f"make it readable and writable to you (chmod u+rwx {folder}), or run as its owner") from None
        yield


def install(path: Path | str, layout: StateLayout | None = None) -> Outcome:
    """Enrol the work tree containing `path`: install the three hooks, remember the repo."""
    layout = layout or StateLayout.current()
    repo = locate(path)
    state = str(layout.root)
    out = Outcome(repo.top)
    created: list[str] = []
    hooks: dict[str, Any] = {}
    if repo.husky_dir is None and not repo.hooks_dir.is_dir():
        missing = [repo.hooks_dir, *(p for p in repo.hooks_dir.parents if not p.exists())]
        try:
            repo.hooks_dir.mkdir(parents=True)
        except OSError as exc:  # a file in its place (or on the way to it), a read-only repository
            raise QmdError(f"cannot create the hooks folder {repo.hooks_dir}: {exc.strerror or exc}", "move whatever is in the way aside (or fix core.hooksPath), then run qmd hooks install again") from exc
        created += [str(p) for p in missing]  # deepest first, the order uninstall removes them in
    with _editing_folder(repo), registry.editing(layout) as repos:  # one at a time, for this repository and this state dir
        _check_writable(repo.husky_dir or repo.hooks_dir)
        if repo.husky_dir is None:
            for name in script.HOOK_NAMES:  # nothing changed unless every hook can be installed
                if (problem := _plain_problem(repo.hooks_dir, name)) is not None:
                    raise problem
        for name in script.HOOK_NAMES:
            if repo.husky_dir is not None:
                message, info = _install_husky(repo, name, script.husky_block(name, state))
            else:
                message, info = _install_plain(repo.hooks_dir, name, script.hook_script(name, state))
            out.lines.append(f"  {name}: {message}")
            hooks[name] = info
        old = repos.get(str(repo.top)) or {}
        for name, info in hooks.items():  # a re-install keeps what the first install recorded
            hooks[name] = info or (old.get("hooks") or {}).get(name) or {}
        repos[str(repo.top)] = {
            "hooks_dir": str(repo.hooks_dir),
            "husky_dir": str(repo.husky_dir) if repo.husky_dir else None,
            "state_dir": state,
            "installed_at": old.get("installed_at") or now_iso(),
            "hooks": hooks,
            "created_dirs": list(dict.fromkeys([*(old.get("created_dirs") or []), *created])),
        }
    where = f"husky ({repo.husky_dir})" if repo.husky_dir else str(repo.hooks_dir)
    out.lines.insert(0, f"{repo.top}: hooks in {where}, requests queued in {layout.queue}")
    return out


def uninstall(path: Path | str, layout: StateLayout | None = None) -> Outcome:
    """Remove our hooks from a repository and forget it (a deleted repository is just forgotten)."""
    layout = layout or StateLayout.current()
    try:
        repo: RepoHooks | None = locate(path)
    except QmdError:  # gone, or no longer a repository: only forgotten
        repo = None
    with _editing_folder(repo) if repo else nullcontext(), registry.editing(layout) as repos:
        out = _uninstall(path, repos, repo)
    return out


def _uninstall(path: Path | str, repos: dict[str, Any], located: RepoHooks | None) -> Outcome:
    """`located`: the work tree containing `path` (None: none), found once by the caller."""
    key = os.path.realpath(os.path.expanduser(str(path)))
    if key not in repos and located is not None:
        key = str(located.top)
    entry = repos.get(key) or {}
    out = Outcome(Path(key), entry=entry)
    if not os.path.isdir(key):
        if not entry:
            raise QmdError(f"{path} is not an enrolled repository", "see the enrolled ones with: qmd hooks status")
        out.lines.append(f"{key}: no longer exists; forgotten")
    else:
        repo = located if located is not None and str(located.top) == key else locate(key)
        shared = [
            other for other, e in repos.items()
            if other != key and os.path.isdir(other) and e.get("hooks_dir") == str(repo.hooks_dir)
        ]
        out.lines.append(f"{repo.top}:")
        if shared:
            out.lines.append(f"  hooks kept: {repo.hooks_dir} also serves the enrolled {', '.join(shared)}")
        else:
            if os.path.isdir(repo.husky_dir or repo.hooks_dir):
                _check_writable(repo.husky_dir or repo.hooks_dir)
            for name in script.HOOK_NAMES:
                if repo.husky_dir is not None:
                    message = _remove_husky(repo.husky_dir, name, (entry.get("hooks") or {}).get(name) or {})
                else:
                    message = _remove_plain(repo.hooks_dir, name)
                out.lines.append(f"  {name}: {message}")
            for folder in entry.get("created_dirs") or []:
                try:
                    os.rmdir(folder)  # only when empty: what qmd created and nobody filled
                except OSError:
                    pass
    repos.pop(key, None)
    return out


@dataclass
class HookState:
    name: str
    state: str  # installed | missing | not-executable | stale (installed for another state dir)
    detail: str


def inspect(key: str, entry: dict[str, Any], layout: StateLayout | None = None) -> tuple[bool, list[HookState]]:
    """(the work tree exists, the state of each hook) for an enrolled repository."""
    layout = layout or StateLayout.current()
    if not os.path.isdir(key):
        return False, []
    try:
        repo = locate(key)
    except QmdError as exc:
        return True, [HookState(name, "missing", exc.message) for name in script.HOOK_NAMES]
    states = []
    for name in script.HOOK_NAMES:
        if repo.husky_dir is not None:
            where = repo.husky_dir / name
            text = _read(where) or ""
            found = text if _block_span(text) else None
        else:
            where = repo.hooks_dir / name
            text = _read(where) or ""
            found = text if script.is_ours(text) else None
            if found is None and script.is_pre_commit(text):
                where = repo.hooks_dir / f"{name}.legacy"
                legacy = _read(where) or ""
                found = legacy if script.is_ours(legacy) else None
        if found is None:
            states.append(HookState(name, "missing", f"{where} does not run qmd's hook (run: qmd hooks install {key})"))
            continue
        baked = script.baked_state(found)
        runner = repo.hooks_dir / name  # what git executes (our script, or pre-commit's that chains ours)
        if repo.husky_dir is None and not (runner.exists() and runner.stat().st_mode & 0o111):
            states.append(HookState(name, "not-executable", f"{runner} is not executable, so git skips it (run: qmd hooks install {key})"))
        elif baked != str(layout.root):
            states.append(HookState(name, "stale", f"{where} queues into {baked}, not {layout.root} (run: qmd hooks install {key})"))
        else:
            states.append(HookState(name, "installed", str(where)))
    return True, states
