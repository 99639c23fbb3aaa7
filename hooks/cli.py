"""`qmd hooks install|uninstall|status` (a typer sub-app of qmd)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Annotated, Any

import typer

from qmd import harness
from qmd import QmdError
from updater import registry

from . import install as installer

app = typer.Typer(
    name="hooks",
    help="Git hooks that queue a reindex request after every commit, merge and rewrite (the updater does the work).",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

ReposArg = Annotated[list[Path] | None, typer.Argument(help="Repositories (default: the one containing the current directory).", show_default=False)]


def _routes(top: str) -> dict[str, list[str]]:
    from updater import routing

    return routing.load().route(top)


@app.command("install", short_help="Install the git hooks in repositories.")
def install_cmd(repos: ReposArg = None) -> None:
    """Enrol repositories: install post-commit, post-merge and post-rewrite hooks (idempotent)."""
    from updater.lock import holder

    layout = harness.StateLayout.current()
    failed: list[tuple[str, str | None]] = []
    for path in repos or [Path.cwd()]:
        try:
            outcome = installer.install(path, layout)
        except QmdError as exc:
            failed.append((f"{path}: {exc.message}", exc.cli_hint))
            continue
        for line in outcome.lines:
            typer.echo(line)
        routes = _routes(str(outcome.repo))
        if routes:
            typer.echo("  routes to: " + "; ".join(f"index {i}: {', '.join(c)}" for i, c in sorted(routes.items())))
        else:
            typer.echo(f"  warning: no collection of any index lies in {outcome.repo}; its requests will be dropped until you add one (qmd collection add DIR)")
    if not failed and holder(layout) is None:
        from updater import service

        if sys.platform.startswith("linux") and service.systemd_missing():  # install-service would refuse
            typer.echo("note: nothing drains the queue yet, and no systemd user manager runs here: " + service.run_elsewhere())
        else:
            typer.echo("note: nothing drains the queue yet: qmd updater install-service (or run qmd updater daemon / qmd updater run)")
    if failed:  # the hints on the hint line, as every other error's (each once)
        raise QmdError("; ".join(m for m, _ in failed), "; ".join(dict.fromkeys(h for _, h in failed if h)) or None)


@app.command("uninstall", short_help="Remove the hooks and restore what was there.")
def uninstall_cmd(
    repos: ReposArg = None,
    all_: Annotated[bool, typer.Option("--all", help="Every enrolled repository.")] = False,
) -> None:
    """Remove our hooks and put back exactly what was there; forget the repositories."""
    from updater import records

    layout = harness.StateLayout.current()
    targets: list[Any] = list(registry.load(layout)) if all_ else list(repos or [Path.cwd()])
    for path in targets:
        outcome = installer.uninstall(path, layout)
        for line in outcome.lines:
            typer.echo(line)
        forgotten = records.forget_repo(layout, str(outcome.repo))
        if forgotten:
            typer.echo(f"  removed {forgotten} dropped-request record(s)")


@app.command("status", short_help="Show enrolled repositories and their hooks.")
def status_cmd(
    repos: ReposArg = None,
    json_: Annotated[bool, typer.Option("--json", help="Print as JSON.")] = False,
) -> None:
    """Enrolled repositories: do their hooks still run, where do they route, what is pending."""
    from updater import spool

    layout = harness.StateLayout.current()
    enrolled = registry.load(layout)
    keys = [os.path.realpath(p) for p in repos] if repos else sorted(enrolled)
    pending = spool.info(layout).by_repo
    report: list[dict[str, Any]] = []
    for key in keys:
        entry = enrolled.get(key)
        exists, hooks = installer.inspect(key, entry or {}, layout)
        report.append({
            "repo": key,
            "enrolled": entry is not None,
            "exists": exists,
            "hooks_dir": (entry or {}).get("hooks_dir"),
            "husky_dir": (entry or {}).get("husky_dir"),
            "hooks": {h.name: {"state": h.state, "detail": h.detail} for h in hooks},
            "routes": _routes(key) if exists else {},
            "pending": pending.get(key, 0),
        })
    if json_:
        typer.echo(json.dumps({"state_dir": str(layout.root), "repos": report}, indent=2))
        return
    if not report:
        typer.echo("No repositories enrolled. Enrol one with: qmd hooks install [REPO]")
        return
    for item in report:
        if not item["exists"]:
            typer.echo(f"{item['repo']}: MISSING (deleted or moved); forget it with: qmd hooks uninstall {item['repo']}")
            continue
        states = {h["state"] for h in item["hooks"].values()}
        summary = "ok" if states == {"installed"} else "NEEDS ATTENTION" if item["enrolled"] else "not enrolled"
        typer.echo(f"{item['repo']}: {summary}, {item['pending']} pending")
        for name, h in item["hooks"].items():
            typer.echo(f"  {name}: {h['state']}" + ("" if h["state"] == "installed" else f" ({h['detail']})"))
        routes = item["routes"]
        typer.echo("  routes to: " + ("; ".join(f"index {i}: {', '.join(c)}" for i, c in sorted(routes.items())) or "nothing (no collection lies in it)"))
