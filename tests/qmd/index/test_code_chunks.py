"""Source files cut at their definitions (tree-sitter break points, `chunk_strategy: auto`)."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from qmd.index import code_chunks
from qmd.index.chunking import chunk_text
from qmd.index.code_chunks import GrammarMissing, NotParsed, code_points, language_of

CODE = Path(__file__).parent / "code"
SAMPLES = ["sample.py", "sample.js", "sample.ts", "sample.tsx", "sample.go", "sample.rs"]
DEFINITION = {  # how a definition's line starts, per language (after indentation)
    ".py": ("def ", "class ", "@", "import ", "from "),
    ".js": ("export ", "class ", "function ", "const ", "import ", "add(", "total(", "constructor("),
    ".ts": ("export ", "class ", "function ", "import ", "add(", "async "),
    ".tsx": ("export ", "function ", "import ", "type "),
    ".go": ("func ", "type ", "import "),
    ".rs": ("pub ", "impl ", "use ", "fn "),
}


def words(text: str) -> int:
    return max(1, len(text.split()))


def line_at(text: str, pos: int) -> str:
    return text[pos : text.find("\n", pos) if "\n" in text[pos:] else len(text)]


pytest.importorskip("tree_sitter")


@pytest.mark.parametrize("name", SAMPLES)
def test_each_language_parses_and_scores_its_definitions(name: str) -> None:
    text = (CODE / name).read_text()
    language = language_of(name)
    assert language is not None
    points = code_points(text, language)
    starts = {line_at(text, p).strip().split("(")[0] for p, s in points.scores.items() if s >= 90}
    assert starts, name
    assert all(line_at(text, p).lstrip().startswith(DEFINITION[Path(name).suffix]) for p in points.scores), name
    assert all(text[p - 1] == "\n" for p in points.scores)  # always before a line


@pytest.mark.parametrize("name", SAMPLES)
def test_boundaries_land_on_definitions(name: str) -> None:
    text = (CODE / name).read_text()
    code = code_points(text, language_of(name) or "")
    chunks = chunk_text(text, words, max_tokens=60, overlap_tokens=0, code=code)
    assert len(chunks) >= 2
    assert "".join(c.text for c in chunks) == text
    for c in chunks[1:]:
        line = line_at(text, c.start)
        assert c.start in code.scores, (name, line)  # a definition starts there
        assert c.start not in code.inside, (name, line)


def test_regex_alone_cuts_python_inside_functions_and_auto_does_not() -> None:
    text = (CODE / "sample.py").read_text()
    code = code_points(text, "python")
    regex = chunk_text(text, words, max_tokens=60, overlap_tokens=0)
    auto = chunk_text(text, words, max_tokens=60, overlap_tokens=0, code=code)
    assert any(c.start in code.inside for c in regex[1:])  # a blank line in a body
    assert not any(c.start in code.inside for c in auto[1:])


def test_overlap_starts_outside_a_function_when_it_can() -> None:
    text = (CODE / "sample.py").read_text()
    code = code_points(text, "python")
    chunks = chunk_text(text, words, max_tokens=60, overlap_tokens=20, code=code)
    assert all(c.tokens <= 60 for c in chunks)
    regex = chunk_text(text, words, max_tokens=60, overlap_tokens=20)
    assert sum(c.start in code.inside for c in chunks[1:]) < sum(c.start in code.inside for c in regex[1:])


def test_imports_stay_together() -> None:
    head = "import os\nimport sys\nfrom pathlib import Path\nfrom typing import Any\n\n\n"
    body = "".join(f"def f{i}(x: Any) -> Any:\n    y = x + {i}\n\n    return y * {i}\n\n\n" for i in range(12))
    text = head + body
    code = code_points(text, "python")
    chunks = chunk_text(text, words, max_tokens=40, overlap_tokens=0, code=code)
    imports_end = len(head)
    assert not any(0 < c.start < imports_end for c in chunks)  # no cut between two imports


def test_an_oversized_function_still_splits_within_the_limit() -> None:
    lines = "".join(f"    total += values[{i}] * {i}\n\n" for i in range(300))
    text = f"import math\n\n\ndef huge(values):\n    total = 0\n{lines}    return math.sqrt(total)\n\n\ndef tiny():\n    return 1\n"
    code = code_points(text, "python")
    chunks = chunk_text(text, words, max_tokens=80, overlap_tokens=10, code=code)
    assert len(chunks) > 10
    assert all(c.tokens <= 80 for c in chunks)
    assert chunks[-1].end == len(text)
    assert any(c.start == text.index("def tiny") or c.start < text.index("def tiny") < c.end for c in chunks)


def test_a_file_with_syntax_errors_is_not_parsed() -> None:
    with pytest.raises(NotParsed):
        code_points("def broken(:\n    return\n", "python")


def test_a_missing_grammar_is_named_with_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    code_chunks._load.cache_clear()
    monkeypatch.setitem(code_chunks.GRAMMARS, "go", ("tree_sitter_go_not_installed", "language", "tree-sitter-go"))
    try:
        with pytest.raises(GrammarMissing, match="tree-sitter-go is not installed"):
            code_points("package x\n", "go")
        status = code_chunks.grammar_status()
        assert status["python"] is None and "qmd-harness[code]" in (status["go"] or "")
        assert ".go" not in code_chunks.available_extensions() and ".py" in code_chunks.available_extensions()
    finally:
        code_chunks._load.cache_clear()


def test_language_of_extensions() -> None:
    assert [language_of(p) for p in ("a/b.PY", "x.jsx", "x.mts", "x.md", "noext", "dir.py/readme")] == ["python", "tsx", "typescript", None, None, None]


def test_switching_a_collection_to_auto_re_embeds_only_its_recut_source_files(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    import shutil

    import qmd

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    root = tmp_path / "src"
    root.mkdir()
    long_py = "import os\n\n\n" + "".join(f"def handler_{i}(event):\n    value = os.environ.get('K{i}')\n\n    return value or event\n\n\n" for i in range(60))
    (root / "big.py").write_text(long_py)
    (root / "small.py").write_text("def one():\n    return 1\n")
    (root / "broken.py").write_text(long_py + "def broken(:\n")
    (root / "notes.md").write_text("# Notes\n\n" + "\n\n".join("restore the database backup " * 10 for _ in range(20)))
    for name in ("sample.go", "sample.rs"):
        shutil.copy(CODE / name, root / name)
    store.add_collection(root, name="src", pattern="**/*")
    first = store.embed()
    assert first.documents == 6 and first.recut == 0
    coll = store.config.collections()["src"]
    coll.chunk_strategy = "auto"
    store.config.set_collection(coll)
    store.config.save()
    assert store.vector_status().pending_documents == 5  # every source file of a language with a grammar
    second = store.embed()
    assert second.recut + second.relabeled == 5 and second.recut >= 1  # big.py at least is cut anew
    assert second.relabeled >= 2  # small.py (one chunk) and broken.py (cut by regex) keep their vectors
    assert second.not_parsed == ["src/broken.py"]
    # status: the file that did not parse is a warning, and the grammars are listed
    from qmd.cli.formats import format_status
    from qmd.store.maintenance import NOT_PARSED

    info = store.status()
    assert ("src", "broken.py", "warning", NOT_PARSED) in info.issues
    assert {g.language: g.available for g in info.grammars} == dict.fromkeys(code_chunks.GRAMMARS, True)
    text = format_status(info, None, None, [])
    assert f"warning  qmd://src/broken.py: {NOT_PARSED}" in text and "AST Chunking" in text and re.search(r"  Languages: .*python", text)
    assert store.vector_status().pending_documents == 0
    assert store.embed().documents == 0
    # back to regex: exactly the re-cut ones again
    coll.chunk_strategy = "regex"
    store.config.set_collection(coll)
    store.config.save()
    third = store.embed()
    assert third.recut == second.recut and third.documents == second.recut
    assert not [i for i in store.status().issues if i[3] == NOT_PARSED]  # cut by regex as asked: no warning
