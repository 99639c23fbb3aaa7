"""Writes qmd/cli/fastspec.json, the lean path's option table, from the typer commands.

The typer commands (read.py, query.py, vectors.py, update.py) are where the options of
`search`, `vsearch`, `query`, `get` and `status` are declared. The lean path (fast.py) must
parse the same options without importing typer, so it reads a table generated from those
declarations: `python -m qmd.cli.fastgen` rewrites it after an option changes, and
tests/qmd/cli/test_fast_path.py fails while the table and the commands differ.
"""

from __future__ import annotations

from pathlib import Path

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.cli.fast import Spec

ROUTED = ("search", "vsearch", "query", "get", "status")  # the commands the lean path parses
TARGET = Path(__file__).with_name("fastspec.json")
_KINDS = {"int": "int", "integer": "int", "float": "float", "str": "str", "text": "str"}  # click's type names → fast.py's converters

def specs() -> dict[str, Spec]:
    """Each routed command's (argument, takes many, flags, options, defaults), read from typer."""
    import typer.main

    from qmd.cli.main import build_app

    table = {}
    for name in ROUTED:
        command = typer.main.get_command(build_app([name])).commands[name]  # type: ignore[attr-defined]
        argument, many = None, False
        flags: dict[str, tuple[str, bool]] = {}
        options: dict[str, tuple[str, str, bool]] = {}
        defaults: dict[str, object] = {}
        for param in command.params:
            defaults[param.name] = param.default
            if param.param_type_name == "argument":
                argument, many = param.name, param.nargs == -1
            elif param.is_flag:
                flags |= {opt: (param.name, True) for opt in param.opts} | {opt: (param.name, False) for opt in param.secondary_opts}
            elif param.type.name in _KINDS:
                options |= {opt: (param.name, _KINDS[param.type.name], param.multiple) for opt in param.opts}
            else:
                raise TypeError(f"{name} {param.opts}: the lean path has no converter for {param.type.name}")
        table[name] = (argument, many, flags, options, defaults)
    return table


def render() -> str:
    """The text of fastspec.json: per command [argument, takes many, flags, options, defaults];
    a flag: option → [parameter, value it sets]; an option taking a value: option →
    [parameter, converter (int, float, str), repeatable]. Read by fast.spec()."""
    import json

    def table(entries: dict[str, object]) -> str:
        inner = ",\n".join(f"   {json.dumps(key)}: {json.dumps(value)}" for key, value in entries.items())
        return "  {\n" + inner + "\n  }"

    commands = []
    for name, (argument, many, flags, options, defaults) in specs().items():
        head = f"  {json.dumps(argument)}, {json.dumps(many)},\n"
        commands.append(f" {json.dumps(name)}: [\n" + head + ",\n".join(table(t) for t in (flags, options, defaults)) + "\n ]")  # type: ignore[arg-type]
    return "{\n" + ",\n".join(commands) + "\n}\n"


if __name__ == "__main__":
    TARGET.write_text(render())
    print(f"wrote {TARGET}")
