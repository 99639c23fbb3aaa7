"""`qmd doctor`: check what breaks quietly, `--fix` what is safe, exit with the worst status.

Exit codes: 0 no failures (warnings allowed), 1 warnings under --strict, 2 a failed
check, or a doctor that could not start (a bad --index: one line says why).
"""

from __future__ import annotations

import sys
from typing import Annotated

import typer

import qmd


def doctor(
    ctx: typer.Context,
    json_: Annotated[bool, typer.Option("--json", help="Print the results as JSON (shape in docs/harness.md).")] = False,
    fix: Annotated[bool, typer.Option("--fix", help="Repair what is safe (restart stale servers, rebuild drifted FTS rows or a corrupted index, reinstall hooks, re-run the updater), then check again.")] = False,
    quick: Annotated[bool, typer.Option("--quick", help="Skip the slow parts: SQLite quick_check and the MCP handshakes.")] = False,
    strict: Annotated[bool, typer.Option("--strict", help="Exit 1 when there are warnings.")] = False,
    index: Annotated[str | None, typer.Option("--index", help="Check only index NAME, or the project-local index whose .qmd/index.yml is given (default: every index in the config dir and the project-local ones, the one found from here checked first).")] = None,
) -> None:
    """Check native modules, models, indexes, the MCP server, the queue, hooks, guard and services.

    Exit codes: 0 no failures (warnings allowed), 1 warnings under --strict, 2 a failed
    check, or a doctor that could not start (a bad --index: one line says why).
    """
    from .context import Context
    from .results import exit_code
    from .render import Style, render
    from .runner import run

    try:
        run_ctx = Context.create(index or ctx.meta.get("qmd.index"), quick=quick, fix=fix)
        report = run(run_ctx)
    except qmd.QmdError as exc:
        # Bad input (an index name that cannot be, a path that is no config): one line and
        # exit 2, never 3 (qmd's code for its own bugs).
        sys.stderr.write(f"Error: doctor could not run: {exc.message}\n" + (f"hint: {exc.cli_hint}\n" if exc.cli_hint else ""))
        raise typer.Exit(2) from None
    typer.echo(render(report, json_, strict, Style.of(sys.stdout)))
    raise typer.Exit(exit_code(report.results, strict))
