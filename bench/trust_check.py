"""Check the trust set (bench/data/trust/questions.jsonl): kinds, answers, splits, novelty.

Answerable questions (their `answer` is a note, `notes/...` for examples/notes or
`paraphrase/...` for bench/data/paraphrase/notes):
- paraphrase: shares no stemmed keyword with its answer (path and whole file), as
  paraphrase_check.py defines it;
- keyword: shares at least one;
- two-facts: its `facts` are two different strings, each found verbatim in the answer.

Unanswerable questions (`answer` null) cannot be proved unanswerable by a script: each was
checked by reading every note (see bench/data/trust/README.md) and names the `closest` note
and `why` it does not answer. The script checks what makes them plausible: a question
(ends with "?") sharing at least one stemmed keyword with its closest note, so an engine
matching words finds that note.

Every question is new (not a question of the paraphrase set, no two alike), and its `split`
is the one the fixed rule gives (`split_of`). `--list` prints the unanswerable questions
with their closest note and why. Exits 1 on any problem.

    .venv/bin/python bench/trust_check.py [--list]
"""

from __future__ import annotations

import argparse
import hashlib
import json
import math
import re
import sys
from pathlib import Path
from typing import Any

from paraphrase_check import REPO, ROOTS, answer_path, shared

TRUST = REPO / "bench" / "data" / "trust"
QUESTIONS = TRUST / "questions.jsonl"
ANSWERABLE = ("paraphrase", "keyword", "two-facts")
KINDS = (*ANSWERABLE, "unanswerable")
SPLITS = ("fit", "held-out")
MIN_ANSWERABLE, MIN_UNANSWERABLE = 60, 25


def load(path: Path = QUESTIONS) -> list[dict[str, Any]]:
    return [json.loads(line) for line in path.read_text(encoding="utf-8").splitlines() if line.strip()]


def split_of(rows: list[dict[str, Any]]) -> dict[str, str]:
    """The fixed split rule: within each kind, order the ids by the SHA-256 of the id (hex);
    the first half (rounded up) is "fit", the rest "held-out"."""
    out: dict[str, str] = {}
    for kind in KINDS:
        ids = sorted((r["id"] for r in rows if r["kind"] == kind), key=lambda i: hashlib.sha256(i.encode()).hexdigest())
        cut = math.ceil(len(ids) / 2)
        out |= {i: SPLITS[0] if n < cut else SPLITS[1] for n, i in enumerate(ids)}
    return out


def _normal(text: str) -> str:
    return " ".join(re.findall(r"\w+", text.lower()))


def problems(rows: list[dict[str, Any]]) -> list[str]:
    out: list[str] = []
    notes = {f"{c}/{p.relative_to(root).as_posix()}" for c, root in ROOTS.items() for p in root.rglob("*.md")}
    ids = [r["id"] for r in rows]
    out += [f"{i}: id used twice" for i in sorted({i for i in ids if ids.count(i) > 1})]
    old = {_normal(r["query"]) for r in load(REPO / "bench" / "data" / "paraphrase" / "questions.jsonl")}
    seen: dict[str, str] = {}
    rule = split_of(rows)
    for r in rows:
        rid, kind, query = r["id"], r.get("kind"), r["query"]
        if kind not in KINDS:
            out.append(f"{rid}: kind {kind!r} is not one of {', '.join(KINDS)}")
            continue
        if r.get("split") != rule[rid]:
            out.append(f"{rid}: split {r.get('split')!r}, the rule gives {rule[rid]!r}")
        norm = _normal(query)
        if norm in old:
            out.append(f"{rid}: already a question of the paraphrase set: {query}")
        if norm in seen:
            out.append(f"{rid}: the same question as {seen[norm]}")
        seen[norm] = rid
        if kind == "unanswerable":
            out += _unanswerable(r, notes)
            continue
        if r.get("answer") not in notes:
            out.append(f"{rid}: no note {r.get('answer')}")
            continue
        common = shared(query, r["answer"])
        if kind == "paraphrase" and common:
            out.append(f"{rid}: shares {sorted(common)} with {r['answer']}: {query}")
        if kind == "keyword" and not common:
            out.append(f"{rid}: keyword question shares nothing with {r['answer']}")
        if kind == "two-facts":
            facts = r.get("facts") or []
            text = answer_path(r["answer"]).read_text(encoding="utf-8")
            if len(facts) != 2 or facts[0] == facts[1]:
                out.append(f"{rid}: a two-facts question needs two different facts, has {facts}")
            out += [f"{rid}: fact not in {r['answer']}: {f!r}" for f in facts if f not in text]
    counts = {k: sum(1 for r in rows if r.get("kind") == k) for k in KINDS}
    if sum(counts[k] for k in ANSWERABLE) < MIN_ANSWERABLE:
        out.append(f"only {sum(counts[k] for k in ANSWERABLE)} answerable questions (at least {MIN_ANSWERABLE})")
    if counts["unanswerable"] < MIN_UNANSWERABLE:
        out.append(f"only {counts['unanswerable']} unanswerable questions (at least {MIN_UNANSWERABLE})")
    return out


def _unanswerable(r: dict[str, Any], notes: set[str]) -> list[str]:
    rid, query, closest = r["id"], r["query"], r.get("closest")
    if r.get("answer") is not None:
        return [f"{rid}: an unanswerable question has answer null, not {r['answer']!r}"]
    if closest not in notes:
        return [f"{rid}: closest note {closest!r} does not exist"]
    out = []
    if not str(r.get("why") or "").strip():
        out.append(f"{rid}: say why {closest} does not answer it")
    if not query.rstrip().endswith("?"):
        out.append(f"{rid}: not phrased as a question: {query}")
    if not shared(query, closest):
        out.append(f"{rid}: shares no keyword with its closest note {closest}: not the notes' vocabulary")
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--list", action="store_true", help="print each unanswerable question, its closest note and why it does not answer")
    args = parser.parse_args()
    sys.path.insert(0, str(REPO))
    rows = load()
    found = problems(rows)
    if args.list:
        for r in rows:
            if r["kind"] == "unanswerable":
                print(f"{r['id']} [{r['split']}] {r['query']}\n    closest: {r['closest']}\n    why not: {r['why']}")
    for line in found:
        print(line)
    counts = ", ".join(f"{sum(1 for r in rows if r['kind'] == k)} {k}" for k in KINDS)
    print(f"{counts} ({sum(1 for r in rows if r.get('split') == 'fit')} fit, {sum(1 for r in rows if r.get('split') == 'held-out')} held-out); {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
