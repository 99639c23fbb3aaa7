"""Every reference qmd prints is one `get` and `multi-get` take back: the URI of a named
index (`qmd://c/p?index=NAME`, with `:LINE` after it) reads that index."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

import qmd
from qmd.core.errors import QmdError
from tests.support.run import qmd_env, run_qmd

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def demo(notes: Path) -> Path:
    """The notes indexed as index `demo` only (the default index stays empty)."""
    proc = run_qmd("--index", "demo", "collection", "add", str(notes), "--name", "notes")
    assert proc.returncode == 0, proc.stderr
    return notes


def test_a_printed_uri_of_a_named_index_reads_that_index(demo: Path) -> None:
    found = run_qmd("--index", "demo", "search", "rollback", "--files")
    uri = found.stdout.splitlines()[0].split(",")[2]
    assert uri == "qmd://notes/runbooks/deploy.md?index=demo", found.stdout
    for fast in ("1", "0"):  # the lean path and typer alike
        env = qmd_env({"QMD_FAST": fast})
        got = run_qmd("get", f"{uri}:5", "-l", "2", env=env)
        assert got.returncode == 0, got.stderr
        assert got.stdout.splitlines()[0].startswith("qmd://notes/runbooks/deploy.md?index=demo") and "5: ## Rollback" in got.stdout
        both = run_qmd("multi-get", f"{uri},qmd://notes/ideas.md?index=demo", "--json", env=env)
        assert both.returncode == 0, both.stderr
        assert '"title": "Deploy Runbook"' in both.stdout and "Some ideas" in both.stdout


def test_a_uri_of_another_index_than_the_chosen_one_is_refused(demo: Path) -> None:
    proc = run_qmd("--index", "other", "get", "qmd://notes/runbooks/deploy.md?index=demo")
    assert proc.returncode == 1 and "names index 'demo', --index says 'other'" in proc.stderr
    mixed = run_qmd("multi-get", "qmd://notes/ideas.md?index=demo,qmd://notes/ideas.md?index=work")
    assert mixed.returncode == 1 and "name 2 indexes" in mixed.stderr


def test_the_api_and_the_server_name_the_index_a_uri_is_of(demo: Path, tmp_path: Path) -> None:
    from qmd.serve.service import ToolService

    store = qmd.open_index("demo")
    with pytest.raises(QmdError, match="names index 'demo'"):
        store.get("qmd://notes/ideas.md?index=demo")
    service = ToolService(store, "demo", idle_s=0, log=lambda line: None)
    try:
        out = service.call("get", {"file": "qmd://notes/ideas.md?index=demo"})
        assert not out.is_error and out.structured and out.structured["text"].startswith("Some ideas")
        other = service.call("get", {"file": "qmd://notes/ideas.md?index=work"})
        assert other.is_error and "names index 'work'; this server reads index 'demo'" in other.text
        listed = service.call("multi_get", {"pattern": "qmd://notes/ideas.md?index=demo, notes/runbooks/deploy.md"})
        assert not listed.is_error and len(listed.structured["documents"]) == 2  # type: ignore[index]
    finally:
        service.close()


def test_a_did_you_mean_keeps_the_line_range_typed(tmp_path: Path, notes: Path) -> None:
    store = qmd.Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    store.add_collection(notes, name="notes")
    store.update()
    for typed, range_ in (("notes/runbooks/deplo.md", ":5:3"), ("qmd://notes/runbooks/deplo.md", ":7"), ("notes/runbooks/deplo.md", "")):
        with pytest.raises(QmdError) as caught:
            store.get(typed + range_)
        assert caught.value.message == f"document not found: {typed}{range_}"
        assert caught.value.cli_hint == f"did you mean: qmd://notes/runbooks/deploy.md{range_}"


# --- a line range per item of a multi-get list --------------------------------------------------

def test_multi_get_takes_a_line_range_per_item_in_every_format(cli: Cli, notes: Path) -> None:
    """`notes/a.md:10:5` in a comma list: from line 10, 5 lines (also `#docid:FROM`), each
    format saying which lines; the items without a range are whole, as before."""
    import csv
    import io
    import json
    import xml.etree.ElementTree as ET

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    docid = json.loads(cli("get", "notes/runbooks/deploy.md", "--json")[1])["docid"]
    pattern = "notes/runbooks/deploy.md:5:3,notes/ideas.md"
    code, out, err = cli("multi-get", pattern)
    assert code == 0, err
    assert "File: qmd://notes/runbooks/deploy.md  " + docid + "\nLines: 5-7 of 8\n" in out
    assert "\n5: ## Rollback\n6: \n7: Flip the load balancer back to blue.\n\n[... truncated 1 more lines]\n" in out
    assert "File: qmd://notes/ideas.md" in out and "1: Some ideas" in out
    deploy, ideas = json.loads(cli("multi-get", pattern, "--json")[1])
    assert (deploy["fromLine"], deploy["lines"], deploy["totalLines"]) == (5, 3, 8) and deploy["body"].startswith("5: ## Rollback\n")
    assert "fromLine" not in ideas and ideas["body"].startswith("1: Some ideas")
    root = ET.fromstring(cli("multi-get", pattern, "--xml")[1])
    assert root[0].find("lines").attrib == {"from": "5", "count": "3", "total": "8"} and root[1].find("lines") is None  # type: ignore[union-attr]
    assert "**Lines:** 5-7 of 8\n" in cli("multi-get", pattern, "--md")[1]
    rows = list(csv.DictReader(io.StringIO(cli("multi-get", pattern, "--csv")[1])))
    assert rows[0]["body"].startswith("5: ## Rollback\n") and rows[1]["body"].startswith("1: Some ideas")
    assert cli("multi-get", pattern, "--files")[1] == f"{docid},qmd://notes/runbooks/deploy.md\n" + cli("multi-get", "notes/ideas.md,notes/ideas.md", "--files")[1]
    # a docid with a range, alone or in a list; the same document twice with two ranges
    code, out, _ = cli("multi-get", f"{docid}:7", "--json")
    assert code == 0 and json.loads(out)[0]["body"] == "7: Flip the load balancer back to blue.\n8: "
    both = json.loads(cli("multi-get", f"notes/runbooks/deploy.md:1:1,{docid}:5:1", "--json")[1])
    assert [d["body"] for d in both] == ["1: # Deploy Runbook\n\n[... truncated 7 more lines]", "5: ## Rollback\n\n[... truncated 3 more lines]"]


def test_multi_get_ranges_that_find_nothing_are_skipped_with_the_reason(cli: Cli, notes: Path) -> None:
    import json

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    missing, past, ideas = json.loads(cli("multi-get", "notes/nope.md:3,notes/runbooks/deploy.md:99,notes/ideas.md", "--json")[1])
    assert missing["file"] == "notes/nope.md:3" and missing["skipped"] is True and "document not found" in missing["reason"]
    assert past["skipped"] is True and past["reason"] == "notes/runbooks/deploy.md has 8 lines; line 99 does not exist"
    assert ideas["body"].startswith("1: Some ideas")
    big = notes / "big.md"
    big.write_text("# Big\n\n" + "word " * 20000 + "\n")
    assert cli("update")[0] == 0
    whole, part = json.loads(cli("multi-get", "notes/big.md,notes/big.md:1:1", "--json")[1])
    assert whole["skipped"] is True and "notes/big.md:1:100" in whole["reason"]  # too big whole: the hint names a range
    assert part["body"] == "1: # Big\n\n[... truncated 3 more lines]"  # a range of it fits


def test_mcp_multi_get_takes_line_ranges(tmp_path: Path, notes: Path) -> None:
    from qmd.serve.service import ToolService

    store = qmd.Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    store.add_collection(notes, name="notes")
    service = ToolService(store, "index", idle_s=0, log=lambda line: None)
    try:
        out = service.call("multi_get", {"pattern": "notes/runbooks/deploy.md:5:3, notes/ideas.md", "lineNumbers": True})
        assert not out.is_error, out.text
        deploy, ideas = out.structured["documents"]  # type: ignore[index]
        assert (deploy["fromLine"], deploy["lines"], deploy["totalLines"]) == (5, 3, 8) and deploy["text"].startswith("5: ## Rollback\n")
        assert "fromLine" not in ideas and ideas["text"].startswith("1: Some ideas")
        assert "=== qmd://notes/runbooks/deploy.md #" in out.text and "— Deploy Runbook (lines 5-7 of 8)\n5: ## Rollback" in out.text
        listed = service.call("multi_get", {"pattern": "notes/nope.md:2, notes/ideas.md"})
        assert not listed.is_error and listed.structured["documents"][0]["file"] == "notes/nope.md:2"  # type: ignore[index]
    finally:
        service.close()


def test_get_of_zero_lines_prints_no_body_line(demo: Path) -> None:
    """`get FILE:1:0` and `get FILE -l 0` printed an empty "1: " line (issue 27): the header
    only, and in JSON no lines; one empty line asked for is still numbered."""
    for fast in ("1", "0"):
        env = qmd_env({"QMD_FAST": fast})
        for args in (["qmd://notes/runbooks/deploy.md?index=demo:1:0"], ["qmd://notes/runbooks/deploy.md?index=demo", "-l", "0"]):
            got = run_qmd("get", *args, env=env)
            assert got.returncode == 0, got.stderr
            assert got.stdout.splitlines() == ["qmd://notes/runbooks/deploy.md?index=demo  #" + got.stdout.split("#")[1].split()[0], "---"], got.stdout
            js = run_qmd("get", *args, "--json", env=env)
            assert '"lines": 0' in js.stdout and '"body": ""' in js.stdout, js.stdout
        blank = run_qmd("get", "qmd://notes/runbooks/deploy.md?index=demo:2:1", env=env)  # line 2 is empty
        assert blank.returncode == 0 and blank.stdout.splitlines()[-1] == "2: ", blank.stdout


def test_multi_get_of_zero_lines_prints_no_body_line(demo: Path) -> None:
    """`multi-get FILE:1:0` and `multi-get FILE -l 0` printed the same phantom empty "1: "
    line `get` no longer prints (issue 27): no line is numbered, the truncation note stays."""
    env = qmd_env()
    for args in (["qmd://notes/runbooks/deploy.md?index=demo:1:0"], ["qmd://notes/runbooks/deploy.md?index=demo", "-l", "0"]):
        got = run_qmd("multi-get", *args, env=env)
        assert got.returncode == 0, got.stderr
        assert "1: " not in got.stdout.splitlines() and "1:" not in got.stdout.splitlines(), got.stdout
        assert "more lines]" in got.stdout
        js = run_qmd("multi-get", *args, "--json", env=env)
        assert '"body": "[... truncated 8 more lines]"' in js.stdout, js.stdout
    one = run_qmd("multi-get", "qmd://notes/runbooks/deploy.md?index=demo:1:1", env=env)
    assert any(line.startswith("1: #") for line in one.stdout.splitlines()), one.stdout  # one line asked: numbered


@pytest.mark.parametrize("fast", ["1", "0"])
@pytest.mark.parametrize(("args", "flag"), [
    (["get", "qmd://notes/runbooks/deploy.md?index=demo", "-l", "-1"], "-l"),
    (["get", "qmd://notes/runbooks/deploy.md?index=demo", "--from", "-5"], "--from"),
    (["multi-get", "qmd://notes/runbooks/deploy.md?index=demo", "-l", "-1"], "-l"),
    (["multi-get", "qmd://notes/runbooks/deploy.md?index=demo", "--max-bytes", "-1"], "--max-bytes"),
])
def test_a_negative_count_is_a_usage_error(demo: Path, fast: str, args: list[str], flag: str) -> None:
    """`get -l -1` printed no line, `--from -5` line 1 and `--max-bytes -1` skipped every
    document 'over the -1-byte limit', all with exit 0: a negative count is refused, naming it."""
    got = run_qmd(*args, env=qmd_env({"QMD_FAST": fast}))
    assert got.returncode == 2 and got.stdout == "", got.stdout
    assert f"Invalid value for {flag}: must be 0 or more" in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_a_ranged_item_of_no_lines_says_none_is_shown(demo: Path, tmp_path: Path) -> None:
    """multi-get's `Lines:` header said `1-1 of 9` for `FILE:1:0` (issue 27), one line shown
    where none was; an empty line asked for is still `2-2`. The MCP tools say the same."""
    env = qmd_env()
    zero = run_qmd("multi-get", "qmd://notes/runbooks/deploy.md?index=demo:3:0", env=env)
    assert zero.returncode == 0, zero.stderr
    assert "Lines: 0 of 8, from line 3" in zero.stdout.splitlines(), zero.stdout
    blank = run_qmd("multi-get", "qmd://notes/runbooks/deploy.md?index=demo:2:1", "--md", env=env)
    assert "**Lines:** 2-2 of 8" in blank.stdout, blank.stdout  # line 2 is empty: still one line
    from qmd.serve.service import ToolService  # the MCP side of the same items

    store = qmd.Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    store.add_collection(demo, name="notes")
    service = ToolService(store, "index", idle_s=0, log=lambda line: None)
    try:
        got = service.call("get", {"file": "notes/runbooks/deploy.md", "fromLine": 3, "maxLines": 0})
        assert "(lines 0 of 8, from line 3)" in got.text, got.text
        listed = service.call("multi_get", {"pattern": "notes/runbooks/deploy.md:2:1"})
        assert "(lines 2-2 of 8)" in listed.text, listed.text
    finally:
        service.close()


@pytest.mark.parametrize("fast", ["1", "0"])
@pytest.mark.parametrize("ref", ["qmd://notes/runbooks/deploy.md?index=demo:-1", "qmd://notes/runbooks/deploy.md?index=demo:3:-2"])
def test_a_negative_line_in_a_reference_is_named(demo: Path, fast: str, ref: str) -> None:
    """`get FILE:-1` said "document not found" with a did-you-mean of the same file (issue 27):
    the negative line or count is named, with the form to use."""
    for command in ("get", "multi-get"):
        got = run_qmd(command, ref, env=qmd_env({"QMD_FAST": fast}))
        assert got.returncode == 1, (got.returncode, got.stdout, got.stderr)
        assert "line numbers start at 1" in got.stderr and "not found" not in got.stderr, got.stderr
        assert "FILE:FROM:COUNT" in got.stderr


@pytest.mark.parametrize("fast", ["1", "0"])
def test_a_line_number_of_thousands_of_digits_is_a_line_past_the_end(demo: Path, fast: str) -> None:
    """`FILE:` + 5,000 nines crashed with exit 3 (Python converts no decimal of over 4,300
    digits): any number past 10**18 reads as a line past the end, a count as the rest."""
    big = "9" * 5000
    env = qmd_env({"QMD_FAST": fast})
    got = run_qmd("--index", "demo", "get", f"notes/runbooks/deploy.md:{big}", env=env)
    assert got.returncode == 1 and "does not exist" in got.stderr and "Unexpected" not in got.stderr, got.stderr
    got = run_qmd("--index", "demo", "get", f"notes/runbooks/deploy.md:3:{big}", env=env)
    assert got.returncode == 0 and "3: How to ship" in got.stdout and got.stdout.rstrip().endswith("8:"), (got.stdout, got.stderr)
    got = run_qmd("--index", "demo", "multi-get", f"notes/runbooks/deploy.md:{big}", env=env)
    assert got.returncode in (0, 1) and "Unexpected" not in got.stderr and "Traceback" not in got.stderr, got.stderr


def test_only_ascii_digits_make_a_range() -> None:
    from qmd.store.refs import split_range

    assert split_range("a.md:3:2") == ("a.md", 3, 2)
    assert split_range("a.md:\u0663") == ("a.md:\u0663", None, None)  # ARABIC-INDIC DIGIT THREE: part of the name
    assert split_range("a.md:" + "9" * 30) == ("a.md", 10**18, None)


def test_multi_get_of_many_names_reads_the_documents_once(notes: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Each name was resolved with its own queries, and each missing one read every document
    for its suggestions (87 ms a name with 1,000 documents: an MCP client's list of thousands
    of names held the server for minutes). One read of the documents now serves every name,
    each answered as when resolved alone (the first 20 missing ones with suggestions)."""
    from qmd.store import refs

    with qmd.Store(tmp_path / "i" / "index.sqlite", tmp_path / "i" / "index.yml") as store:
        store.add_collection(notes, name="notes")
        (notes / "ideas.md").unlink()
        store.update()  # ideas.md: removed at an update
        docid = store.multi_get("notes/runbooks/postgres.md,notes/runbooks/deploy.md")[0].docid
        names = ["notes/runbooks/deploy.md", "notes/runbooks/deplo.md", "ideas.md", "qmd://notes/ideas.md", docid, "#abcdef0", "qmd://notes/nope.md",
                 "runbooks/postgres.md:3:1", "qmd://other/x.md"]
        backend, colls = store.backend, store._state.collections()  # noqa: SLF001 - the per-name answer to compare with

        def alone(name: str) -> str:
            try:
                row = refs.resolve(backend, colls, refs.split_range(name)[0])
            except qmd.QmdError as exc:
                return exc.message + (f" ({exc.cli_hint})" if exc.cli_hint else "")
            return f"{row.collection}/{row.path}"

        expected = [alone(n) for n in names]
        assert any("did you mean" in e for e in expected) and any("was removed" in e for e in expected)
        reads = []
        real = type(backend).find
        monkeypatch.setattr(type(backend), "find", lambda self, **kw: reads.append(kw) or real(self, **kw))
        items = store.multi_get(",".join(names + [f"gone{i}.md" for i in range(300)]))
        assert len(reads) <= 2, len(reads)
        got = [i.skipped if i.skipped else f"{i.collection}/{i.path}" for i in items[: len(names)]]
        assert got == expected
        assert len(items) == len(names) + 300 and all("document not found: gone" in i.skipped for i in items[len(names) :])
