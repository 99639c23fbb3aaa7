"""Every reference qmd prints is one `get` and `multi-get` take back: the URI of a named
index (`qmd://c/p?index=NAME`, with `:LINE` after it) reads that index."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmd
from qmd.core.errors import QmdError
from tests.support.run import qmd_env, run_qmd


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
