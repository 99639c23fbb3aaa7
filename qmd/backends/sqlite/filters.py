"""A filter tree (qmd/core/filters.py) compiled to SQL: a SELECT of the matching ids, or a row test.

Each condition is an index range on `document_meta (key, type, value)`; groups are
compound selects (`and` INTERSECT, `or` UNION, `not` EXCEPT from the active documents);
a date range is a range on `documents (when_ns)`. So the cost of a filter follows the
rows it matches, not the size of the index, and a search uses the set as
`id IN (…)`, which SQLite builds once per statement. The type column keeps matching
typed: `3` never equals `'3'`, and a boolean is never a number.
"""

from __future__ import annotations

from qmd.core.filters import Condition, DateRange, Group, value_type

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.filters import Filter

Params = list[object]

_COMPARE_SQL = {"eq": "=", "gt": ">", "gte": ">=", "lt": "<", "lte": "<="}
ACTIVE = "SELECT id AS doc_id FROM documents WHERE active = 1"


def _stored(value: object) -> object:
    """A filter value as it is stored: booleans as 1/0 (their type column says boolean)."""
    return int(value) if isinstance(value, bool) else value


def _members(key: str, values: tuple[object, ...], params: Params) -> str:
    """Documents whose `key` holds any of `values` (typed)."""
    by_type: dict[str, list[object]] = {}
    for v in values:
        by_type.setdefault(value_type(v) or "", []).append(_stored(v))
    params.append(key)
    parts = []
    for kind, vs in by_type.items():
        parts.append(f"(type = ? AND value IN ({','.join('?' * len(vs))}))")
        params += [kind, *vs]
    return f"SELECT doc_id FROM document_meta WHERE key = ? AND ({' OR '.join(parts)})"


def _condition(node: Condition, params: Params) -> str:
    op, key, value = node.operator, node.key, node.value
    if op == "exists":
        params.append(key)
        has = "SELECT doc_id FROM document_meta WHERE key = ?"
        return has if value else f"{ACTIVE} EXCEPT {has}"
    if op in _COMPARE_SQL:
        params += [key, value_type(value), _stored(value)]
        return f"SELECT doc_id FROM document_meta WHERE key = ? AND type = ? AND value {_COMPARE_SQL[op]} ?"
    if op == "ne":
        params += [key, key, value_type(value), _stored(value)]
        return "SELECT doc_id FROM document_meta WHERE key = ? EXCEPT SELECT doc_id FROM document_meta WHERE key = ? AND type = ? AND value = ?"
    if op == "in":
        return _members(key, value, params)
    if op == "nin":
        params.append(key)
        return f"SELECT doc_id FROM document_meta WHERE key = ? EXCEPT {_members(key, value, params)}"
    if op == "all":
        parts = []
        for v in dict.fromkeys(value):
            params += [key, value_type(v), _stored(v)]
            parts.append("SELECT doc_id FROM document_meta WHERE key = ? AND type = ? AND value = ?")
        return " INTERSECT ".join(parts)
    raise ValueError(f"unknown operator {op!r}")  # parse_filter admits none


def _compile(node: Filter, params: Params) -> str:
    if isinstance(node, Condition):
        return _condition(node, params)
    if isinstance(node, DateRange):
        where = ["active = 1"]
        if node.since_ns is not None:
            where.append("when_ns >= ?")
            params.append(node.since_ns)
        if node.until_ns is not None:
            where.append("when_ns < ?")
            params.append(node.until_ns)
        return f"SELECT id AS doc_id FROM documents WHERE {' AND '.join(where)}"
    if isinstance(node, Group):
        if node.op == "not":
            return f"{ACTIVE} EXCEPT SELECT doc_id FROM ({_compile(node.items[0], params)})"
        if node.op == "and":
            return _conjunction(node.items, params)
        return " UNION ".join(f"SELECT doc_id FROM ({_compile(item, params)})" for item in node.items)
    raise TypeError(f"not a filter node: {node!r}")


def _has(doc: str, key: str, params: Params, test: str = "", values: Params | None = None) -> str:
    params.append(key)
    params += values or []
    return f"EXISTS (SELECT 1 FROM document_meta m WHERE m.doc_id = {doc} AND m.key = ?{test})"


def _members_test(values: tuple[object, ...], params: Params) -> str:
    by_type: dict[str, list[object]] = {}
    for v in values:
        by_type.setdefault(value_type(v) or "", []).append(_stored(v))
    parts = []
    for kind, vs in by_type.items():
        parts.append(f"(m.type = ? AND m.value IN ({','.join('?' * len(vs))}))")
        params += [kind, *vs]
    return " AND (" + " OR ".join(parts) + ")"


def _predicate(node: Filter, doc: str, params: Params) -> str:
    if isinstance(node, Condition):
        op, key, value = node.operator, node.key, node.value
        if op == "exists":
            has = _has(doc, key, params)
            return has if value else f"NOT {has}"
        if op in _COMPARE_SQL:
            return _has(doc, key, params, f" AND m.type = ? AND m.value {_COMPARE_SQL[op]} ?", [value_type(value), _stored(value)])
        if op == "ne":
            has = _has(doc, key, params)
            return f"({has} AND NOT {_has(doc, key, params, ' AND m.type = ? AND m.value = ?', [value_type(value), _stored(value)])})"
        if op in ("in", "nin"):
            if op == "nin":
                has = _has(doc, key, params)
            inner: Params = []
            test = _members_test(value, inner)
            member = _has(doc, key, params, test, inner)
            return member if op == "in" else f"({has} AND NOT {member})"
        if op == "all":
            return "(" + " AND ".join(_has(doc, key, params, " AND m.type = ? AND m.value = ?", [value_type(v), _stored(v)]) for v in dict.fromkeys(value)) + ")"
        raise ValueError(f"unknown operator {op!r}")
    if isinstance(node, DateRange):
        where = []
        if node.since_ns is not None:
            where.append("w.when_ns >= ?")
            params.append(node.since_ns)
        if node.until_ns is not None:
            where.append("w.when_ns < ?")
            params.append(node.until_ns)
        return f"EXISTS (SELECT 1 FROM documents w WHERE w.id = {doc}{''.join(' AND ' + c for c in where)})"
    if isinstance(node, Group):
        if node.op == "not":
            return f"NOT ({_predicate(node.items[0], doc, params)})"
        joiner = " AND " if node.op == "and" else " OR "
        return "(" + joiner.join(_predicate(item, doc, params) for item in node.items) + ")"
    raise TypeError(f"not a filter node: {node!r}")


def predicate(tree: Filter, doc: str) -> tuple[str, Params]:
    """(SQL boolean over the document id expression `doc`, its parameters): the filter as a
    test of one row, each condition a primary-key probe of `document_meta` (doc_id, key, …).

    For a search that already has its candidate rows (FTS5 matches): the cost follows the
    matches, and the virtual table never sees a constraint it would answer one id at a time
    (`rowid IN (…)` makes FTS5 run the MATCH once per id: a minute on 23k ids).
    """
    params: Params = []
    return _predicate(tree, doc, params), params


def _drives(node: Filter) -> int:
    """How well a node can drive a conjunction's id set (lower is better; 9: only as a test)."""
    if isinstance(node, Condition):
        return {"eq": 0, "all": 0, "in": 1}.get(node.operator, 2 if node.operator in _COMPARE_SQL or (node.operator == "exists" and node.value) else 9)
    if isinstance(node, DateRange):
        return 3
    return 4 if node.op != "not" else 9


def _conjunction(items: tuple[Filter, ...], params: Params) -> str:
    """`and`: the ids of its best index-driven part, the other parts tested on each of them
    (a probe per id), instead of materialising and intersecting every part's set."""
    order = sorted(range(len(items)), key=lambda i: _drives(items[i]))
    first = items[order[0]]
    if _drives(first) == 9:  # nothing to drive from: test every active document
        tests = " AND ".join(_predicate(item, "s.id", params) for item in items)
        return f"SELECT s.id AS doc_id FROM documents s WHERE s.active = 1 AND {tests}"
    driver = _compile(first, params)
    rest = " AND ".join(_predicate(items[i], "s.doc_id", params) for i in order[1:])
    return f"SELECT s.doc_id FROM ({driver}) s" + (f" WHERE {rest}" if rest else "")


def id_set(tree: Filter) -> tuple[str, Params]:
    """(SELECT of matching document ids, its parameters); inactive ids may be among them."""
    params: Params = []
    return _compile(tree, params), params
