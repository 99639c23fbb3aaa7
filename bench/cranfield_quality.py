"""Ranking quality on Cranfield-1400: nDCG@10, Recall@10, MRR@10 of `store.search(q, limit=10)`.

Indexes cranfield/docs, runs the 225 questions, writes a run file (qid, docid, rank; docid
is the file name without .md) and scores it with the data dir's score.py against
qrels.tsv (graded, the -1 "source paper" codes excluded; see cranfield/README.md).
Target: nDCG@10 >= 0.37 (reference any-term BM25 with the same FTS5 setup: 0.371).
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import qmd

from _common import PYTHON, Report, Target, arg_parser, data_dir, isolated_home

K = 10


def load_questions(path: Path) -> list[tuple[str, str]]:
    rows = (line.split("\t", 1) for line in path.read_text(encoding="utf-8").splitlines() if "\t" in line)
    return [(qid.strip(), text.strip()) for qid, text in rows]


def score(score_py: Path, qrels: Path, run: Path) -> dict[str, float]:
    """Run score.py; parse `queries=N  nDCG@10=x  Recall@10=y  MRR@10=z`."""
    out = subprocess.run([PYTHON, str(score_py), str(qrels), str(run), str(K)], capture_output=True, text=True, check=True).stdout
    return {key: float(value) for key, value in (field.split("=") for field in out.split())}


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--run-out", metavar="PATH", help="also keep the run file at PATH")
    parser.add_argument("--backend", choices=["sqlite", "postgres", "both"], default="sqlite",
                        help="storage backend; both: each, and the nDCG@10 gap (target |gap| <= 0.01)")
    args = parser.parse_args()
    if args.backend == "sqlite":
        return run_one(args, "sqlite", None)
    from contextlib import nullcontext

    from _postgres import postgres_server

    with postgres_server() as url:
        if args.backend == "postgres":
            return run_one(args, "postgres", url)
        results = {b: run_one(args, b, url, keep=True) for b in ("sqlite", "postgres")}
    gap = results["postgres"]["nDCG@10"] - results["sqlite"]["nDCG@10"]  # type: ignore[index]
    report = Report("cranfield_quality_backends")
    for b, scores in results.items():
        report.row(f"{b} nDCG@10 / Recall@10 / MRR@10", " / ".join(f"{scores[k]:.4f}" for k in ("nDCG@10", "Recall@10", "MRR@10")))  # type: ignore[index]
    report.row("nDCG@10 gap (postgres - sqlite)", f"{gap:+.4f}")
    report.target(Target("|nDCG@10 gap|", abs(gap), 0.01, kind="max"))
    report.data = {"scores": results, "gap": gap}
    del nullcontext
    return report.finish(args.json)


def run_one(args, backend: str, url: str | None, keep: bool = False):  # type: ignore[no-untyped-def]
    from _postgres import backend_env

    data = data_dir()
    cran = data / "cranfield"
    questions = load_questions(cran / "queries.tsv")
    report = Report(f"cranfield_quality ({backend})")
    with isolated_home("cranfield") as tmp, backend_env(backend, url, "bench_cranfield"):
        run_path = tmp / "run.tsv"
        answered = all_terms = 0
        with qmd.Store(tmp / "index.sqlite", tmp / "index.yml") as store:
            store.add_collection(cran / "docs", name="cranfield", pattern="**/*.md")
            lines: list[str] = []
            for qid, text in questions:
                hits = store.search(text, limit=K)
                answered += bool(hits)
                all_terms += any(h.match == "all" for h in hits)
                lines.extend(f"{qid}\t{Path(h.path).stem}\t{rank}" for rank, h in enumerate(hits, 1))
        run_path.write_text("\n".join(lines) + "\n", encoding="utf-8")
        if args.run_out:
            Path(args.run_out).write_text(run_path.read_text(encoding="utf-8"), encoding="utf-8")
        scores = score(data / "score.py", cran / "qrels.tsv", run_path)
    report.row("questions", str(len(questions)))
    report.row("questions with at least one result", f"{answered} of {len(questions)}")
    report.row("questions with an all-terms hit", f"{all_terms} of {len(questions)}")
    for key in (f"nDCG@{K}", f"Recall@{K}", f"MRR@{K}"):
        report.row(key, f"{scores[key]:.4f}")
    report.row("scored queries (with >= 1 relevant doc)", str(int(scores["queries"])))
    report.target(Target(f"nDCG@{K}", scores[f"nDCG@{K}"], 0.37, kind="min"))
    report.data = {"scores": scores, "answered": answered, "all_terms": all_terms}
    if keep:
        report.finish(None)
        return scores
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
