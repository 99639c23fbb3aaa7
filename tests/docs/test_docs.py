"""The docs say only what qmd does: every `qmd …` line in their shell blocks parses against the
real CLI, the blocks marked runnable run on examples/notes and exit 0, and every relative link
and #anchor resolves (conventions: tests/support/docs.py)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from tests.support.docs import (
    RUNNABLE_FRESH, SHELL_LANGS, SKIP_MARK, Block, anchors, blocks, broken_links, doc_files, invocations, logical_lines,
    parse_error, shell_segments, slug,
)
from tests.support.paths import REPO
from tests.support.run import qmd_env, run_qmd

DOCS = doc_files()
SHELL_BLOCKS = [b for path in DOCS for b in blocks(path) if b.lang in SHELL_LANGS]
RUNNABLE_BLOCKS = [b for path in DOCS for b in blocks(path) if b.marker]


def bad_lines(block: Block) -> list[str]:
    """`file:line: qmd ARGS: why` for each qmd command of the block that does not parse."""
    out = []
    for number, line in logical_lines(block):
        if line.rstrip().endswith(SKIP_MARK):
            continue
        for argv in invocations(line):
            if (why := parse_error(argv)) is not None:
                out.append(f"{block.path.name}:{number}: qmd {' '.join(argv)}: {why}")
    return out


def test_the_docs_have_shell_blocks_and_runnable_ones() -> None:
    assert len(SHELL_BLOCKS) > 20 and len(RUNNABLE_BLOCKS) >= 5
    readme = [b for b in RUNNABLE_BLOCKS if b.path.name == "README.md"]
    assert readme and readme[0].marker == RUNNABLE_FRESH, "the README's quick start runs"


@pytest.mark.parametrize("block", SHELL_BLOCKS, ids=lambda b: b.where)
def test_every_qmd_line_parses(block: Block) -> None:
    assert bad_lines(block) == []


def test_the_parse_check_sees_a_bad_line(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text(
        "```sh\nqmd search rollback --bogus     # an option qmd lacks\nqmd nope\n"
        "qmd query $'lex: a\\nvec: b' --explain && qmd get '#2e6c96'\n"
        "qmd hooks uninstall [REPO…]   # not parsed\n"
        "QMD_DATABASE_URL=x qmd search restore -n abc\n"
        "qmd search --filter '{\"a\":\n  1}' x --json\n```\n",
        encoding="utf-8",
    )
    (block,) = blocks(page)
    assert bad_lines(block) == [
        "page.md:2: qmd search rollback --bogus: No such option: --bogus",
        "page.md:3: qmd nope: No such command 'nope'.",
        "page.md:6: qmd search restore -n abc: Invalid value for '-n': 'abc' is not a valid int.",
    ]


@pytest.mark.parametrize("block", RUNNABLE_BLOCKS, ids=lambda b: b.where)
def test_runnable_blocks_run_on_the_sample_notes(block: Block, tmp_path: Path) -> None:
    work = tmp_path / "work"
    shutil.copytree(REPO / "examples", work / "examples")
    env = qmd_env({"QMD_SERVER": "off", "QMD_HF_ENDPOINT": "http://127.0.0.1:9"})  # nothing to ask, nothing to download
    if block.marker != RUNNABLE_FRESH:
        added = run_qmd("collection", "add", "examples/notes", "--name", "notes", env=env, cwd=work)
        assert added.returncode == 0, added.stderr
    ran = 0
    for number, line in logical_lines(block):
        for segment in shell_segments(line):
            assert segment[0] == "qmd", f"{block.path.name}:{number}: a runnable block runs only qmd: {line}"
        for argv in invocations(line):
            done = run_qmd(*argv, env=env, cwd=work)
            assert done.returncode == 0, f"{block.path.name}:{number}: qmd {' '.join(argv)} exited {done.returncode}: {done.stderr}"
            ran += 1
    assert ran, "a runnable block with no qmd line"


def test_a_runnable_block_that_fails_is_seen(tmp_path: Path) -> None:
    page = tmp_path / "page.md"
    page.write_text("<!-- runnable -->\n```sh\nqmd get qmd://notes/runbooks/postgres.md\n```\n", encoding="utf-8")
    (block,) = blocks(page)
    with pytest.raises(AssertionError, match="exited 1"):
        test_runnable_blocks_run_on_the_sample_notes(block, tmp_path)


@pytest.mark.parametrize("path", DOCS, ids=lambda p: p.relative_to(REPO).as_posix())
def test_links_and_anchors_resolve(path: Path) -> None:
    assert broken_links(path) == []


def test_the_link_check_sees_broken_links(tmp_path: Path) -> None:
    (tmp_path / "other.md").write_text("# Other page\n\n## Models and `vector` search\n\n## Models and `vector` search\n", encoding="utf-8")
    page = tmp_path / "page.md"
    text = (
        "# Page\n\nSee [here](#page), [there](other.md#models-and-vector-search-1), [web](https://example.com/x#y),\n"
        "[gone](missing.md), [no heading](other.md#nope), [self](#nowhere) and `[code](nope.md)`.\n"
        "```sh\n[in a block](nope.md)\n```\n"
    )
    assert broken_links(page, text) == [
        "page.md:4: missing.md (no such file)",
        "page.md:4: other.md#nope (no such heading)",
        "page.md:4: #nowhere (no such heading)",
    ]


def test_anchors_are_githubs() -> None:
    assert slug("Without models, and --explain") == "without-models-and---explain"
    assert slug("How `qmd query` ranks") == "how-qmd-query-ranks"
    assert slug("Where each role's model comes from") == "where-each-roles-model-comes-from"
    assert anchors("# A\n```\n# not a heading\n```\n## A\n") == {"a", "a-1"}
