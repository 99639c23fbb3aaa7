"""`loads` without importing `json`: the hook's common path must not pay for `re` (~10 ms).

`json.loads` is a thin Python layer over the C scanner in `_json`; importing `json` pulls
in `re` (and `enum`) for its whitespace and number patterns. This calls the same C scanner
with the same settings, so results match `json.loads`; on malformed input it hands over to
`json.loads` (imported only then), which raises the usual `json.JSONDecodeError`. Falls
back to `json.loads` where `_json` is missing.
"""

from __future__ import annotations

_WS = " \t\n\r"


class _Context:
    strict = True
    object_hook = None
    object_pairs_hook = None
    parse_float = float
    parse_int = int
    parse_constant = {"-Infinity": float("-inf"), "Infinity": float("inf"), "NaN": float("nan")}.__getitem__
    memo: dict[str, str] = {}


def loads(text: str) -> object:
    """Decode one JSON document from `text`, exactly as `json.loads` would."""
    try:
        from _json import make_scanner
    except ImportError:  # pragma: no cover - other Python implementations
        import json

        return json.loads(text)
    if text.startswith("\ufeff"):
        import json

        return json.loads(text)  # let json raise its "Unexpected UTF-8 BOM" error
    scan = make_scanner(_Context())  # type: ignore[arg-type]  # typeshed: the context is any object with a decoder's attributes
    start = len(text) - len(text.lstrip(_WS))
    try:
        value, end = scan(text, start)
    except StopIteration as exc:
        from json import JSONDecodeError

        raise JSONDecodeError("Expecting value", text, exc.value) from None
    except Exception:  # noqa: BLE001 - the C scanner reports errors through json.decoder,
        import json  # which it expects to be imported already: let json raise the real error

        return json.loads(text)
    tail = text[end:]
    after = end + len(tail) - len(tail.lstrip(_WS))
    if after != len(text):
        from json import JSONDecodeError

        raise JSONDecodeError("Extra data", text, after)
    return value
