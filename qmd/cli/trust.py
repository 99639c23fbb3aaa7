"""`qmd trust [list|revoke]`: approve, list or drop approvals of project-local configs
(qmd/core/trust.py); the question asked before a command uses them is in trustask.py."""

from __future__ import annotations

from typing import Annotated

import typer

from qmd.cli.shared import out
from qmd.cli.trustask import _current


trust_app = typer.Typer(
    help="Approve a checked-in .qmd config's update commands, outside paths and models (list, revoke).",
    invoke_without_command=True, no_args_is_help=False,
)


@trust_app.callback()
def trust(ctx: typer.Context) -> None:
    """Approve the project-local config in scope: its update commands, collections outside the
    project and custom models are then used, until one of them changes."""
    if ctx.invoked_subcommand is not None:
        return
    from qmd.core.trust import record_trust

    paths, decision = _current()
    if not decision.local:
        out(f"{paths.config_path} is your own config — it is never gated. Nothing to trust.\n")
        return
    if not decision.gated:
        out(f"{paths.config_path} defines no update commands, out-of-project collection paths, or custom models. Nothing to trust.\n")
        return
    for line in decision.gated.lines():
        out(line + "\n")
    record_trust(decision.config_path, decision.digest)
    out(f"✓ Trusted {decision.config_path}\n")
    out("Editing a hook, out-of-project path, or custom model will ask again. Revoke with 'qmd trust revoke'.\n")


@trust_app.command("list", short_help="List the approved project configs.")
def trust_list(json_: Annotated[bool, typer.Option("--json")] = False) -> None:
    """The approved project configs (from <config dir>/trusted.json)."""
    from qmd.core.trust import list_trusted

    records = list_trusted()
    if json_:
        import json

        out(json.dumps([{"path": p, "trustedAt": t} for p, t in records], indent=2) + "\n")
        return
    if not records:
        out("No trusted project configs.\n")
    for path, when in records:
        out(f"{path} (trusted {when})\n")


@trust_app.command("revoke", short_help="Withdraw the approval of this project's config.")
def trust_revoke() -> None:
    """Drop the approval of the project-local config in scope: its gated fields are asked for again."""
    from qmd.core.trust import revoke_trust

    paths, decision = _current()
    if not decision.local:
        out(f"No project-local .qmd config in scope — {paths.config_path} is your own config and is never gated.\n")
        out("Run this from inside the project, or see 'qmd trust list'.\n")
        return
    if revoke_trust(paths.config_path):
        out(f"✓ Revoked trust for {paths.config_path}\n")
    else:
        out(f"{paths.config_path} was not trusted.\n")
