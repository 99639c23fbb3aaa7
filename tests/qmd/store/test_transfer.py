"""`qmd export` / `qmd import` (issue 31): a built index carried to another HOME answers the
same without embedding again, on SQLite and PostgreSQL alike; another embed model, a name
already here and a crafted file are refused in one line with nothing written; collections
are placed where the importer's folders are, and files that differ are left to `update`."""

from __future__ import annotations

import base64
import gzip
import json
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest

import qmd
from qmd.core.errors import QmdError
from tests.support.paths import REPO
from tests.support.run import qmd_env, run_qmd

NOTES = REPO / "examples" / "notes"
QUESTIONS = ("capacity planning growth", "who joined the team offsite in Tokyo", "database storage", "hiring SRE candidates", "incident postmortem")


def _home(root: Path, **extra: str) -> dict[str, str]:
    """An environment whose HOME and every qmd path lie under `root` (another machine)."""
    home = root / "home"
    home.mkdir(parents=True, exist_ok=True)
    env = {k: v for k, v in qmd_env().items() if k not in ("INDEX_PATH", "QMD_DATABASE_URL", "QMD_CONFIG_DIR", "QMD_STATE_DIR", "QMD_MODELS_DIR")}
    env.update(HOME=str(home), XDG_CONFIG_HOME=str(home / ".config"), XDG_CACHE_HOME=str(home / ".cache"), XDG_STATE_HOME=str(home / ".state"))
    env.update(XDG_DATA_HOME=str(home / ".share"), QMD_THREADS="1", QMD_SERVER="off")
    env.update(extra)
    return env


def _ok(env: dict[str, str], *args: str, cwd: Path | None = None) -> str:
    done = run_qmd(*args, env=env, cwd=cwd)
    assert done.returncode == 0, (args, done.stdout, done.stderr)
    return done.stdout + done.stderr


def _answers(env: dict[str, str]) -> list[object]:
    """vsearch and query results (JSON) of every question."""
    out: list[object] = []
    for q in QUESTIONS:
        for cmd in ("vsearch", "query"):
            out.append([(h["file"], h["score"], h["docid"]) for h in json.loads(run_qmd(cmd, q, "--json", "-n", "5", env=env).stdout)])
    return out


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory, minilm_gguf: Path) -> Iterator[tuple[Path, dict[str, object], list[object]]]:
    """examples/notes indexed and embedded with MiniLM in one HOME, exported: (file, models env, answers)."""
    root = tmp_path_factory.mktemp("exporter")
    models = {"QMD_EMBED_MODEL": str(minilm_gguf), "QMD_RERANK_MODEL": str(root / "none.gguf"), "QMD_GENERATE_MODEL": str(root / "none.gguf")}
    env = _home(root, **models)
    shutil.copytree(NOTES, root / "notes")
    _ok(env, "collection", "add", str(root / "notes"), "--name", "notes")
    _ok(env, "context", "add", "qmd://notes/meetings", "Weekly meeting minutes")
    _ok(env, "embed")
    answers = _answers(env)
    file = root / "notes.qmd.gz"
    said = _ok(env, "export", str(file))
    assert "14 documents" in said and "all-MiniLM-L6-v2" in said
    yield file, dict(models), answers


def _importer(tmp_path: Path, models: dict[str, object], **extra: str) -> tuple[dict[str, str], Path]:
    env = _home(tmp_path / "importer", **{k: str(v) for k, v in models.items()}, **extra)
    place = tmp_path / "importer" / "work"
    shutil.copytree(NOTES, place / "notes")
    return env, place


def _no_embedding_and_same_answers(env: dict[str, str], answers: list[object]) -> None:
    said = _ok(env, "embed")
    assert "nothing to embed" in said and "Embedded" not in said, said
    assert _answers(env) == answers


@pytest.mark.slow
def test_round_trip_into_another_home_needs_no_embedding_and_answers_the_same(built: tuple[Path, dict[str, object], list[object]], tmp_path: Path) -> None:
    file, models, answers = built
    env, place = _importer(tmp_path, models)
    said = _ok(env, "import", str(file), cwd=place)  # placed at ./notes by default
    assert "14 match the files here, 0 differ, 0 missing" in said, said
    assert "nothing to embed for them" in said
    status = _ok(env, "collection", "show", "notes")
    assert str(place / "notes") in status
    assert "Weekly meeting minutes" in _ok(env, "context", "list")
    _no_embedding_and_same_answers(env, answers)
    update = _ok(env, "update")
    assert "0 new, 0 updated, 14 unchanged" in update  # the local files' stats were taken


@pytest.mark.slow
def test_sqlite_to_postgres_and_back(built: tuple[Path, dict[str, object], list[object]], tmp_path: Path, postgres_url: str) -> None:
    from tests.support import postgres

    file, models, answers = built
    url, schema = postgres.fresh_schema_url(postgres_url)
    try:
        env, place = _importer(tmp_path / "pg", models, QMD_DATABASE_URL=url)
        assert "14 match" in _ok(env, "import", str(file), "--root", str(place))
        _no_embedding_and_same_answers(env, answers)
        again = tmp_path / "from-pg.qmd.gz"
        _ok(env, "export", str(again))
    finally:
        postgres.drop_schema(postgres_url, schema)
    env, place = _importer(tmp_path / "back", models)
    assert "14 match" in _ok(env, "import", str(again), "--collection", f"notes={place / 'notes'}")
    _no_embedding_and_same_answers(env, answers)


# --- the rest with tiny random models (fast) ---------------------------------------------


@pytest.fixture
def exported(tmp_path: Path, notes: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, index_backend: str) -> Path:
    """The `notes` fixture indexed in SQLite and embedded with the tiny model, exported; the
    tests import it into each backend (`index_backend`: the PostgreSQL schema is the importer's)."""
    import os

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    url = os.environ.pop("QMD_DATABASE_URL", None)
    try:
        with qmd.Store(tmp_path / "a" / "index.sqlite", tmp_path / "a" / "index.yml") as store:
            store.add_collection(notes, name="notes")
            store.embed()
            report = store.export(tmp_path / "notes.qmd.gz")
    finally:
        if url is not None:
            os.environ["QMD_DATABASE_URL"] = url
    assert report.documents == 4 and report.embedded == 4
    return tmp_path / "notes.qmd.gz"


def _target(tmp_path: Path) -> qmd.Store:
    return qmd.Store(tmp_path / "b" / "index.sqlite", tmp_path / "b" / "index.yml")


@pytest.mark.slow
def test_another_embed_model_is_refused_naming_both(exported: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed_b"]))
    with _target(tmp_path) as store:
        with pytest.raises(QmdError) as caught:
            store.import_file(exported, root=tmp_path)
        assert "tiny-embed " in caught.value.message and "tiny-embed_b" in caught.value.message
        assert store.collections() == [] and store.backend.collection_counts() == {}
        report = store.import_file(exported, root=tmp_path, force_model=True)  # documents in, vectors kept unused
        assert report.model_forced and store.document_count() == 4
        assert store.vector_status().pending_documents == 4  # embedded with the importer's model by the next embed


def test_relocation_and_a_changed_file_left_for_update(exported: Path, tmp_path: Path, notes: Path) -> None:
    elsewhere = tmp_path / "moved" / "my-notes"
    shutil.copytree(notes, elsewhere)
    (elsewhere / "ideas.md").write_text("Some ideas, rewritten since the export.\n")
    (elsewhere / "runbooks" / "deploy.md").unlink()
    with _target(tmp_path) as store:
        report = store.import_file(exported, places={"notes": elsewhere})
        (c,) = report.collections
        assert (c.path, c.match, c.differ, c.missing, c.folder_missing) == (str(elsewhere), 2, 1, 1, False)
        assert store.collection("notes").path == str(elsewhere)
        assert store.vector_status().pending_documents == 0  # the exported content is embedded
        assert [h.path for h in store.search("caching layers")] == ["ideas.md"]  # as exported until update
        upd = store.update()
        (r,) = upd.collections
        assert (r.new, r.updated, r.unchanged, r.removed) == (0, 1, 2, 1)
        assert store.vector_status().pending_documents == 1  # the changed file, for the next embed


def test_a_missing_folder_is_imported_and_flagged(exported: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    code, _, err = cli("import", str(exported), "--root", str(tmp_path / "nowhere"))
    assert code == 0, err
    assert "0 match the files here, 0 differ, 4 missing" in err
    assert "does not exist: its documents are searchable" in err
    code, out, _ = cli("search", "rollback", "--json")
    assert code == 0 and "deploy.md" in out


def test_a_collection_already_here_is_refused_unless_replace(exported: Path, tmp_path: Path, notes: Path, cli) -> None:  # type: ignore[no-untyped-def]
    other = tmp_path / "other"
    other.mkdir()
    (other / "x.md").write_text("# Other\n\nsomething else entirely\n")
    assert cli("collection", "add", str(other), "--name", "notes")[0] == 0
    code, _, err = cli("import", str(exported), "--collection", f"notes={notes}")
    assert code == 1 and "already has a collection 'notes'" in err and "--replace" in err
    assert cli("search", "rollback", "--json")[1].strip() in ("[]", "")
    code, _, err = cli("import", str(exported), "--collection", f"notes={notes}", "--replace")
    assert code == 0 and "replaced 4 documents" in err
    assert "deploy.md" in cli("search", "rollback", "--json")[1]
    assert "x.md" not in cli("ls", "notes")[1]


@pytest.mark.parametrize("index_backend", ["postgres"], indirect=True)
def test_a_large_import_into_postgres_leaves_the_planner_its_statistics(
    exported: Path, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch, postgres_url: str,
) -> None:
    """An update of many documents vacuums and analyzes what it wrote; an import writes every
    collection in one transaction, where VACUUM cannot run, so it skipped that and the planner
    met the new rows without statistics. Now the tables are optimized once the import commits."""
    import os
    import time
    from urllib.parse import parse_qs, urlsplit

    import psycopg

    from qmd.backends.postgres import fulltext

    monkeypatch.setattr(fulltext, "OPTIMIZE_AFTER", 4)  # the 4 notes count as a large import
    schema = parse_qs(urlsplit(os.environ["QMD_DATABASE_URL"]).query)["schema"][0]
    with _target(tmp_path) as store:
        assert store.import_file(exported, places={"notes": notes}).documents == 4
    tables = ("documents", "content", "document_meta", "fts_docs", "fts_terms", "fts_postings")
    query = "SELECT relname, last_analyze IS NOT NULL, last_vacuum IS NOT NULL FROM pg_stat_user_tables WHERE schemaname = %s AND relname = ANY(%s)"
    deadline = time.monotonic() + 10
    with psycopg.connect(postgres_url, autocommit=True) as conn:
        while True:  # the statistics are visible to another session once reported: poll briefly
            rows = {r[0]: (r[1], r[2]) for r in conn.execute(query, (schema, list(tables))).fetchall()}
            if all(rows.get(t, (False, False))[0] for t in tables) or time.monotonic() > deadline:
                break
            time.sleep(0.1)
    assert all(rows.get(t, (False, False))[0] for t in tables), rows  # analyzed
    assert rows["fts_terms"][1], rows  # vacuumed: keyword searches read it by index-only scans


@pytest.mark.slow
def test_a_failed_write_leaves_the_index_as_it_was(exported: Path, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from qmd.store.state import IndexState

    with _target(tmp_path) as store:
        store.add_collection(notes, name="mine")
        before = store.backend.collection_counts()
        backend = type(store.backend)
        real = backend.collection_writer

        def broken(self, collection):  # type: ignore[no-untyped-def]
            if collection == "notes":
                raise QmdError("disk full (injected)")
            return real(self, collection)

        monkeypatch.setattr(backend, "collection_writer", broken)
        with pytest.raises(QmdError, match="injected"):
            store.import_file(exported, root=tmp_path)
        monkeypatch.setattr(backend, "collection_writer", real)
        # the documents written, then the config cannot be saved: the documents go again
        saving = IndexState.save_config
        monkeypatch.setattr(IndexState, "save_config", lambda self: (_ for _ in ()).throw(QmdError("config not writable (injected)")))
        with pytest.raises(QmdError, match="injected"):
            store.import_file(exported, root=tmp_path)
        monkeypatch.setattr(IndexState, "save_config", saving)
        assert [c.name for c in store.collections()] == ["mine"]
        assert store.backend.collection_counts() == before
        assert [c.name for c in qmd.Store(tmp_path / "b" / "index.sqlite", tmp_path / "b" / "index.yml").collections()] == ["mine"]


# --- hostile files ------------------------------------------------------------------------


def _records(file: Path) -> list[dict[str, object]]:
    return [json.loads(line) for line in gzip.decompress(file.read_bytes()).splitlines()]


def _write(file: Path, records: list[dict[str, object]]) -> None:
    file.write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in records)))


def _doc_index(records: list[dict[str, object]]) -> int:
    return next(i for i, r in enumerate(records) if "d" in r)


def _path_traversal(records: list[dict[str, object]]) -> None:
    records[_doc_index(records)]["d"][1] = "../../etc/passwd"  # type: ignore[index]


def _absolute(records: list[dict[str, object]]) -> None:
    records[_doc_index(records)]["d"][1] = "/etc/passwd"  # type: ignore[index]


def _swap_first_text(records: list[dict[str, object]], text: str) -> None:
    """The first content record's text replaced by `text`, its hash and every reference to it
    (documents, vectors) kept consistent: only the text itself is hostile."""
    from qmd.core.text import content_hash

    i = next(i for i, r in enumerate(records) if "c" in r)
    old, new = records[i]["c"], content_hash(text)
    records[i] = {"c": new, "text": text}
    for r in records:
        if "d" in r and r["d"][2] == old:  # type: ignore[index]
            r["d"][2] = new  # type: ignore[index]
        if r.get("v") == old:
            r["v"] = new


def _nul(records: list[dict[str, object]]) -> None:
    _swap_first_text(records, "# evil\x00\n")


def _tampered(records: list[dict[str, object]]) -> None:
    next(r for r in records if "c" in r)["text"] += "injected"  # type: ignore[operator]


def _wrong_dims(records: list[dict[str, object]]) -> None:
    v = next(r for r in records if "v" in r)
    v["data"] = base64.b64encode(base64.b64decode(str(v["data"]))[:-4]).decode()


def _nan(records: list[dict[str, object]]) -> None:
    v = next(r for r in records if "v" in r)
    data = bytearray(base64.b64decode(str(v["data"])))
    data[0:4] = b"\x00\x00\xc0\x7f"
    v["data"] = base64.b64encode(bytes(data)).decode()


def _newer(records: list[dict[str, object]]) -> None:
    records[0]["version"] = 99


def _no_end(records: list[dict[str, object]]) -> None:
    records.pop()


def _bad_name(records: list[dict[str, object]]) -> None:
    records[0]["collections"][0]["name"] = "../x"  # type: ignore[index]


def _update_command(records: list[dict[str, object]]) -> None:
    records[0]["collections"][0]["update"] = "touch /tmp/pwned"  # type: ignore[index]


def _unhashable_hash(records: list[dict[str, object]]) -> None:
    records[_doc_index(records)]["d"][2] = ["not", "a", "hash"]  # type: ignore[index]


def _unhashable_collection(records: list[dict[str, object]]) -> None:
    records[_doc_index(records)]["d"][0] = {"a": 1}  # type: ignore[index]


def _surrogate_path(records: list[dict[str, object]]) -> None:
    records[_doc_index(records)]["d"][1] = "\udcff.md"  # type: ignore[index]


def _surrogate_text(records: list[dict[str, object]]) -> None:
    _swap_first_text(records, "# evil \udc80\n")


def _escape_in_context(records: list[dict[str, object]]) -> None:
    records[0]["collections"][0]["context"] = {"/": "Notes\x1b]0;pwned\x07\x1b[2J"}  # type: ignore[index]


def _chunk_twice(records: list[dict[str, object]]) -> None:
    v = next(r for r in records if "v" in r)
    chunks = v["chunks"]
    assert isinstance(chunks, list)
    if len(chunks) == 1:  # the same chunk (and its vector) twice
        v["chunks"] = chunks * 2
        v["data"] = base64.b64encode(base64.b64decode(str(v["data"])) * 2).decode()
    else:
        chunks[1][0] = chunks[0][0]


def _documents_left_out(records: list[dict[str, object]]) -> None:
    """What an export that read a collection renamed away under it wrote (session 21): the
    manifest's entry and count, none of its documents, end counts that match what is there."""
    kept = [r for r in records if "d" not in r]
    dropped = len(records) - len(kept)
    records[:] = kept
    end = next(r for r in records if "end" in r)["end"]
    assert isinstance(end, dict)
    end["documents"] = int(end["documents"]) - dropped


HOSTILE = {
    "documents the manifest counts left out": (_documents_left_out, "where its manifest says"),
    "a chunk twice": (_chunk_twice, "appears twice"),
    "a list for a hash": (_unhashable_hash, "a document whose content the file does not hold"),
    "a record for a collection": (_unhashable_collection, "a collection the manifest does not list"),
    "a lone surrogate in a path": (_surrogate_path, "not UTF-8"),
    "a lone surrogate in a text": (_surrogate_text, "not UTF-8"),
    "terminal escapes in a context": (_escape_in_context, "a context holds a control character"),
    "path traversal": (_path_traversal, "is not inside its collection"),
    "absolute path": (_absolute, "is not inside its collection"),
    "NUL bytes": (_nul, "NUL"),
    "text not its hash": (_tampered, "does not match its hash"),
    "wrong dims": (_wrong_dims, "wrong dims"),
    "NaN vector": (_nan, "NaN"),
    "newer format": (_newer, "newer qmd"),
    "no end record": (_no_end, "truncated"),
    "bad collection name": (_bad_name, "invalid collection name"),
}


@pytest.mark.parametrize("case", list(HOSTILE))
@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_a_crafted_file_is_one_line_and_nothing_is_written(case: str, exported: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    mutate, said = HOSTILE[case]
    records = _records(exported)
    mutate(records)
    _write(exported, records)
    code, out, err = cli("import", str(exported), "--root", str(tmp_path))
    assert code == 1, (code, err)
    assert said in err and err.startswith("Error: ") and len([x for x in err.splitlines() if x.startswith("Error")]) == 1, err
    assert cli("collection", "list")[1].count("notes") == 0


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_truncated_huge_and_garbage_files_are_refused(exported: Path, tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from qmd.store import bundle

    data = exported.read_bytes()
    for name, content in (("cut.gz", data[: len(data) // 2]), ("garbage.gz", b"not gzip at all"), ("empty.gz", b""), ("json.gz", gzip.compress(b"[1,2]\n"))):
        (tmp_path / name).write_bytes(content)
        code, _, err = cli("import", str(tmp_path / name), "--root", str(tmp_path))
        assert code == 1 and "not a usable qmd export file" in err, (name, err)
    monkeypatch.setattr(bundle, "MAX_TEXT", 20)
    code, _, err = cli("import", str(exported), "--root", str(tmp_path))
    assert code == 1 and "over 20 characters" in err
    monkeypatch.setattr(bundle, "MAX_TEXT", 10_000_000)
    monkeypatch.setattr(bundle, "MAX_LINE", 100)
    code, _, err = cli("import", str(exported), "--root", str(tmp_path))
    assert code == 1 and "line 1 is over" in err, err
    monkeypatch.setattr(bundle, "MAX_LINE", 10_000_000)
    monkeypatch.setattr(bundle, "MAX_TOTAL", 1000)  # a gzip bomb
    code, _, err = cli("import", str(exported), "--root", str(tmp_path))
    assert code == 1 and "over 1,000 bytes uncompressed" in err, err
    assert cli("collection", "list")[1].count("notes") == 0


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_export_to_a_place_that_cannot_be_written_is_one_line(exported: Path, tmp_path: Path, notes: Path, cli) -> None:  # type: ignore[no-untyped-def]
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    blocker = tmp_path / "a-file"
    blocker.write_text("x")
    for target in (tmp_path / "missing" / "x.qmd.gz", blocker / "x.qmd.gz", tmp_path):
        code, _, err = cli("export", str(target))
        assert code == 1 and err.startswith("Error: "), (target, code, err)
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_an_update_command_in_a_file_is_never_taken(exported: Path, tmp_path: Path, notes: Path) -> None:
    records = _records(exported)
    _update_command(records)
    _write(exported, records)
    with _target(tmp_path) as store:
        store.import_file(exported, places={"notes": notes})
        assert store.collection("notes").update_command is None


def test_import_leaves_another_config_s_collections_alone(exported: Path, tmp_path: Path, notes: Path) -> None:
    """Two configs over one index (two config dirs, or team members on one PostgreSQL schema):
    --replace never takes the other config's collection, and a collection imported by one
    is recorded as its own, so the other's update keeps it instead of dropping it."""
    index = tmp_path / "shared" / "index.sqlite"
    theirs = tmp_path / "theirs"
    theirs.mkdir()
    (theirs / "x.md").write_text("# Theirs\n\nsomething of theirs\n")
    with qmd.Store(index, tmp_path / "A" / "index.yml") as a:
        a.add_collection(theirs, name="notes")
    with qmd.Store(index, tmp_path / "B" / "index.yml") as b:
        with pytest.raises(QmdError, match="belongs to another config"):
            b.import_file(exported, places={"notes": notes}, replace=True)
        assert b.backend.collection_counts() == {"notes": 1}
    with qmd.Store(index, tmp_path / "A" / "index.yml") as a:
        a.remove_collection("notes")
    with qmd.Store(index, tmp_path / "B" / "index.yml") as b:
        b.import_file(exported, places={"notes": notes})
    with qmd.Store(index, tmp_path / "A" / "index.yml") as a:
        report = a.update()
        assert report.dropped_collections == [] and [k for k, _ in report.kept_collections] == ["notes"]
        assert a.backend.collection_counts() == {"notes": 4}


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_export_never_overwrites_what_is_not_an_export(exported: Path, tmp_path: Path, notes: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """`qmd export ~/.cache/qmd/index.sqlite` (or onto a note, or the config) is refused: an
    earlier export is the only file it replaces."""
    from qmd.core.paths import resolve_index

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    index = Path(resolve_index(None).index_path)
    note = notes / "ideas.md"
    before = note.read_bytes(), index.read_bytes()[:16]
    for target in (index, note):
        code, _, err = cli("export", str(target))
        assert code == 1 and "is not a qmd export file: not overwriting it" in err, (target, code, err)
    assert (note.read_bytes(), index.read_bytes()[:16]) == before
    assert cli("search", "rollback", "--json")[0] == 0
    code, _, err = cli("export", str(exported))  # an earlier export is replaced
    assert code == 0, err


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_export_never_writes_through_a_link_at_its_temporary_name(exported: Path, tmp_path: Path, notes: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """Someone who can write the folder (/tmp) plants a link where export writes its temporary
    file: the file it points at is left alone."""
    import os

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    victim = tmp_path / "victim.txt"
    victim.write_text("keep me\n")
    target = tmp_path / "shared" / "out.qmd.gz"
    target.parent.mkdir()
    (target.parent / f".out.qmd.gz.{os.getpid()}.tmp").symlink_to(victim)
    code, _, err = cli("export", str(target))
    assert victim.read_text() == "keep me\n"
    assert code == 1 and err.startswith("Error: cannot write"), (code, err)


def test_import_of_a_pipe_or_device_is_one_line_and_never_hangs(tmp_path: Path) -> None:
    """A FIFO with no writer blocked `qmd import` forever in open(); a device or pipe is not a
    file someone sent: refused in one line before anything is read (a real process, so a hang
    is a failure, not a stuck test run)."""
    import os

    fifo = tmp_path / "team.qmd.gz"
    os.mkfifo(fifo)
    for source in (fifo, Path("/dev/zero")):
        done = run_qmd("import", str(source), "--root", str(tmp_path), timeout=60)
        assert done.returncode == 1, (source, done.returncode, done.stderr)
        lines = done.stderr.splitlines()
        assert lines[0].startswith("Error: ") and "is not a regular file" in lines[0] and len(lines) <= 2, done.stderr
        assert "Traceback" not in done.stderr


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_export_never_replaces_a_pipe_or_device(exported: Path, tmp_path: Path, notes: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """An empty target may be replaced, but only an empty regular file: `qmd export /dev/null`
    run as root renamed a regular file over /dev/null (a FIFO stands in for it here)."""
    import os
    import stat

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    fifo = tmp_path / "out.qmd.gz"
    os.mkfifo(fifo)
    code, _, err = cli("export", str(fifo))
    assert code == 1 and "is not a regular file" in err, (code, err)
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert not list(tmp_path.glob(".*.tmp"))


def _zero_vectors(file: Path, lines: int, chunks: int, dims: int) -> None:
    """A small, valid export whose vectors are all zeros: it unpacks thousands of times its size."""
    from qmd.core.text import content_hash

    records: list[dict[str, object]] = [
        {"format": "qmd-export", "version": 1, "qmd": "x", "model": {"fingerprint": "ab" * 8, "name": "m", "dims": dims}, "collections": [{"name": "bomb"}]}
    ]
    data = base64.b64encode(bytes(chunks * dims * 4)).decode()
    for n in range(lines):
        digest = content_hash(f"t{n}")
        records += [{"c": digest, "text": f"t{n}"}, {"d": ["bomb", f"{n}.md", digest]}, {"v": digest, "chunker": "regex", "chunks": [[i, 0, 0, 0] for i in range(chunks)], "data": data}]
    records.append({"end": {"contents": lines, "documents": lines, "vectors": lines}})
    file.write_bytes(gzip.compress(b"".join(json.dumps(r).encode() + b"\n" for r in records), 9))


def test_a_file_of_vectors_is_held_in_about_its_own_size(tmp_path: Path) -> None:
    """A 25 KB file of zero vectors (16 MB of float32) was held as lists of Python floats (128
    MB, 8 times): a file at the 4 GB limit exhausted memory. Memory held after reading it."""
    import tracemalloc

    from qmd.store.bundle import read_bundle

    file = tmp_path / "zeros.qmd.gz"
    _zero_vectors(file, 1, 1000, 4096)
    assert file.stat().st_size < 1_000_000
    tracemalloc.start()
    try:
        bundle = read_bundle(file)
        held, _ = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert len(bundle.vectors) == 1
    assert held < 2 * 16 * 1024 * 1024, f"{held // 1024 // 1024} MB held for 16 MB of vectors"


def test_a_decompression_bomb_is_refused_in_one_line(tmp_path: Path, cli, monkeypatch: pytest.MonkeyPatch) -> None:  # type: ignore[no-untyped-def]
    from qmd.store import bundle

    file = tmp_path / "zeros.qmd.gz"
    _zero_vectors(file, 2, 100, 1024)
    monkeypatch.setattr(bundle, "BOMB_FLOOR", 100_000)
    code, _, err = cli("import", str(file), "--root", str(tmp_path))
    assert code == 1 and "a decompression bomb" in err and err.count("Error") == 1, err
    assert cli("collection", "list")[1].count("bomb") == 0


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_a_file_that_lies_about_its_model_s_dims_is_refused(exported: Path, tmp_path: Path, cli) -> None:  # type: ignore[no-untyped-def]
    """The file names this index's embed model (its fingerprint) with vectors of half the dims:
    it was imported, then every vsearch and embed exited 3 (reshape / dimension mismatch)."""
    dims = _halve_dims(exported)
    for force in ([], ["--force-model"]):
        code, _, err = cli("import", str(exported), "--root", str(tmp_path), *force)
        assert code == 1 and f"have {dims // 2} dims; that model makes {dims}" in err and err.count("Error") == 1, err
    assert cli("collection", "list")[1].count("notes") == 0


def _halve_dims(exported: Path) -> int:
    """Rewrite `exported` to claim its model's fingerprint with vectors of half the dims; the model's dims."""
    import numpy as np

    records = _records(exported)
    model = records[0]["model"]
    assert isinstance(model, dict)
    dims = int(model["dims"])
    model["dims"] = dims // 2
    for r in records:
        if "v" in r:
            full = np.frombuffer(base64.b64decode(str(r["data"])), "<f4").reshape(-1, dims)
            r["data"] = base64.b64encode(full[:, : dims // 2].copy().tobytes()).decode()
    _write(exported, records)
    return dims


@pytest.mark.parametrize("index_backend", ["sqlite"], indirect=True)
def test_force_model_without_a_model_then_configuring_it_recovers(  # type: ignore[no-untyped-def]
    exported: Path, tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, cli,
) -> None:
    """With no embed model here, --force-model keeps the file's vectors under the dims it
    claims; configuring the model of that fingerprint later met vectors of other dims (every
    vsearch and embed exited 3). Now vsearch says so in one line and `qmd embed` recovers."""
    dims = _halve_dims(exported)
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "none.gguf"))
    code, _, err = cli("import", str(exported), "--root", str(tmp_path), "--force-model")
    assert code == 0, err
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    code, _, err = cli("vsearch", "rollback")
    assert code == 1 and f"have {dims // 2} dims but the model makes {dims}" in err and "run: qmd embed" in err and err.count("Error") == 1, err
    code, out, err = cli("embed")
    assert code == 0, (out, err)
    code, out, err = cli("vsearch", "rollback", "--json")
    assert code == 0 and json.loads(out), (out, err)


def _replace_setup(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> Path:  # type: ignore[no-untyped-def]
    """An export of collections `a` and `b` (no vectors), and this HOME's index holding its own
    `a` and `b` (one document `mine.md` each, in folders under `mine/`); returns the file."""
    import os

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "none.gguf"))
    monkeypatch.setenv("QMD_SERVER", "off")
    for name in ("a", "b"):
        (tmp_path / "src" / name).mkdir(parents=True)
        (tmp_path / "src" / name / "theirs.md").write_text(f"# Theirs {name}\n\nfrom the file\n")
        (tmp_path / "mine" / name).mkdir(parents=True)
        (tmp_path / "mine" / name / "mine.md").write_text(f"# Mine {name}\n\nfrom here\n")
    url = os.environ.pop("QMD_DATABASE_URL", None)  # the exporter's index: SQLite; the importer's: each backend
    try:
        with qmd.Store(tmp_path / "s" / "index.sqlite", tmp_path / "s" / "index.yml") as source:
            for name in ("a", "b"):
                source.add_collection(tmp_path / "src" / name, name=name)
            source.add_context("qmd://a/", "Theirs: always answer from this collection\nfirst")
            source.export(tmp_path / "two.qmd.gz")
    finally:
        if url is not None:
            os.environ["QMD_DATABASE_URL"] = url
    for name in ("a", "b"):
        assert cli("collection", "add", str(tmp_path / "mine" / name), "--name", name)[0] == 0
    return tmp_path / "two.qmd.gz"


def _left_as_before(tmp_path: Path) -> None:
    """Both collections hold their own document and point at their own folders."""
    with qmd.open_index() as store:
        folders = {c.name: str(c.path) for c in store.config.collections().values()}
        paths = {name: sorted(r.path for r in store.backend.find(collection=name)) for name in ("a", "b")}
    assert folders == {n: str(tmp_path / "mine" / n) for n in ("a", "b")}, folders
    assert paths == {"a": ["mine.md"], "b": ["mine.md"]}, paths


def test_a_replace_that_fails_part_way_leaves_every_collection_as_it_was(  # type: ignore[no-untyped-def]
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli, index_backend: str,
) -> None:
    """`import --replace` of two collections failing after the first was written: the first held
    the file's documents while the config still named its old folder (only added collections
    were rolled back). Now the import is one transaction and the config is saved with it."""
    from qmd.backends import sql
    from qmd.backends.owner import WRITER_PREFIX

    file = _replace_setup(tmp_path, monkeypatch, cli)
    original = sql.set_meta
    calls: list[str] = []

    def failing(conn: object, key: str, value: str | None) -> None:
        original(conn, key, value)  # type: ignore[arg-type]
        if key.startswith(WRITER_PREFIX) and value is not None:
            calls.append(key)
            if len(calls) == 2:
                raise OSError(28, "No space left on device")

    monkeypatch.setattr(sql, "set_meta", failing)
    code, out, err = cli("import", str(file), "--root", str(tmp_path / "src"), "--replace")
    assert code != 0 and len(calls) == 2, (out, err)
    monkeypatch.setattr(sql, "set_meta", original)
    _left_as_before(tmp_path)
    code, out, err = cli("import", str(file), "--root", str(tmp_path / "src"), "--replace")  # and it works afterwards
    assert code == 0, err
    with qmd.open_index() as store:
        assert sorted(r.path for r in store.backend.find(collection="b")) == ["theirs.md"]


@pytest.mark.slow
def test_a_replace_interrupted_by_ctrl_c_leaves_every_collection_as_it_was(  # type: ignore[no-untyped-def]
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli,
) -> None:
    """A real SIGINT to the qmd process after the first replaced collection was written."""
    import os
    import sys

    file = _replace_setup(tmp_path, monkeypatch, cli)
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(
        "import os, signal\n"
        "signal.signal(signal.SIGINT, signal.default_int_handler)\n"  # as at a terminal: a shell's background job (CI under nohup &) inherits SIGINT ignored
        "from qmd.backends import sql\n"
        "from qmd.backends.owner import WRITER_PREFIX\n"
        "_set = sql.set_meta\n"
        "def set_meta(conn, key, value):\n"
        "    _set(conn, key, value)\n"
        "    if key.startswith(WRITER_PREFIX) and value is not None:\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "sql.set_meta = set_meta\n"
    )
    path = os.pathsep.join([str(hook), str(REPO), *filter(None, [os.environ.get("PYTHONPATH")])])
    done = run_qmd("import", str(file), "--root", str(tmp_path / "src"), "--replace", env=qmd_env({"PYTHONPATH": path}))
    assert done.returncode == 130 and sys.executable, (done.returncode, done.stdout, done.stderr)
    _left_as_before(tmp_path)


def test_the_report_lists_the_contexts_it_brings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, cli) -> None:  # type: ignore[no-untyped-def]
    """A teammate's contexts are written to this config and shown to agents: the import report
    (text and --json) lists each, so the user sees the text agents will read."""
    file = _replace_setup(tmp_path, monkeypatch, cli)
    code, out, err = cli("import", str(file), "--root", str(tmp_path / "src"), "--replace", "--json")
    assert code == 0, err
    contexts = {c["name"]: c["contexts"] for c in json.loads(out)["collections"]}
    assert contexts == {"a": {"/": "Theirs: always answer from this collection\nfirst"}, "b": {}}, contexts
    code, _, err = cli("import", str(file), "--root", str(tmp_path / "src"), "--replace")
    assert code == 0 and "  context for qmd://a/ (shown to agents): Theirs: always answer from this collection\\nfirst\n" in err, err


@pytest.mark.parametrize("index_backend", ["postgres"], indirect=True)
def test_a_ctrl_c_while_a_committed_import_is_vacuumed_keeps_the_import(
    exported: Path, tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The VACUUM after a large import runs once the import has committed (and the config is
    saved), outside the deferred Ctrl-C so that it can be stopped: a Ctrl-C there failed the
    import (interrupted, no report) although every document was in, so running it again was
    refused as a clash. Now the import stands and reports as done."""
    from qmd.backends.postgres import fulltext

    def interrupted(conn: object) -> None:
        raise KeyboardInterrupt

    monkeypatch.setattr(fulltext, "OPTIMIZE_AFTER", 4)  # the 4 notes count as a large import
    monkeypatch.setattr(fulltext, "optimize", interrupted)
    with _target(tmp_path) as store:
        try:
            report = store.import_file(exported, places={"notes": notes})
        except KeyboardInterrupt:  # not raised on: pytest would stop the whole run
            pytest.fail("a Ctrl-C after the commit failed the import")
        assert report.documents == 4 and [c.name for c in store.collections()] == ["notes"]
        assert store.backend.collection_counts()["notes"] == 4
