"""Run every check group (in threads: most wait on subprocesses), then `--fix`'s repairs.

Repairs run one group at a time, in the groups' order (an index is rebuilt before the
updater is run against it); after a group's repairs its checks run again, so what is
printed is the state after the repair, not the repair's claim.
"""

from __future__ import annotations

import time
import traceback
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import qmd

from . import hooks, index, mcp, models, native, queue, services
from .context import Context
from .results import CheckResult, Status, fail

Group = Callable[[Context], list[CheckResult]]

GROUPS: list[tuple[str, str, Group]] = [
    ("native", "Native modules", native.check),
    ("models", "Models", models.check),
    ("index", "Index", index.check),
    ("mcp", "MCP server", mcp.check),
    ("queue", "Queue and updater", queue.check),
    ("hooks", "Hooks and guard", hooks.check),
    ("services", "Services", services.check),
]
TITLES = {key: title for key, title, _ in GROUPS}


@dataclass
class Report:
    results: list[CheckResult]
    seconds: float


def _run_group(ctx: Context, key: str, group: Group) -> list[CheckResult]:
    started = time.perf_counter()
    try:
        results = group(ctx)
    except Exception as exc:  # noqa: BLE001 - a broken check is a failed check, not a crashed doctor
        where = traceback.extract_tb(exc.__traceback__)[-1]
        results = [fail(key, f"the check itself failed: {type(exc).__name__}: {exc} (at {where.filename}:{where.lineno})", "report this; run qmd doctor --json for details")]
    elapsed = (time.perf_counter() - started) * 1000
    for r in results:
        r.group = key
        if not r.ms:
            r.ms = elapsed / len(results)
    return results


def _repair(ctx: Context, key: str, group: Group, results: list[CheckResult]) -> list[CheckResult]:
    done: dict[str, str] = {}
    for r in results:
        if r.status is Status.OK or r.repair is None:
            continue
        try:
            done[r.name] = r.repair()
        except qmd.QmdError as exc:
            done[r.name] = f"could not repair: {exc.message}" + (f" (hint: {exc.cli_hint})" if exc.cli_hint else "")
        except Exception as exc:  # noqa: BLE001
            done[r.name] = f"could not repair: {type(exc).__name__}: {exc}"
    if not done:
        return results
    again = _run_group(ctx, key, group)
    for r in again:
        r.repaired = done.get(r.name)
    names = {r.name for r in again}
    for name, what in done.items():  # a check that no longer appears (e.g. a stale PID file removed)
        if name not in names:
            again.append(CheckResult(name, Status.OK, "repaired", group=key, repaired=what))
    return again


def run(ctx: Context) -> Report:
    started = time.perf_counter()
    with ThreadPoolExecutor(max_workers=len(GROUPS)) as pool:
        futures = [(key, group, pool.submit(_run_group, ctx, key, group)) for key, _, group in GROUPS]
        grouped = [(key, group, future.result()) for key, group, future in futures]
    results: list[CheckResult] = []
    for key, group, found in grouped:
        results += _repair(ctx, key, group, found) if ctx.fix else found
    return Report(results, time.perf_counter() - started)
