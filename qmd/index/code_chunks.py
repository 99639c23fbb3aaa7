"""Break points of source files from their syntax tree (tree-sitter), for `--chunk-strategy auto`.

The grammars are optional (`pip install 'qmd-harness[code]'`): without tree-sitter or a language's
grammar wheel, that language is chunked by the markdown rules (regex) and `status` says so.
As the original (2.8.3): .ts .tsx .js .jsx (.mts .cts .mjs .cjs) .py .go .rs; the start of a
class / interface / struct / impl / trait / module scores 100, a function / method (and an
exported or decorated one) 90, a type alias / enum 80, an import / use declaration 60. A
break goes before the line the definition starts on; lines inside a function's body are
marked so the chunker cuts there only when the window has no better place.

A file whose tree has syntax errors is "not parsed": the caller chunks it by regex and
records it (shown by `status`).
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

# language → (module, function returning the grammar pointer, PyPI wheel)
GRAMMARS: dict[str, tuple[str, str, str]] = {
    "python": ("tree_sitter_python", "language", "tree-sitter-python"),
    "javascript": ("tree_sitter_javascript", "language", "tree-sitter-javascript"),
    "typescript": ("tree_sitter_typescript", "language_typescript", "tree-sitter-typescript"),
    "tsx": ("tree_sitter_typescript", "language_tsx", "tree-sitter-typescript"),
    "go": ("tree_sitter_go", "language", "tree-sitter-go"),
    "rust": ("tree_sitter_rust", "language", "tree-sitter-rust"),
}

GRAMMARS_INSTALL = "pip install 'qmd-harness[code]'"  # the extra with tree-sitter and every grammar wheel

EXTENSIONS: dict[str, str] = {
    ".py": "python",
    ".js": "javascript", ".mjs": "javascript", ".cjs": "javascript",
    ".jsx": "tsx",  # the tsx grammar reads JSX; javascript's reads it too, tsx also takes type annotations
    ".ts": "typescript", ".mts": "typescript", ".cts": "typescript",
    ".tsx": "tsx",
    ".go": "go",
    ".rs": "rust",
}

_JS_COMMON = """
    (export_statement) @export
    (class_declaration) @class
    (function_declaration) @func
    (generator_function_declaration) @func
    (method_definition) @method
    (import_statement) @import
    (lexical_declaration (variable_declarator value: (arrow_function))) @func
    (lexical_declaration (variable_declarator value: (function_expression))) @func
"""
_TS_EXTRA = """
    (interface_declaration) @iface
    (abstract_class_declaration) @class
    (type_alias_declaration) @type
    (enum_declaration) @enum
"""
QUERIES: dict[str, str] = {
    "python": """
        (class_definition) @class
        (function_definition) @func
        (decorated_definition) @decorated
        (import_statement) @import
        (import_from_statement) @import
        (future_import_statement) @import
    """,
    "javascript": _JS_COMMON,
    "typescript": _JS_COMMON + _TS_EXTRA,
    "tsx": _JS_COMMON + _TS_EXTRA,
    "go": """
        (type_declaration) @type
        (type_declaration (type_spec type: (struct_type))) @struct
        (type_declaration (type_spec type: (interface_type))) @iface
        (function_declaration) @func
        (method_declaration) @method
        (import_declaration) @import
    """,
    "rust": """
        (struct_item) @struct
        (impl_item) @impl
        (trait_item) @trait
        (mod_item) @mod
        (function_item) @func
        (enum_item) @enum
        (type_item) @type
        (use_declaration) @import
    """,
}

SCORES: dict[str, float] = {
    "class": 100, "iface": 100, "struct": 100, "trait": 100, "impl": 100, "mod": 100,
    "export": 90, "func": 90, "method": 90, "decorated": 90,
    "type": 80, "enum": 80,
    "import": 60,
}
_BODIES = {"func", "method", "decorated"}  # a cut inside one of these is a last resort


class GrammarMissing(Exception):
    """tree-sitter or the language's grammar wheel is not installed (or does not load)."""


class NotParsed(Exception):
    """The file has syntax errors for its grammar: chunk it by regex."""


@dataclass(frozen=True)
class CodePoints:
    """Break points of one source file, by character offset of a line start."""

    scores: dict[int, float]  # line start → the best definition starting on that line
    inside: frozenset[int]  # line starts inside a function's body (not at its start)


def _is_function(node: Any) -> bool:
    """A decorated definition is a function's only when it wraps one (not a decorated class)."""
    if node.type != "decorated_definition":
        return True
    inner = node.child_by_field_name("definition")
    return inner is not None and inner.type == "function_definition"


def language_of(path: str) -> str | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 and "/" not in path[dot:] else None


@lru_cache(maxsize=None)
def _load(language: str) -> tuple[Any, Any]:
    """(Language, Query) of one grammar; GrammarMissing with the reason."""
    module, function, wheel = GRAMMARS[language]
    try:
        import tree_sitter
    except ImportError as e:
        raise GrammarMissing(f"tree-sitter is not installed ({e.name}): {GRAMMARS_INSTALL}") from None
    try:
        grammar = getattr(importlib.import_module(module), function)()
        lang = tree_sitter.Language(grammar)
        return lang, tree_sitter.Query(lang, QUERIES[language])
    except ImportError:
        raise GrammarMissing(f"{wheel} is not installed: {GRAMMARS_INSTALL}") from None
    except Exception as e:  # an ABI the installed tree-sitter cannot read, a query it rejects
        raise GrammarMissing(f"{wheel} does not load ({type(e).__name__}: {e})") from None


def grammar_status() -> dict[str, str | None]:
    """language → None when it can be parsed, else why not."""
    status: dict[str, str | None] = {}
    for language in GRAMMARS:
        try:
            _load(language)
            status[language] = None
        except GrammarMissing as e:
            status[language] = str(e)
    return status


def available_extensions() -> list[str]:
    """The file extensions whose grammar loads (what `auto` chunks by syntax)."""
    ok = {language for language, why in grammar_status().items() if why is None}
    return sorted(ext for ext, language in EXTENSIONS.items() if language in ok)


def code_points(text: str, language: str) -> CodePoints:
    """The definitions of `text` as break points; GrammarMissing, NotParsed."""
    import tree_sitter

    lang, query = _load(language)
    data = text.encode("utf-8")
    tree = tree_sitter.Parser(lang).parse(data)
    if tree.root_node.has_error:
        raise NotParsed(f"syntax errors for the {language} grammar")
    # tree-sitter counts bytes; the chunker counts characters. Line starts in both.
    line_bytes = [0]
    line_chars = [0]
    b = c = 0
    for line in text.split("\n")[:-1]:
        b += len(line.encode("utf-8")) + 1
        c += len(line) + 1
        line_bytes.append(b)
        line_chars.append(c)
    scores: dict[int, float] = {}
    inside: set[int] = set()
    for name, nodes in tree_sitter.QueryCursor(query).captures(tree.root_node).items():
        score = SCORES.get(name, 20.0)
        for node in nodes:
            first = node.start_point.row
            pos = line_chars[first]
            if score > scores.get(pos, -1.0):
                scores[pos] = score
            if name in _BODIES and _is_function(node):
                last = node.end_point.row  # the last line of the body
                inside.update(line_chars[first + 1 : last + 1])
    # A definition starting on a line is never "inside" for itself, but a nested one is.
    outer_starts = {p for p in scores if p not in inside}
    return CodePoints({p: s for p, s in scores.items() if p > 0}, frozenset(inside - outer_starts))

