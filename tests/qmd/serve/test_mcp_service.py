"""The MCP tools without a transport: argument checks, path escapes, freshness, instructions,
the Origin/Host guard, client registration, the build id."""

from __future__ import annotations

import json
import os
import re
from collections.abc import Callable, Iterator
from typing import Any
from pathlib import Path

import pytest

import qmd
from qmd import harness
from qmd.serve.origin import Guard, is_loopback, normalise_origin
from qmd.serve.arguments import ArgError, parse_query_args
from qmd.serve.service import ToolService
from qmd.serve.answers import INSTRUCTIONS_MAX_BYTES, build_instructions, read_health_flag
from tests.support.mcp import SECRET, write_notes
from tests.support.run import qmd_env

Cli = Callable[..., tuple[int, str, str]]  # conftest's in-process CLI runner


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ToolService]:
    notes = write_notes(tmp_path)
    os.symlink(tmp_path / "secret.md", notes / "link-out.md")  # a symlink leaving the collection
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(notes, name="notes")
    svc = ToolService(store, "index", idle_s=0, log=lambda line: None).start()
    yield svc
    svc.close()


ESCAPES = [
    "../secret.md",
    "../../secret.md",
    "notes/../secret.md",
    "notes/../../secret.md",
    "qmd://notes/../secret.md",
    "qmd://notes/../../secret.md",
    "qmd://secret.md",
    "{tmp}/secret.md",
    "{tmp}/notes/../secret.md",
    "{tmp}/notes/.hidden/private.md",
    "{tmp}/notes/link-out.md",
    "notes/link-out.md",
    "/etc/passwd",
    "~/secret.md",
    "notes/.hidden/private.md",
    "secret.md",
    "#" + "f" * 6,
]


@pytest.mark.parametrize("ref", ESCAPES)
def test_get_refuses_paths_outside_the_collections(service: ToolService, tmp_path: Path, ref: str) -> None:
    out = service.call("get", {"file": ref.format(tmp=tmp_path)})
    assert out.is_error and out.text.startswith("Error: ")
    assert SECRET not in out.text and "root:" not in out.text


def test_get_of_a_removed_document_says_it_was_removed(service: ToolService, tmp_path: Path) -> None:
    gone = tmp_path / "notes" / "ideas.md"
    os.utime(gone, (1_600_000_000, 1_600_000_000))
    service.store.update()
    gone.unlink()
    service.store.update()
    out = service.call("get", {"file": "notes/ideas.md"})
    assert out.is_error and out.text.startswith("Error: qmd://notes/ideas.md was removed from the index at the update of "), out.text
    assert "restore the file" in out.text


@pytest.mark.parametrize("pattern", ["../*", "../**", "*/../*", "/*", "/etc/*", "{tmp}/*", "**/secret.md", "*secret*", "notes/.hidden/*", "notes/link-out.md", "notes/**/../../*", "notes/runbooks/deploy.md,../secret.md", "notes/ideas.md,{tmp}/secret.md"])
def test_multi_get_refuses_globs_and_lists_that_leave_the_collections(service: ToolService, tmp_path: Path, pattern: str) -> None:
    out = service.call("multi_get", {"pattern": pattern.format(tmp=tmp_path)})
    assert SECRET not in out.text and SECRET not in json.dumps(out.structured or {})
    if not out.is_error:  # a glob may match indexed documents, and only those (a name that finds none is a skipped entry)
        assert all(d["file"].startswith("qmd://notes/") for d in out.structured["documents"] if "docid" in d)


def test_multi_get_of_a_list_returns_what_it_finds_and_names_what_it_does_not(service: ToolService) -> None:
    out = service.call("multi_get", {"pattern": "notes/nope.md, notes/ideas.md"})
    assert not out.is_error
    missing, found = out.structured["documents"]
    assert missing["file"] == "notes/nope.md" and "not found" in missing["skipped"] and "docid" not in missing
    assert found["file"] == "qmd://notes/ideas.md" and found["text"].startswith("Some ideas")
    assert "=== notes/nope.md\n[skipped: document not found" in out.text
    assert service.call("multi_get", {"pattern": "notes/nope.md, notes/gone.md"}).is_error  # nothing found: an error, as before


def test_multi_get_within_the_collections(service: ToolService) -> None:
    out = service.call("multi_get", {"pattern": "notes/**/*.md", "maxBytes": 80})  # '**/' is zero or more folders
    docs = {d["file"]: d for d in out.structured["documents"]}
    assert set(docs) == {"qmd://notes/ideas.md", "qmd://notes/meetings/2024-03-01.md", "qmd://notes/runbooks/deploy.md", "qmd://notes/runbooks/postgres.md"}
    assert "over the 80-byte limit" in docs["qmd://notes/runbooks/deploy.md"]["skipped"]
    assert docs["qmd://notes/ideas.md"]["text"].startswith("Some ideas")
    top = service.call("multi_get", {"pattern": "notes/*.md"})  # '*' stops at '/'
    assert [d["file"] for d in top.structured["documents"]] == ["qmd://notes/ideas.md"]


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ({}, "exactly one of query"),
        ({"query": "a", "searches": [{"type": "lex", "query": "a"}]}, "exactly one of query"),
        ({"query": "   "}, "query is empty"),
        ({"query": 3}, "query must be a string"),
        ({"searches": []}, "non-empty list"),
        ({"searches": [{"type": "lex"}]}, "searches[1].query must be a string"),
        ({"searches": [{"type": "sql", "query": "x"}]}, "lex, vec or hyde"),
        ({"searches": [{"type": "lex", "query": "x", "weight": 2}]}, "unknown field 'weight'"),
        ({"searches": [{"type": "lex", "query": "x"}] * 11}, "at most 10"),
        ({"query": "a", "limit": 0}, "between 1 and 100"),
        ({"query": "a", "limit": True}, "whole number"),
        ({"query": "a", "minScore": 2}, "between 0 and 1"),
        ({"query": "a", "candidateLimit": "lots"}, "whole number"),
        ({"query": "a", "rerank": "maybe"}, "true or false"),
        ({"query": "a", "collections": [1]}, "list of names"),
        ({"query": "a", "collection": "notes"}, "unknown parameter 'collection'"),
        ({"query": "a", "n": 3, "k": 1}, "unknown parameters 'n', 'k'"),
    ],
)
def test_query_argument_errors(args: dict, message: str) -> None:
    with pytest.raises(ArgError) as info:
        parse_query_args(args)
    assert message in info.value.message


def test_query_arguments_are_lax_about_json_types() -> None:
    q = parse_query_args({"searches": json.dumps([{"type": "lex", "query": "a\nvec: b"}]), "limit": "5", "minScore": "0.5", "rerank": "false", "collections": "notes"})
    assert q.text == "lex: a vec: b"  # a newline cannot smuggle in another sub-query
    assert (q.limit, q.min_score, q.rerank, q.collections) == (5, 0.5, False, ["notes"])
    q = parse_query_args({"query": "how do we roll back", "limit": 3.0, "intent": "deploys"})
    assert (q.text, q.limit, q.intent, q.candidates) == ("how do we roll back", 3, "deploys", 40)


@pytest.mark.parametrize("query", ["", "  ", "\n"])
def test_an_empty_query_is_a_clear_error(service: ToolService, query: str) -> None:
    out = service.call("query", {"query": query})
    assert out.is_error and out.text.startswith("Error: query is empty") and "internal error" not in out.text, out.text


def test_unknown_names_are_refused_by_every_tool(service: ToolService) -> None:
    for tool, args, valid in (
        ("get", {"file": "notes/ideas.md", "path": "x"}, "file, fromLine, maxLines, lineNumbers"),
        ("multi_get", {"pattern": "*", "max_bytes": 10}, "pattern, maxLines, maxBytes, lineNumbers"),
        ("status", {"verbose": True}, "(none)"),
    ):
        out = service.call(tool, args)
        assert out.is_error and "unknown parameter" in out.text and valid in out.text, out.text
    assert "did you mean 'maxBytes'" in service.call("multi_get", {"pattern": "*", "maxbytes": 1}).text


def test_unexpected_errors_become_error_results(service: ToolService, monkeypatch: pytest.MonkeyPatch) -> None:
    def boom(*a: object, **k: object) -> None:
        raise RuntimeError("kaboom")

    monkeypatch.setattr(service.store, "query", boom)
    out = service.call("query", {"query": "x"})
    assert out.is_error and "internal error in query: RuntimeError: kaboom" in out.text
    assert not service.call("status", {}).is_error


def test_freshness_follows_the_health_flag(service: ToolService, tmp_path: Path) -> None:
    flag = harness.state_dir() / "health.json"
    assert service.call("status", {}).structured["freshness"]["health"] == "unknown"
    flag.parent.mkdir(parents=True, exist_ok=True)
    flag.write_text(json.dumps({"raised": True, "since": "2026-01-02T03:04:05Z", "failures": ["a", "b"], "last_success": None}))
    out = service.call("query", {"searches": [{"type": "lex", "query": "rollback"}]})
    f = out.structured["freshness"]
    assert (f["health"], f["health_since"], f["failures"]) == ("raised", "2026-01-02T03:04:05Z", 2)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", f["updated_at"]) and f["age_s"] >= 0
    assert "health flag: raised since 2026-01-02T03:04:05Z (2 failing updates)" in out.text and "qmd health" in out.text
    flag.write_text(json.dumps({"raised": False, "since": None, "failures": [], "last_success": "x"}))
    assert service.call("status", {}).structured["freshness"]["health"] == "ok"
    assert "health flag: not raised" in service.call("status", {}).text
    for junk in ("{", "[]", '{"raised": "yes"}', ""):
        flag.write_text(junk)
        assert read_health_flag(flag)["health"] == "unknown"


def test_config_changes_are_seen_without_a_restart(service: ToolService, tmp_path: Path) -> None:
    more = tmp_path / "more"
    more.mkdir()
    (more / "zebra.md").write_text("# Zebra\n\nstripes\n")
    other = qmd.Store(service.store.index_path, service.store.config_path)  # another qmd process
    other.add_collection(more, name="more")
    other.close()
    out = service.call("query", {"searches": [{"type": "lex", "query": "stripes"}], "collections": ["more"]})
    assert not out.is_error and out.structured["results"][0]["file"] == "qmd://more/zebra.md"


def test_instructions_are_built_from_the_index_and_stay_under_2kb(service: ToolService) -> None:
    text = service.instructions()
    assert "4 markdown documents" in text and "- notes (4 docs)" in text
    assert "lex:" in text and "vec:" in text and "hyde:" in text and "before answering from general knowledge" in text
    assert len(text.encode()) <= INSTRUCTIONS_MAX_BYTES
    from qmd.core.results import CollectionInfo, StatusInfo

    colls = [CollectionInfo(f"collection-{i:03d}", "/x", "**/*.md", [], True, i, None, {"/": "ü context " * 30}) for i in range(200)]
    big = build_instructions(StatusInfo("/x", 0, 12345, 0, 0, None, colls, [], "global " * 100), "big", False)
    assert len(big.encode()) <= INSTRUCTIONS_MAX_BYTES
    assert "12345 markdown documents" in big and "more (see the status tool)" in big and "hyde:" in big
    assert "index is empty" in build_instructions(None, "x", None)


@pytest.mark.parametrize(
    ("origin", "host", "status"),
    [
        (None, None, 200),
        (None, "127.0.0.1:8181", 200),
        (None, "localhost", 200),
        (None, "[::1]:8181", 200),
        (None, "127.9.9.9:1", 200),
        (None, "app.localhost:8181", 200),
        ("http://localhost:5173", "127.0.0.1:8181", 200),
        ("https://127.0.0.1", None, 200),
        ("http://[::1]:3000", None, 200),
        ("http://[::ffff:127.0.0.1]:3000", None, 200),
        ("http://evil.example", "127.0.0.1:8181", 403),
        ("http://localhost.evil.example", None, 403),
        ("http://0.0.0.0:8181", None, 403),
        ("null", None, 403),
        ("file://", None, 403),
        ("chrome-extension://abc", None, 403),
        ("not a url", None, 403),
        (None, "evil.example", 421),
        (None, "evil.example:8181", 421),
        (None, "0.0.0.0:8181", 421),
        (None, "127.0.0.1@evil.example", 421),
        (None, "", 421),
        ("http://evil.example", "evil.example", 403),
    ],
)
def test_guard_table(origin: str | None, host: str | None, status: int) -> None:
    assert Guard.for_bind("127.0.0.1", [], []).check(origin, host).status == status


def test_guard_widened_by_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_ALLOWED_ORIGINS", "https://App.Example:8443, http://tool.lan")
    monkeypatch.setenv("QMD_ALLOWED_HOSTS", "notes.lan,box:9000")
    g = Guard.for_bind("127.0.0.1")
    assert g.check("https://app.example:8443", "notes.lan").ok and g.check("http://tool.lan", "notes.lan:1234").ok
    assert g.check(None, "box:9000").ok and g.check(None, "box:9001").status == 421
    assert g.check("https://app.example", None).status == 403
    monkeypatch.setenv("QMD_ALLOWED_ORIGINS", "*")
    monkeypatch.setenv("QMD_ALLOWED_HOSTS", "*")
    assert Guard.for_bind("127.0.0.1").check("http://anything.example", "any.host").ok


def test_guard_accepts_its_own_bind_address() -> None:
    g = Guard.for_bind("192.0.2.7", [], [])
    assert g.check(None, "192.0.2.7:8181").ok and g.check(None, "192.0.2.8:8181").status == 421
    assert Guard.for_bind("0.0.0.0", [], []).check(None, "0.0.0.0:8181").status == 421  # a wildcard is no name
    assert is_loopback("LOCALHOST") and not is_loopback("0.0.0.0") and normalise_origin("HTTP://Example.COM:80/") == "http://example.com:80"


def test_build_id_changes_with_the_sources(tmp_path: Path) -> None:
    from qmd.core.buildinfo import build_id, source_digest

    assert re.fullmatch(re.escape(qmd.__version__) + r"\+[0-9a-f]{12}", build_id())
    (tmp_path / "a.py").write_text("x = 1\n")
    first = source_digest(tmp_path)
    (tmp_path / "a.py").write_text("x = 2\n")
    assert source_digest(tmp_path) != first


# --- install: tests/qmd/agents/test_agents_mcp_install.py ---------------------------------


def test_only_the_server_imports_the_sdk(tmp_path: Path) -> None:
    import subprocess
    import sys

    notes = write_notes(tmp_path)
    code = (
        "import sys\n"
        "from qmd.cli.main import main\n"
        f"assert main(['collection', 'add', {str(notes)!r}, '--name', 'n']) == 0\n"
        "assert main(['search', 'rollback', '--json']) == 0\n"
        "assert main(['mcp', '--help']) == 0\n"
        "assert main(['mcp', 'install', '--help']) == 0\n"
        "heavy = sorted(m for m in ('mcp', 'mcp_types', 'pydantic', 'starlette', 'uvicorn', 'anyio', 'httpx2') if m in sys.modules)\n"
        "assert not heavy, heavy\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=qmd_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


FIRST_CALLS = {
    "lex query": ("query", {"searches": [{"type": "lex", "query": "rollback"}], "limit": 10}),
    "get": ("get", {"file": "notes/runbooks/deploy.md"}),
}


# models.yml as install.sh leaves it (`qmd models import --set-default`): the query's rerank
# lookup read it with the YAML parser, 25 ms of a 20 ms first keyword call in a real home.
INSTALLED = "from qmd.llm.models import set_installed_default\nset_installed_default('embed', '/models/minilm.gguf')\n"


def first_session(tmp_path: Path, first: str, script: str, installed: bool = False) -> tuple[dict[int, dict[str, Any]], str]:
    """Run `script` (a stdio server in a fresh interpreter) over a small index with initialize,
    initialized and the FIRST_CALLS tool call `first` as request 2; its answers by id and its
    stderr, once the call's answer is checked to hold the deploy runbook. `installed`: the
    home as install.sh leaves it (INSTALLED), no model named by the environment."""
    import subprocess
    import sys

    from tests.support.mcp import make_env, setup_index

    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    if installed:
        for role in ("EMBED", "RERANK", "GENERATE"):
            env.pop(f"QMD_{role}_MODEL")
        subprocess.run([sys.executable, "-c", INSTALLED], env=env, check=True, timeout=60)
    tool, arguments = FIRST_CALLS[first]
    messages = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}},
    ]
    stdin = "".join(json.dumps(m) + "\n" for m in messages)
    proc = subprocess.run([sys.executable, "-c", script], input=stdin, env=env, capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr
    answers = {a["id"]: a for a in map(json.loads, proc.stdout.splitlines())}
    result = answers[2]["result"]
    assert not result["isError"] and ("deploy.md" in result["content"][0]["text"]), result
    return answers, proc.stderr


@pytest.mark.parametrize("first", sorted(FIRST_CALLS))
def test_first_stdio_call_loads_nothing_it_does_not_use(tmp_path: Path, first: str) -> None:
    """A stdio session's first tool call, keyword-only or a get, waits for nothing it does not
    use: not tree-sitter and its grammars (only `status` lists them: the instructions never
    do), not llama.cpp, not numpy."""
    code = (
        "import json, sys\n"
        "from qmd.serve.stdio import run\n"
        "code = run(None)\n"
        "heavy = sorted(m for m in ('tree_sitter', 'llama_cpp', 'numpy') if m in sys.modules)\n"
        "sys.stderr.write('HEAVY ' + json.dumps(heavy) + '\\n')\n"
        "sys.exit(code)\n"
    )
    answers, stderr = first_session(tmp_path, first, code)
    assert "documents" in answers[1]["result"]["instructions"]
    heavy = json.loads(stderr.rsplit("HEAVY ", 1)[1])
    assert heavy == [], heavy


# What a later start's first call (instructions kept from the last start) must not wait for:
# the status the instructions are made of (maintenance, collections: checked after the call),
# the trust gate and its hashlib, datetime (qmd's own timestamps are read without it), typing (3 ms), the
# embed activity, the vector side of a keyword-only query, the indexer, and the heavy libraries.
NOT_ON_A_FIRST_CALL = (
    "qmd.store.maintenance", "qmd.store.collections", "qmd.store.activity", "qmd.core.trust", "qmd.search.vector",
    "hashlib", "datetime", "shlex", "typing", "yaml", "tree_sitter", "llama_cpp", "numpy",
    "weakref", "zlib",  # kept side writes (only a write records one), the config copy's name (0.4 and 0.2 ms)
)
NOT_ON_A_FIRST_QUERY = ("qmd.store.refs",)  # references: a get's, never a search's


@pytest.mark.parametrize("installed", [False, True], ids=["bare home", "installed home"])
@pytest.mark.parametrize("first", sorted(FIRST_CALLS))
def test_a_later_starts_first_call_imports_only_what_its_answer_uses(tmp_path: Path, first: str, installed: bool) -> None:
    """Issue 31: the modules loaded when the answer to a stdio session's first tool call is
    written (a start that finds kept instructions, as every start after the first does), in
    a home as `collection add` leaves it and in one install.sh set up."""
    code = (
        "import json, sys\n"
        "from qmd.core.paths import resolve_index\n"
        "from qmd.serve import instructions, stdio\n"
        "paths = resolve_index(None)\n"
        "kept = instructions.cache_path(paths.key)\n"
        "kept.parent.mkdir(parents=True, exist_ok=True)\n"
        "kept.write_text(json.dumps({'version': instructions.VERSION, 'key': instructions.inputs(paths), 'text': 'KEPT'}))\n"
        "import threading\n"
        "loaded = []\n"
        "answered = threading.Event()\n"
        "send = stdio.StdioServer.send\n"
        "def spy(self, message):\n"
        "    if isinstance(message, dict) and message.get('id') == 2:\n"
        "        loaded.extend(sys.modules)\n"
        "    send(self, message)\n"
        "    if isinstance(message, dict) and message.get('id') == 1:\n"
        "        answered.set()\n"
        "stdio.StdioServer.send = spy\n"
        "# the index opens once initialize is answered, as on an idle machine: an opener done first\n"
        "# (under load, CI 2026-12-03) makes initialize answer fresh text, not the kept one\n"
        "open_index = stdio.StdioServer._open_index\n"
        "def late_open(self):\n"
        "    answered.wait(30)\n"
        "    open_index(self)\n"
        "stdio.StdioServer._open_index = late_open\n"
        "code = stdio.run(None)\n"
        "sys.stderr.write('LOADED ' + json.dumps(sorted(loaded)) + '\\n')\n"
        "sys.exit(code)\n"
    )
    answers, stderr = first_session(tmp_path, first, code, installed)
    assert answers[1]["result"]["instructions"] == "KEPT"  # a later start: the kept text answered
    loaded = json.loads(stderr.rsplit("LOADED ", 1)[1])
    assert "qmd.store.store" in loaded  # the snapshot is the answer's
    unused = sorted(m for m in loaded if m in NOT_ON_A_FIRST_CALL or m.startswith(("qmd.index.", "qmd.cli.")))
    assert unused == [], unused
    assert first != "lex query" or not set(NOT_ON_A_FIRST_QUERY) & set(loaded)


def test_the_collector_is_held_off_until_the_first_call_is_answered_then_runs_again(tmp_path: Path) -> None:
    """A stdio start makes tens of thousands of objects that live as long as the process; the
    cyclic collector walked them all on the way to the first answer. It is off from `run` to
    the first answer, then on again with what was made frozen (never left off in a server
    that may run for days)."""
    code = (
        "import gc, json, sys\n"
        "from qmd.serve import stdio\n"
        "seen = []\n"
        "send = stdio.StdioServer.send\n"
        "def spy(self, message):\n"
        "    if isinstance(message, dict) and message.get('id') == 2:\n"
        "        seen.append(gc.isenabled())\n"
        "    send(self, message)\n"
        "stdio.StdioServer.send = spy\n"
        "code = stdio.run(None)\n"
        "sys.stderr.write('GC ' + json.dumps([seen, gc.isenabled(), gc.get_freeze_count() > 1000]) + '\\n')\n"
        "sys.exit(code)\n"
    )
    _, stderr = first_session(tmp_path, "lex query", code)
    assert json.loads(stderr.rsplit("GC ", 1)[1]) == [[False], True, True]


def test_an_index_that_cannot_be_opened_leaves_the_collector_on(tmp_path: Path) -> None:
    import subprocess
    import sys

    from tests.support.mcp import make_env

    env = make_env(tmp_path)
    config = Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"
    config.parent.mkdir(parents=True, exist_ok=True)
    config.write_text("collections: [unclosed\n")
    code = (
        "import gc, sys, threading\n"
        "from qmd.serve import stdio\n"
        "code = stdio.run(None)\n"
        "sys.stderr.write(f'GC {gc.isenabled()}\\n')\n"
        "sys.exit(code)\n"
    )
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    proc = subprocess.run([sys.executable, "-c", code], input=json.dumps(init) + "\n", env=env, capture_output=True, text=True, timeout=60)
    assert "qmd cannot serve" in proc.stdout and proc.stderr.rstrip().endswith("GC True"), proc.stderr


def test_importing_the_reference_parser_compiles_no_pattern() -> None:
    """Issue 31: a get imports qmd.store.refs, and most gets parse no range: its patterns are
    compiled when a reference is first parsed (they were 0.35 ms of a stdio server's first
    answer)."""
    import subprocess
    import sys

    code = (
        "import re\n"
        "import qmd.backends.base, qmd.core.clock, qmd.core.config, qmd.core.errors\n"
        "compiled = []\n"
        "original = re._compile\n"
        "def spy(pattern, flags):\n"
        "    compiled.append(pattern)\n"
        "    return original(pattern, flags)\n"
        "re._compile = spy\n"
        "import qmd.store.refs as refs\n"
        "assert compiled == [], compiled\n"
        "assert refs.split_range('a.md:3:2') == ('a.md', 3, 2) and compiled\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], env=qmd_env(), capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stderr


QUERY_PATH = ("qmd.store.reading", "qmd.search.hybrid", "qmd.search.narrowed", "qmd.llm.models")


def _timeless(answer: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    """A query answer without its freshness (its age moves between two sessions)."""
    result = answer["result"]
    structured = {k: v for k, v in result["structuredContent"].items() if k != "freshness"}
    return result["content"][0]["text"].split("Index last updated")[0], structured


def test_the_idle_time_after_the_handshake_prepares_the_first_keyword_query(tmp_path: Path) -> None:
    """Issue 31: once `initialize` is answered and the index is open, the worker imports the
    query pipeline and the model lookup (and opens the connection) while the client composes
    its first call: nothing of it before `initialize` is answered, and the call's answer is
    the one a session without the wait gets."""
    import subprocess
    import sys
    import threading

    from tests.support.mcp import make_env

    code = (
        "import json, sys\n"
        "from qmd.serve import stdio\n"
        "from qmd.serve.service import ToolService\n"
        f"path = {QUERY_PATH!r}\n"
        "seen = {}\n"
        "send = stdio.StdioServer.send\n"
        "def spy(self, message):\n"
        "    if isinstance(message, dict) and message.get('id') in (1, 2):\n"
        "        seen[message['id']] = sorted(m for m in path if m in sys.modules)\n"
        "    send(self, message)\n"
        "stdio.StdioServer.send = spy\n"
        "warm = ToolService.warm\n"
        "def spy_warm(self):\n"
        "    warm(self)\n"
        "    sys.stderr.write('WARMED ' + json.dumps(sorted(m for m in path if m in sys.modules)) + '\\n')\n"
        "    sys.stderr.flush()\n"
        "ToolService.warm = spy_warm\n"
        "code = stdio.run(None)\n"
        "sys.stderr.write('SEEN ' + json.dumps(seen) + '\\n')\n"
        "sys.exit(code)\n"
    )
    back_to_back, _ = first_session(tmp_path, "lex query", code)  # the index, and the answer without a wait
    tool, arguments = FIRST_CALLS["lex query"]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "0"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": tool, "arguments": arguments}}
    proc = subprocess.Popen([sys.executable, "-c", code], env=make_env(tmp_path), stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdin is not None and proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    warmed = threading.Event()

    def read_stderr() -> None:
        assert proc.stderr is not None
        for line in proc.stderr:
            lines.append(line)
            if line.startswith("WARMED "):
                warmed.set()

    reader = threading.Thread(target=read_stderr, daemon=True)
    reader.start()
    try:
        proc.stdin.write(json.dumps(init) + "\n")
        proc.stdin.flush()
        assert json.loads(proc.stdout.readline())["id"] == 1
        assert warmed.wait(30), "".join(lines)  # the client's model turn: the server prepares meanwhile
        proc.stdin.write(json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n" + json.dumps(call) + "\n")
        proc.stdin.flush()
        answer = json.loads(proc.stdout.readline())
        proc.stdin.close()
        assert proc.wait(30) == 0
    finally:
        proc.kill()
    reader.join(10)
    warm_line = next(line for line in lines if line.startswith("WARMED "))
    seen = json.loads(next(line for line in lines if line.startswith("SEEN ")).split(" ", 1)[1])
    assert not set(seen["1"]) & {"qmd.store.reading", "qmd.search.hybrid", "qmd.search.narrowed"}  # initialize was answered first (its instructions may look up the models)
    assert json.loads(warm_line.split(" ", 1)[1]) == sorted(QUERY_PATH)
    assert answer["id"] == 2 and not answer["result"]["isError"]
    assert _timeless(answer) == _timeless(back_to_back[2])


def test_rest_fast_path_never_waits_or_loads_a_model(service: ToolService) -> None:
    import threading

    lex = {"searches": [{"type": "lex", "query": "rollback"}], "rerank": False}
    fast = service.rest_query(lex, fast_only=True)
    full = service.rest_query(lex)
    assert fast is not None and full is not None and fast[0] == 200 and fast[1] == full[1]
    assert service.rest_query({"query": "rollback", "rerank": False}, fast_only=True) is None  # plain: may expand
    assert service.rest_query({**lex, "rerank": True}, fast_only=True) is None  # the reranker may run
    assert service.rest_query({**lex, "searches": [*lex["searches"], {"type": "vec", "query": "x"}]}, fast_only=True) is None
    refused = service.rest_query({"bogus": 1}, fast_only=True)
    assert refused is not None and refused[0] == 400
    held, release = threading.Event(), threading.Event()

    def hold() -> None:
        with service._lock:
            held.set()
            release.wait(10)

    worker = threading.Thread(target=hold)
    worker.start()
    held.wait(10)
    try:
        assert service.rest_query(lex, fast_only=True) is None  # a search is running: go to a thread
        assert service.health()["documents"] == 4  # /health does not wait either
    finally:
        release.set()
        worker.join()


def test_close_waits_for_a_running_call_only_as_long_as_it_is_told(service: ToolService) -> None:
    """A stopping server waited for a running call as long as it ran (a rerank: minutes after
    SIGTERM); close(grace) gives up after `grace` and leaves the Store to the call."""
    import threading

    holding, release = threading.Event(), threading.Event()

    def call() -> None:
        with service.using():
            holding.set()
            release.wait(30)

    worker = threading.Thread(target=call)
    worker.start()
    assert holding.wait(30)
    try:
        assert service.close(0.2) is False
    finally:
        release.set()
        worker.join(30)
    assert service.close(5) is True


def test_the_warm_up_never_waits_on_a_locked_index(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The idle-time warm-up runs on the worker that answers calls: on an index another
    process holds locked it waited the whole busy timeout (5 s) to open the connection, and a
    first call arriving meanwhile waited for it and then its own 5 s (10.0 s measured through
    `qmd mcp`, 5.0 s without the warm-up). It now opens only what it can without waiting;
    the call opens the index (and says why it cannot) itself."""
    import threading

    import apsw

    import qmd.backends.sqlite.connection as connection

    notes = write_notes(tmp_path)
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(notes, name="notes")
    store.close()
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    svc = ToolService(store, "index", idle_s=0, log=lambda line: None)
    holder = apsw.Connection(str(tmp_path / "idx" / "index.sqlite"))  # another process's lock: every reader waits
    holder.execute("PRAGMA locking_mode = EXCLUSIVE").fetchall()
    holder.execute("BEGIN EXCLUSIVE; CREATE TABLE held (x)").fetchall()
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 60_000)
    try:
        warming = threading.Thread(target=svc.warm, daemon=True)
        warming.start()
        warming.join(20)
        assert not warming.is_alive(), "the warm-up waited on the lock"
    finally:
        holder.execute("ROLLBACK").fetchall()
        holder.close()
    monkeypatch.setattr(connection, "BUSY_TIMEOUT_MS", 5000)
    warming.join(70)
    try:
        out = svc.call("query", {"searches": [{"type": "lex", "query": "rollback"}]})
        assert not out.is_error, out.text
    finally:
        svc.close()
