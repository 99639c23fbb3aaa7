"""`qmd mcp` over stdio: a real handshake with the SDK client, every tool, compared with the CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import SECRET, make_env, run_session, setup_index, stdio_connect
from tests.support.run import run_qmd

pytest.importorskip("mcp")


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    return env


def cli_json(env: dict[str, str], *args: str) -> Any:
    proc = run_qmd(*args, "--json", env=env)
    assert proc.returncode == 0, proc.stderr
    return json.loads(proc.stdout)


def test_stdio_handshake_tools_and_cli_parity(env: dict[str, str], tmp_path: Path) -> None:
    errlog = open(tmp_path / "stderr.log", "w+")  # noqa: SIM115

    async def body(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"init": s.init_result, "tools": (await s.list_tools()).tools}
        out["lex"] = await s.call_tool("query", {"searches": [{"type": "lex", "query": "rollback"}], "limit": 10})
        out["plain"] = await s.call_tool("query", {"query": "load balancer", "limit": 10, "rerank": False})
        out["get"] = await s.call_tool("get", {"file": "notes/runbooks/deploy.md", "lineNumbers": True})
        out["range"] = await s.call_tool("get", {"file": "qmd://notes/runbooks/deploy.md:5:2"})
        out["multi"] = await s.call_tool("multi_get", {"pattern": "notes/runbooks/*.md", "lineNumbers": True})
        out["status"] = await s.call_tool("status", {})
        out["missing"] = await s.call_tool("get", {"file": "runbooks/deploi.md"})
        out["escape"] = await s.call_tool("get", {"file": str(tmp_path / "secret.md")})
        out["unknown"] = await s.call_tool("query", {"query": "rollback", "collection": "notes"})
        out["bad_type"] = await s.call_tool("query", {"query": "rollback", "limit": "many"})
        out["both"] = await s.call_tool("query", {"query": "x", "searches": [{"type": "lex", "query": "x"}]})
        out["after"] = await s.call_tool("status", {})  # the server survived every error
        return out

    r = run_session(stdio_connect(env, errlog), body)

    init = r["init"]
    assert init.protocol_version == "2025-11-25" and init.server_info.name == "qmd"
    assert "4 markdown documents" in init.instructions and "notes (4 docs): Team engineering notes" in init.instructions
    assert len(init.instructions.encode()) < 2048
    tools = {t.name: t for t in r["tools"]}
    assert set(tools) == {"query", "get", "multi_get", "status"}
    assert set(tools["query"].input_schema["properties"]) == {"query", "searches", "limit", "minScore", "minConfidence", "candidateLimit", "collections", "intent", "rerank", "filter", "since", "until", "why"}
    assert set(tools["get"].input_schema["properties"]) == {"file", "fromLine", "maxLines", "lineNumbers"}
    assert set(tools["multi_get"].input_schema["properties"]) == {"pattern", "maxLines", "maxBytes", "lineNumbers"}
    assert tools["multi_get"].input_schema["properties"]["maxBytes"]["default"] == 65536
    assert all(t.input_schema["additionalProperties"] is False for t in tools.values())
    assert all(t.annotations.read_only_hint for t in tools.values())

    # query == the CLI's `qmd query --json` (same pipeline, same snippets)
    for key, cli_args in (("lex", ("query", "lex: rollback", "-n", "10")), ("plain", ("query", "load balancer", "-n", "10", "--no-rerank"))):
        res = r[key]
        assert not res.is_error
        cli_rows = cli_json(env, *cli_args)
        rows = res.structured_content["results"]
        assert rows, key
        assert [(x["docid"], x["file"], x["title"], x["score"], x["line"], x["snippet"], x["confidence"], x["below_threshold"]) for x in rows] == [
            (c["docid"], c["file"], c["title"], c["score"], c["line"], c["snippet"], c["confidence"], c["below_threshold"]) for c in cli_rows
        ]
        assert all(set(x) == {"docid", "file", "title", "score", "context", "line", "snippet", "confidence", "below_threshold"} for x in rows)
        assert rows[0]["context"] == "Team engineering notes"
        fresh = res.structured_content["freshness"]
        assert fresh["updated_at"] and fresh["health"] == "unknown"
        text = res.content[0].text
        assert rows[0]["docid"] in text and rows[0]["file"] in text and "last updated" in text
    assert {x["file"] for x in r["lex"].structured_content["results"]} == {"qmd://notes/runbooks/deploy.md", "qmd://notes/meetings/2024-03-01.md"}

    # get and multi_get == the CLI's get / multi-get
    doc = r["get"].structured_content
    cli_doc = cli_json(env, "get", "notes/runbooks/deploy.md")
    assert (doc["docid"], doc["file"], doc["title"], doc["totalLines"], doc["text"]) == (cli_doc["docid"], cli_doc["file"], cli_doc["title"], cli_doc["totalLines"], cli_doc["body"])
    assert r["get"].content[0].text.endswith(cli_doc["body"])
    part = r["range"].structured_content
    assert (part["fromLine"], part["lines"], part["text"]) == (5, 2, "## Rollback\n")
    multi = r["multi"].structured_content["documents"]
    cli_multi = cli_json(env, "multi-get", "notes/runbooks/*.md")
    # the CLI's --json names a glob's files collection-relative (the original's format), MCP by qmd:// URI
    assert [(d["file"], d["text"]) for d in multi] == [("qmd://notes/" + c["file"], c["body"]) for c in cli_multi]

    # status == the CLI's status
    st = r["status"].structured_content
    cli_st = cli_json(env, "status")
    assert st["documents"] == cli_st["documents"] == 4
    assert [c["name"] for c in st["collections"]] == [c["name"] for c in cli_st["collections"]] == ["notes"]
    assert st["freshness"]["health"] == "unknown" and st["server"]["models_loaded"] == []

    # errors are tool results with a message naming the fix
    assert r["missing"].is_error and "qmd://notes/runbooks/deploy.md" in r["missing"].content[0].text
    assert r["escape"].is_error and SECRET not in r["escape"].content[0].text
    unknown = r["unknown"].content[0].text
    assert r["unknown"].is_error and "'collection'" in unknown and "did you mean 'collections'" in unknown and "candidateLimit" in unknown
    assert r["bad_type"].is_error and "limit must be a whole number" in r["bad_type"].content[0].text
    assert r["both"].is_error and "exactly one of query" in r["both"].content[0].text
    assert not r["after"].is_error

    errlog.seek(0)
    log = errlog.read()
    assert log.count("tools/call ") == 12, log


def test_stdio_other_index_and_empty_index(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    notes = tmp_path / "work-notes"
    notes.mkdir()
    (notes / "a.md").write_text("# Alpha\n\nquokka facts\n")
    assert run_qmd("--index", "work", "collection", "add", str(notes), "--name", "work", env=env).returncode == 0
    errlog = open(tmp_path / "stderr.log", "w+")  # noqa: SIM115

    async def body(s: Any) -> Any:
        return s.init_result, await s.call_tool("query", {"searches": [{"type": "lex", "query": "quokka"}]})

    init, res = run_session(stdio_connect(env, errlog, "--index", "work"), body)
    assert "index 'work'" in init.instructions
    assert res.structured_content["results"][0]["file"] == "qmd://work/a.md"

    # the default index has no collections: the server starts and says how to fix it
    async def empty(s: Any) -> Any:
        return s.init_result, await s.call_tool("query", {"query": "anything"}), await s.call_tool("status", {})

    init, res, status = run_session(stdio_connect(env, errlog), empty)
    assert "index is empty" in init.instructions
    assert res.is_error and "qmd collection add" in res.content[0].text
    assert not status.is_error and status.structured_content["documents"] == 0
