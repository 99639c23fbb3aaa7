"""Check the paraphrase set: no paraphrase question shares a stemmed keyword with its answer.

A question's terms are its words minus qmd's stop-words, each stemmed by the same FTS5
tokenizer qmd indexes with (`porter unicode61`); the answer's terms are every stemmed
token of its path and whole file (front matter included: tags are searchable). A
paraphrase question passes when the two sets do not meet; a keyword question must share
at least one term. Prints each failure and exits 1 if there is one.

    .venv/bin/python bench/paraphrase_check.py
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

import apsw

REPO = Path(__file__).resolve().parent.parent
SET = REPO / "bench" / "data" / "paraphrase"
ROOTS = {"notes": REPO / "examples" / "notes", "paraphrase": SET / "notes"}


def stems(texts: list[str]) -> list[set[str]]:
    """The porter-stemmed FTS5 tokens of each text."""
    conn = apsw.Connection(":memory:")
    conn.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize = 'porter unicode61')")
    conn.execute("CREATE VIRTUAL TABLE v USING fts5vocab(t, 'instance')")
    for i, text in enumerate(texts):
        conn.execute("INSERT INTO t(rowid, x) VALUES (?, ?)", (i, text))
    out: list[set[str]] = [set() for _ in texts]
    for doc, term in conn.execute("SELECT doc, term FROM v"):
        out[doc].add(term)
    return out


def question_stems(question: str) -> set[str]:
    from qmd.search.syntax import STOPWORDS

    words = [w for w in re.findall(r"\w+", question.lower()) if w not in STOPWORDS]
    return set().union(*stems(words)) if words else set()


def answer_path(answer: str) -> Path:
    collection, _, rel = answer.partition("/")
    return ROOTS[collection] / rel


def shared(question: str, answer: str) -> set[str]:
    """Stemmed non-stop-word terms of `question` found in the answer's path or text."""
    path = answer_path(answer)
    (doc,) = stems([answer.replace("/", " ") + "\n" + path.read_text(encoding="utf-8")])
    return question_stems(question) & doc


def load() -> list[dict[str, str]]:
    return [json.loads(line) for line in (SET / "questions.jsonl").read_text(encoding="utf-8").splitlines() if line.strip()]


def problems() -> list[str]:
    out = []
    rows = load()
    notes = {f"{c}/{p.relative_to(root).as_posix()}" for c, root in ROOTS.items() for p in root.rglob("*.md")}
    for r in rows:
        if r["answer"] not in notes:
            out.append(f"{r['id']}: no note {r['answer']}")
            continue
        common = shared(r["query"], r["answer"])
        if r["kind"] == "paraphrase" and common:
            out.append(f"{r['id']}: shares {sorted(common)} with {r['answer']}: {r['query']}")
        if r["kind"] == "keyword" and not common:
            out.append(f"{r['id']}: keyword question shares nothing with {r['answer']}")
    answered = {r["answer"] for r in rows if r["kind"] == "paraphrase"}
    missing = sorted(n for n in notes if n.startswith("paraphrase/") and n not in answered)
    if missing:
        out.append(f"benchmark notes no paraphrase question answers: {missing}")
    return out


def main() -> int:
    sys.path.insert(0, str(REPO))
    rows = load()
    found = problems()
    for line in found:
        print(line)
    kinds = {k: sum(1 for r in rows if r["kind"] == k) for k in ("paraphrase", "keyword")}
    print(f"{kinds['paraphrase']} paraphrase and {kinds['keyword']} keyword questions; {len(found)} problems")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
