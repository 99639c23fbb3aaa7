"""What a caller may name: a token confined to some collections is refused the others,
saying nothing of whether they exist (HTTP 403); a reference to another index is refused."""

from __future__ import annotations

from qmd.core.errors import QmdError


class OutOfScope(QmdError):
    """A collection the caller's token may not read was named (HTTP 403)."""

    status = 403


def out_of_scope(name: str, scope: frozenset[str]) -> OutOfScope:
    # The same answer for a collection that exists and one that does not: nothing is revealed.
    return OutOfScope(f"collection '{name[:100]}' is not readable with this token", f"this token reads: {', '.join(sorted(scope)) or 'no collection'}")


def check_scope(names: list[str] | None, scope: frozenset[str] | None) -> None:
    """Refuse any of `names` outside `scope` (no scope: nothing is refused here)."""
    if scope is None:
        return
    for name in names or []:
        if name not in scope:
            raise out_of_scope(name, scope)


def check_ref_scope(ref: str, scope: frozenset[str] | None) -> None:
    """Refuse a `qmd://NAME/…` reference (or comma list of them) whose NAME is outside `scope`;
    a glob in NAME matches visible collections only, so it passes."""
    if scope is None:
        return
    for part in ref.split(","):
        part = part.strip()
        if part.startswith("qmd://"):
            name = part[len("qmd://") :].partition("/")[0]
            if not any(ch in name for ch in "*?[") and name not in scope:
                raise out_of_scope(name, scope)


def own_references(pattern: str, index: str, shown: str) -> str:
    """`pattern` (a reference or a comma list) without the `?index=NAME` qmd prints on a named
    index's URIs, when NAME is this server's `index`; a QmdError naming both when it is another's
    (`shown`: this index as the caller may see it)."""
    from qmd.core.paths import index_name
    from qmd.store.refs import strip_indexes

    stripped, names = strip_indexes(pattern)
    others = names - {index, index_name(index)}
    if others:
        raise QmdError(f"the reference names index '{sorted(others)[0][:80]}'; this server reads index '{shown}'", "ask that index's server, or give the URI without ?index=")
    return stripped
