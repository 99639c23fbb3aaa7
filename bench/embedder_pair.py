"""A second embedder's vector list fused into `query` (issue 29), offline on captured lists.

Reads two `fusion_bench.py --dump` files of the same sets, each from one embedding model (or
one chunk setting): per question, the first run's captured lists (BM25, its vector list,
the feedback list) and the second run's vector list. Rankings, same questions, scored as
fusion_bench scores them:

- "first" / "second": each run's own `query` (fusion.fuse_lists of its lists);
- "both": the first run's lists plus the second's vector list at the same weight;
- "both, halved": the two vector lists at half weight each (vectors weigh as before);
- "vsearch first", "vsearch second", "vsearch both": the vector lists alone, and both fused.

The second model's cost is its embedding time (fusion_bench prints it) plus one query
embedding per question.

    .venv/bin/python bench/embedder_pair.py FIRST.json SECOND.json [--per-query]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from fusion_bench import Question, mean, metrics

METHODS = ("first", "second", "both", "both, halved", "vsearch first", "vsearch second", "vsearch both")


def _lists(rows: list[list[object]]) -> list:  # type: ignore[type-arg]
    from qmd.search.fusion import RankedList

    return [RankedList(str(n), float(w), list(k), list(s), str(kind), int(ex), list(cov)) for n, w, k, s, kind, ex, cov in rows]  # type: ignore[arg-type,call-overload]


def rankings(first: list, second: list) -> dict[str, list[str]]:  # type: ignore[type-arg]
    """Each method's top 10 for one question (see the module doc)."""
    from qmd.search.fusion import RankedList, fuse_lists

    def replace(x: RankedList, name: str | None = None, weight: float | None = None) -> RankedList:
        return RankedList(x.name if name is None else name, x.weight if weight is None else weight, x.keys, x.scores, x.kind, x.exact, x.coverage)

    def top(lists: list) -> list[str]:  # type: ignore[type-arg]
        return [str(f.key) for f in fuse_lists(lists)][:10]

    vec_a = [x for x in first if x.kind == "vector"]
    vec_b = [replace(x, name=x.name + " (second)") for x in second if x.kind == "vector"]
    halved = [replace(x, weight=x.weight / 2) if x.kind == "vector" else x for x in first] + [replace(x, weight=x.weight / 2) for x in vec_b]
    return {
        "first": top(first),
        "second": top(second),
        "both": top(first + vec_b),
        "both, halved": top(halved),
        "vsearch first": top(vec_a),
        "vsearch second": top(vec_b),
        "vsearch both": top(vec_a + vec_b),
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("first")
    parser.add_argument("second")
    parser.add_argument("--per-query", action="store_true")
    parser.add_argument("--json", dest="json_path")
    args = parser.parse_args()
    a, b = json.loads(Path(args.first).read_text()), json.loads(Path(args.second).read_text())
    by_set = lambda dump: {k.rpartition("/")[2]: (k.rpartition("/")[0], v) for k, v in dump.items()}  # noqa: E731
    sa, sb = by_set(a), by_set(b)
    out: dict[str, object] = {}
    for name in [n for n in sa if n in sb]:
        (la, qa), (lb, qb) = sa[name], sb[name]
        second = {q["id"]: q for q in qb}
        runs = []
        for q in qa:
            question = Question(q["id"], q["text"], q["group"], q["relevant"])
            ranked = rankings(_lists(q["lists"]), _lists(second[q["id"]]["lists"]))
            if ranked["first"] != q["ranked"]["qmd"][:10]:
                sys.exit(f"{name} {q['id']}: the dump's query answer differs from the rule applied offline")
            runs.append((question, ranked))
        groups = {"all": runs} | ({g: [r for r in runs if r[0].group == g] for g in ("paraphrase", "keyword")} if name == "paraphrase" else {})
        print(f"\n{name}: first = {la}, second = {lb}")
        for g, rs in groups.items():
            for m in METHODS:
                rows = [metrics(ranked[m], q, False) for q, ranked in rs]
                hit, mrr = mean(rows, "hit@1"), mean(rows, "mrr")
                out[f"{name}/{g}/{m}"] = {"hit@1": hit, "mrr": mrr, "n": len(rows)}
                print(f"  {name + ('' if g == 'all' else '/' + g):<22} {m:<16} {round(hit * len(rows)):>3}/{len(rows):<3} {hit:.2f} {mrr:7.3f}")
        if args.per_query:
            for q, ranked in runs:
                ranks = {m: next((i for i, k in enumerate(ranked[m], 1) if k in q.relevant), None) for m in METHODS}
                print("    " + " ".join(f"{m.replace(' ', '-')}={ranks[m] or '-'}" for m in METHODS) + f"  {q.id} {q.text[:60]}")
    if args.json_path:
        Path(args.json_path).write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
