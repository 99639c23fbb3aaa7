"""Document filters: typed metadata conditions and date ranges, as a backend-neutral tree (pure).

The grammar is upstream qmd's (PR #910): a condition is `{"key", "operator", "value"}`
with operator `eq ne gt gte lt lte in nin all exists`; conditions combine with
`{"operator": "and"|"or", "operands": [...]}` and `{"operator": "not", "operand": {...}}`,
or the short forms `{"and": [...]}`, `{"or": [...]}`, `{"not": {...}}`.

Matching is typed, never coerced: a value is a string, a number or a boolean (an array
field holds several), and `priority: 3` matches `3`, never `"3"`. For an array field a
condition holds when some element satisfies it (`all`: every given value is an element).
`ne` and `nin` need the key to be present (`{"key": k, "operator": "exists", "value": false}`
inside an `or` adds the documents without it); `gt gte lt lte` compare numbers with numbers
and strings with strings (ISO dates compare as dates).

`--since` / `--until` become a `DateRange` on each document's date: its front matter's
`date` or `updated` (the later of the two), else the file's modification time.

The storage backend compiles the tree (qmd/backends/sqlite/filters.py); nothing here is SQL.
"""

from __future__ import annotations

import json
import re

from qmd.core.errors import QmdError
from qmd.core.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any, Union

    Scalar = Union[str, int, float, bool]
    Filter = Union["Condition", "Group", "DateRange"]

COMPARE = ("eq", "ne", "gt", "gte", "lt", "lte")
MEMBERSHIP = ("in", "nin", "all")
OPERATORS = (*COMPARE, *MEMBERSHIP, "exists")
GROUPS = ("and", "or", "not")
MAX_NODES = 200  # conditions and groups in one filter
MAX_DEPTH = 16
MAX_LIST = 200  # values of one in / nin / all
MAX_KEY = 200

EXAMPLE = '{"key": "status", "operator": "eq", "value": "published"}'
GRAMMAR_HINT = (
    f"a condition is {EXAMPLE} (operators: {' '.join(OPERATORS)}); combine with "
    '{"operator": "and", "operands": [...]}, "or" likewise, or {"operator": "not", "operand": {...}}'
)


@record(frozen=True)
class Condition:
    """One metadata test; `value` is a scalar (comparisons), a tuple of scalars (in, nin, all) or a bool (exists)."""

    key: str
    operator: str
    value: Any


@record(frozen=True)
class Group:
    """`and` / `or` over `items`; `not` of its single item."""

    op: str
    items: tuple[Filter, ...]


@record(frozen=True)
class DateRange:
    """Documents dated at or after `since_ns` and before `until_ns` (epoch nanoseconds; None: open)."""

    since_ns: int | None = None
    until_ns: int | None = None


class FilterError(QmdError):
    """A filter that does not fit the grammar: the message names the place, the hint the fix."""

    def __init__(self, message: str, hint: str | None = None) -> None:
        super().__init__(f"bad filter: {message}", hint or GRAMMAR_HINT)


def value_type(value: object) -> str | None:
    """The filter/metadata type of a scalar: string, number or boolean (None: not a scalar)."""
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, (int, float)):
        return "number" if value == value and value not in (float("inf"), float("-inf")) else None
    if isinstance(value, str):
        return "string"
    return None


def _shown(value: object) -> str:
    text = json.dumps(value, ensure_ascii=False, default=str)
    return text if len(text) <= 80 else text[:77] + "..."


def _widened(value: object) -> object:
    """`value`, except an integer past what the index stores (64-bit): the float nearest it,
    or None beyond any float (1.8e308)."""
    if isinstance(value, int) and not isinstance(value, bool) and not INT64[0] <= value <= INT64[1]:
        try:
            return float(value)
        except OverflowError:
            return None
    return value


def _scalar(value: object, where: str) -> Any:
    kept = _widened(value)
    if kept is None and value is not None:
        raise FilterError(f"{where}: the number {_shown(value)} is beyond what can be compared (±1.8e308)")
    if value_type(kept) is None:
        raise FilterError(f"{where}: the value must be a string, a number or true/false, not {_shown(value)}")
    if isinstance(kept, str) and "\x00" in kept:  # no front matter holds one (a file with NUL is not indexed)
        raise FilterError(f"{where}: the value holds a NUL character", "remove the \\u0000 from the value")
    return kept


def _condition(node: dict[str, Any], where: str) -> Condition:
    unknown = [k for k in node if k not in ("key", "operator", "value")]
    if unknown:
        raise FilterError(f"{where}: unknown field {unknown[0]!r}", f"a condition has exactly key, operator and value, e.g. {EXAMPLE}")
    key, op = node.get("key"), node.get("operator")
    if not isinstance(key, str) or not key.strip():
        raise FilterError(f"{where}: key must be a non-empty string, not {_shown(key)}", f"e.g. {EXAMPLE}")
    if len(key) > MAX_KEY or "\x00" in key:
        raise FilterError(f"{where}: key is longer than {MAX_KEY} characters or holds a NUL")
    if op is None:
        raise FilterError(f"{where}: no operator", f"a condition has key, operator and value, e.g. {EXAMPLE}")
    if op not in OPERATORS:
        import difflib

        close = difflib.get_close_matches(str(op), OPERATORS, n=1)
        hint = f"did you mean {close[0]!r}? operators: {' '.join(OPERATORS)}" if close else f"operators: {' '.join(OPERATORS)}"
        raise FilterError(f"{where}: unknown operator {_shown(op)}", hint)
    if "value" not in node:
        raise FilterError(f"{where}: {op} needs a value", 'e.g. {"key": "draft", "operator": "exists", "value": true}' if op == "exists" else f"e.g. {EXAMPLE}")
    value = node["value"]
    if op == "exists":
        if not isinstance(value, bool):
            raise FilterError(f"{where}: exists takes true or false, not {_shown(value)}")
        return Condition(key, op, value)
    if op in MEMBERSHIP:
        if not isinstance(value, list) or not value:
            raise FilterError(f"{where}: {op} takes a non-empty list of values, not {_shown(value)}", f'e.g. {{"key": "status", "operator": "{op}", "value": ["draft", "archived"]}}')
        if len(value) > MAX_LIST:
            raise FilterError(f"{where}: {op} has {len(value)} values; at most {MAX_LIST} are allowed")
        return Condition(key, op, tuple(_scalar(v, f"{where}.value[{i}]") for i, v in enumerate(value)))
    if isinstance(value, list):
        raise FilterError(f"{where}: {op} takes one value, not a list", "for a list of values use in, nin or all")
    value = _scalar(value, f"{where}.value")
    if op in ("gt", "gte", "lt", "lte") and isinstance(value, bool):
        raise FilterError(f"{where}: {op} compares numbers or strings, not true/false", "use eq or ne for booleans")
    return Condition(key, op, value)


def _node(node: object, where: str, depth: int, budget: list[int]) -> Filter:
    budget[0] += 1
    if budget[0] > MAX_NODES:
        raise FilterError(f"more than {MAX_NODES} conditions and groups", "simplify the filter (in / nin take a list of values)")
    if depth > MAX_DEPTH:
        raise FilterError(f"{where}: nested more than {MAX_DEPTH} levels deep")
    if not isinstance(node, dict):
        raise FilterError(f"{where} must be an object, not {_shown(node)}")
    if not node:
        raise FilterError(f"{where} is an empty object", f"give a condition, e.g. {EXAMPLE}, or leave the filter out")
    short = [k for k in GROUPS if k in node]
    if short:  # {"and": [...]}, {"or": [...]}, {"not": {...}}
        if len(node) != 1:
            raise FilterError(f"{where}: {short[0]!r} must be the only field of its object")
        op = short[0]
        operands = node[op]
        if op == "not":
            return Group("not", (_node(operands, f"{where}.not", depth + 1, budget),))
        return _group(op, operands, f"{where}.{op}", depth, budget)
    group = node.get("operator")
    if group in GROUPS:
        op = str(group)
        allowed = ("operator", "operand") if op == "not" else ("operator", "operands")
        unknown = [k for k in node if k not in allowed]
        if unknown:
            raise FilterError(f"{where}: unknown field {unknown[0]!r} in a {op} group", f"a {op} group has exactly: {', '.join(allowed)}")
        if op == "not":
            if "operand" not in node:
                raise FilterError(f"{where}: not needs an operand", '{"operator": "not", "operand": {...}}')
            return Group("not", (_node(node["operand"], f"{where}.operand", depth + 1, budget),))
        return _group(op, node.get("operands"), f"{where}.operands", depth, budget)
    return _condition(node, where)


def _group(op: str, operands: object, where: str, depth: int, budget: list[int]) -> Group:
    if not isinstance(operands, list) or not operands:
        raise FilterError(f"{where}: {op} takes a non-empty list of filters, not {_shown(operands)}", f'{{"operator": "{op}", "operands": [{EXAMPLE}, ...]}}')
    return Group(op, tuple(_node(item, f"{where}[{i}]", depth + 1, budget) for i, item in enumerate(operands)))


def parse_filter(spec: object) -> Filter | None:
    """The filter tree of `spec`: JSON text, a decoded object, a tree already, or None/"" (no filter).

    Raises FilterError (a QmdError) naming what is wrong and how it should look.
    """
    if spec is None or isinstance(spec, (Condition, Group, DateRange)):
        return spec
    if isinstance(spec, str):
        if not spec.strip():
            return None
        try:
            spec = json.loads(spec)
        except ValueError as exc:
            raise FilterError(f"not valid JSON ({exc})", f"quote the whole filter for the shell, e.g. --filter '{EXAMPLE}'") from None
        except RecursionError:  # hundreds of levels: the decoder gives up before _node's depth check
            raise FilterError(f"nested more than {MAX_DEPTH} levels", "flatten it: and/or take a list of operands") from None
    return _node(spec, "filter", 0, [0])


# --- dates ----------------------------------------------------------------------------------

_RELATIVE = re.compile(r"^\s*(\d{1,6})\s*([hdwmy])\s*$", re.IGNORECASE)
_UNIT_S = {"h": 3600, "d": 86400, "w": 7 * 86400, "m": 30 * 86400, "y": 365 * 86400}
WHEN_HINT = "an ISO date or time (2024-05-01, 2024-05-01T09:30) or an age: 12h, 7d, 2w, 3m (30 days), 1y"
INT64 = (-(2**63), 2**63 - 1)  # what the index stores as an integer
NS_MIN, NS_MAX = INT64  # what a stored date holds (signed 64-bit epoch ns: 1677-09-21 to 2262-04-11)


def _clamped(ns: int) -> int:
    """`ns` within what the index stores: earlier dates sort as the earliest, later as the latest."""
    return min(NS_MAX, max(NS_MIN, ns))


def parse_when(text: str, now_ns: int, *, end: bool = False, name: str = "since") -> int:
    """Epoch nanoseconds of `text`: an ISO date/time, or an age before `now_ns` (7d, 2w…).

    A bare date is that day in UTC; with `end` (for --until) the whole day is included.
    Dates beyond what the index stores (before 1677, after 2262: `date: 0001-01-01`,
    `--until 9999-12-31`, `--since 999999y`) are clamped to its first or last moment.
    """
    if not isinstance(text, str) or not text.strip():
        raise QmdError(f"--{name} needs a date or an age", WHEN_HINT)
    match = _RELATIVE.match(text)
    if match:
        return _clamped(now_ns - int(match.group(1)) * _UNIT_S[match.group(2).lower()] * 1_000_000_000)
    from datetime import datetime, timedelta, timezone

    value = text.strip()
    try:
        if len(value) == 10:
            moment = datetime.strptime(value, "%Y-%m-%d").replace(tzinfo=timezone.utc)
        else:
            moment = datetime.fromisoformat(value.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=timezone.utc)
    except ValueError:
        raise QmdError(f"--{name} {text!r} is not a date or an age", WHEN_HINT) from None
    epoch = datetime(1970, 1, 1, tzinfo=timezone.utc)
    ns = ((moment - epoch) // timedelta(microseconds=1)) * 1000  # exact for any year, unlike timestamp()
    if len(value) == 10 and end:
        ns += 86_400 * 1_000_000_000  # the whole day
    return _clamped(ns)


def date_range(since: str | None, until: str | None, now_ns: int | None = None) -> DateRange | None:
    """The DateRange of --since / --until (None when neither is given)."""
    if not since and not until:
        return None
    if now_ns is None:
        import time

        now_ns = time.time_ns()
    lo = parse_when(since, now_ns, name="since") if since else None
    hi = parse_when(until, now_ns, end=True, name="until") if until else None
    if lo is not None and hi is not None and lo >= hi:
        raise QmdError(f"--since {since} is not before --until {until}: no document can match", "swap them, or widen the range")
    return DateRange(lo, hi)


def build(spec: object = None, since: str | None = None, until: str | None = None) -> Filter | None:
    """One tree for a metadata filter and a date range (both optional)."""
    tree = parse_filter(spec)
    dates = date_range(since, until)
    if tree is None or dates is None:
        return tree if dates is None else dates
    return Group("and", (tree, dates))


# --- metadata from front matter -------------------------------------------------------------


def _plain(value: object) -> Any:
    """A front-matter value as metadata: a scalar, a list of scalars, or None (not kept)."""
    from datetime import date, datetime

    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, date):
        return value.isoformat()
    value = _widened(value)
    if value_type(value) is not None:
        return value
    if isinstance(value, list):
        items = [_plain(v) for v in value]
        kept = [v for v in items if v is not None and not isinstance(v, list)]
        return kept if kept else None
    return None


def extract_metadata(front: dict[str, Any]) -> dict[str, Any]:
    """Typed metadata of a document: its top-level front-matter keys, then the original's
    `qmd: metadata:` block, which wins on conflict. Values are strings, numbers, booleans
    or flat lists of them; dates become ISO strings; nested mappings and nulls are dropped."""
    out: dict[str, Any] = {}
    block: object = None
    for key, value in front.items():
        if not isinstance(key, str):
            continue
        if key == "qmd":
            block = value.get("metadata") if isinstance(value, dict) else None
            continue
        plain = _plain(value)
        if plain is not None:
            out[key] = plain
    if isinstance(block, dict):
        for key, value in block.items():
            plain = _plain(value)
            if isinstance(key, str) and plain is not None:
                out[key] = plain
    return out


def document_date_ns(metadata: dict[str, Any]) -> int | None:
    """The later of the metadata's `date` and `updated` as epoch ns (None when neither parses)."""
    found: list[int] = []
    for key in ("date", "updated"):
        value = metadata.get(key)
        if isinstance(value, str) and value[:4].isdigit():
            try:
                found.append(parse_when(value, 0, name=key))
            except QmdError:
                pass
    return max(found) if found else None


def front_matter_text(front: dict[str, Any]) -> str:
    """The front matter as searchable words: "key value" for every entry, nested ones included."""
    parts: list[str] = []

    def walk(value: object, key: str | None) -> None:
        if isinstance(value, dict):
            for k, v in value.items():
                walk(v, str(k))
        elif isinstance(value, list):
            if key:
                parts.append(key)
            for v in value:
                walk(v, None)
        elif value is not None:
            parts.append(f"{key} {value}" if key else str(value))

    walk({k: v for k, v in front.items() if k != "title"}, None)
    return "\n".join(parts)
