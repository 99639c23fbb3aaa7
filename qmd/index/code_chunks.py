"""Break points of source files from their syntax tree (tree-sitter), for `--chunk-strategy auto`.

The grammars are optional (`pip install 'qmd-harness[code]'`): without tree-sitter or a language's
grammar wheel, that language is chunked by the markdown rules (regex) and `status` says so.
As the original (2.8.3): .ts .tsx .js .jsx (.mts .cts .mjs .cjs) .py .go .rs; the start of a
class / interface / struct / impl / trait / module scores 100, a function / method (and an
exported or decorated one) 90, a type alias / enum 80, an import / use declaration 60. A
break goes before the line the definition starts on; lines inside a function's body are
marked so the chunker cuts there only when the window has no better place.

A file whose tree has syntax errors is "not parsed": the caller chunks it by regex and
records it (shown by `status`). So is a file beyond the budgets of the syntax-tree pass
(`OverBudget`: over MAX_AST_BYTES, a line over MAX_AST_LINE characters, a tree over
MAX_AST_NODES nodes): generated or minified code, where parsing costs much and a cut at a
line start gains nothing. Within them the work is linear: one parse, one walk of the tree
(each node visited once), and the function bodies' lines marked by a running count.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from functools import lru_cache
from itertools import accumulate
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

# Budgets of the syntax-tree pass; beyond one, the file is cut by regex (chunker `ast!`).
MAX_AST_BYTES = 2 * 1024 * 1024  # UTF-8 bytes: parsing costs 0.1-0.5 µs a byte of code, up to 3 µs of garbage
MAX_AST_LINE = 32 * 1024  # characters in the longest line: minified or generated code
MAX_AST_NODES = 1_000_000  # nodes of the tree (0.1-0.4 a byte of code): the walk visits each once

# What is a definition, per language: a named node's type → its kind. As the original's
# tree-sitter queries, plus two shapes (below): `const f = () => …` / `= function …` in
# JavaScript and TypeScript (a func), and a Go `type` declaring a struct or an interface.
_JS_NODES = {
    "export_statement": "export",
    "class_declaration": "class",
    "function_declaration": "func",
    "generator_function_declaration": "func",
    "method_definition": "method",
    "import_statement": "import",
}
_TS_NODES = {
    **_JS_NODES,
    "interface_declaration": "iface",
    "abstract_class_declaration": "class",
    "type_alias_declaration": "type",
    "enum_declaration": "enum",
}
NODES: dict[str, dict[str, str]] = {
    "python": {
        "class_definition": "class",
        "function_definition": "func",
        "decorated_definition": "decorated",
        "import_statement": "import",
        "import_from_statement": "import",
        "future_import_statement": "import",
    },
    "javascript": _JS_NODES,
    "typescript": _TS_NODES,
    "tsx": _TS_NODES,
    "go": {  # and type_declaration: a type, a struct or an interface (_shape)
        "function_declaration": "func",
        "method_declaration": "method",
        "import_declaration": "import",
    },
    "rust": {
        "struct_item": "struct",
        "impl_item": "impl",
        "trait_item": "trait",
        "mod_item": "mod",
        "function_item": "func",
        "enum_item": "enum",
        "type_item": "type",
        "use_declaration": "import",
    },
}
_JS_FUNCTION_VALUES = frozenset({"arrow_function", "function_expression"})
_GO_TYPES = {"struct_type": "struct", "interface_type": "iface"}
_SHAPES = {  # node types whose kind depends on their children (see _shape)
    "javascript": ("lexical_declaration",),
    "typescript": ("lexical_declaration",),
    "tsx": ("lexical_declaration",),
    "go": ("type_declaration",),
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


class OverBudget(NotParsed):
    """The file is beyond a budget of the syntax-tree pass (bytes, line length, nodes): chunk it by regex."""


@dataclass(frozen=True)
class CodePoints:
    """Break points of one source file, by character offset of a line start."""

    scores: dict[int, float]  # line start → the best definition starting on that line
    inside: frozenset[int]  # line starts inside a function's body (not at its start)
    nodes: int = 0  # syntax-tree nodes visited to find them (each once)


@dataclass(frozen=True)
class _Grammar:
    language: Any  # tree_sitter.Language
    kinds: dict[int, str]  # node kind id → definition kind (every id of a named node type of NODES)
    shapes: frozenset[int]  # node kind ids whose definition kind depends on their children


def _is_function(node: Any) -> bool:
    """A decorated definition is a function's only when it wraps one (not a decorated class)."""
    if node.type != "decorated_definition":
        return True
    inner = node.child_by_field_name("definition")
    return inner is not None and inner.type == "function_definition"


def _shape(node: Any) -> str | None:
    """The kind of a node whose kind depends on its children, or None: not a definition.

    `const f = () => …` (any declarator's value an arrow function or a function expression) is a
    func; a Go type declaration is a struct or an interface when one of its specs declares one,
    else a type alias.
    """
    if node.type == "lexical_declaration":
        for child in node.named_children:
            if child.type == "variable_declarator" and any(v.type in _JS_FUNCTION_VALUES for v in child.children_by_field_name("value")):
                return "func"
        return None
    best = "type"
    for child in node.named_children:
        if child.type == "type_spec":
            for t in child.children_by_field_name("type"):
                kind = _GO_TYPES.get(t.type)
                if kind is not None and SCORES[kind] >= SCORES[best]:
                    best = kind
    return best


def language_of(path: str) -> str | None:
    dot = path.rfind(".")
    return EXTENSIONS.get(path[dot:].lower()) if dot >= 0 and "/" not in path[dot:] else None


@lru_cache(maxsize=None)
def _load(language: str) -> _Grammar:
    """The grammar of one language and its definition kinds by node kind id; GrammarMissing with the reason."""
    module, function, wheel = GRAMMARS[language]
    try:
        import tree_sitter
    except ImportError as e:
        raise GrammarMissing(f"tree-sitter is not installed ({e.name}): {GRAMMARS_INSTALL}") from None
    try:
        lang = tree_sitter.Language(getattr(importlib.import_module(module), function)())
        names = {**NODES[language], **dict.fromkeys(_SHAPES.get(language, ()), "")}
        ids: dict[str, list[int]] = {}
        for i in range(lang.node_kind_count):
            name = lang.node_kind_for_id(i)
            if name in names and lang.node_kind_is_named(i):
                ids.setdefault(name, []).append(i)
        unknown = sorted(set(names) - set(ids))
        if unknown:  # a grammar of another generation: its definitions are named otherwise
            raise ValueError(f"no node type {', '.join(unknown)}")
    except ImportError:
        raise GrammarMissing(f"{wheel} is not installed: {GRAMMARS_INSTALL}") from None
    except Exception as e:  # an ABI the installed tree-sitter cannot read, node types it lacks
        raise GrammarMissing(f"{wheel} does not load ({type(e).__name__}: {e})") from None
    kinds = {i: kind for name, kind in NODES[language].items() for i in ids[name]}
    shapes = frozenset(i for name in _SHAPES.get(language, ()) for i in ids[name])
    return _Grammar(lang, kinds, shapes)


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


def _definitions(tree: Any, grammar: _Grammar, budget: int) -> tuple[list[tuple[int, int, float, bool]], int]:
    """(first row, last row, score, is a function's body) of every definition, and the nodes visited.

    One depth-first walk with a tree cursor: each node once, no recursion (a tree 30,000 levels
    deep is walked as any other), and no query (tree-sitter's query cursor slows down more than
    linearly on wide or deep trees).
    """
    found: list[tuple[int, int, float, bool]] = []
    kinds, shapes = grammar.kinds, grammar.shapes
    cursor = tree.walk()
    first_child, next_sibling, parent = cursor.goto_first_child, cursor.goto_next_sibling, cursor.goto_parent
    visited = 0
    while True:
        node = cursor.node
        visited += 1
        if visited > budget:
            raise OverBudget(f"over {budget} syntax-tree nodes")
        kind_id = node.kind_id
        kind = kinds.get(kind_id) or (_shape(node) if kind_id in shapes else None)
        if kind is not None:
            body = kind in _BODIES and _is_function(node)
            found.append((node.start_point.row, node.end_point.row, SCORES[kind], body))
        if first_child():
            continue
        while not next_sibling():
            if not parent():
                return found, visited


def code_points(text: str, language: str) -> CodePoints:
    """The definitions of `text` as break points; GrammarMissing, NotParsed (OverBudget).

    The budgets are decided before any work they bound: bytes and the longest line before
    parsing, the tree's node count (tree-sitter keeps it) before walking.
    """
    import tree_sitter

    grammar = _load(language)
    size = len(text) if text.isascii() else len(text.encode("utf-8"))
    if size > MAX_AST_BYTES:
        raise OverBudget(f"{size} bytes, over the {MAX_AST_BYTES}-byte budget of the syntax-tree pass")
    lines = text.split("\n")
    longest = max(map(len, lines))
    if longest > MAX_AST_LINE:
        raise OverBudget(f"a line of {longest} characters, over the {MAX_AST_LINE}-character budget of the syntax-tree pass")
    tree = tree_sitter.Parser(grammar.language).parse(text.encode("utf-8"))
    root = tree.root_node
    if root.descendant_count > MAX_AST_NODES:
        raise OverBudget(f"{root.descendant_count} syntax-tree nodes, over the budget of {MAX_AST_NODES}")
    if root.has_error:
        raise NotParsed(f"syntax errors for the {language} grammar")
    found, visited = _definitions(tree, grammar, MAX_AST_NODES)
    # tree-sitter counts rows; the chunker counts characters: the offset of each line's start.
    line_chars = list(accumulate((len(line) + 1 for line in lines[:-1]), initial=0))
    scores: dict[int, float] = {}
    opened = [0] * (len(line_chars) + 1)  # +1 where a body's inner lines begin, -1 after its last
    for first, last, score, body in found:
        pos = line_chars[first]
        if score > scores.get(pos, -1.0):
            scores[pos] = score
        if body and last > first:
            opened[first + 1] += 1
            opened[min(last, len(line_chars) - 1) + 1] -= 1
    # The lines after a function's first, up to its last, are inside it; a nested definition's
    # line too (a cut there splits the outer function).
    depth = 0
    inside: list[int] = []
    for row, pos in enumerate(line_chars):
        depth += opened[row]
        if depth:
            inside.append(pos)
    return CodePoints({p: s for p, s in scores.items() if p > 0}, frozenset(inside), visited)
