"""`qmd updater …`: run, daemon, status, retry, install-service (a typer sub-app of qmd)."""

from __future__ import annotations

import json
import os
import time
from typing import Annotated

import typer

from qmd import harness
from qmd import QmdError

from . import spool
from .health import render, snapshot
from .records import index_phrase
from .lock import UpdaterBusy, UpdaterLock

app = typer.Typer(
    name="updater",
    help="Drain the reindex queue the git hooks fill: update, then embed, the collections each repo routes to.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
)

ThreadsOpt = Annotated[int | None, typer.Option("--threads", help="llama.cpp threads for embedding (default: $QMD_UPDATER_THREADS, else 1).")]


def _low_priority(threads: int | None) -> None:
    """Stay out of the way: nice 10 and few threads (QMD_THREADS for this process only)."""
    try:
        current = os.nice(0)
        if current < 10:
            os.nice(10 - current)
    except OSError:
        pass
    os.environ["QMD_THREADS"] = str(threads or os.environ.get("QMD_UPDATER_THREADS") or 1)


def _enrolled(path: str, layout: harness.StateLayout) -> str:
    """The enrolled work tree `path` names (as its hook names it: the top of the work tree), or a QmdError naming `qmd hooks install`."""
    from .registry import load

    enrolled = load(layout)
    real = os.path.realpath(path)
    for tree in enrolled:
        if os.path.realpath(tree) == real:
            return tree
    raise QmdError(f"{path} is not a repository qmd's hooks are installed in", f"install them first: qmd hooks install {path}")


@app.command(short_help="Drain the queue once.")
def run(
    respect_backoff: Annotated[bool, typer.Option("--respect-backoff", help="Leave failed repos alone until their backoff elapses (what the daemon and the timer do); by default a manual run retries them now.")] = False,
    if_idle: Annotated[bool, typer.Option("--if-idle", help="Exit 0 quietly when another updater holds the lock.")] = False,
    json_: Annotated[bool, typer.Option("--json", help="Print the run's result as JSON.")] = False,
    threads: ThreadsOpt = None,
    repos: Annotated[list[str] | None, typer.Option("--repo", metavar="PATH", help="First queue a request for this enrolled repository, as its hook would (a commit whose request the hook could not write); repeatable.", show_default=False)] = None,
) -> None:
    """Drain the queue once: claim, coalesce per repo, update then embed, delete what succeeded."""
    from .logs import setup
    from .run import drain

    layout = harness.StateLayout.current()
    asked = [_enrolled(path, layout) for path in repos or []]
    _low_priority(threads)
    log = setup(layout, stderr=True, plain=True)  # what it does, as it goes, on stderr too (the result goes to stdout)
    try:
        with UpdaterLock(layout, "run"):
            for path in asked:
                spool.enqueue(layout, path, "manual")
            result = drain(layout, log, respect_backoff=respect_backoff)
    except UpdaterBusy:
        if if_idle:
            raise typer.Exit(0) from None
        raise
    if json_:
        typer.echo(json.dumps(result.as_dict(), indent=2, sort_keys=True))
    else:
        typer.echo(
            f"{result.requests} request(s), {len(result.succeeded_repos)} repo(s) updated: "
            f"{result.documents_updated} documents changed, {result.chunks_embedded} chunks embedded ({result.seconds:.2f}s)"
        )
        for name, repos in result.lost.items():
            typer.echo(f"recovered: {name}, a request the git hooks could not finish writing (a full disk?), queued again for {', '.join(repos) or 'nothing (no repository enrolled, no collection configured)'}")
        for repo in result.dropped:
            typer.echo(f"dropped: {repo} no longer exists")
        for repo in result.unrouted:
            typer.echo(f"nothing to do: no collection lies in {repo}")
        for repo in result.deferred:
            typer.echo(f"waiting for its retry backoff: {repo}")
        for index, why in result.embed_skipped.items():
            typer.echo(f"embedding skipped for {index_phrase(index)}: {why}")
        for f in result.failures:
            state = ", dead: no more automatic retries" if f["dead"] else ""
            typer.echo(f"failed: {f['step']} of {f['repo'] or 'every repo'} into {index_phrase(f['index'])} (attempt {f['attempts']}{state}): {f['error']}")
    if result.lost_error:
        raise QmdError(result.lost_error, f"free space there, then run it again (or: qmd update --embed); details in {layout.updater_log}")
    if result.failures:
        raise QmdError(f"{len(result.failures)} step(s) failed; requests kept for retry", f"qmd health shows why; details in {layout.updater_log}")


@app.command(short_help="Drain requests as they arrive.")
def daemon(
    watch: Annotated[bool, typer.Option("--watch", help="Also reindex collection folders no enrolled repository covers when their files change.")] = False,
    window: Annotated[float, typer.Option("--window", help="Seconds of quiet that close a batch of requests.")] = 0.5,
    threads: ThreadsOpt = None,
    verbose: Annotated[bool, typer.Option("-v", "--verbose", help="Log every step to stderr too.")] = False,
) -> None:
    """Hold the updater lock and drain requests as they arrive (watchdog), in batches."""
    import logging

    from .daemon import Daemon
    from .logs import setup

    layout = harness.StateLayout.current()
    _low_priority(threads)
    log = setup(layout, stderr=True, verbose=False)
    for handler in log.handlers:
        if not verbose and type(handler).__name__ == "StreamHandler":
            handler.setLevel(logging.WARNING)  # journald/launchd get warnings; updater.log gets everything
    with UpdaterLock(layout, "daemon"):
        Daemon(layout, log, window=window, watch=watch).serve()


@app.command(short_help="Show pending requests, failures and counters.")
def status(json_: Annotated[bool, typer.Option("--json", help="Print the state as JSON.")] = False) -> None:
    """Pending requests, failures, last success, counters of every run."""
    layout = harness.StateLayout.current()
    snap = snapshot(layout)
    if json_:
        typer.echo(json.dumps(snap, indent=2, sort_keys=True, default=str))
        return
    lines = [render(snap)]
    s = snap["stats"]
    lines.append(f"runs: {s['runs']}, documents updated: {s['documents_updated']}, chunks embedded: {s['chunks_embedded']}")
    last = s.get("last_run")
    if isinstance(last, dict):
        t = harness.parse_iso(last.get("finished_at"))
        age = f" ({harness.age(time.time() - t)} ago)" if t else ""
        lines.append(
            f"last run: {last.get('finished_at')}{age}: {last.get('requests', 0)} request(s), "
            f"{len(last.get('succeeded_repos') or [])} repo(s) updated, {len(last.get('failures') or [])} failure(s), {last.get('seconds', 0)}s"
        )
        for index, why in (last.get("embed_skipped") or {}).items():
            lines.append(f"  embedding skipped for {index_phrase(index)}: {why}")
    for repo, n in sorted(snap["queue"]["by_repo"].items()):
        lines.append(f"  pending: {n} for {repo}")
    lines.append(f"logs: {layout.logs}")
    typer.echo("\n".join(lines))


@app.command(short_help="Queue dead-lettered requests again.")
def retry(repos: Annotated[list[str] | None, typer.Argument(help="Only these repositories (default: every one).")] = None) -> None:
    """Put dead-lettered requests (queue/failed/) back in the queue; their failures get fresh attempts."""
    layout = harness.StateLayout.current()
    wanted = {os.path.realpath(r) for r in repos or []}
    moved = 0
    folder = layout.q("failed")
    for path in sorted(folder.iterdir()) if folder.is_dir() else []:
        request = spool.parse(path)
        if request is None or (wanted and os.path.realpath(request.repo) not in wanted) or not os.path.isdir(request.repo):
            continue
        spool.enqueue(layout, request.repo, request.event, request.commit, {"retry": True})
        path.unlink()
        moved += 1
    typer.echo(f"{moved} request(s) queued again" + (": a running updater picks them up; or run: qmd updater run" if moved else ""))


@app.command("install-service", short_help="Install the updater as a user service.")
def install_service(
    print_: Annotated[bool, typer.Option("--print", help="Show the unit file(s) without installing anything.")] = False,
    timer: Annotated[bool, typer.Option("--timer", help="Run `qmd updater run` every few minutes instead of a resident daemon.")] = False,
    watch: Annotated[bool, typer.Option("--watch", help="Daemon: also watch collection folders outside enrolled repos.")] = False,
    interval: Annotated[int, typer.Option("--interval", help="Timer: minutes between runs.", min=1)] = 2,
    no_start: Annotated[bool, typer.Option("--no-start", help="Write the files, do not enable or start them.")] = False,
    platform: Annotated[str | None, typer.Option("--platform", help="linux (systemd) or macos (launchd); default: this machine.", hidden=True)] = None,
) -> None:
    """Install the updater as a systemd user service (or timer) on Linux, a LaunchAgent on macOS."""
    from . import service

    name = service.platform_name(platform)
    if print_:
        for unit in service.units(name, timer, watch, interval):
            typer.echo(f"# {unit.path}\n{unit.text}")
        if name == "linux":
            typer.echo(f"# {service.LINGER_NOTE}")
        return
    for line in service.install(name, timer, watch, interval, start=not no_start):
        typer.echo(line)


@app.command("uninstall-service", short_help="Stop and remove the updater service.")
def uninstall_service(platform: Annotated[str | None, typer.Option("--platform", hidden=True)] = None) -> None:
    """Stop and remove the service install-service wrote."""
    from . import service

    for line in service.uninstall(service.platform_name(platform)):
        typer.echo(line)
