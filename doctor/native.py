"""Native modules, loaded in a fresh subprocess each: a module already in memory proves nothing
about the next start (a runtime upgrade can break the file on disk under a running server)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time

from .context import Context, pip_command
from .results import CheckResult, fail, ok

TIMEOUT_S = 60

APSW = """
import apsw, json
c = apsw.Connection(":memory:")
c.execute("CREATE VIRTUAL TABLE t USING fts5(x, tokenize='porter unicode61')")
c.execute("INSERT INTO t VALUES ('running tests')")
assert c.execute("SELECT count(*) FROM t WHERE t MATCH 'run'").fetchall()[0][0] == 1
print(json.dumps(f"apsw {apsw.apsw_version()}, SQLite {apsw.sqlite_lib_version()}, FTS5 ok"))
"""

SQLITE_VEC = """
import apsw, json, os
c = apsw.Connection(":memory:")
c.enable_load_extension(True)
path = os.environ.get("QMD_SQLITE_VEC_PATH")
if path:
    c.load_extension(path)
else:
    import sqlite_vec
    path = sqlite_vec.loadable_path()
    c.load_extension(path)
print(json.dumps(f"sqlite-vec {c.execute('SELECT vec_version()').fetchall()[0][0]} from {path}"))
"""

LLAMA = """
import json, llama_cpp
lib = getattr(llama_cpp.llama_cpp, "_lib", None)
print(json.dumps(f"llama-cpp-python {llama_cpp.__version__}, {getattr(lib, '_name', 'libllama')}"))
"""


def _fixes() -> dict[str, str]:
    vec = os.environ.get("QMD_SQLITE_VEC_PATH")
    return {
        "apsw": pip_command("install", "--force-reinstall", "--no-deps", "apsw"),
        "sqlite-vec": f"unset QMD_SQLITE_VEC_PATH  # it points at {vec}" if vec else pip_command("install", "--force-reinstall", "--no-deps", "sqlite-vec"),
        "llama_cpp": "./install.sh  # rebuilds llama-cpp-python for this machine (or: "
        + 'CMAKE_ARGS="-DLLAVA_BUILD=OFF -DGGML_NATIVE=OFF" '
        + pip_command("install", "--force-reinstall", "--no-deps", "--no-binary", "llama-cpp-python", "llama-cpp-python")
        + ")",
    }


def _verdict(name: str, proc: subprocess.Popen[str], started: float, fix: str) -> CheckResult:
    try:
        out, err = proc.communicate(timeout=max(1.0, TIMEOUT_S - (time.perf_counter() - started)))
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.communicate()
        return fail(name, f"loading it did not finish within {TIMEOUT_S}s in a fresh process", fix)
    ms = (time.perf_counter() - started) * 1000
    if proc.returncode == 0:
        try:
            return ok(name, str(json.loads(out.strip().splitlines()[-1])), ms=ms)
        except (ValueError, IndexError):
            pass
    if proc.returncode < 0:
        why = f"the process was killed by signal {-proc.returncode} while loading it"
    else:
        lines = [line.strip() for line in (err or out).splitlines() if line.strip()]
        why = lines[-1][:400] if lines else f"exit code {proc.returncode}"
    return fail(name, f"does not load in a fresh process: {why}", fix, ms=ms)


def check(ctx: Context) -> list[CheckResult]:
    """apsw (+ FTS5), the sqlite-vec extension and llama.cpp's library, in parallel subprocesses."""
    fixes = _fixes()
    started = time.perf_counter()
    procs = {
        name: subprocess.Popen([sys.executable, "-c", code], stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for name, code in (("apsw", APSW), ("sqlite-vec", SQLITE_VEC), ("llama_cpp", LLAMA))
    }
    return [_verdict(name, proc, started, fixes[name]) for name, proc in procs.items()]
