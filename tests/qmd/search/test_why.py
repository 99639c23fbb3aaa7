"""`query --why REF` (issue 28): where a document stood in each stage, and what cut it; CLI and MCP."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import qmd
from qmd.serve.service import ToolService

Cli = Callable[..., tuple[int, str, str]]
QUESTION = "restore the database with pg_restore"


@pytest.fixture
def store(notes: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, index_backend: str) -> Iterator[qmd.Store]:
    """Both collections embedded, on each backend (`index_backend`: --why's SQL runs on both)."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_RERANK_MODEL", str(tiny_models["rerank"]))
    monkeypatch.setenv("QMD_GENERATE_MODEL", str(tmp_path / "none.gguf"))
    archive = tmp_path / "archive"
    archive.mkdir()
    (archive / "old-restore.md").write_text("# Old restore notes\n\nWe used to restore the database by hand with pg_restore.\n")
    with qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml") as s:
        s.add_collection(notes, name="notes")
        s.add_collection(archive, name="archive")
        s.embed()
        yield s


def test_a_shown_document_says_its_place_in_every_stage(store: qmd.Store) -> None:
    result = store.query(QUESTION, why="notes/runbooks/postgres.md", rerank=False)
    why = result.why
    assert why is not None and why["document"]["uri"] == "qmd://notes/runbooks/postgres.md"
    at = [h.uri for h in result.hits].index("qmd://notes/runbooks/postgres.md") + 1
    assert why["shown"] and why["verdict"] == f"shown at rank {at} of {len(result.hits)}"
    lists = {x["list"]: x for x in why["lists"]}
    by_keywords = [h.uri for h in store.search(QUESTION, limit=20)]
    assert lists["bm25:query"]["rank"] == by_keywords.index("qmd://notes/runbooks/postgres.md") + 1 and lists["bm25:query"]["score"] > 0
    assert lists["vec:query"]["rank"] is not None and -1 <= lists["vec:query"]["score"] <= 1
    assert why["fused"]["rank"] >= 1 and why["final"]["rank"] == at and why["rerank"] == {"note": "off"}
    assert why["vectors"]["state"] == "embedded" and why["vectors"]["chunks"][0] == {"seq": 0, "lines": "1-7", "state": "embedded"}
    shown = next(h for h in result.hits if h.uri == "qmd://notes/runbooks/postgres.md")
    assert why["confidence"] == shown.confidence and why["threshold"] == result.threshold  # the hit's confidence and the threshold in force (issue 28)
    assert store.query(QUESTION, rerank=False).why is None  # nothing asked, nothing done


def test_what_cut_a_document(store: qmd.Store, notes: Path) -> None:
    full = store.query(QUESTION, rerank=False, limit=10)
    second = full.hits[1].uri
    cut = store.query(QUESTION, rerank=False, limit=1, why=second).why
    assert cut is not None and not cut["shown"] and cut["verdict"] == "ranked 2, below the 1 results asked for (-n)"
    reranked = store.query(QUESTION, limit=1, candidates=1, why=second).why  # the reranker reads the fused top 1 only
    assert reranked is not None and reranked["verdict"].startswith("cut by the candidate limit: fused rank ")
    assert reranked["rerank"]["note"].startswith("not read: fused rank")
    scoped = store.query(QUESTION, collections=["notes"], why="qmd://archive/old-restore.md").why
    assert scoped is not None and scoped["verdict"] == "not searched: its collection 'archive' is not among those searched (notes); add -c archive"
    assert {x["list"]: x["rank"] for x in scoped["lists"]}["bm25:query"] is not None  # where it would have stood
    filtered = store.query(QUESTION, since="2999-01-01", why="notes/runbooks/postgres.md", rerank=False).why
    assert filtered is not None and filtered["verdict"].startswith("left out by the filter: ")
    missing = store.query(QUESTION, why="notes/nope.md").why
    assert missing is not None and missing["document"] is None and missing["verdict"].startswith("not in the index: document not found")
    words = store.query(QUESTION, why="notes/ideas.md", rerank=False).why
    assert words is not None and {x["list"]: x["note"] for x in words["lists"]}["bm25:query"] == "the document has none of its words"


def test_an_edited_document_has_pending_and_orphaned_chunks(store: qmd.Store, notes: Path) -> None:
    path = notes / "runbooks" / "postgres.md"
    path.write_text(path.read_text() + "\nAsk the DBA on call before a restore.\n")
    store.update()
    why = store.query(QUESTION, why=str(path), rerank=False).why
    assert why is not None
    vectors = why["vectors"]
    assert vectors["state"] == "pending" and vectors["chunks"] and {c["state"] for c in vectors["chunks"]} == {"pending"}
    assert vectors["orphaned"] and {c["state"] for c in vectors["orphaned"]} == {"orphaned"}  # the earlier version's chunks
    assert {x["list"]: x["note"] for x in why["lists"]}["vec:query"] == "no vectors for its current content: counted at its keyword rank"
    assert any(name.startswith("vec:query") for name, *_ in (tuple(x.values()) for x in why["fused"]["lists"]))
    assert store.query(QUESTION, rerank=False).pending == 1


def test_cli_why_prints_under_the_hits_or_beside_a_format(cli: Cli, store: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INDEX_PATH", str(store.index_path))
    monkeypatch.setenv("QMD_CONFIG_DIR", str(store.config_path.parent))
    code, out, err = cli("query", QUESTION, "--no-rerank", "--why", "#" + store.search("pg_restore")[0].docid)
    assert code == 0, err
    assert "\nWhy qmd://" in out and "  fused: rank " in out
    code, out, err = cli("query", QUESTION, "--no-rerank", "--json", "--why", "qmd://notes/runbooks/postgres.md")
    assert code == 0 and json.loads(out) and "Why qmd://notes/runbooks/postgres.md: shown at rank" in err
    code, _, err = cli("query", QUESTION, "--why", " ")
    assert code == 2 and "--why" in err


def test_mcp_query_takes_why_and_says_what_lacks_vectors(store: qmd.Store, notes: Path) -> None:
    svc = ToolService(store, "index", idle_s=0, log=lambda line: None).start()
    try:
        out = svc.call("query", {"query": QUESTION, "why": "notes/runbooks/postgres.md", "rerank": False})
        assert not out.is_error and out.structured is not None
        assert out.structured["why"]["document"]["uri"] == "qmd://notes/runbooks/postgres.md"
        assert "Why qmd://notes/runbooks/postgres.md: shown at rank" in out.text
        assert svc.call("query", {"query": QUESTION, "why": ""}).is_error
        assert "pending" not in out.structured and "changed since the last embed" not in out.text
        path = notes / "runbooks" / "postgres.md"
        path.write_text(path.read_text() + "\nAsk the DBA on call before a restore.\n")
        store.update()
        for _ in range(2):  # said on every answer while it holds, not once per server as a notice
            out = svc.call("query", {"query": QUESTION, "rerank": False})
            assert out.structured is not None and out.structured["pending"] == 1
            assert "Note: 1 document changed since the last embed (run qmd embed): its new text is found by keywords, not yet by meaning." in out.text
    finally:
        svc.close()


def test_a_keyword_match_below_the_lists_cut_is_not_called_no_match(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A document every list ranked, but below the hits it keeps, was told 'in none of the
    query's lists: no keyword match' while its own list entry gave its rank: the verdict says the cut."""
    for role in ("EMBED", "RERANK", "GENERATE"):
        monkeypatch.setenv(f"QMD_{role}_MODEL", str(tmp_path / "none.gguf"))
    notes = tmp_path / "many"
    notes.mkdir()
    for i in range(30):
        (notes / f"n{i:02d}.md").write_text(f"# Note {i}\n\n" + "rollback " * (40 - i) + "filler " * (20 * i) + "\n")
    with qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml") as s:
        s.add_collection(notes, name="many")
        why = s.query("rollback", why="many/n29.md", rerank=False).why
    assert why is not None and not why["shown"]
    ranks = [x["rank"] for x in why["lists"] if x["rank"] is not None]
    assert ranks and "no keyword match" not in why["verdict"], why
    assert why["verdict"].startswith("in none of the query's lists as kept: ") and f"rank {ranks[0]}" in why["verdict"], why["verdict"]
