"""An SQLite file at the index path that qmd never made is refused, and nothing in it is
changed: another program's database named by INDEX_PATH had qmd's tables written into it (and
its journal mode switched to WAL), and the original qmd's index at the same default path
(~/.cache/qmd/index.sqlite) failed every command with "table content already exists" and a
hint offering a rebuild (the session 21 red team). Moved aside, qmd builds its own there."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import apsw
import pytest

from tests.support.run import qmd_env, run_qmd

COMMANDS = [("collection", "add", "{notes}", "--name", "notes"), ("update",), ("search", "rollback"), ("status",), ("ls",), ("rebuild",)]


def refused(args: tuple[str, ...], notes: Path, env: dict[str, str], path: Path, what: str) -> None:
    proc = run_qmd(*(a.format(notes=notes) for a in args), env=env)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 1 and len(lines) == 2, proc.stderr
    assert lines[0] == f"Error: {path} is {what}, not this qmd's index; nothing in it was changed" and f"mv {path} {path}.moved-aside" in lines[1], proc.stderr


@pytest.mark.parametrize("args", COMMANDS, ids=" ".join)
def test_another_programs_database_at_index_path_is_left_as_it_was(isolated_home: Path, notes: Path, tmp_path: Path, args: tuple[str, ...]) -> None:
    app = tmp_path / "app.db"
    conn = apsw.Connection(str(app))
    conn.execute("CREATE TABLE users (id INTEGER PRIMARY KEY, name TEXT); INSERT INTO users (name) VALUES ('alice')")  # a rollback journal, as most programs keep
    conn.close()
    before = app.read_bytes()
    env = qmd_env({"INDEX_PATH": str(app)})
    if args[0] != "collection":
        assert run_qmd("collection", "add", str(notes), "--name", "notes", env=env).returncode == 1
    refused(args, notes, env, app, "an SQLite database of something else (its tables: users)")
    assert app.read_bytes() == before  # beside it at most the writer lock file qmd took before it looked (no -wal, no -shm)
    assert {p.name for p in tmp_path.iterdir() if p.name.startswith("app.db")} <= {"app.db", "app.db.lock"}


def test_an_empty_database_file_becomes_the_index(isolated_home: Path, notes: Path, tmp_path: Path) -> None:
    empty = tmp_path / "empty.sqlite"
    conn = apsw.Connection(str(empty))
    conn.execute("PRAGMA user_version = 7")  # a database with a header and no tables: a place for the index, as a new file is
    conn.close()
    env = qmd_env({"INDEX_PATH": str(empty)})
    assert run_qmd("collection", "add", str(notes), "--name", "notes", env=env).returncode == 0
    assert "qmd://notes/" in run_qmd("search", "rollback", env=env).stdout


def test_the_original_qmds_index_is_left_to_it(isolated_home: Path, notes: Path, tmp_path: Path) -> None:
    """The real original (npm @tobilu/qmd 2.8.3) builds its index at the shared default path."""
    from tests.support.npm_clients import original_bin, original_node

    node, original = original_node(), original_bin("qmd").resolve()
    env = qmd_env()
    theirs = dict(env, PATH=f"{node.parent}{os.pathsep}{env.get('PATH', '')}", PWD=str(tmp_path))
    config = Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    missing = tmp_path / "no-models"  # the original would download its models on first use (offline: hang)
    config.write_text(f"models:\n  embed: {missing}/embed.gguf\n  rerank: {missing}/rerank.gguf\n  generate: {missing}/generate.gguf\ncollections: {{}}\n")
    made = subprocess.run([str(node), str(original), "collection", "add", str(notes), "--name", "notes"], env=theirs, cwd=tmp_path, capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    if made.returncode != 0:
        pytest.skip(f"the original qmd does not run here: {made.stderr.strip()[-200:]}")
    index = Path(env["XDG_CACHE_HOME"]) / "qmd" / "index.sqlite"
    before = index.read_bytes()
    for args in COMMANDS[1:]:
        refused(args, notes, env, index, "the original qmd's index (npm @tobilu/qmd keeps its own schema there)")
    assert index.read_bytes() == before
    for fix in ([], ["--fix"]):  # a failed check naming the move; --fix never rebuilds over it
        doctor = run_qmd("doctor", "--quick", *fix)
        assert doctor.returncode == 2 and "the original qmd's index" in doctor.stdout and f"mv {index}" in doctor.stdout, doctor.stdout
        assert "corrupted" not in doctor.stdout and index.read_bytes() == before
        assert [p.name for p in index.parent.iterdir() if p.name.startswith("index.sqlite.")] in ([], ["index.sqlite.lock"])
    shutil.move(index, index.with_name("index.sqlite.moved-aside"))  # the hint's fix
    assert run_qmd("update").returncode == 0  # the config's collection, shared with the original, in qmd's own index
    assert "qmd://notes/" in run_qmd("search", "rollback").stdout
    assert index.with_name("index.sqlite.moved-aside").read_bytes() == before
