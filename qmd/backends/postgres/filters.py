"""A filter tree (qmd/core/filters.py) compiled to PostgreSQL: a SELECT of matching document ids.

The same plan as the SQLite backend's (qmd/backends/sqlite/filters.py): each condition is an
index range on `document_meta (key, type, s|n)`, groups are INTERSECT / UNION / EXCEPT, a
date range is a range on `documents (when_ns)`. Strings live in `s` (byte order, like
SQLite), numbers and booleans (1/0) in `n`; the type column keeps the matching typed.
"""

from __future__ import annotations

from qmd.core.filters import Condition, DateRange, Group, value_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

Params = list[object]

_COMPARE_SQL = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
ACTIVE = "SELECT id AS doc_id FROM documents WHERE active"


def column(kind: str | None) -> str:
    """The column a value of `kind` is stored in."""
    return "s" if kind == "string" else "n"


def stored(value: object) -> object:
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, (int, float)):
        return float(value)
    return value


def _one(key: str, value: object, op: str, params: Params) -> str:
    kind = value_type(value)
    params += [key, kind, stored(value)]
    return f"SELECT doc_id FROM document_meta WHERE key = %s AND type = %s AND {column(kind)} {op} %s"


def _members(key: str, values: tuple[object, ...], params: Params) -> str:
    return " UNION ".join(_one(key, v, "=", params) for v in dict.fromkeys(values)) or "SELECT NULL::bigint AS doc_id WHERE false"


def _condition(node: Condition, params: Params) -> str:
    op, key, value = node.operator, node.key, node.value
    if op == "exists":
        params.append(key)
        has = "SELECT doc_id FROM document_meta WHERE key = %s"
        return has if value else f"{ACTIVE} EXCEPT {has}"
    if op in _COMPARE_SQL:
        return _one(key, value, _COMPARE_SQL[op], params)
    if op == "ne":
        params.append(key)
        return f"SELECT doc_id FROM document_meta WHERE key = %s EXCEPT {_one(key, value, '=', params)}"
    if op == "in":
        return _members(key, value, params)
    if op == "nin":
        params.append(key)
        return f"SELECT doc_id FROM document_meta WHERE key = %s EXCEPT ({_members(key, value, params)})"
    if op == "all":
        return " INTERSECT ".join(f"({_one(key, v, '=', params)})" for v in dict.fromkeys(value))
    raise ValueError(f"unknown operator {op!r}")


def _compile(node: Filter, params: Params) -> str:
    if isinstance(node, Condition):
        return _condition(node, params)
    if isinstance(node, DateRange):
        where = ["active"]
        if node.since_ns is not None:
            where.append("when_ns >= %s")
            params.append(node.since_ns)
        if node.until_ns is not None:
            where.append("when_ns < %s")
            params.append(node.until_ns)
        return f"SELECT id AS doc_id FROM documents WHERE {' AND '.join(where)}"
    if isinstance(node, Group):
        if node.op == "not":
            return f"{ACTIVE} EXCEPT SELECT doc_id FROM ({_compile(node.items[0], params)}) g"
        joiner = " INTERSECT " if node.op == "and" else " UNION "
        return joiner.join(f"SELECT doc_id FROM ({_compile(item, params)}) g" for item in node.items)
    raise TypeError(f"not a filter node: {node!r}")


def id_set(tree: Filter) -> tuple[str, Params]:
    """(SELECT of matching document ids, its parameters); inactive ids may be among them."""
    params: Params = []
    return _compile(tree, params), params
