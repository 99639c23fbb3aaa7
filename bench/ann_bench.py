"""The approximate vector index (issue 31) against qmd's exact scan, same run: recall@10, p50.

For each size × dimension: an index of N one-chunk documents of synthetic clustered unit
vectors (bench/postgres_bench.py's generator: cluster centres, Gaussian offsets of norm
`--noise`; 0.5 is text-like, 1.4 near-uniform and hard), written through the storage API
with QMD_VECTOR_INDEX=exact; then the approximate index built (`build_vector_index`, timed)
and its size (the file's growth) reported, and the first approximate query of a connection
(which reads the codes). `--loader bulk` (default) writes the same rows as the storage API
by executemany in big transactions, so 1M x 768 loads in minutes, not ~25. Queries: perturbed data points. Each query is run
exact and approximate (`nearest_documents`, limit 10, unscoped and scoped to a 10%
collection and to a 1% one whose chunks are also in another), interleaved, and the scopes
alternated query by query; recall@10 is the approximate result's share of the exact one.
Targets (the issue's, at the largest size run): recall@10 >= 0.95 and approx p50 <= 1/20
of exact p50; on a quiet machine approx p50 <= 100 ms at 1M x 768 (reported, not a target).
"""

from __future__ import annotations

import os
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any
from pathlib import Path

import numpy as np

import qmd
from qmd.backends.base import ChunkVector, forced_vector_index
from qmd.backends.sqlite import approx

from _common import Report, Target, arg_parser, isolated_home, ms, p50, percentile


def unit(x: np.ndarray) -> np.ndarray:
    return x / np.linalg.norm(x, axis=-1, keepdims=True)


def vectors(n: int, dims: int, queries: int, noise: float) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(11)
    centers = unit(rng.standard_normal((max(10, n // 100), dims)).astype(np.float32))
    data = np.empty((n, dims), np.float32)
    for lo in range(0, n, 100_000):  # in blocks: 1M x 768 is 3 GB, its temporaries as much again
        m = min(n, lo + 100_000) - lo
        data[lo:lo + m] = unit(centers[rng.integers(0, len(centers), m)] + noise * rng.standard_normal((m, dims)).astype(np.float32) / np.sqrt(dims))
    qv = unit(data[rng.integers(0, n, queries)] + noise / 0.7 * rng.standard_normal((queries, dims)).astype(np.float32) / np.sqrt(dims)).astype(np.float32)
    return data, qv


def build(store: qmd.Store, data: np.ndarray, loader: str = "bulk", first: int = 0, upto: int | None = None) -> object:
    """Write N one-chunk documents. `api`: through write_vectors (2000 a transaction; 1M x 768
    took ~25 min). `bulk`: the same rows (documents, chunks, the exact vec0 table, embedded)
    by executemany in transactions of 50k, the floats packed by numpy: a normal qmd index,
    read by qmd's own search code, written several times faster. `first`, `upto`: only those
    rows (a grown index: the first ones, the approximate index built, then the rest)."""
    backend = store.backend
    if not first:
        backend.open(create=True)
    conn = backend.connection()
    n = len(data) if upto is None else upto
    step = 50_000
    for lo in range(first, n, step):
        with conn:
            conn.executemany(
                "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
                " VALUES (?, ?, ?, ?, ?, 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)",
                ((i + 1, "ten" if i % 10 == 0 else "rest", f"d{i}.md", f"d{i}", f"h{i:08d}") for i in range(lo, min(n, lo + step))),
            )
    with conn:  # the 1% collection: second documents of the content of every 100th "rest" one (a chunk in two collections)
        conn.executemany(
            "INSERT INTO documents (id, collection, path, title, hash, size, mtime_ns, created_at, modified_at, active, meta_version, when_ns)"
            " VALUES (?, ?, ?, ?, ?, 1, 0, '2026-01-01', '2026-01-01', 1, 1, 0)",
            ((len(data) + 1 + i, "one", f"o{i}.md", f"o{i}", f"h{i:08d}") for i in range(5, n, 100) if i >= first),
        )
    model = backend.ensure_vector_model(f"bench-ann-{data.shape[1]}", "synthetic", data.shape[1])
    if loader == "api":
        for lo in range(first, n, 2000):
            backend.write_vectors(model, [(f"h{i:08d}", [ChunkVector(f"h{i:08d}", 0, 0, 10, 10, data[i].tolist())]) for i in range(lo, min(n, lo + 2000))])
        return model
    mid = model.id  # type: ignore[attr-defined]
    for lo in range(first, n, step):
        hi = min(n, lo + step)
        with conn:
            conn.executemany("INSERT INTO chunks (id, model_id, hash, seq, start, end, tokens) VALUES (?, ?, ?, 0, 0, 10, 10)", ((i + 1, mid, f"h{i:08d}") for i in range(lo, hi)))
            conn.executemany(f"INSERT INTO vec_{mid} (chunk_id, embedding) VALUES (?, ?)", ((i + 1, data[i].tobytes()) for i in range(lo, hi)))
            conn.executemany("INSERT INTO embedded (model_id, hash, chunks, embedded_at, chunker) VALUES (?, ?, 1, '2026-01-01', 'regex')", ((mid, f"h{i:08d}") for i in range(lo, hi)))
    return model


SCOPES = {"all": None, "10%": ["ten"], "1%": ["one"]}  # "one": every 100th "rest" document's content again


@contextmanager
def index_dir(keep: str | None, n: int, dims: int, noise: float) -> Iterator[Path]:
    """Where the index of one size lives: under --keep (kept, and reused when built), else a temp home."""
    if keep is None:
        with isolated_home("ann") as tmp:
            yield tmp / "idx"
        return
    folder = Path(keep) / f"{n}x{dims}-{noise}"
    folder.mkdir(parents=True, exist_ok=True)
    saved = dict(os.environ)
    try:  # HOME and the XDG dirs still isolated (qmd writes nothing else there)
        with isolated_home("ann"):
            yield folder
    finally:
        os.environ.clear()
        os.environ.update(saved)
class WalPeak:
    """The largest size the index's -wal file reached while the block ran (sampled every 50 ms)."""

    def __init__(self, path: Path) -> None:
        self.wal, self.peak, self._stop = Path(f"{path}-wal"), 0, threading.Event()
        self._thread = threading.Thread(target=self._watch, daemon=True)

    def _watch(self) -> None:
        while not self._stop.wait(0.05):
            try:
                self.peak = max(self.peak, self.wal.stat().st_size)
            except OSError:
                pass

    def __enter__(self) -> "WalPeak":
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()
        try:
            self.peak = max(self.peak, self.wal.stat().st_size)
        except OSError:
            pass


def measure(report: Report, backend: Any, model: Any, qv: np.ndarray, tag0: str, args: Any) -> dict[str, float]:
    """Exact and approximate queries interleaved, for each of --scopes (alternated query by
    query, so a change of load hits them alike): p50 (p95), their ratio, recall@10 of the
    approximate against the exact, and a scope's approximate p50 against the unscoped one."""
    labels = args.scopes.split(",")
    times = {label: {"exact": list[float](), "approx": list[float]()} for label in labels}
    hits, wanted = dict.fromkeys(labels, 0), dict.fromkeys(labels, 0)
    for r in range(args.rounds):
        for i, q in enumerate(qv):
            for label in (labels if (i + r) % 2 == 0 else labels[::-1]):
                got: dict[str, set[int]] = {}
                for mode in (("exact", "approx") if (i + r) % 2 == 0 else ("approx", "exact")):
                    if r > 0 and mode == "exact" and i >= args.exact_repeat:
                        continue
                    os.environ["QMD_VECTOR_INDEX"] = mode
                    s = time.perf_counter()
                    found = backend.nearest_documents(model, q.tolist(), 10, SCOPES[label])
                    times[label][mode].append(time.perf_counter() - s)
                    got[mode] = {d for d, _, _ in found}
                if r == 0:
                    hits[label] += len(got["exact"] & got["approx"])
                    wanted[label] += len(got["exact"])  # 10, or all a scope of fewer documents holds
    out: dict[str, float] = {}
    for label in labels:
        took = times[label]
        recall = hits[label] / max(1, wanted[label])
        ratio = p50(took["approx"]) / p50(took["exact"])
        tag = f"{tag0} {label}"
        report.row(f"{tag}: exact / approx p50 (p95)", f"{ms(p50(took['exact']))} / {ms(p50(took['approx']))} ({ms(percentile(took['exact'], 95))} / {ms(percentile(took['approx'], 95))})")
        out[f"{label}_ratio"], out[f"{label}_recall"] = ratio, recall
        out[f"{label}_exact_p50_ms"], out[f"{label}_approx_p50_ms"] = p50(took["exact"]) * 1000, p50(took["approx"]) * 1000
        scoped = f"; {out[f'{label}_approx_p50_ms'] / out['all_approx_p50_ms']:.2f}x unscoped approx" if label != "all" and "all_approx_p50_ms" in out else ""
        report.row(f"{tag}: ratio; recall@10", f"{ratio:.3f}x; {recall:.3f}{scoped}")
    return out


def recall_check(report: Report, backend: Any, model: Any, tag: str, out: dict[str, float]) -> None:
    """What the build's recall measurement found (qmd/backends/recall.py): what searches under
    auto decide by, beside the held-out queries' recall that `measure` reports."""
    check = backend.vector_recall(model)
    if check is None:
        report.row(f"{tag}: recall check", "none (searches exact)")
        return
    out["check_recall"], out["check_low"] = check.recall, check.low
    with forced_vector_index("auto"):  # the bench searches under approx, which takes the index whatever it measured
        trusted = backend.recall_status(model)["recall_trusted"]
    report.row(f"{tag}: recall check (auto takes the index: {'yes' if trusted else 'no'})", f"{check.recall:.3f}, 95% lower bound {check.low:.3f}, {check.queries} queries")


def run_one(report: Report, n: int, dims: int, args: Any) -> dict[str, float]:
    os.environ["QMD_VECTOR_INDEX"] = "exact"
    queries, noise, keep = args.queries, args.noise, args.keep
    with index_dir(keep, n, dims, noise) as folder:
        path = folder / "index.sqlite"
        done, saved_q = folder / "built", folder / f"queries-{queries}.npy"
        store = qmd.Store(path, folder / "index.yml")
        out: dict[str, float] = {}
        if done.exists() and saved_q.exists():  # --keep: built by an earlier run
            qv = np.load(saved_q)
            store.backend.open(create=False)
            model = store.backend.ensure_vector_model(f"bench-ann-{dims}", "synthetic", dims)
            out["reused"] = 1.0
        else:
            data, qv = vectors(n, dims, queries, noise)
            t0 = time.perf_counter()
            model = build(store, data, args.loader)
            del data
            load_s = time.perf_counter() - t0
            store.backend.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            before = path.stat().st_size
            os.environ["QMD_VECTOR_INDEX"] = "approx"
            t0 = time.perf_counter()
            with WalPeak(path) as wal:
                store.backend.build_vector_index(model)  # type: ignore[arg-type]
            build_s = time.perf_counter() - t0
            wal_end = Path(f"{path}-wal").stat().st_size if Path(f"{path}-wal").exists() else 0
            store.backend.connection().execute("PRAGMA wal_checkpoint(TRUNCATE)")
            grown = path.stat().st_size - before
            out.update({"load_s": load_s, "build_s": build_s, "exact_mb": before / 1e6, "approx_mb": grown / 1e6, "wal_peak_mb": wal.peak / 1e6, "wal_end_mb": wal_end / 1e6})
            report.row(f"{n // 1000}k x {dims}: load / approx build; exact file / approx growth", f"{load_s:.1f} s / {build_s:.1f} s; {before / 1e6:.0f} MB / {grown / 1e6:.0f} MB")
            report.row(f"{n // 1000}k x {dims}: WAL during the build: peak / at its end", f"{wal.peak / 1e6:.0f} MB / {wal_end / 1e6:.0f} MB")
            recall_check(report, store.backend, model, f"{n // 1000}k x {dims}", out)
            if keep is not None:
                np.save(saved_q, qv)
                done.write_text("built\n")
        if args.build_only:
            store.close()
            return out
        backend = store.backend
        os.environ["QMD_VECTOR_INDEX"] = "approx"
        approx.forget_codes()  # the first query of a connection reads the codes (a CLI query pays this each time)
        s = time.perf_counter()
        backend.nearest_documents(model, qv[0].tolist(), 10, None)  # type: ignore[arg-type]
        out["first_query_ms"] = (time.perf_counter() - s) * 1000
        report.row(f"{n // 1000}k x {dims}: first approx query of a connection (reads the codes)", ms(out["first_query_ms"] / 1000))
        out.update(measure(report, backend, model, qv, f"{n // 1000}k x {dims}", args))
        store.close()
    print(f"  {n} x {dims} done", flush=True)
    return out


def run_grown(report: Report, n: int, dims: int, args: Any) -> dict[str, float]:
    """`--grow-from N0`: the approximate index built on the first N0 vectors (its centroids
    trained there), the rest loaded and coded into those lists as writes would (no retrain),
    measured; then the build `qmd embed` runs (it retrains: approx.retrain_due), measured again
    on the same queries. `--drift`: the vectors ordered along a random direction first, so the
    first N0 cover one side of the space and the rest crowd its edge lists."""
    from qmd.backends.sqlite.vectors import table

    os.environ["QMD_VECTOR_INDEX"] = "exact"
    data, qv = vectors(n, dims, args.queries, args.noise)
    if args.drift:
        data = data[np.argsort(data @ unit(np.random.default_rng(5).standard_normal(dims).astype(np.float32)))]
    tag = f"{n // 1000}k x {dims} grown from {args.grow_from // 1000}k{' (drift)' if args.drift else ''}"
    with isolated_home("ann") as tmp:
        path = tmp / "idx" / "index.sqlite"
        store = qmd.Store(path, tmp / "idx" / "index.yml")
        backend = store.backend
        model = build(store, data, args.loader, 0, args.grow_from)
        os.environ["QMD_VECTOR_INDEX"] = "approx"
        backend.build_vector_index(model)
        build(store, data, args.loader, args.grow_from)
        conn = backend.connection()
        approx.build(conn, model, table(model.id), retrain=False)  # type: ignore[arg-type,attr-defined]
        found = approx.status(conn, model.id)  # type: ignore[attr-defined]
        largest = conn.execute(f"SELECT max(n) FROM (SELECT count(*) AS n FROM {approx.floats(model.id)} GROUP BY list)").fetchall()[0][0]  # type: ignore[attr-defined]
        report.row(f"{tag}: lists, largest list; retrain due", f"{found['lists']}, {largest}; {found['retrain_due']}")
        approx.forget_codes()
        out = {f"stale_{k}": v for k, v in measure(report, backend, model, qv, f"{tag}, stale", args).items()}
        t0 = time.perf_counter()
        with WalPeak(path) as wal:
            backend.build_vector_index(model)  # type: ignore[arg-type]
        out["retrain_s"], out["retrain_wal_peak_mb"] = time.perf_counter() - t0, wal.peak / 1e6
        found = approx.status(conn, model.id)  # type: ignore[attr-defined]
        largest = conn.execute(f"SELECT max(n) FROM (SELECT count(*) AS n FROM {approx.floats(model.id)} GROUP BY list)").fetchall()[0][0]  # type: ignore[attr-defined]
        report.row(f"{tag}: retrain (embed's build) time, WAL peak; lists, largest list now", f"{out['retrain_s']:.1f} s, {wal.peak / 1e6:.0f} MB; {found['lists']}, {largest}")
        approx.forget_codes()
        out.update({f"retrained_{k}": v for k, v in measure(report, backend, model, qv, f"{tag}, retrained", args).items()})
        store.close()
    print(f"  {tag} done", flush=True)
    return out


def run_real(report: Report, args: Any) -> dict[str, float]:
    """`--from-index DIR`: a copy of an index `qmd embed` built (export_bench.py --keep: the
    tldr pages with MiniLM, chunked as embed does), its approximate index built on the copy,
    queried with the bench's fixed tldr questions (queries_semantic.txt, queries_keyword.txt;
    PROBE_MIN_CODES was chosen on them) or, held out, the descriptions of every 500th page
    (`--questions descriptions`), embedded by the index's own model. Scopes: `--scopes` labels other than
    `all` name a pages folder (`pages` = English, `pages.de`, …), made its own collection in
    the copy, so a scope is a real language's share of real vectors."""
    import shutil

    from _common import BENCH, cache_root, data_dir, resolve_model

    source = Path(args.from_index)
    with isolated_home("ann-real") as tmp:
        path = tmp / "index.sqlite"
        shutil.copyfile(source / "index.sqlite", path)
        os.environ["QMD_EMBED_MODEL"] = str(resolve_model(args.model, cache_root()))
        store = qmd.Store(path, tmp / "index.yml")
        backend = store.backend
        backend.open(create=False)
        conn = backend.connection()
        (fingerprint,) = [str(r[0]) for r in conn.execute("SELECT fingerprint FROM embed_models")]
        model = backend.vector_model(fingerprint)
        assert model is not None
        labels = [label for label in args.scopes.split(",") if label != "all"]
        with conn:
            for label in labels:
                conn.execute("UPDATE documents SET collection = ? WHERE path LIKE ?", (label, f"{label}/%"))
                SCOPES[label] = [label]
        docs = as_counts(conn, labels)
        chunks = int(conn.execute("SELECT count(*) FROM chunks WHERE model_id = ?", (model.id,)).fetchall()[0][0])
        report.row("real index: documents; chunks (model)", f"{docs['all']:,}; {chunks:,} ({model.model}, {model.dims} dims)")
        for label in labels:
            report.row(f"scope {label}: documents", f"{docs[label]:,} ({docs[label] / docs['all']:.1%})")
        if args.questions == "tldr":
            lines = [line.strip() for name in ("queries_semantic.txt", "queries_keyword.txt") for line in (BENCH / name).read_text(encoding="utf-8").splitlines()]
            questions = [line for line in lines if line and not line.startswith("#")]
        else:  # held out: the one-line description ("> …") of every 500th page, any language; PROBE_MIN_CODES was not tuned on them
            pages = sorted(str(p) for p in (data_dir() / "tldr-pages").glob("pages*/**/*.md"))[7::500]
            questions = [next((line[2:].strip() for line in Path(p).read_text(encoding="utf-8").splitlines() if line.startswith("> ")), "") for p in pages]
            questions = [q for q in questions if q]
        embedder = store.embedder()
        qv = np.array([embedder.embed_query(q) for q in questions], np.float32)
        os.environ["QMD_VECTOR_INDEX"] = "approx"
        from qmd.backends.sqlite.vectors import ensure_vec

        ensure_vec(conn)
        approx.reset(conn, model.id)  # built anew by this code (the kept one may predate it)
        t0 = time.perf_counter()
        backend.build_vector_index(model)
        build_s = time.perf_counter() - t0
        found = approx.status(conn, model.id)
        report.row("approximate index: build; lists; structure", f"{build_s:.1f} s; {found['lists']}; {found['structure']}")
        checked: dict[str, float] = {}
        recall_check(report, backend, model, "real", checked)
        approx.forget_codes()
        s = time.perf_counter()
        backend.nearest_documents(model, qv[0].tolist(), 10, None)
        first_ms = (time.perf_counter() - s) * 1000
        report.row("first approx query of a connection (reads the codes)", ms(first_ms / 1000))
        out = {"chunks": float(chunks), "build_s": build_s, "first_query_ms": first_ms, "queries": float(len(qv)), **checked}
        out.update(measure(report, backend, model, qv, f"tldr {chunks // 1000}k x {model.dims}, {len(qv)} {args.questions} questions", args))
        store.close()
    return out


def as_counts(conn: Any, labels: list[str]) -> dict[str, int]:
    """Active documents in all and in each of `labels`' collections."""
    out = {"all": int(conn.execute("SELECT count(*) FROM documents WHERE active").fetchall()[0][0])}
    for label in labels:
        out[label] = int(conn.execute("SELECT count(*) FROM documents WHERE active AND collection = ?", (label,)).fetchall()[0][0])
    return out


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated vector counts (default 10000,100000; the issue's curve adds 1000000)")
    parser.add_argument("--dims", default="384,768", help="comma-separated dimensions (default 384,768)")
    parser.add_argument("--queries", type=int, default=20, help="query vectors (default 20)")
    parser.add_argument("--rounds", type=int, default=2, help="timed passes over the queries (default 2)")
    parser.add_argument("--noise", type=float, default=0.5, help="cluster spread (default 0.5, text-like; 1.4 is near-uniform)")
    parser.add_argument("--oversample", type=int, default=approx.OVERSAMPLE, help=f"candidates per result (default {approx.OVERSAMPLE})")
    parser.add_argument("--loader", choices=("bulk", "api"), default="bulk", help="how the exact index is written (default bulk: executemany, 50k a transaction; api: write_vectors)")
    parser.add_argument("--scopes", default="all,10%,1%", help="comma-separated scopes (default all,10%%,1%%: unscoped, a 10%% collection, a 1%% one whose chunks are also in another)")
    parser.add_argument("--keep", metavar="DIR", help="keep each index (and its queries) under DIR and reuse it in later runs (a 1M x 768 index is ~8 GB: delete DIR after)")
    parser.add_argument("--exact-repeat", type=int, default=1 << 30, help="after the first round, time the exact search only on this many queries (it costs seconds at 1M)")
    parser.add_argument("--build-only", action="store_true", help="load and build, report time, size and the WAL's peak; no queries")
    parser.add_argument("--grow-from", type=int, default=0, help="build on the first N vectors, grow to each size, measure before and after embed's retrain")
    parser.add_argument("--drift", action="store_true", help="with --grow-from: the first vectors from one side of the space (content that drifted)")
    parser.add_argument("--from-index", metavar="DIR", help="real vectors: a copy of DIR/index.sqlite (export_bench.py --keep), queried with the tldr questions; --scopes labels name pages folders (pages, pages.de, ...)")
    parser.add_argument("--model", default="minilm", help="with --from-index: the model that embedded it, for the questions (default minilm)")
    parser.add_argument("--questions", choices=("tldr", "descriptions"), default="tldr", help="with --from-index: the bench's 72 tldr questions, or (held out) the descriptions of every 500th page")
    args = parser.parse_args()
    approx.OVERSAMPLE = args.oversample
    report = Report("ann_bench")
    if args.from_index:
        got = report.data["real"] = run_real(report, args)
        for label in args.scopes.split(","):
            report.target(Target(f"real {label} recall@10", got[f"{label}_recall"], 0.95, "", "min"))
            report.target(Target(f"real {label} approx/exact p50", got[f"{label}_ratio"], 0.05, "x"))
        return report.finish(args.json)
    runs = [(int(n), int(d)) for n in args.sizes.split(",") for d in args.dims.split(",")]
    if args.grow_from:
        for n, dims in runs:
            report.data[f"{n}x{dims}-grown"] = run_grown(report, n, dims, args)
        return report.finish(args.json)
    for n, dims in runs:
        report.data[f"{n}x{dims}"] = run_one(report, n, dims, args)
    n, dims = runs[-1]
    last = report.data[f"{n}x{dims}"]
    for label in args.scopes.split(","):
        if f"{label}_recall" not in last:
            continue
        report.target(Target(f"{n}x{dims} {label} recall@10", last[f"{label}_recall"], 0.95, "", "min"))
        report.target(Target(f"{n}x{dims} {label} approx/exact p50", last[f"{label}_ratio"], 0.05, "x"))
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
