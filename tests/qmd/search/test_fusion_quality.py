"""Deterministic quality gate for the hybrid fusion: the paraphrase set with MiniLM embeddings.

bench/data/paraphrase holds 43 questions sharing no stemmed keyword with their answer and
10 keyword questions, over examples/notes plus 20 benchmark notes (bench/fusion_bench.py
has every set and model). Here, with all-MiniLM-L6-v2 and rerank and expansion off,
`query` must be at least as good as `search` and as `vsearch` on hit@1 and MRR@10, and
answer every keyword question first. Quality only: nothing here is timed.
"""

from __future__ import annotations

import importlib.util
import json
import statistics
from pathlib import Path

import pytest

import qmd
from qmd.search.metrics import mrr_at

REPO = Path(__file__).resolve().parents[3]
SET = REPO / "bench" / "data" / "paraphrase"


def load_check(name: str = "paraphrase_check"):  # type: ignore[no-untyped-def]
    spec = importlib.util.spec_from_file_location(name, REPO / "bench" / f"{name}.py")
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_paraphrase_questions_share_no_keyword_with_their_answer() -> None:
    check = load_check()
    rows = check.load()
    assert sum(r["kind"] == "paraphrase" for r in rows) >= 40 and sum(r["kind"] == "keyword" for r in rows) == 10
    assert len(list((SET / "notes").rglob("*.md"))) == 20
    assert check.problems() == []


def test_trust_set_is_sound(monkeypatch: pytest.MonkeyPatch) -> None:
    """bench/data/trust (issue 28): kinds and sizes as its README says, every row passes trust_check."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))  # trust_check imports its sibling paraphrase_check
    check = load_check("trust_check")
    rows = check.load()
    kinds = [r["kind"] for r in rows]
    assert kinds.count("unanswerable") >= 25 and len(rows) - kinds.count("unanswerable") >= 60
    assert check.problems(rows) == []
    # the checker itself: a shared stem is found, stop-words are not terms
    assert check.shared("restoring backups", "notes/runbooks/postgres-backup-restore.md") == {"restor", "backup"}
    assert check.shared("how do we undo a bad release?", "notes/runbooks/blue-green-deploy.md") == set()


@pytest.fixture(scope="module")
def runs(minilm_gguf: Path, tmp_path_factory: pytest.TempPathFactory) -> dict[str, list[tuple[str, str, list[str]]]]:
    """{method: [(kind, answer, top-10 keys)]} for every question of the set."""
    root = tmp_path_factory.mktemp("paraphrase-gate")
    mp = pytest.MonkeyPatch()
    mp.setenv("QMD_EMBED_MODEL", str(minilm_gguf))
    mp.setenv("QMD_RERANK_MODEL", str(root / "none.gguf"))
    mp.setenv("QMD_GENERATE_MODEL", str(root / "none.gguf"))
    try:
        store = qmd.Store(root / "index.sqlite", root / "index.yml")
        store.add_collection(REPO / "examples" / "notes", name="notes")
        store.add_collection(SET / "notes", name="paraphrase")
        store.embed()
        out: dict[str, list[tuple[str, str, list[str]]]] = {"search": [], "vsearch": [], "query": []}
        rows = [json.loads(line) for line in (SET / "questions.jsonl").read_text().splitlines() if line.strip()]
        for r in rows:
            got = {
                "search": store.search(r["query"], limit=10),
                "vsearch": store.vsearch(r["query"], limit=10).hits,
                "query": store.query(r["query"], limit=10, rerank=False, expand=False).hits,
            }
            for method, hits in got.items():
                out[method].append((r["kind"], r["answer"], [f"{h.collection}/{h.path}" for h in hits]))
        store.close()
    finally:
        mp.undo()
    return out


def scores(rows: list[tuple[str, str, list[str]]], kind: str | None = None) -> tuple[float, float]:
    picked = [(a, keys) for k, a, keys in rows if kind is None or k == kind]
    return statistics.fmean(float(bool(keys) and keys[0] == a) for a, keys in picked), statistics.fmean(mrr_at(keys, {a}, 10) for a, keys in picked)


@pytest.mark.parametrize("kind", [None, "paraphrase"])
@pytest.mark.slow
def test_query_is_at_least_its_best_signal(runs: dict[str, list[tuple[str, str, list[str]]]], kind: str | None) -> None:
    (h_q, m_q), (h_b, m_b), (h_v, m_v) = (scores(runs[m], kind) for m in ("query", "search", "vsearch"))
    assert h_q >= max(h_b, h_v), (h_q, h_b, h_v)
    assert m_q >= max(m_b, m_v), (m_q, m_b, m_v)


@pytest.mark.slow
def test_keyword_questions_all_first(runs: dict[str, list[tuple[str, str, list[str]]]]) -> None:
    assert scores(runs["query"], "keyword") == (1.0, 1.0)
    assert scores(runs["search"], "keyword") == (1.0, 1.0)
