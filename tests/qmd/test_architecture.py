"""The layout's rules, checked on the source: rooms without cycles, one storage seam, one public API."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

import qmd
import qmd.harness
from tests.support import import_graph

REPO = Path(__file__).resolve().parents[2]
HARNESS = ("hooks", "updater", "doctor", "guards")
# What the harness may import of qmd: the public API, the harness surface, and the documented package surfaces.
PUBLIC_SURFACES = {"qmd", "qmd.harness", "qmd.serve", "qmd.agents"}


def _sources(*tops: str) -> list[Path]:
    return sorted(p for top in tops for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts)


def _imports(path: Path) -> list[tuple[str, list[str]]]:
    """(module, names) of every absolute import in `path` (relative ones stay in their package)."""
    out: list[tuple[str, list[str]]] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(a.name, []) for a in node.names]
        elif isinstance(node, ast.ImportFrom) and not node.level and node.module:
            out.append((node.module, [a.name for a in node.names]))
    return out


def test_no_import_cycles_between_modules_or_packages() -> None:
    files = [p for top in import_graph.PACKAGES for p in (REPO / top).rglob("*.py") if "__pycache__" not in p.parts]
    modules = {import_graph.module_name(p) for p in files}
    graph = {import_graph.module_name(p): import_graph.imports(p, modules) for p in files}
    assert import_graph.cycles(graph) == []
    # The same check at package level is what `python tests/support/import_graph.py` prints.
    assert import_graph.main() == 0


def test_the_cycle_finder_finds_a_cycle() -> None:
    assert import_graph.cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert import_graph.floors({"a": {"b"}, "b": set(), "c": {"a", "b"}}) == {"b": 0, "a": 1, "c": 2}


_SQL = re.compile(r"\b(SELECT|INSERT INTO|DELETE FROM|CREATE (VIRTUAL )?TABLE|PRAGMA)\b|\bvec0\b|\.execute\(|\bimport apsw\b|\bfrom apsw\b|\bimport psycopg\b|\bfrom psycopg\b")


def _docstring_lines(tree: ast.AST) -> set[int]:
    """Lines of bare string statements (docstrings): prose, not code."""
    lines: set[int] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant) and isinstance(node.value.value, str):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


SQL_HOMES = ("qmd/backends/sqlite/", "qmd/backends/postgres/", "qmd/backends/sql.py")  # each backend's own, and the SQL both speak


def test_no_sql_above_the_storage_seam() -> None:
    """Every SQL statement, PRAGMA, vec0 table, apsw and psycopg call lives under qmd/backends/<backend>/
    or, where both backends say the same, in qmd/backends/sql.py."""
    offenders = []
    for path in _sources("qmd"):
        rel = path.relative_to(REPO).as_posix()
        if rel.startswith(SQL_HOMES):
            continue
        text = path.read_text(encoding="utf-8")
        prose = _docstring_lines(ast.parse(text))
        for n, line in enumerate(text.splitlines(), start=1):
            if n not in prose and _SQL.search(line.split("#", 1)[0]):
                offenders.append(f"{rel}:{n}: {line.strip()}")
    assert offenders == []


def test_the_sql_check_sees_sql() -> None:
    assert _SQL.search('conn.execute("SELECT 1")') and _SQL.search("import apsw") and not _SQL.search("select the best")


BACKENDS = ("sqlite", "postgres")


def test_the_backends_never_import_each_other_and_the_seam_imports_neither() -> None:
    """What both backends say is written once, in the shared base (qmd/backends/base.py) or
    in the SQL both speak (qmd/backends/sql.py): never borrowed from the other backend."""
    offenders = []
    for path in _sources("qmd/backends"):
        rel = path.relative_to(REPO).as_posix()
        home = next((b for b in BACKENDS if rel.startswith(f"qmd/backends/{b}/")), None)
        for module, names in _imports(path):
            targets = [module] + [f"{module}.{n}" for n in names]
            for backend in BACKENDS:
                if backend != home and any(t == f"qmd.backends.{backend}" or t.startswith(f"qmd.backends.{backend}.") for t in targets):
                    offenders.append(f"{rel}: imports {module}")
    assert offenders == []


def test_index_backend_is_the_abstract_base_of_the_two_backends() -> None:
    """`IndexBackend` is an ABC; the classes built on it are the two backends, each complete
    (no abstract method left), and each public method of theirs reaches the error translation."""
    import abc

    from qmd.backends.base import IndexBackend

    subclassing = sorted(
        f"{path.relative_to(REPO).as_posix()}:{node.name}"
        for path in _sources("qmd")
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8")))
        if isinstance(node, ast.ClassDef) and any(isinstance(b, ast.Name) and b.id == "IndexBackend" for b in node.bases)
    )
    assert subclassing == ["qmd/backends/postgres/backend.py:PostgresBackend", "qmd/backends/sqlite/backend.py:SqliteBackend"]
    assert isinstance(IndexBackend, abc.ABCMeta) and IndexBackend.__abstractmethods__
    pytest.importorskip("psycopg")
    from qmd.backends.postgres.backend import PostgresBackend
    from qmd.backends.sqlite.backend import SqliteBackend

    for cls in (SqliteBackend, PostgresBackend):
        assert not cls.__abstractmethods__, f"{cls.__name__} leaves {sorted(cls.__abstractmethods__)} unimplemented"
        unguarded = [n for n in dir(cls) if not n.startswith("_") and callable(getattr(cls, n)) and n not in cls.UNGUARDED and not getattr(getattr(cls, n), "guarded", False)]
        assert unguarded == [], f"{cls.__name__}: {unguarded} would let a driver's error through"


def test_the_harness_uses_only_the_public_api() -> None:
    """hooks/, updater/, doctor/, guards/ import qmd only through `qmd` (its `__all__`),
    `qmd.harness` (its `__all__`) and the documented package surfaces `qmd.serve`, `qmd.agents`."""
    offenders = []
    for path in _sources(*HARNESS):
        for module, names in _imports(path):
            if module != "qmd" and not module.startswith("qmd."):
                continue
            if module not in PUBLIC_SURFACES:
                offenders.append(f"{path.relative_to(REPO)}: imports {module}")
            elif module == "qmd":
                offenders += [f"{path.relative_to(REPO)}: qmd.{n} is not public" for n in names if n not in qmd.__all__ and n != "harness"]
            elif module == "qmd.harness":
                offenders += [f"{path.relative_to(REPO)}: qmd.harness.{n} is not in its surface" for n in names if n not in qmd.harness.__all__]
    assert offenders == []


def test_the_harness_uses_qmd_attributes_of_the_public_api_only() -> None:
    """`qmd.NAME` and `harness.NAME` in the harness name what those surfaces export."""
    offenders = []
    for path in _sources(*HARNESS):
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name):
                surface = {"qmd": qmd.__all__, "harness": qmd.harness.__all__}.get(node.value.id)
                if surface is not None and node.attr not in surface and node.attr not in ("harness", "serve", "agents"):
                    offenders.append(f"{path.relative_to(REPO)}:{node.lineno}: {node.value.id}.{node.attr}")
    assert offenders == []


def test_the_public_api_is_declared_and_holds_no_harness_plumbing() -> None:
    for surface in ("qmd/__init__.py", "qmd/harness.py"):
        tree = ast.parse((REPO / surface).read_text(encoding="utf-8"))
        assigned = {t.id for node in tree.body if isinstance(node, ast.Assign) for t in node.targets if isinstance(t, ast.Name)}
        assert "__all__" in assigned, f"{surface} declares no __all__"
    assert set(qmd.__all__).isdisjoint(qmd.harness.__all__)
    assert {"Store", "open_index", "QmdError", "SearchHit", "QueryResult", "CollectionConfig", "__version__"} <= set(qmd.__all__)


def test_nothing_in_qmd_imports_the_package_root() -> None:
    """The package root only re-exports: no module of qmd imports `qmd` itself (the arrows point down)."""
    offenders = [
        f"{path.relative_to(REPO)}: {module} {names}"
        for path in _sources("qmd")
        if path.relative_to(REPO).as_posix() != "qmd/__init__.py"
        for module, names in _imports(path)
        if module == "qmd"
    ]
    assert offenders == []


def test_the_package_ships_its_annotations_and_one_version() -> None:
    import tomllib

    project = tomllib.loads((REPO / "pyproject.toml").read_text(encoding="utf-8"))
    setuptools = project["tool"]["setuptools"]
    assert (REPO / "qmd" / "py.typed").is_file() and "py.typed" in setuptools["package-data"]["qmd"]
    assert "version" in project["project"]["dynamic"] and setuptools["dynamic"]["version"] == {"attr": "qmd.core.version.__version__"}
    from qmd.core.version import __version__

    assert qmd.__version__ == __version__


def test_qmd_never_imports_a_harness_package() -> None:
    offenders = [
        f"{path.relative_to(REPO)}: {module}"
        for path in _sources("qmd")
        for module, _ in _imports(path)
        if module.split(".")[0] in HARNESS
    ]
    assert offenders == []


def test_only_the_fileio_helper_renames_files() -> None:
    """Atomic writes have one home (qmd/core/fileio.py); nothing else calls os.replace."""
    callers = [
        f"{path.relative_to(REPO)}:{n}"
        for path in _sources("qmd", *HARNESS)
        for n, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1)
        if re.search(r"\bos\.(replace|rename)\(", line.split("#", 1)[0])
    ]
    assert [c.split(":")[0] for c in callers] == ["qmd/core/fileio.py"], callers


@pytest.mark.parametrize("name", sorted(qmd.__all__))
def test_every_public_name_resolves(name: str) -> None:
    assert getattr(qmd, name) is not None


@pytest.mark.parametrize("name", sorted(qmd.harness.__all__))
def test_every_harness_name_resolves(name: str) -> None:
    assert getattr(qmd.harness, name) is not None


def test_the_public_api_holds_nothing_of_the_cli() -> None:
    for name in qmd.__all__:
        value = getattr(qmd, name)
        module = getattr(value, "__module__", "") or ""
        assert not module.startswith("qmd.cli"), f"qmd.{name} comes from the CLI ({module})"


def _private_reaches(path: Path) -> list[str]:
    """`obj._name` where obj is not self, cls or a module (os._exit) and `_name` is not a
    member defined in the same module: another module's object reached through its privates."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    own = {n.name for n in ast.walk(tree) if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef))}
    own |= {n.attr for n in ast.walk(tree) if isinstance(n, ast.Attribute) and isinstance(n.ctx, ast.Store)}
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Attribute) and node.attr.startswith("_") and not node.attr.startswith("__") and node.attr not in own:
            owner = node.value
            if not (isinstance(owner, ast.Name) and owner.id in ("self", "cls", "os", "sys")):
                found.append(f"{path.name}:{node.lineno} .{node.attr}")
    return found


def test_the_server_reaches_no_private_member_of_another_object() -> None:
    # One door into the Store (ToolService.using): routes and transports call public members.
    assert [hit for path in _sources("qmd/serve") for hit in _private_reaches(path)] == []


def test_the_private_member_check_sees_one(tmp_path: Path) -> None:
    source = tmp_path / "x.py"
    source.write_text("def f(service):\n    service._lock.acquire()\n    self._ok = 1\n")
    assert len(_private_reaches(source)) == 1


_REQUESTS = {"SearchRequest", "QueryRequest"}


def _builds_requests(path: Path) -> bool:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    return any(isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in _REQUESTS for n in ast.walk(tree))


def test_one_request_record_from_both_command_line_parsers() -> None:
    """The typer commands and the lean path hand their option values to the same builders
    (qmd/cli/actions.py's *_request); no other CLI module makes a request of its own, and the
    lean path's option table is the one generated from the typer declarations."""
    from qmd.cli import fastgen

    builders = [p.relative_to(REPO).as_posix() for p in _sources("qmd/cli") if _builds_requests(p)]
    assert builders == ["qmd/cli/actions.py"]
    assert fastgen.TARGET.read_text() == fastgen.render(), "the lean path's options differ from typer's: run python -m qmd.cli.fastgen"
    for name in fastgen.ROUTED:
        source = (REPO / "qmd/cli").glob("*.py")
        calls = [p.name for p in source if f"actions.{name}(locals())" in p.read_text() or f"actions.{name}(params)" in p.read_text()]
        assert calls, f"the typer command {name} does not hand its values to actions.{name}"


def _module_aliases(path: Path) -> list[str]:
    """Project modules imported under another name (`import qmd.serve as servers`), except
    where the name is taken: two modules of one name (`from hooks import install as
    hook_install`), or a function of the importing module (guards/cli.py's `stats` command)."""
    found = []
    package = path.parent.relative_to(REPO).as_posix().replace("/", ".")
    tree = ast.parse(path.read_text(encoding="utf-8"))
    taken = {"install"} | {n.name for n in tree.body if isinstance(n, (ast.FunctionDef, ast.ClassDef))}
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            pairs = [(a.name, a.asname) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = node.module or "" if not node.level else ".".join([*package.split(".")[: len(package.split(".")) - node.level + 1], *([node.module] if node.module else [])])
            pairs = [(f"{base}.{a.name}", a.asname) for a in node.names]
        else:
            continue
        for dotted, alias in pairs:
            name = dotted.rsplit(".", 1)[-1]
            target = REPO / dotted.replace(".", "/")
            if alias and alias != name and name not in taken and (target.with_suffix(".py").exists() or (target / "__init__.py").exists()):
                found.append(f"{path.relative_to(REPO)}:{node.lineno} {dotted} as {alias}")
    return found


def test_no_project_module_hides_behind_another_name() -> None:
    assert [hit for path in _sources("qmd", *HARNESS) for hit in _module_aliases(path)] == []
