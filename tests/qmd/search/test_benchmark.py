"""`qmd bench` metrics (same definitions as shared/benchmarks/score.py) and both modes end to end."""

from __future__ import annotations

import json
import math
from pathlib import Path

import pytest

from qmd.search.metrics import mrr_at, ndcg_at, precision_at, recall_at
from tests.support.run import qmd_env, run_qmd


def test_metrics() -> None:
    results = ["a", "x", "b", "y"]
    assert precision_at(results, {"a", "b"}, 2) == 0.5
    assert recall_at(results, {"a", "b"}, 1) == 0.5 and recall_at(results, {"a", "b"}, 3) == 1.0
    assert mrr_at(results, {"b"}) == pytest.approx(1 / 3) and mrr_at(results, {"z"}) == 0.0
    gains = {"a": 3, "b": 1, "c": 2}
    dcg = 3 / math.log2(2) + 1 / math.log2(4)
    idcg = 3 / math.log2(2) + 2 / math.log2(3) + 1 / math.log2(4)
    assert ndcg_at(results, gains) == pytest.approx(dcg / idcg)
    assert ndcg_at(["a", "a", "c", "b"], gains) == pytest.approx(1.0)  # duplicates count once, as score.py
    assert ndcg_at(results, {}) == 0.0


def test_bench_fixture_and_qrels_modes(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api.md").write_text("# API\n\nREST endpoints and versioning.\n")
    (docs / "cap.md").write_text("# CAP\n\nConsistency and availability under partitions.\n")
    (docs / "money.md").write_text("# Fundraising\n\nSeries A and burn rate.\n")
    env = {"QMD_EMBED_MODEL": str(tiny_models["embed"]), "QMD_RERANK_MODEL": str(tiny_models["rerank"])}
    assert run_qmd("collection", "add", str(docs), "--name", "eval", env=qmd_env(env)).returncode == 0
    assert run_qmd("embed", env=qmd_env(env)).returncode == 0
    fixture = tmp_path / "fixture.json"
    fixture.write_text(json.dumps({"collection": "eval", "queries": [
        {"id": "a", "query": "versioning", "expected_files": ["api.md"], "expected_in_top_k": 1},
        {"id": "b", "query": "burn rate", "expected_files": ["money.md"], "expected_in_top_k": 1},
    ]}))
    proc = run_qmd("bench", str(fixture), "--json", env=qmd_env(env))
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)  # the original's shape
    assert set(result) == {"timestamp", "fixture", "results", "summary"} and result["fixture"] == str(fixture)
    assert [r["id"] for r in result["results"]] == ["a", "b"]
    first = result["results"][0]["backends"]
    assert set(first) == {"bm25", "vector", "hybrid", "full"}
    assert first["bm25"]["mrr"] == 1.0 and first["bm25"]["recall_at_1"] == 1.0 and first["bm25"]["top_files"][0] == "api.md"
    assert first["bm25"]["matched_files"] == ["api.md"] and first["bm25"]["latency_ms"] > 0
    summary = result["summary"]
    assert summary["bm25"]["avg_mrr"] == 1.0 and set(summary["bm25"]) == {"avg_precision", "avg_recall", "avg_recall_at_1", "avg_recall_at_3", "avg_recall_at_5", "avg_mrr", "avg_f1", "avg_latency_ms"}
    table = run_qmd("bench", str(fixture), env=qmd_env(env))
    assert table.returncode == 0 and "Query" in table.stdout and "Summary:" in table.stdout and "MRR=" in table.stdout
    assert any(line.startswith("a ") and " bm25 " in line for line in table.stdout.splitlines())  # per query, per backend

    # no embeddings: vectors flagged unavailable, not a row of zeros
    no_vectors = {"QMD_EMBED_MODEL": str(tiny_models["embed_b"]), "QMD_RERANK_MODEL": str(tiny_models["rerank"])}
    flagged = json.loads(run_qmd("bench", str(fixture), "--json", env=qmd_env(no_vectors)).stdout)
    assert "unavailable" in flagged["summary"]["vector"] and "unavailable" in flagged["results"][0]["backends"]["vector"]
    assert "unavailable" in run_qmd("bench", str(fixture), env=qmd_env(no_vectors)).stdout

    # an unknown fixture collection: exit 1, naming the ones that exist
    fixture.write_text(json.dumps({"collection": "nope", "queries": [{"id": "a", "query": "x", "expected_files": ["api.md"]}]}))
    missing = run_qmd("bench", str(fixture), env=qmd_env(env))
    assert missing.returncode == 1 and "collection not found: nope" in missing.stderr and "eval" in missing.stderr
    (tmp_path / "q.tsv").write_text("1\tversioning\n2\tpartitions availability\n3\tunjudged\n")
    (tmp_path / "qrels.tsv").write_text("1\tapi\t2\n2\tcap\t1\n")
    proc = run_qmd("bench", "--queries", str(tmp_path / "q.tsv"), "--qrels", str(tmp_path / "qrels.tsv"), env=qmd_env(env))
    assert proc.returncode == 0, proc.stderr
    bm25 = next(line for line in proc.stdout.splitlines() if line.startswith("bm25"))
    assert bm25.split()[1:4] == ["1.000", "1.000", "1.000"]  # nDCG@10, Recall@10, MRR@10
    bad = run_qmd("bench", env=qmd_env(env))
    assert bad.returncode == 2


@pytest.mark.parametrize("which", ["queries", "qrels", "fixture"])
@pytest.mark.parametrize("kind", ["latin-1", "fifo"])
def test_bench_files_that_are_not_utf8_text_are_one_line(tmp_path: Path, which: str, kind: str) -> None:
    """A queries, qrels or fixture file in another encoding crashed `qmd bench` with exit 3
    (the session 21 red team); a FIFO blocked it. One line naming the file, exit 1."""
    docs = tmp_path / "docs"
    docs.mkdir()
    (docs / "api.md").write_text("# API\n\nREST endpoints and versioning.\n")
    assert run_qmd("collection", "add", str(docs), "--name", "eval").returncode == 0
    files = {"queries": tmp_path / "q.tsv", "qrels": tmp_path / "qrels.tsv", "fixture": tmp_path / "fixture.json"}
    files["queries"].write_text("1\tversioning\n")
    files["qrels"].write_text("1\tapi\t1\n")
    files["fixture"].write_text(json.dumps({"collection": "eval", "queries": [{"id": "a", "query": "versioning", "expected_files": ["api.md"]}]}))
    bad = files[which]
    bad.unlink()
    if kind == "fifo":
        import os

        os.mkfifo(bad)
    else:
        bad.write_bytes("1\tcaf\xe9 versioning\n".encode("latin-1") if which != "fixture" else b'{"collection": "caf\xe9"}')
    args = ["bench", str(files["fixture"])] if which == "fixture" else ["bench", "--queries", str(files["queries"]), "--qrels", str(files["qrels"])]
    proc = run_qmd(*args, timeout=60)
    assert proc.returncode == 1 and str(bad) in proc.stderr and "Unexpected error" not in proc.stderr, proc.stderr
    assert ("not UTF-8 text" if kind == "latin-1" else "not a regular file") in proc.stderr
