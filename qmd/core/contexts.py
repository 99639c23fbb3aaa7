"""Contexts: sentences describing the whole index, a collection, or a folder inside one."""

from __future__ import annotations

from qmd.core.config import CollectionConfig
from qmd.core.errors import QmdError


def normalise_subpath(sub: str) -> str:
    """'/', '/meetings', '/a/b' — leading slash, no trailing slash, no '.' or '..' parts."""
    parts = [p for p in sub.replace("\\", "/").split("/") if p and p != "."]
    if ".." in parts:
        raise QmdError(f"'..' is not allowed in a path inside a collection: {sub[:200]}", "name a folder inside the collection: NAME/folder or qmd://NAME/folder")
    return "/" + "/".join(parts)


def contexts_for(global_context: str | None, coll: CollectionConfig | None, rel_path: str) -> str | None:
    """Every context that applies to `rel_path`, general to specific, separated by a blank
    line (`\n\n`, as the original joins them, so a context may hold several lines)."""
    found: list[str] = [global_context] if global_context else []
    if coll is not None and coll.context:
        target = "/" + rel_path
        for key in sorted(coll.context, key=len):
            sub = normalise_subpath(key)
            if sub == "/" or target == sub or target.startswith(sub + "/"):
                found.append(coll.context[key])
    return "\n\n".join(found) if found else None
