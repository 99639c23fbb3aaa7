"""Deterministic quality gate: BM25 on Cranfield (skips where the benchmark data is absent)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

import qmd
from tests.support.paths import BENCH_DATA

CRANFIELD = BENCH_DATA / "cranfield"


@pytest.mark.skipif(not (CRANFIELD / "docs").is_dir(), reason=f"benchmark data not found at {CRANFIELD} (set QMD_BENCH_DATA)")
def test_cranfield_bm25_ndcg(tmp_path: Path) -> None:
    store = qmd.Store(tmp_path / "cran.sqlite")
    store.add_collection(CRANFIELD / "docs", name="cran")
    run = tmp_path / "run.tsv"
    answered = 0
    with run.open("w") as fh:
        for line in (CRANFIELD / "queries.tsv").read_text().splitlines():
            qid, question = line.split("\t", 1)
            hits = store.search(question, limit=10)
            answered += bool(hits)
            for rank, hit in enumerate(hits, 1):
                fh.write(f"{qid}\t{Path(hit.path).stem}\t{rank}\n")
    assert answered == 225  # the original answers 10 of 225 (all-terms AND only)
    proc = subprocess.run(
        [sys.executable, str(BENCH_DATA / "score.py"), str(CRANFIELD / "qrels.tsv"), str(run)], capture_output=True, text=True, check=True
    )
    fields = dict(part.split("=") for part in proc.stdout.split() if "=" in part)
    assert float(fields["nDCG@10"]) >= 0.37, proc.stdout
