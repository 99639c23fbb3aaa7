"""Our output, format by format, against what the original qmd 2.8.3 prints.

The reference files (shared/reference-outputs/) were produced by the TypeScript original
on the seven notes in reference-outputs/corpus/, indexed as collection `small`. We index
a copy of the same notes and compare byte for byte where we mean to match, and assert
our documented behaviour (with the reason in a comment) where we differ on purpose.
"""

from __future__ import annotations

import csv
import io
import json
import re
import shutil
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.paths import REFERENCE

CORPUS = REFERENCE / "corpus"
pytestmark = pytest.mark.skipif(
    not CORPUS.is_dir(), reason=f"reference outputs not found at {REFERENCE} (set QMD_BENCH_DATA to the shared benchmarks folder)"
)

Cli = Callable[..., tuple[int, str, str]]

# The multi-word query the reference search_*.txt files were made with.
QUERY = "flip the load balancer back to blue"
REF_HIT = "qmd://small/bluegreen-rollout.md"

def ref(name: str) -> str:
    return (REFERENCE / name).read_text(encoding="utf-8")


def ref_sections(name: str, marker: str) -> dict[str, str]:
    """Split a reference file made of `== <label>` sections into {label: body}."""
    sections: dict[str, str] = {}
    label = None
    for line in ref(name).splitlines(keepends=True):
        m = re.match(marker, line)
        if m:
            label = m.group(1)
            sections[label] = ""
        elif label is not None:
            sections[label] += line
    return sections


@pytest.fixture
def small(tmp_path: Path, cli: Cli) -> Path:
    """A copy of the reference corpus, indexed as collection `small`."""
    root = tmp_path / "corpus"
    shutil.copytree(CORPUS, root)
    code, _, err = cli("collection", "add", str(root), "--name", "small")
    assert code == 0, err
    assert "small: 7 new" in err
    return root


def ok(cli: Cli, *args: str) -> str:
    code, out, err = cli(*args)
    assert code == 0, f"qmd {' '.join(args)} exited {code}: {err}"
    return out


# --- the multi-word query: our score differs on purpose, layout must not ------------------
#
# Design §7: multi-term queries are AND-ed first, then filled with any-term hits (marked
# `"match": "any"` in JSON); our BM25 of this query is 0.88 where the original printed 0.82.
# So for QUERY we swap the score for the reference's and compare everything else exactly.

def _swap_score(text: str, pattern: str, replacement: str) -> str:
    new, n = re.subn(pattern, replacement, text, count=1, flags=re.MULTILINE)
    assert n == 1, f"no score found by {pattern!r} in:\n{text}"
    return new


# Ours ends each hit with its confidence (issue 28), after the original's fields: JSON keys
# `confidence` and `below_threshold` (after ours, `match`), CSV columns, an XML attribute, a
# Markdown line, --files fields (the context and any-term fields then kept in place, empty).
# These take ours back to the original's fields, so the rest is still compared byte for byte.
OURS_JSON = ("match", "confidence", "below_threshold", "unmatched")


def _json_original(out: str) -> str:
    hits = json.loads(out)
    for hit in hits:
        assert list(hit)[-3:] == ["match", "confidence", "below_threshold"] or "unmatched" in hit  # ours come last
        assert 0.0 <= hit["confidence"] <= 1.0 and isinstance(hit["below_threshold"], bool)
        for key in OURS_JSON:
            hit.pop(key, None)
    return json.dumps(hits, indent=2, ensure_ascii=False) + "\n"


def _files_original(out: str) -> str:
    """--files rows without our fields: `,[any-term]` and `,0.87[,[below-threshold]]` (and the
    empty context field kept before them)."""
    lines = []
    for line in out.splitlines():
        line, n = re.subn(r",(\[any-term\])?,[01]\.\d\d(,\[below-threshold\])?$", "", line)
        assert n == 1, line  # every row carries its confidence
        lines.append(line.removesuffix(","))
    return "".join(f"{line}\n" for line in lines)


def test_search_json_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--json", "-n", "1")
    hits = json.loads(out)
    assert [h["match"] for h in hits] == ["all"]  # design §7: every JSON hit says how it matched
    # The reference has no "match" key (the original has no any-term fill) nor a confidence: drop ours, swap the score.
    ours = _swap_score(_json_original(out), r'"score": 0\.\d\d?,', '"score": 0.82,')
    assert ours == ref("search_json.txt")


def test_search_json_full_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--json", "--full", "-n", "1")
    body = json.loads(out)[0]["body"]
    assert body == (small / "bluegreen-rollout.md").read_text()
    ours = _swap_score(_json_original(out), r'"score": 0\.\d\d?,', '"score": 0.82,')
    assert ours == ref("search_json_full.txt")


def test_search_csv_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--csv", "-n", "1")
    assert re.search(r"^#9d4971,0\.\d{4},", out, re.MULTILINE)  # CSV keeps 4 decimals
    # Ours adds last columns after the original's: `match` (all / any: the any-term fill), `confidence`, `below_threshold`.
    assert out.startswith("docid,score,file,title,context,line,snippet,match,confidence,below_threshold\n")
    assert re.search(r'",all,[01]\.\d{4},(true|false)\n$', out)
    out = out.replace(",match,confidence,below_threshold\n", "\n", 1)
    out = re.sub(r",all,[01]\.\d{4},(true|false)\n$", "\n", out)
    assert _swap_score(out, r"^#9d4971,0\.\d{4},", "#9d4971,0.8245,") == ref("search_csv.txt")


def test_search_files_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--files", "-n", "1")
    # files: 2 decimals; ours: the (empty) context and any-term fields, then the confidence
    assert re.fullmatch(r"#9d4971,0\.\d\d,qmd://small/bluegreen-rollout\.md,,,[01]\.\d\d\n", out)
    assert _swap_score(_files_original(out), r"^#9d4971,0\.\d\d,", "#9d4971,0.82,") == ref("search_files.txt")


def test_search_md_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--md", "-n", "1")
    assert re.search(r"^\*\*confidence:\*\* [01]\.\d\d\n", out, re.MULTILINE)
    assert re.sub(r"^\*\*confidence:\*\* .*\n", "", out, flags=re.MULTILINE) == ref("search_md.txt")


def test_search_xml_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "--xml", "-n", "1")
    assert re.search(r' confidence="[01]\.\d\d">', out)
    assert re.sub(r' confidence="[01]\.\d\d"', "", out) == ref("search_xml.txt")


CONFIDENCE_LINE = r"^Confidence: +\d{1,3}%$"  # where the original prints its score: ours shows the confidence


def test_search_cli_layout_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "-n", "1")
    assert re.search(CONFIDENCE_LINE, out, re.MULTILINE)  # a percent, as the original's score
    ours = _swap_score(out, CONFIDENCE_LINE, "Score:  82%")
    # Header line with :line and #docid, Title, Score, blank line, @@ snippet header, snippet.
    assert ours.rstrip("\n") == ref("search_default.txt").rstrip("\n")


def test_search_cli_trailing_newlines_match_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "search", QUERY, "-n", "1")
    assert _swap_score(out, CONFIDENCE_LINE, "Score:  82%") == ref("search_default.txt")


def test_any_term_fill_comes_after_all_terms_hits(small: Path, cli: Cli) -> None:
    # Same command as the reference (no -n): the original stops at the one all-terms hit;
    # we add the document sharing the most other words, after it, marked "any".
    hits = json.loads(ok(cli, "search", QUERY, "--json"))
    assert hits[0]["file"] == REF_HIT and hits[0]["match"] == "all"
    assert len(hits) >= 2 and all(h["match"] == "any" for h in hits[1:])
    assert "qmd://small/postgres-backup.md" in [h["file"] for h in hits[1:]]  # shares "back(ups)"
    assert list(hits[0]) == ["docid", "score", "file", "line", "title", "snippet", "match", "confidence", "below_threshold"]
    cli_out = ok(cli, "search", QUERY)
    assert cli_out.startswith("qmd://small/bluegreen-rollout.md:17 #9d4971\nTitle: Blue/Green Rollout Runbook\n")
    assert cli_out.count("\nTitle: ") == min(len(hits), 5)  # cli shows 5 by default, json 20


def test_files_columns_stay_in_place_with_and_without_a_context(small: Path, cli: Cli) -> None:
    """--files: the original's fields (docid, score, file, context) in its order, then the
    any-term mark, always the fifth field, then the confidence, the sixth (issue 28), and
    `[below-threshold]` for a best guess: the context and mark fields are left empty before
    what follows when a hit has none (the mark moved between the 4th and the 5th field)."""
    def rows() -> list[list[str]]:
        return list(csv.reader(io.StringIO(ok(cli, "search", QUERY, "--files"))))

    def ours_ok(r: list[str]) -> bool:
        return re.fullmatch(r"[01]\.\d\d", r[5]) is not None and r[6:] in ([], ["[below-threshold]"])

    plain = rows()
    assert plain[0][:5] == ["#9d4971", plain[0][1], REF_HIT, "", ""] and ours_ok(plain[0])  # the all-terms hit: the original's line, then ours
    fill = plain[1:]
    assert fill and all(r[3] == "" and r[4] == "[any-term]" and ours_ok(r) for r in fill), plain
    assert cli("context", "add", "qmd://small/", 'Team "runbooks", and notes')[0] == 0
    with_context = rows()
    assert with_context[0][:5] == [*plain[0][:3], 'Team "runbooks", and notes', ""]
    assert all(r[3] == 'Team "runbooks", and notes' and r[4] == "[any-term]" and ours_ok(r) for r in with_context[1:]), with_context
    assert [r[:3] for r in with_context] == [r[:3] for r in plain]


def test_scores_agree_across_formats(small: Path, cli: Cli) -> None:
    """One score, rounded per format: 2 decimals JSON/files, 4 CSV; one confidence: 2
    decimals JSON/files, 4 CSV, whole percent in cli (where the original shows its score)."""
    rows = list(csv.DictReader(io.StringIO(ok(cli, "search", QUERY, "--csv"))))
    hits = json.loads(ok(cli, "search", QUERY, "--json"))
    files = list(csv.reader(io.StringIO(ok(cli, "search", QUERY, "--files"))))
    percents = re.findall(r"^Confidence: +(\d+)%", ok(cli, "search", QUERY), re.MULTILINE)
    assert len(rows) == len(hits) == len(files) == len(percents) >= 2
    for row, hit, line, pct in zip(rows, hits, files, percents):
        exact = float(row["score"])
        assert re.fullmatch(r"0\.\d{4}", row["score"])
        assert hit["score"] == round(exact, 2)
        assert line[1] == f"{exact:.2f}"
        assert row["docid"] == hit["docid"] == line[0]
        sure = float(row["confidence"])
        assert hit["confidence"] == round(sure, 2) and line[5] == f"{sure:.2f}" and abs(int(pct) - sure * 100) <= 0.51
        assert row["below_threshold"] == str(hit["below_threshold"]).lower()


# --- no results, query syntax ------------------------------------------------------------

NO_RESULTS = ref_sections("search_no_results.txt", r"^== '(\w*)'$") if CORPUS.is_dir() else {}


@pytest.mark.parametrize("fmt", sorted(NO_RESULTS) or ["(no reference)"])
def test_no_results_each_format(small: Path, cli: Cli, fmt: str) -> None:
    expected = NO_RESULTS[fmt]
    rc = int(re.search(r"^rc=(\d+)$", expected, re.MULTILINE).group(1))  # type: ignore[union-attr]
    expected_out = re.sub(r"^rc=\d+\n", "", expected, flags=re.MULTILINE)
    args = ["search", "zzyzx quuxly"] + ([f"--{fmt}"] if fmt else [])
    code, out, _ = cli(*args)
    if fmt == "csv":  # our extra last columns: match (all / any), confidence, below_threshold
        assert out == "docid,score,file,title,context,line,snippet,match,confidence,below_threshold\n"
        out = out.replace(",match,confidence,below_threshold\n", "\n")
    assert (code, out) == (rc, expected_out)


SYNTAX = ref_sections("search_syntax.txt", r"^== \[(.*)\]$") if CORPUS.is_dir() else {}


@pytest.mark.parametrize("query", list(SYNTAX) or ["(no reference)"])
def test_syntax_queries_match_reference(small: Path, cli: Cli, query: str) -> None:
    # Same documents, same order, same scores to 2 decimals (single-term and negation
    # queries: no any-term fill is involved, so our BM25 equals the original's).
    assert _files_original(ok(cli, "search", query, "--files")) == SYNTAX[query]


def test_search_syntax_examples_are_not_all_empty() -> None:
    # Guards the parametrisation above: the reference must yield hits for some queries.
    assert sum(1 for body in SYNTAX.values() if body) >= 4 and "kubectl" in SYNTAX


# --- get, multi-get, ls, collection list, status ----------------------------------------

@pytest.mark.parametrize("form", ["collection/path", "qmd-uri", "absolute", "relative-fs"])
def test_get_by_path_matches_reference(small: Path, cli: Cli, form: str, monkeypatch: pytest.MonkeyPatch) -> None:
    ref_arg = {
        "collection/path": "small/bluegreen-rollout.md",
        "qmd-uri": "qmd://small/bluegreen-rollout.md",
        "absolute": str(small / "bluegreen-rollout.md"),
        "relative-fs": "./bluegreen-rollout.md",
    }[form]
    monkeypatch.chdir(small)
    assert ok(cli, "get", ref_arg) == ref("get.txt")


def test_get_by_docid_with_line_limit_matches_reference(small: Path, cli: Cli) -> None:
    assert ok(cli, "get", "#9d4971", "-l", "5") == ref("get_docid.txt")


def test_multi_get_json_matches_reference(small: Path, cli: Cli) -> None:
    ours = json.loads(ok(cli, "multi-get", "small/*.md", "-l", "3", "--json"))
    theirs = json.loads(ref("multiget_json.txt"))
    assert [o["docid"] for o in ours] == [t["docid"] for t in theirs]
    assert [o["title"] for o in ours] == [t["title"] for t in theirs]
    for o, t in zip(ours, theirs):
        assert list(o) == ["file", "docid", "title", "body"]
        # A glob's matches are named by their collection-relative path, as the original names them.
        assert o["file"] == t["file"]
        # The original line-numbers its own "[... truncated]" marker as if it were lines 4
        # and 5 of the file; ours numbers only real file lines and appends the marker after
        # a blank line, so a number always points at the file. Same lines, same count.
        lines = t["body"].split("\n")
        assert lines[3] == "4: " and lines[4].startswith("5: [... truncated ")
        marker = lines[4][len("5: "):]
        assert o["body"] == "\n".join(lines[:3]) + "\n\n" + marker
    assert ours[0]["body"].endswith("[... truncated 15 more lines]")


_DATE = re.compile(r"[A-Z][a-z]{2} [ 0-3]\d \d\d:\d\d")


def test_ls_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "ls", "small")
    assert _DATE.sub("<date>", out) == _DATE.sub("<date>", ref("ls.txt"))
    # The date column is the file's own modification time.
    mtime = (small / "travel-japan.md").stat().st_mtime
    assert f"{time.strftime('%b %d %H:%M', time.localtime(mtime))}  qmd://small/travel-japan.md\n" in out


def test_ls_root_matches_reference(small: Path, cli: Cli) -> None:
    assert ok(cli, "ls") == ref("ls_root.txt")


_AGO = re.compile(r"\b\d+[smhd] ago\b")


def test_collection_list_matches_reference(small: Path, cli: Cli) -> None:
    out = ok(cli, "collection", "list")
    assert _AGO.search(out)
    assert _AGO.sub("<ago>", out) == _AGO.sub("<ago>", ref("collection_list.txt"))


def _sections(text: str) -> list[list[str]]:
    return [block.split("\n") for block in text.rstrip("\n").split("\n\n")]


def _section(text: str, title: str) -> list[str]:
    found = [s for s in _sections(text) if s[0] == title]
    assert found, f"no section {title!r} in:\n{text}"
    return found[0]


def test_status_sections_match_reference(small: Path, cli: Cli) -> None:
    import qmd

    out = ok(cli, "status")
    theirs = ref("status.txt")
    # We print the original's sections in the original's order.
    our_titles = [s[0] for s in _sections(out)]
    their_titles = [s[0] for s in _sections(theirs)]
    assert our_titles[0] == "QMD Status" and our_titles[1].startswith("Index: ")
    common = [t for t in our_titles[2:]]
    assert common == ["Documents", "AST Chunking", "Collections", "Examples", "Models", "Tips"]
    assert [t for t in their_titles if t in common] == common
    index_block = _sections(out)[1]
    assert index_block[0] == f"Index: {qmd.resolve_index(None).index_path}"  # the reference shortened it to ~
    assert re.fullmatch(r"Size:  \d+\.\d KB", index_block[1]) and re.fullmatch(r"Size:  \d+\.\d KB", _sections(theirs)[1][1])
    docs = _section(out, "Documents")
    assert docs[1] == _section(theirs, "Documents")[1] == "  Total:    7 files indexed"
    assert re.fullmatch(r"  Updated:  \d+[smhd] ago", docs[-1])
    assert "  Pending:  7 need embedding (run 'qmd embed')" in docs
    assert "  Pending:  7 need embedding (run 'qmd embed')" in _section(theirs, "Documents")
    models = _section(out, "Models")
    assert [line.split(":")[0].strip() for line in models[1:]] == ["Embedding", "Reranking", "Generation"]
    assert _section(out, "Collections")[:3] == _section(theirs, "Collections")[:3]
    assert _section(out, "Examples") == _section(theirs, "Examples")
    assert _section(out, "Tips")[:3] == _section(theirs, "Tips")[:3]


def test_status_collection_entry_matches_reference(small: Path, cli: Cli) -> None:
    ours = _AGO.sub("<ago>", "\n".join(_section(ok(cli, "status"), "Collections")))
    assert ours == _AGO.sub("<ago>", "\n".join(_section(ref("status.txt"), "Collections")))


def test_status_tips_match_reference(small: Path, cli: Cli) -> None:
    assert _section(ok(cli, "status"), "Tips") == _section(ref("status.txt"), "Tips")


# --- options -------------------------------------------------------------------------------

@pytest.mark.parametrize("fmt", ["json", "csv", "md", "xml", "files"])
def test_format_option_equals_shorthand_flag(small: Path, cli: Cli, fmt: str) -> None:
    long = ok(cli, "search", QUERY, "--format", fmt)
    assert long == ok(cli, "search", QUERY, f"--{fmt}")
    assert "bluegreen-rollout.md" in long


def test_format_cli_is_the_default(small: Path, cli: Cli) -> None:
    assert ok(cli, "search", QUERY, "--format", "cli") == ok(cli, "search", QUERY)


@pytest.mark.parametrize("flags", [("--json", "--csv"), ("--format", "md", "--xml"), ("--files", "--md")])
def test_two_formats_at_once_is_a_usage_error(small: Path, cli: Cli, flags: tuple[str, ...]) -> None:
    code, out, err = cli("search", QUERY, *flags)
    assert code == 2 and out == ""
    assert "one output format" in err and "Traceback" not in err


def test_same_format_twice_is_fine(small: Path, cli: Cli) -> None:
    assert ok(cli, "search", QUERY, "--format", "json", "--json") == ok(cli, "search", QUERY, "--json")


def test_unknown_format_is_a_usage_error(small: Path, cli: Cli) -> None:
    code, out, err = cli("search", QUERY, "--format", "yaml")
    assert code == 2 and out == "" and "yaml" in err


@pytest.mark.parametrize("n", ["0", "-3"])
def test_non_positive_n_is_a_usage_error(small: Path, cli: Cli, n: str) -> None:
    code, out, err = cli("search", QUERY, "-n", n)
    assert code == 2 and out == "" and "-n" in err


def test_n_limits_hits(small: Path, cli: Cli) -> None:
    assert len(ok(cli, "search", "the", "--files", "-n", "2").splitlines()) == 2
    assert len(ok(cli, "search", "the", "--files", "--all").splitlines()) > 2


def _check_numbered_snippet(snippet: str, source: Path) -> int:
    """Every line after the @@ header is `N: <line N of the file>`; returns how many."""
    header, *body = snippet.split("\n")
    m = re.fullmatch(r"@@ -(\d+),(\d+) @@ \((\d+) before, (\d+) after\)", header)
    assert m, header
    start, count = int(m.group(1)), int(m.group(2))
    file_lines = source.read_text().split("\n")
    assert len(body) == count
    for i, line in enumerate(body):
        assert line == f"{start + i}: {file_lines[start + i - 1]}"
    return count


def test_line_numbers_number_snippet_lines(small: Path, cli: Cli) -> None:
    plain = ok(cli, "search", "rollback")
    numbered = ok(cli, "search", "rollback", "--line-numbers")
    assert plain != numbered
    assert "\n17: If error rates rise, flip the load balancer back to blue." in numbered
    # The first line (path:line #docid) and the @@ header are unchanged; only snippet lines get numbers.
    assert numbered.split("\n")[:5] == plain.split("\n")[:5]
    hit = json.loads(ok(cli, "search", "rollback", "--json", "--line-numbers"))[0]
    assert _check_numbered_snippet(hit["snippet"], small / "bluegreen-rollout.md") >= 3
    # The original numbers the @@ header line itself as a file line; we never do.
    assert hit["snippet"].startswith("@@ -")


def test_full_path_prints_file_system_paths(small: Path, cli: Cli) -> None:
    real = small.resolve()
    files = ok(cli, "search", "rollback", "--files", "--full-path")
    # As the original: no docid field (the path is the identifier), the absolute real path
    # outside the working directory.
    assert _files_original(files) == f"0.61,{real}/bluegreen-rollout.md\n"
    out = ok(cli, "search", "rollback", "--full-path")
    # The cli and JSON keep the docid (the original drops it): it is how agents refer to hits.
    assert out.startswith(f"{real}/bluegreen-rollout.md:15 #9d4971\n")
    assert "qmd://" not in out
    hit = json.loads(ok(cli, "search", "rollback", "--json", "--full-path"))[0]
    assert hit["file"] == f"{real}/bluegreen-rollout.md" and Path(hit["file"]).is_file()
    got = ok(cli, "get", "small/travel-japan.md", "--full-path", "-l", "1")
    assert got == f"{real}/travel-japan.md  #5408da\n---\n\n1: # Travel Plan: Japan\n"


def test_full_path_is_relative_under_the_working_directory(small: Path, cli: Cli, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(small.parent)
    assert _files_original(ok(cli, "search", "rollback", "--files", "--full-path")) == "0.61,./corpus/bluegreen-rollout.md\n"
    assert json.loads(ok(cli, "search", "rollback", "--json", "--full-path"))[0]["file"] == "./corpus/bluegreen-rollout.md"
    assert ok(cli, "get", "#5408da", "--full-path", "-l", "1").startswith("./corpus/travel-japan.md  #5408da\n")
    rows = json.loads(ok(cli, "multi-get", "small/travel*.md", "--json", "--full-path", "-l", "1"))
    assert [r["file"] for r in rows] == ["./corpus/travel-japan.md"] and "docid" not in rows[0]


def test_repeated_collection_option(small: Path, cli: Cli) -> None:
    once = ok(cli, "search", "rollback", "--files", "-c", "small")
    twice = ok(cli, "search", "rollback", "--files", "-c", "small", "-c", "small")
    assert twice == once == ok(cli, "search", "rollback", "--files")
    assert _files_original(once) == "#9d4971,0.61,qmd://small/bluegreen-rollout.md\n"


# --- contexts ------------------------------------------------------------------------------

def test_collection_context_shows_with_every_hit(small: Path, cli: Cli) -> None:
    code, _, err = cli("context", "add", "qmd://small/", "Team runbooks and notes")
    assert code == 0, err
    ctx = "Team runbooks and notes"

    out = ok(cli, "search", QUERY)
    blocks = [b for b in out.split("qmd://small/")[1:]]
    assert len(blocks) >= 2
    for block in blocks:
        lines = block.split("\n")
        # Title, then Context, then the confidence where the original's Score is: the original's order.
        assert lines[1].startswith("Title: ") and lines[2] == f"Context: {ctx}" and lines[3].startswith("Confidence: ")
        assert lines[4] in ("", "Match:  some terms (not every word of the query)")  # ours marks the any-term fill

    hits = json.loads(ok(cli, "search", QUERY, "--json"))
    assert len(hits) >= 2 and all(h["context"] == ctx for h in hits)
    assert list(hits[0])[:6] == ["docid", "score", "file", "line", "title", "context"]

    for line in _files_original(ok(cli, "search", QUERY, "--files")).splitlines():
        assert line.endswith(f',"{ctx}"')
    rows = list(csv.DictReader(io.StringIO(ok(cli, "search", QUERY, "--csv"))))
    assert rows and all(r["context"] == ctx for r in rows)
    md = ok(cli, "search", QUERY, "--md")
    assert md.count(f"**docid:** `#9d4971`\n**context:** {ctx}\n") == 1 and md.count(f"**context:** {ctx}\n") == len(hits)
    assert ok(cli, "search", QUERY, "--xml").count(f'context="{ctx}"') == len(hits)
    assert ok(cli, "get", "small/travel-japan.md", "-l", "1") == f"qmd://small/travel-japan.md  #5408da\nFolder Context: {ctx}\n---\n\n1: # Travel Plan: Japan\n"


def test_a_context_is_inert_on_a_terminal(small: Path, cli: Cli) -> None:
    """A context comes from a config that may arrive with `git clone`; its escape sequences
    (a terminal title, a clipboard write) are shown as text, never sent raw (line breaks stay:
    the original prints a multi-level context on several lines)."""
    evil = "Runbooks\x1b]0;pwned\x07\x1b]52;c;Y3VybA==\x07\nFAKE: line"
    code, _, err = cli("context", "add", "qmd://small/", evil)
    assert code == 0, err
    for argv in (("search", QUERY), ("get", "small/travel-japan.md", "-l", "1"), ("context", "list")):
        out = ok(cli, *argv)
        assert "\x1b" not in out and "\x07" not in out, (argv, out)
        assert "Runbooks\\x1b]0;pwned\\x07" in out, (argv, out)
    assert json.loads(ok(cli, "search", QUERY, "--json"))[0]["context"] == evil  # data stays data


def test_sub_path_context_applies_only_below_it(tmp_path: Path, cli: Cli) -> None:
    root = tmp_path / "ctx"
    for rel, words in (("sub/deep.md", "below"), ("sub/more/deeper.md", "further below"), ("subway/beside.md", "beside"), ("top.md", "above")):
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_text(f"# {rel}\n\nsharedword {words}\n")
    assert cli("collection", "add", str(root), "--name", "ctx")[0] == 0
    assert cli("context", "add", "qmd://ctx/sub", "Notes in sub")[0] == 0

    by_file = {h["file"]: h for h in json.loads(ok(cli, "search", "sharedword", "--json"))}
    assert set(by_file) == {"qmd://ctx/sub/deep.md", "qmd://ctx/sub/more/deeper.md", "qmd://ctx/subway/beside.md", "qmd://ctx/top.md"}
    assert by_file["qmd://ctx/sub/deep.md"]["context"] == "Notes in sub"
    assert by_file["qmd://ctx/sub/more/deeper.md"]["context"] == "Notes in sub"
    assert "context" not in by_file["qmd://ctx/top.md"]
    assert "context" not in by_file["qmd://ctx/subway/beside.md"]  # a prefix of the name is not "below"

    # A collection-wide context joins it, general first, a blank line between (as the original).
    assert cli("context", "add", "qmd://ctx/", "Test notes")[0] == 0
    by_file = {h["file"]: h for h in json.loads(ok(cli, "search", "sharedword", "--json"))}
    assert by_file["qmd://ctx/sub/deep.md"]["context"] == "Test notes\n\nNotes in sub"
    assert by_file["qmd://ctx/top.md"]["context"] == "Test notes"
    cli_out = ok(cli, "search", "sharedword", "-c", "ctx")
    assert "Title: sub/deep.md\nContext: Test notes\n\nNotes in sub\nConfidence: " in cli_out
    assert "Title: top.md\nContext: Test notes\nConfidence: " in cli_out


def test_multi_get_of_a_list_prints_what_it_finds_and_names_what_it_does_not(small: Path, cli: Cli) -> None:
    """As the original: one missing name does not fail the list; the terminal hears of it on
    stderr, structured formats carry it as a skipped entry with the reason."""
    code, out, err = cli("multi-get", "small/nope.md,small/postgres-backup.md", "-l", "2")
    assert code == 0 and "small/postgres-backup.md" in out and "nope.md" not in out
    assert "skipped small/nope.md: document not found" in err
    rows = json.loads(ok(cli, "multi-get", "small/nope.md,small/postgres-backup.md", "--json"))
    assert [r["file"] for r in rows] == ["small/nope.md", "qmd://small/postgres-backup.md"]
    assert rows[0]["skipped"] is True and "document not found" in rows[0]["reason"] and "docid" not in rows[0]
    assert "body" in rows[1]
    code, out, err = cli("multi-get", "small/nope.md,small/gone.md")
    assert code == 1 and out == "" and "none of the 2 documents was found" in err
