"""Import graph of qmd and the harness packages: module and package cycles, floors, sizes.

    python tests/support/import_graph.py            # cycles (should be none) and a summary
    python tests/support/import_graph.py --json

Every import counts, including ones inside functions (a lazy import still ties two modules
together); imports under `if TYPE_CHECKING:` do not (they never run).
"""

from __future__ import annotations

import ast
import json
import statistics
import sys
from collections import defaultdict
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGES = ["qmd", "hooks", "updater", "doctor", "guards"]


def module_name(path: Path) -> str:
    parts = list(path.relative_to(REPO).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _type_checking_lines(tree: ast.AST) -> set[int]:
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and isinstance(node.test, ast.Name) and node.test.id == "TYPE_CHECKING":
            for sub in node.body:
                lines.update(range(sub.lineno, (sub.end_lineno or sub.lineno) + 1))
    return lines


def imports(path: Path, modules: set[str]) -> set[str]:
    """Modules of ours that `path` imports (resolved to the longest known module name)."""
    name = module_name(path)
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    tree = ast.parse(path.read_text(encoding="utf-8"))
    skip = _type_checking_lines(tree)
    found: set[str] = set()
    for node in ast.walk(tree):
        if getattr(node, "lineno", None) in skip:
            continue
        targets: list[str] = []
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            targets = [f"{mod}.{a.name}" for a in node.names] + [mod]
        for target in targets:
            while target and target not in modules:
                target = target.rpartition(".")[0]
            if target and target != name:
                found.add(target)
    return found


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one member (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on.add(v)
        for w in graph.get(v, ()):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    sys.setrecursionlimit(10000)
    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def floors(graph: dict[str, set[str]]) -> dict[str, int]:
    """Each module's floor: 0 imports nothing of ours, else 1 + the highest floor it imports.

    Members of a cycle (there should be none) are counted once, as if the cycle were cut.
    """
    out: dict[str, int] = {}
    visiting: set[str] = set()

    def floor(v: str) -> int:
        if v in out:
            return out[v]
        if v in visiting:
            return 0
        visiting.add(v)
        deps = [floor(w) for w in graph.get(v, ()) if w in graph]
        visiting.discard(v)
        out[v] = 1 + max(deps) if deps else 0
        return out[v]

    for v in graph:
        floor(v)
    return out


def package_of(module: str) -> str:
    """`qmd.backends.sqlite.vectors` → `qmd.backends.sqlite`; a top-level qmd module → `qmd`."""
    parts = module.split(".")
    return ".".join(parts[:-1]) if len(parts) > 1 else parts[0]


def main() -> int:
    files = [p for top in PACKAGES for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts]
    modules = {module_name(p) for p in files}
    graph = {module_name(p): imports(p, modules) for p in files}
    # Package graph: an edge between two different packages (a package's own __init__ belongs to it).
    pgraph: dict[str, set[str]] = defaultdict(set)
    for mod, deps in graph.items():
        src = mod if any(p.name == "__init__.py" and module_name(p) == mod for p in files) else package_of(mod)
        for dep in deps:
            dst = dep if any(p.name == "__init__.py" and module_name(p) == dep for p in files) else package_of(dep)
            if src != dst and not dst.startswith(src + ".") and not src.startswith(dst + "."):
                pgraph[src].add(dst)
    per_folder: dict[str, int] = defaultdict(int)
    sizes = []
    for p in files:
        if p.name != "__init__.py" or p.stat().st_size > 200:
            per_folder[str(p.parent.relative_to(REPO))] += 1
        sizes.append(len(p.read_text(encoding="utf-8").splitlines()))
    result = {
        "modules": len(files),
        "module_cycles": cycles(graph),
        "package_cycles": cycles(dict(pgraph)),
        "modules_per_folder": dict(sorted(per_folder.items())),
        "floors": 1 + max(floors(graph).values()),
        "median_lines": statistics.median(sizes),
        "max_lines": max(sizes),
    }
    if "--json" in sys.argv:
        print(json.dumps(result, indent=2))
    else:
        print(f"{result['modules']} modules on {result['floors']} import floors; median {result['median_lines']} lines, max {result['max_lines']}")
        for folder, n in result["modules_per_folder"].items():
            print(f"  {folder:24} {n}")
        print(f"module cycles: {result['module_cycles'] or 'none'}")
        print(f"package cycles: {result['package_cycles'] or 'none'}")
    return 1 if result["module_cycles"] or result["package_cycles"] else 0


if __name__ == "__main__":
    sys.exit(main())
