"""`qmd token add|list|revoke`: bearer tokens for the HTTP server (qmd/serve/auth.py).

`add` prints the token once, alone on stdout (so `TOKEN=$(qmd token add alice)` works),
and keeps only its SHA-256 beside the index's config. A running server sees the change
on its next request.
"""

from __future__ import annotations

import json
from typing import Annotated

import typer

from qmd.cli.shared import STATE, err, open_store, out
from qmd.core.errors import QmdError
from qmd.core.paths import DEFAULT_INDEX, resolve_index

token_app = typer.Typer(
    help="Bearer tokens for `qmd mcp --http`: add (printed once), list, revoke. Once a token exists, every HTTP request needs one.",
    no_args_is_help=True,
    add_completion=False,
    rich_markup_mode=None,
)


def _index() -> str:
    return resolve_index(STATE.index_name).name


def _flag(index: str) -> str:
    return "" if index == DEFAULT_INDEX else f" --index {index}"


@token_app.command("add", short_help="Make a token; it is printed once.")
def add(
    name: Annotated[str, typer.Argument(help="Who holds the token (a person or an agent): letters, digits, . _ @ -.")],
    collection: Annotated[list[str] | None, typer.Option("-c", "--collection", help="A collection the token may read (repeatable); default: every collection.")] = None,
) -> None:
    """Make a token, print it once, store only its hash."""
    from qmd.serve.auth import add as add_token
    from qmd.serve.auth import tokens_path

    index = _index()
    if collection:
        with open_store() as store:
            known = store.config.collections()
        unknown = [c for c in collection if c not in known]
        if unknown:
            names = ", ".join(sorted(known)) or "none yet"
            raise QmdError(f"unknown collection{'s' if len(unknown) > 1 else ''} {', '.join(repr(u) for u in unknown)} in index '{index}'", f"collections: {names}")
    path = tokens_path(index)
    token, entry = add_token(path, name, collection)
    scope = ", ".join(entry.collections) if entry.collections is not None else "every collection"
    out(token + "\n")
    err(f"token '{name}' for index '{index}' reads {scope}. It is shown only this once; {path} keeps its hash.")
    err("clients send it as: Authorization: Bearer <token>  (qmd mcp install --claude|--codex --http --token-env VAR reads it from $VAR)")


@token_app.command("list", short_help="List the tokens (never the tokens themselves).")
def list_(
    json_: Annotated[bool, typer.Option("--json", help="JSON: [{name, collections, created_at, id}].")] = False,
) -> None:
    """The tokens: name, collections, when made (never the token itself)."""
    from qmd.serve.auth import load, tokens_path

    index = _index()
    path = tokens_path(index)
    entries = load(path)
    rows = [{"name": e.name, "collections": list(e.collections) if e.collections is not None else None, "created_at": e.created_at, "id": e.sha256[:8]} for e in entries or []]
    if json_:
        out(json.dumps(rows, indent=2) + "\n")
        return
    if entries is None:
        out(f"no tokens for index '{index}': qmd mcp --http serves loopback without them (add one: qmd{_flag(index)} token add NAME)\n")
        return
    if not rows:
        out(f"no tokens left in {path}: the HTTP server refuses every request (add one, or delete the file to serve loopback without tokens)\n")
        return
    width = max(len(r["name"]) for r in rows)  # type: ignore[arg-type]
    for r in rows:
        colls = r["collections"]
        scope = ", ".join(colls) if isinstance(colls, list) else "every collection"
        out(f"{str(r['name']).ljust(width)}  {r['created_at']}  sha256:{r['id']}…  {scope}\n")


@token_app.command("revoke", short_help="Remove a token; requests carrying it get 401.")
def revoke(
    name: Annotated[str, typer.Argument(help="The token's name (qmd token list).")],
) -> None:
    """Remove a token: the next request carrying it gets 401 (no restart needed)."""
    from qmd.serve.auth import revoke as revoke_token
    from qmd.serve.auth import tokens_path

    index = _index()
    path = tokens_path(index)
    revoke_token(path, name)
    out(f"revoked token '{name}' of index '{index}'\n")
