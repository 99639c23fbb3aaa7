"""The project-local index in use (`.qmd/index.yml` found from the working directory, or
given with --index): which one and why, its index file, and its trust state.

Reported in the index group (the index checks of that index run there too): an empty or
unreadable index file fails here by name, and gated fields of a config that came with the
repository (update commands, collections outside the project, custom models) that nobody
approved are a warning whose fix is `qmd trust`; agents, MCP and the updater skip them.
"""

from __future__ import annotations

import os
from pathlib import Path

import qmd
from qmd import harness

from .context import Context, home_path, qmd_command
from .results import CheckResult, fail, ok, warn

SQLITE_HEADER = b"SQLite format 3\x00"


def _in_use(ctx: Context, local: qmd.IndexPaths) -> CheckResult:
    """Which local index this run uses and why; whether the harness serves it."""
    why = "chosen with --index" if ctx.selected else "found from the working directory upward"
    root = home_path(local.project_root or local.config_path)
    detail = f"{home_path(local.config_path)} ({why}): the project-local index of {root}"
    if any(os.path.realpath(p) == os.path.realpath(local.config_path) for p in harness.local_configs()):
        return ok("project-local index", detail + "; the updater, guard and doctor serve it")
    return warn(
        "project-local index",
        detail + "; not known to the harness yet: the updater does not route the repository's commits to it, the guard does not protect its folders",
        qmd_command("update", index=local.key) + "  # registers it",
    )


def _file(ctx: Context, local: qmd.IndexPaths) -> CheckResult:
    """The index file beside the config: there, a regular readable file, not empty, SQLite."""
    name = "project-local index file"
    path = Path(local.index_path)
    where = home_path(path)
    rebuild = qmd_command("rebuild", index=local.key)
    if path.is_symlink() and not path.exists():
        return fail(name, f"{where} is a dangling symlink (to {os.readlink(path)}): every command that reads the index fails", f"rm {where} && {qmd_command('update', index=local.key)}")
    try:
        store = ctx.store(local.key)
    except qmd.QmdError as exc:
        return fail(name, f"{home_path(local.config_path)} cannot be read: {exc.message}", exc.cli_hint or f"edit {home_path(local.config_path)}")
    try:
        if store.backend.location != str(path):
            return ok(name, "the index is in PostgreSQL (no index file to check; the index checks below open it)")
    finally:
        store.close()
    if not path.exists():
        return warn(name, f"{where} has not been built", qmd_command("update", index=local.key))
    if not path.is_file():
        return fail(name, f"{where} is not a file: no command can open the index", f"move it away, then: {qmd_command('update', index=local.key)}")
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(SQLITE_HEADER))
        size = path.stat().st_size
    except OSError as exc:  # a mode or an owner is no damage: never a rebuild for it
        fix = f"chmod u+rw {where}  # or run qmd as the user who owns it" if isinstance(exc, PermissionError) else f"fix its permissions (chmod u+rw {where}), or: {rebuild}"
        return fail(name, f"{where} cannot be read: {exc.strerror or exc}", fix)
    if size == 0:
        return fail(name, f"{where} is EMPTY (0 bytes): not an index; every command that reads it stops with 'the index is damaged'", f"{rebuild}  # or: qmd doctor --fix")
    if head != SQLITE_HEADER:
        return fail(name, f"{where} is not a SQLite database ({size} bytes, header {head[:16]!r})", f"{rebuild}  # or: qmd doctor --fix")
    return ok(name, f"{where}: {size} bytes, readable")


def _trust(local: qmd.IndexPaths) -> CheckResult:
    name = "project-local trust"
    try:
        decision = harness.local_trust(local.config_path)
    except qmd.QmdError as exc:
        return fail(name, f"{home_path(local.config_path)} cannot be read: {exc.message}", exc.cli_hint or f"edit {home_path(local.config_path)}")
    gated = decision.gated
    parts = [f"{len(gated.hooks)} update command(s) ({', '.join(f'{c}: {cmd}' for c, cmd in gated.hooks)})"] if gated.hooks else []
    parts += [f"{len(gated.paths)} collection(s) outside the project ({', '.join(f'{c}: {p}' for c, p in gated.paths)})"] if gated.paths else []
    parts += [f"custom models ({', '.join(f'{slot}: {uri}' for slot, uri in gated.models)})"] if gated.models else []
    parts += [f"a database server ({gated.database})"] if gated.database else []
    parts += [f"an index file outside the project ({gated.index_file})"] if gated.index_file else []
    parts += [f"guard exemptions inside the project ({', '.join(gated.guard_allow)})"] if gated.guard_allow else []
    listed = "; ".join(parts)
    if decision.why == "nothing-gated":
        return ok(name, "nothing to approve: no update commands, no collections outside the project, only the built-in models, no database, no guard exemptions")
    if decision.why == "approved":
        return ok(name, f"approved (qmd trust): {listed}")
    if decision.why == "opted-in":
        return ok(name, f"trusted for unattended runs by QMD_TRUST_LOCAL_CONFIG / QMD_TRUST_UPDATE_HOOKS: {listed}")
    if decision.why == "untrusted":
        return warn(
            name,
            f"pending approval, so skipped by every run (agents, MCP, the updater; a terminal asks): {listed}",
            qmd_command("trust", index=local.key) + "  # review what it lists; then they are used until one changes",
        )
    return ok(name, f"{home_path(local.config_path)} is not gated ({decision.why})")


def check(ctx: Context) -> list[CheckResult]:
    """The local index in use, or nothing when none is (outside every project, --index NAME)."""
    local = ctx.local
    if local is None:
        return []
    return [_in_use(ctx, local), _file(ctx, local), _trust(local)]
