"""The syntax-tree pass of `chunk_strategy: auto` is bounded and linear (issue 25).

A generated one-line file, a minified line, a tree of too many nodes: cut by regex and
recorded as `ast!`, without parsing or walking it. Within the budgets the walk visits each
node once, whatever the depth or width of the tree, and finds what the original's
tree-sitter queries found. No test here measures time: they count the work instead.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from qmd.index import code_chunks
from qmd.index.chunking import chunk_text
from qmd.index.code_chunks import NotParsed, code_points, language_of
from qmd.llm.families import Family

tree_sitter = pytest.importorskip("tree_sitter")

CODE = Path(__file__).parent / "code"
REPO = Path(__file__).parents[3]


def words(text: str) -> int:
    return max(1, len(text.split()))


@dataclass
class WordEmbedder:
    """What `embedding.prepare` needs of a model: a family, a token counter, a title cutter."""

    family: Family = Family("bert", "{q}", "{title}\n\n{chunk}", 64, 8)

    def count_tokens(self, text: str) -> int:
        return words(text)

    def fit(self, text: str, limit: int) -> str:
        return text


def no_parser(monkeypatch: pytest.MonkeyPatch) -> None:
    """Make any parse fail the test: a budget must be decided before parsing."""

    class Refused:
        def __init__(self, *args: Any) -> None:
            raise AssertionError("parsed a file over the budget")

    monkeypatch.setattr(tree_sitter, "Parser", Refused)


def test_a_generated_ten_megabyte_line_is_refused_before_parsing(monkeypatch: pytest.MonkeyPatch) -> None:
    text = "DATA = [" + ", ".join(map(str, range(1_250_000))) + "]\n"  # 10 MB on one line
    assert len(text) > 9_000_000
    code_chunks._load("python")  # the grammar loads as usual
    no_parser(monkeypatch)
    with pytest.raises(NotParsed, match=r"10\d{6} bytes, over the 2097152-byte budget"):
        code_points(text, "python")


def test_a_minified_line_falls_back_to_regex_as_ast_bang(monkeypatch: pytest.MonkeyPatch) -> None:
    from qmd.index.embedding import prepare

    minified = "var a = [" + ", ".join(f'"k{i}"' for i in range(6000)) + "];"  # one 50 KB line
    text = f"import {{x}} from './x.js';\n\n\nfunction f() {{\n  return x;\n}}\n\n{minified}\n\n\nfunction g() {{\n  return 2;\n}}\n"
    no_parser(monkeypatch)
    with pytest.raises(NotParsed, match=r"a line of \d+ characters, over the 32768-character budget"):
        code_points(text, "javascript")
    auto = prepare(WordEmbedder(), text, "t", "h", "javascript")  # type: ignore[arg-type]
    regex = prepare(WordEmbedder(), text, "t", "h", None)  # type: ignore[arg-type]
    assert (auto.chunker, regex.chunker) == ("ast!", "regex")  # named by embed and status as cut by regex
    assert auto.starts == regex.starts and len(auto.starts) > 1


def test_a_tree_over_the_node_budget_is_not_walked(monkeypatch: pytest.MonkeyPatch) -> None:
    text = (CODE / "sample.py").read_text()
    assert code_points(text, "python").nodes > 300
    monkeypatch.setattr(code_chunks, "MAX_AST_NODES", 300)

    def walk(*args: Any) -> Any:
        raise AssertionError("walked a tree over the budget")

    monkeypatch.setattr(code_chunks, "_definitions", walk)
    with pytest.raises(NotParsed, match=r"\d+ syntax-tree nodes, over the budget of 300"):
        code_points(text, "python")


def nested_functions(depth: int) -> str:
    """`depth` JavaScript functions, each inside the previous one, one per line."""
    return "".join(f"function f{i}() {{\n" for i in range(depth)) + "return 1;\n" + "}\n" * depth


def test_thirty_thousand_nested_functions_are_walked_once_per_node() -> None:
    depth = 30_000  # 650 KB, 270,000 nodes: 14 s when each body's lines were re-marked per level
    text = nested_functions(depth)
    points = code_points(text, "javascript")
    tree = tree_sitter.Parser(code_chunks._load("javascript").language).parse(text.encode())
    assert points.nodes == tree.root_node.descendant_count  # each node once, none twice
    assert len(points.scores) == depth - 1 and set(points.scores.values()) == {90.0}  # every function but the first line's
    assert len(points.inside) == 2 * depth  # every line after the first, up to the last closing brace
    assert 0 not in points.inside and len(text) not in points.inside
    chunks = chunk_text(text, words, max_tokens=900, overlap_tokens=0, code=points)  # all inside: cut where it must
    assert "".join(c.text for c in chunks) == text and all(c.tokens <= 900 for c in chunks)


def test_work_grows_linearly_with_depth_and_width() -> None:
    """Twice the nesting, or twice the items of one wide list: twice the nodes visited."""
    def visits(text: str, language: str) -> int:
        return code_points(text, language).nodes

    deep = [visits(nested_functions(n), "javascript") for n in (1000, 2000, 4000)]
    assert deep[2] - deep[1] == 2 * (deep[1] - deep[0])
    wide = [visits("DATA = [\n" + "    1,\n" * n + "]\n", "python") for n in (10_000, 20_000, 40_000)]
    assert wide[2] - wide[1] == 2 * (wide[1] - wide[0]) == 4 * 10_000  # an item and its comma


# The original's tree-sitter queries (qmd 2.8.3): the walk must find exactly what they found.
REFERENCE_QUERIES = {
    "python": """
        (class_definition) @class
        (function_definition) @func
        (decorated_definition) @decorated
        (import_statement) @import
        (import_from_statement) @import
        (future_import_statement) @import
    """,
    "javascript": """
        (export_statement) @export
        (class_declaration) @class
        (function_declaration) @func
        (generator_function_declaration) @func
        (method_definition) @method
        (import_statement) @import
        (lexical_declaration (variable_declarator value: (arrow_function))) @func
        (lexical_declaration (variable_declarator value: (function_expression))) @func
    """,
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
REFERENCE_QUERIES["typescript"] = REFERENCE_QUERIES["tsx"] = REFERENCE_QUERIES["javascript"] + """
    (interface_declaration) @iface
    (abstract_class_declaration) @class
    (type_alias_declaration) @type
    (enum_declaration) @enum
"""


def by_query(text: str, language: str) -> tuple[dict[int, float], frozenset[int]]:
    """(scores, inside) as the original computed them, with a tree-sitter query."""
    lang = code_chunks._load(language).language
    tree = tree_sitter.Parser(lang).parse(text.encode())
    starts = [0]
    for line in text.split("\n")[:-1]:
        starts.append(starts[-1] + len(line) + 1)
    scores: dict[int, float] = {}
    inside: set[int] = set()
    for name, nodes in tree_sitter.QueryCursor(tree_sitter.Query(lang, REFERENCE_QUERIES[language])).captures(tree.root_node).items():
        for node in nodes:
            pos = starts[node.start_point.row]
            scores[pos] = max(scores.get(pos, -1.0), code_chunks.SCORES[name])
            if name in ("func", "method", "decorated") and code_chunks._is_function(node):
                inside.update(starts[node.start_point.row + 1 : node.end_point.row + 1])
    return {p: s for p, s in scores.items() if p > 0}, frozenset(inside)


SHAPES = {
    "shapes.js": "const a = 1, f = () => 2;\n\nlet g = function () {\n  return 3;\n};\n\nconst h = (() => 4)();\n\nvar v = () => 5;\n",
    "shapes.ts": "export const f = async (x: number): Promise<number> => {\n  return x;\n};\n\nexport default class A {\n  m(): void {}\n}\n\nenum E { A }\n",
    "shapes.go": "package p\n\ntype (\n\tA int\n\tB struct{}\n)\n\ntype C = int\n\ntype D interface {\n\tM()\n}\n",
}


@pytest.mark.parametrize(
    "path",
    [*(CODE / n for n in ("sample.py", "sample.js", "sample.ts", "sample.tsx", "sample.go", "sample.rs")),
     *(REPO / "qmd" / "index" / n for n in ("code_chunks.py", "chunking.py", "embedding.py", "indexer.py")),
     *SHAPES],
    ids=lambda p: Path(p).name,
)
def test_the_walk_finds_what_the_original_queries_found(path: Path | str) -> None:
    text = SHAPES[path] if isinstance(path, str) else path.read_text()
    language = language_of(str(path))
    assert language is not None
    points = code_points(text, language)
    assert (points.scores, points.inside) == by_query(text, language)
    if isinstance(path, Path) and path.parent == CODE:
        assert chunk_text(text, words, max_tokens=60, overlap_tokens=10, code=points)


def test_an_auto_collection_names_an_over_budget_file_as_cut_by_regex(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import qmd
    from qmd.store.maintenance import NOT_PARSED

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    root = tmp_path / "src"
    root.mkdir()
    (root / "ok.py").write_text("".join(f"def handler_{i}(event):\n    return event + {i}\n\n\n" for i in range(40)))
    (root / "bundle.js").write_text("var a=[" + ",".join(str(i) for i in range(9000)) + "];\nfunction f() {\n  return a;\n}\n")
    store.add_collection(root, name="src", pattern="**/*")
    coll = store.config.collections()["src"]
    coll.chunk_strategy = "auto"
    store.config.set_collection(coll)
    store.config.save()
    report = store.embed()
    assert report.not_parsed == ["src/bundle.js"]
    assert ("src", "bundle.js", "warning", NOT_PARSED) in store.status().issues
    assert not [i for i in store.status().issues if i[1] == "ok.py"]
