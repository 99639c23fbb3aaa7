"""YAML as the original qmd and today's editors read it: the YAML 1.2 core schema's scalars.

PyYAML implements YAML 1.1, where `yes`, `no`, `on`, `off`, `y` and `n` are booleans,
`10:30` is the sexagesimal integer 630 and `017` is octal 15. The original qmd (npm `yaml`,
YAML 1.2) reads those as the strings `yes` … `10:30` and the integer 17, and so do Obsidian
and most front-matter tools; a note's `time: 10:30` or a config's `context: no` must mean
what its author wrote. Only booleans and numbers change: timestamps (`2024-01-05`) stay
dates, as qmd's date filters expect. A plain mapping key is always its text (`08:`, `1e3:`,
`on:`): keys here are names.

`dumper()` writes what both readers take back as the same text: a string that either
YAML 1.1 or 1.2 would read as something else (`yes`, `10:30`, `1e3`, `017`) is quoted.
"""

from __future__ import annotations

import re
from functools import cache
from typing import Any

_BOOL = re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$")
_INT = re.compile(r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$")
_FLOAT = re.compile(r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$")


@cache
def loader() -> Any:
    """A safe loader class (libyaml's when installed) with YAML 1.2 core booleans and numbers."""
    import yaml

    base = getattr(yaml, "CSafeLoader", yaml.SafeLoader)

    class CoreLoader(base):  # type: ignore[misc, valid-type]
        pass

    replaced = {"tag:yaml.org,2002:bool", "tag:yaml.org,2002:int", "tag:yaml.org,2002:float"}
    CoreLoader.yaml_implicit_resolvers = {
        first: [(tag, regexp) for tag, regexp in resolvers if tag not in replaced]
        for first, resolvers in base.yaml_implicit_resolvers.items()
    }
    CoreLoader.add_implicit_resolver("tag:yaml.org,2002:bool", _BOOL, list("tTfF"))
    CoreLoader.add_implicit_resolver("tag:yaml.org,2002:int", _INT, list("-+0123456789"))
    CoreLoader.add_implicit_resolver("tag:yaml.org,2002:float", _FLOAT, list("-+0123456789."))

    def bad(node: Any, what: str) -> Exception:
        return yaml.constructor.ConstructorError(None, None, f"{what} is not a YAML 1.2 {node.tag.rsplit(':', 1)[-1]}", node.start_mark)

    def construct_int(self: Any, node: Any) -> int:
        value = str(self.construct_scalar(node))
        try:
            if value.startswith("0o"):
                return int(value[2:], 8)
            if value.startswith("0x"):
                return int(value[2:], 16)
            if value.startswith("0b"):  # only an explicit !!int: YAML 1.1's binary
                return int(value[2:], 2)
            return int(value, 10)
        except ValueError:
            raise bad(node, repr(value)) from None

    def construct_float(self: Any, node: Any) -> float:
        value = str(self.construct_scalar(node))
        special = {".inf": "inf", "+.inf": "inf", "-.inf": "-inf", ".nan": "nan"}.get(value.lower(), value)
        try:
            return float(special)
        except ValueError:
            raise bad(node, repr(value)) from None

    def construct_bool(self: Any, node: Any) -> bool:
        value = str(self.construct_scalar(node))
        word = value.lower()  # only an explicit !!bool reaches here with more than true/false
        if word in ("true", "yes", "on", "y", "false", "no", "off", "n"):
            return word in ("true", "yes", "on", "y")
        raise bad(node, repr(value))

    plain_names = {"tag:yaml.org,2002:int", "tag:yaml.org,2002:float", "tag:yaml.org,2002:bool", "tag:yaml.org,2002:null"}

    def construct_mapping(self: Any, node: Any, deep: bool = False) -> Any:
        # A plain key is its text: `08:`, `1e3:`, `on:` name a collection, a context folder or
        # a metadata field (qmd once wrote `08:` unquoted, as YAML 1.1 reads it as text).
        for key_node, _ in node.value:
            if isinstance(key_node, yaml.ScalarNode) and not key_node.style and key_node.tag in plain_names:  # plain: None, or "" from libyaml
                key_node.tag = "tag:yaml.org,2002:str"
        return base.construct_mapping(self, node, deep=deep)

    CoreLoader.construct_mapping = construct_mapping
    CoreLoader.add_constructor("tag:yaml.org,2002:int", construct_int)
    CoreLoader.add_constructor("tag:yaml.org,2002:float", construct_float)
    CoreLoader.add_constructor("tag:yaml.org,2002:bool", construct_bool)
    return CoreLoader



@cache
def dumper() -> Any:
    """A safe dumper class that quotes every string YAML 1.1 or `loader()` would not read back as it."""
    import yaml

    base = getattr(yaml, "CSafeDumper", yaml.SafeDumper)

    class CoreDumper(base):  # type: ignore[misc, valid-type]
        pass

    merged: dict[Any, list[Any]] = {first: list(rs) for first, rs in base.yaml_implicit_resolvers.items()}
    for first, rs in loader().yaml_implicit_resolvers.items():
        merged.setdefault(first, []).extend(r for r in rs if r not in merged[first])
    CoreDumper.yaml_implicit_resolvers = merged
    CoreDumper.add_implicit_resolver("tag:yaml.org,2002:bool", re.compile(r"^(?:y|Y|n|N)$"), list("yYnN"))  # YAML 1.1's, which PyYAML skips
    return CoreDumper


def load(text: str) -> Any:
    """One YAML document read with `loader()` (raises yaml.YAMLError)."""
    import yaml

    return yaml.load(text, Loader=loader())


def bounded(value: object, budget: int) -> bool:
    """Whether `value` has at most `budget` nodes counted as its readers walk it (an alias is
    counted again each time it is used). False for an alias bomb, whose few hundred bytes
    expand to billions of values, and for a self-referencing alias, which never ends."""
    stack, seen = [value], 0
    while stack:
        item = stack.pop()
        seen += 1
        if seen > budget:
            return False
        if isinstance(item, dict):
            stack.extend(item.keys())
            stack.extend(item.values())
        elif isinstance(item, (list, tuple, set)):
            stack.extend(item)
    return True
