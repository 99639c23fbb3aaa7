"""A hybrid query's vector sub-queries (issue 31): k of them searched one by one vs in one pass.

`qmd query` embeds the question and each vec/hyde line (typed, or the expansion's) and asks
the index for each one's nearest documents (limit 20, the hybrid list depth). Before, one
`nearest_documents` a sub-query (sqlite-vec's KNN: every vector read again); after, one
`nearest_many` for all of them. For each size x dims: N one-chunk documents of clustered
unit vectors (bench/ann_bench.py's generator and loader; 10% of them in collection `ten`),
written with QMD_VECTOR_INDEX=exact; the exact search timed, then the approximate index built
and the approximate search timed. The baseline is `--before REV`'s vectors.py (default
`main`) with that revision's approx.py, loaded beside the current ones (bench/scope_bench.py's
`before_module`) on the same index; before and after interleaved, the order rotating, each round drawing fresh queries.

Reported per size, search and scope: p50 of 1, 3 and 5 sub-queries, before and after, the
ratio k / one in each (the figure issue 31 asks about: 5.0x when each sub-query repeats the
scan), and whether after's answers equal before's (document ids; scores to 1e-6).
Target: 5 sub-queries / one <= 2.0x with the exact search at the largest size run.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
import types

import numpy as np

import qmd
from qmd.backends.sqlite import approx

from _common import REPO, Report, Target, arg_parser, isolated_home, ms, p50
from ann_bench import build, vectors
from scope_bench import before_module

COUNTS = (1, 3, 5)
DEPTH = 20  # qmd/search/hybrid.py LIST_DEPTH


def before(rev: str) -> types.ModuleType:
    """`rev`'s SQLite vectors.py, its approx.py (also `rev`'s) in place of the current one."""
    old = before_module(rev, "sqlite")
    source = subprocess.run(["git", "-C", str(REPO), "show", f"{rev}:qmd/backends/sqlite/approx.py"], check=True, capture_output=True, text=True).stdout
    approx = types.ModuleType("qmd.backends.sqlite.approx_before")
    exec(compile(source, f"{rev}:approx.py", "exec"), approx.__dict__)
    old.__dict__["approx"] = approx
    return old


def old_structure(rev: str) -> str | None:
    """The approximate index structure `rev` builds (approx.STRUCTURE there)."""
    return getattr(before(rev).__dict__["approx"], "STRUCTURE", None)


def same(a: list[list[tuple[int, float, tuple[int, int]]]], b: list[list[tuple[int, float, tuple[int, int]]]]) -> bool:
    return all([d for d, _, _ in x] == [d for d, _, _ in y] and all(abs(s - t) < 1e-6 for (_, s, _), (_, t, _) in zip(x, y)) for x, y in zip(a, b))


def timed_runs(report: Report, tag: str, backend: object, old: object, model: object, qv: np.ndarray, rounds: int, scope: list[str] | None) -> dict[str, float]:
    conn = backend.connection()  # type: ignore[attr-defined]
    impls = {
        "before": lambda qs: [old.nearest_documents(conn, model, q, DEPTH, scope) for q in qs],  # type: ignore[attr-defined]
        "after": lambda qs: backend.nearest_many(model, qs, DEPTH, scope),  # type: ignore[attr-defined]
    }
    rng = np.random.default_rng(5)
    pick = lambda k: [qv[i].tolist() for i in rng.choice(len(qv), k, replace=False)]  # noqa: E731
    equal = True
    for k in COUNTS:  # warm-up, and the answers compared
        qs = pick(k)
        equal &= same(impls["before"](qs), impls["after"](qs))
    times: dict[tuple[str, int], list[float]] = {}
    calls = [(impl, k) for k in COUNTS for impl in impls]
    for r in range(rounds):
        shift = r % len(calls)
        for impl, k in calls[shift:] + calls[:shift]:
            qs = pick(k)
            s = time.perf_counter()
            impls[impl](qs)
            times.setdefault((impl, k), []).append(time.perf_counter() - s)
    out: dict[str, float] = {"equal": float(equal)}
    for impl in impls:
        one = p50(times[(impl, 1)])
        row = " / ".join(ms(p50(times[(impl, k)])) for k in COUNTS)
        ratios = ", ".join(f"{p50(times[(impl, k)]) / one:.2f}x" for k in COUNTS[1:])
        report.row(f"{tag} {impl}: p50 1/3/5 sub-queries; 3, 5 / one", f"{row}; {ratios}")
        for k in COUNTS:
            out[f"{impl}_{k}_ms"] = p50(times[(impl, k)]) * 1000
            out[f"{impl}_{k}_ratio"] = p50(times[(impl, k)]) / one
    report.row(f"{tag}: after / before at 1, 3, 5; answers equal", ", ".join(f"{out[f'after_{k}_ms'] / out[f'before_{k}_ms']:.2f}x" for k in COUNTS) + f"; {equal}")
    return out


def run_one(report: Report, n: int, dims: int, args: object) -> dict[str, float]:
    os.environ["QMD_VECTOR_INDEX"] = "exact"
    data, qv = vectors(n, dims, 40, args.noise)  # type: ignore[attr-defined]
    old = before(args.before)  # type: ignore[attr-defined]
    out: dict[str, float] = {}
    with isolated_home("subq") as tmp:
        store = qmd.Store(tmp / "idx" / "index.sqlite", tmp / "idx" / "index.yml")
        t0 = time.perf_counter()
        model = build(store, data)
        print(f"  {n} x {dims} written in {time.perf_counter() - t0:.1f} s", flush=True)
        backend = store.backend
        searches = ["exact", "approx"] if not args.exact_only else ["exact"]  # type: ignore[attr-defined]
        for search in searches:
            os.environ["QMD_VECTOR_INDEX"] = search
            if search == "approx":
                backend.build_vector_index(model)  # type: ignore[arg-type]
            for label, scope in (("all", None), ("10%", ["ten"])):
                got = timed_runs(report, f"{n // 1000}k x {dims} {search} {label}", backend, old, model, qv, args.rounds, scope)  # type: ignore[attr-defined]
                out.update({f"{search}_{label}_{k}": v for k, v in got.items()})
        store.close()
    return out


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="50000", help="comma-separated vector counts (default 50000)")
    parser.add_argument("--dims", default="384,768", help="comma-separated dimensions (default 384,768)")
    parser.add_argument("--rounds", type=int, default=7, help="timed rounds, each every count before and after (default 7)")
    parser.add_argument("--noise", type=float, default=0.5, help="cluster spread (default 0.5, text-like)")
    parser.add_argument("--before", default="main", metavar="REV", help="the baseline's git revision (default main)")
    parser.add_argument("--exact-only", action="store_true", help="skip the approximate index")
    args = parser.parse_args()
    report = Report("subquery_bench")
    runs = [(int(n), int(d)) for n in args.sizes.split(",") for d in args.dims.split(",")]
    for n, dims in runs:
        report.data[f"{n}x{dims}"] = run_one(report, n, dims, args)
    n, dims = runs[-1]
    last = report.data[f"{n}x{dims}"]
    report.target(Target(f"{n}x{dims} exact: 5 sub-queries / one", last["exact_all_after_5_ratio"], 2.0, "x"))
    # The approximate answers compare only when REV builds the same structure (else REV searches
    # the structure it does not know exactly, and approximate ≠ exact is no regression).
    compared = ("exact_",) if old_structure(args.before) != approx.STRUCTURE else ("exact_", "approx_")
    if compared == ("exact_",):
        print(f"  {args.before}'s approximate index is another structure: its answers are exact, only the exact rows are compared")
    report.target(Target(f"{n}x{dims} answers equal to before's", min(v for k, v in last.items() if k.endswith("_equal") and k.startswith(compared)), 1.0, "", "min"))
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
