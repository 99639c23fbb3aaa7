"""POST /cli: the hits `qmd search`, `qmd vsearch` and `qmd query` print, from a warm server.

The CLI (qmd/cli/remote.py) sends the request record it would run in-process; the server
runs it on its Store (its models already loaded) and returns the Outcome (`Store.answer`):
the hits whole (every SearchHit field) with what the CLI prints beside them: notices,
stages, sub-queries, timings, the vsearch model and pending count, and the roots of the
hit collections (for --full-path and terminal links). The CLI renders them with its own
renderers (qmd/cli/formats.py), so the output is the same bytes as an in-process run.

Body: {command: search|vsearch|query, request: {...the request record's fields},
build_id, identity} (the record: qmd/core/requests.py; identity: qmd/serve/identity.py).
This module only reads the body (`parse`) and runs the request (`run`); ToolService.cli_query
checks the caller and runs it through the service's one door (`ToolService.using`). Answers:

    200  {hits, roots, notices, stages, searches, timings_ms, model, pending}
    400  a malformed body, an unknown setting, or the Store's own QmdError (bad filter, …)
    403  a scoped token: this route reads the whole index, as the CLI does
    409  another build of qmd, or another index than the caller's (identity differs)
    503  the server stayed busy with another search for BUSY_WAIT_S seconds

The CLI treats every answer but 200 as "run in-process", so the server never has to be
right about an error: the local run reproduces it.
"""

from __future__ import annotations

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.core.requests import Request
    from qmd.store.store import Store

BUSY_WAIT_S = 2.0  # how long a CLI request waits behind another search before it is told to run locally


class RouteError(Exception):
    def __init__(self, status: int, error: str, hint: str = "") -> None:
        super().__init__(error)
        self.status, self.error, self.hint = status, error, hint


def parse(body: Any) -> tuple[Request, str, str]:
    """(request, build_id, identity) of a /cli body; RouteError(400) when malformed. The
    request's settings are checked against the record's field types (qmd/core/requests.py)."""
    from qmd.core.requests import from_json

    if not isinstance(body, dict):
        raise RouteError(400, "the body must be a JSON object")
    unknown = set(body) - {"command", "request", "build_id", "identity"}
    if unknown:
        raise RouteError(400, f"unknown field {sorted(unknown)[0][:60]!r}", "fields: command, request, build_id, identity")
    build, identity = body.get("build_id"), body.get("identity")
    if not isinstance(build, str) or not isinstance(identity, str):
        raise RouteError(400, "build_id and identity must be strings")
    try:
        request = from_json({"command": body.get("command"), "request": body.get("request")})
    except ValueError as exc:
        raise RouteError(400, str(exc)) from exc
    return request, build, identity


def run(store: Store, request: Request) -> dict[str, Any]:
    """The Outcome the CLI would have in-process, as JSON (every SearchHit field)."""
    from qmd.core.results import SearchHit

    found = store.answer(request)
    fields = list(SearchHit.__annotations__)
    payload: dict[str, Any] = dict(found.__dict__)
    payload["hits"] = [{name: getattr(h, name) for name in fields} for h in found.hits]
    return payload
