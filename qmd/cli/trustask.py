"""The question asked before a command uses a project-local config's gated fields
(qmd/core/trust.py): `update:` commands, collections outside the project, custom models.

On a terminal (stdin and stdout both TTYs, as the original checks) the items are listed and
the user is asked; with nobody to ask they are skipped with a notice and the command goes
on with the project's own collections. No typer here: `qmd query` runs without it.
"""

from __future__ import annotations

import sys

from qmd.cli.shared import STATE, err, out

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.paths import IndexPaths
    from qmd.core.trust import Decision


def _current() -> tuple[IndexPaths, Decision]:
    from qmd.core.config import Config
    from qmd.core.paths import resolve_index
    from qmd.core.trust import decide

    paths = resolve_index(STATE.index_name)
    return paths, decide(paths.config_path, Config.load(paths.config_path).raw)


def interactive() -> bool:
    return sys.stdin.isatty() and sys.stdout.isatty()


def ask_local_trust() -> bool:
    """Before update/embed/pull/vsearch/query: True when the config's gated fields may be
    used (not local, nothing gated, approved, opted in, or approved now on the terminal)."""
    from qmd.core.paths import resolve_index

    if not resolve_index(STATE.index_name).local:
        return True  # the cheap common case: no config to read
    from qmd.core.trust import record_trust, skip_notice

    _, decision = _current()
    if decision.allowed:
        return True
    if not interactive():
        if decision.gated.index_file:
            return False  # nothing can be skipped: opening the index says why, and the fix
        err(f"Note: {skip_notice(decision)}")
        err("hint: approve them with 'qmd trust' (run inside the project), or set QMD_TRUST_LOCAL_CONFIG=1 for unattended runs")
        return False
    for line in decision.gated.lines():
        out(line + "\n")
    out("Config that came with a checkout is not trusted by default.\n")
    try:
        answer = input("Trust this project's .qmd config? [y/N] ")
    except EOFError:
        answer = ""
    if answer.strip().lower() not in ("y", "yes"):
        out("Skipped. Indexing of this project continues.\n\n")
        return False
    record_trust(decision.config_path, decision.digest)
    out(f"Trusted {decision.config_path}. Editing a hook, path, or model will ask again.\n\n")
    return True


def keep_trust_after(before: Decision) -> None:
    """After the user changed a local config on the command line (`collection add`,
    `collection update-cmd`): what they typed needs no second approval, so when the config
    was trusted (or had nothing to trust) before, the new gated set is recorded as approved.
    An untrusted config stays untrusted: its other items were never shown."""
    from qmd.core.trust import record_trust

    if not before.local or not (before.why in ("approved", "nothing-gated")):
        return
    _, after = _current()
    if after.gated and not after.allowed:
        record_trust(after.config_path, after.digest)


def before_change() -> Decision:
    """The gate of the config in use, to pass to `keep_trust_after` once a change is saved."""
    return _current()[1]
