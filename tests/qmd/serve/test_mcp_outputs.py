"""Tools that describe themselves (issue 30): each tool's title, annotations and outputSchema,
advertised by protocol version, and every structured answer of real calls (stdio and HTTP)
validated against the outputSchema the server advertised, with a JSON Schema validator."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

jsonschema = pytest.importorskip("jsonschema")

from qmd.serve.answers import NOTHING_RELEVANT  # noqa: E402
from qmd.serve.catalog import READ_ONLY, TITLES, tools_for  # noqa: E402
from qmd.serve.outputs import OUTPUT_SCHEMAS  # noqa: E402
from tests.support.mcp import RawStdio, http_server, make_env, request, setup_index  # noqa: E402

ACCEPT = {"Accept": "application/json, text/event-stream"}
NAMES = ["query", "get", "multi_get", "status"]

# (tool, arguments, what the answer must show beyond validating): hits, no hits, nothing relevant, why, ranges, skips.
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("query", {"searches": [{"type": "lex", "query": "rollback"}]}),
    ("query", {"query": "load balancer", "rerank": False, "minConfidence": 0.1}),
    ("query", {"searches": [{"type": "lex", "query": "zzzqqq"}]}),  # no hits
    ("query", {"query": "zzzqqq balancer"}),  # hits, none relevant: the verdict
    ("query", {"query": "rollback", "why": "notes/ideas.md"}),
    ("query", {"query": "rollback", "why": "notes/nothing-here.md"}),
    ("get", {"file": "notes/runbooks/deploy.md", "lineNumbers": True}),
    ("get", {"file": "qmd://notes/runbooks/deploy.md:5:2"}),
    ("multi_get", {"pattern": "notes/runbooks/*.md", "lineNumbers": True}),
    ("multi_get", {"pattern": "notes/ideas.md, notes/nope.md, notes/runbooks/deploy.md:1:2"}),
    ("multi_get", {"pattern": "notes/**/*.md", "maxBytes": 60, "maxLines": 1}),
    ("status", {}),
]


def validator(schema: dict[str, Any]) -> Any:
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    return cls(schema)


def check_answers(answers: dict[int, dict[str, Any]], listed: list[dict[str, Any]]) -> None:
    """Every answer to CALLS validates against its tool's advertised outputSchema, and says
    what each case is about (hits, nothing, the verdict in the text and the structure)."""
    schemas = {t["name"]: t["outputSchema"] for t in listed}
    for i, (tool, args) in enumerate(CALLS):
        result = answers[i]
        assert result["isError"] is False, (tool, args, result)
        errors = sorted(validator(schemas[tool]).iter_errors(result["structuredContent"]), key=str)
        assert not errors, (tool, args, [e.message for e in errors])
    assert answers[0]["structuredContent"]["results"] and "verdict" not in answers[0]["structuredContent"]
    assert answers[2]["structuredContent"]["results"] == [] and answers[2]["structuredContent"]["unmatched"] == ["zzzqqq"]
    nothing = answers[3]
    assert nothing["structuredContent"]["verdict"] == NOTHING_RELEVANT and nothing["content"][0]["text"].startswith(NOTHING_RELEVANT)
    assert all(r["below_threshold"] for r in nothing["structuredContent"]["results"])
    assert answers[4]["structuredContent"]["why"]["document"] and answers[5]["structuredContent"]["why"]["document"] is None
    assert answers[9]["structuredContent"]["documents"][1] == {"file": "notes/nope.md", "skipped": answers[9]["structuredContent"]["documents"][1]["skipped"]}
    assert any("skipped" in d for d in answers[10]["structuredContent"]["documents"])


# --- the schemas themselves ----------------------------------------------------------------


def test_every_tool_has_a_valid_object_output_schema_and_read_only_annotations() -> None:
    tools = tools_for("2025-11-25")
    assert [t["name"] for t in tools] == NAMES
    for t in tools:
        schema = t["outputSchema"]
        assert schema is OUTPUT_SCHEMAS[t["name"]] and schema["type"] == "object" and schema["additionalProperties"] is False
        validator(schema)  # a valid JSON Schema (2020-12, the spec's default)
        assert t["title"] == TITLES[t["name"]] and t["annotations"] == {"title": TITLES[t["name"]], **READ_ONLY}
        assert t["annotations"]["readOnlyHint"] is True and t["annotations"]["destructiveHint"] is False
        assert t["annotations"]["idempotentHint"] is True and t["annotations"]["openWorldHint"] is False


def test_the_schema_rejects_a_wrong_answer() -> None:
    """The check can fail: a good answer passes, each kind of drift does not."""
    good = {
        "results": [{"docid": "#abc123", "file": "qmd://notes/a.md", "title": "A", "score": 0.5, "context": None, "line": 1,
                     "snippet": "@@ -1,1 @@\nA", "confidence": 0.2, "below_threshold": True}],
        "freshness": {"updated_at": None, "age_s": None, "health": "unknown", "health_since": None, "failures": 0, "summary": "Index never updated."},
        "threshold": 0.37, "unmatched": [], "verdict": NOTHING_RELEVANT,
    }
    check = validator(OUTPUT_SCHEMAS["query"])
    assert check.is_valid(good)
    wrong: list[dict[str, Any]] = []
    for change in (
        lambda d: d["results"][0].update(confidence="high"),  # a wrong type
        lambda d: d["results"][0].update(confidence=1.5),  # out of range
        lambda d: d.pop("freshness"),  # a required field gone
        lambda d: d.update(relevance=0.1),  # a field the schema does not name
        lambda d: d["freshness"].update(health="fine"),  # not in the enum
        lambda d: d["results"][0].update(docid="abc123"),  # not a #docid
    ):
        bad = copy.deepcopy(good)
        change(bad)
        wrong.append(bad)
    assert [check.is_valid(w) for w in wrong] == [False] * len(wrong)


def test_older_protocols_see_only_the_fields_they_define() -> None:
    assert all(set(t) == {"name", "description", "inputSchema"} for t in tools_for("2024-11-05"))
    assert all(set(t) == {"name", "description", "inputSchema", "annotations"} for t in tools_for("2025-03-26"))
    for version in ("2025-06-18", "2025-11-25"):
        assert all(set(t) == {"name", "title", "description", "inputSchema", "outputSchema", "annotations"} for t in tools_for(version))


# --- real calls ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def env(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[dict[str, str], Path]]:
    root = tmp_path_factory.mktemp("mcp-outputs")
    env = make_env(root)
    setup_index(root, env)
    yield env, root


def test_stdio_answers_validate_against_the_advertised_schemas(env: tuple[dict[str, str], Path]) -> None:
    environ, root = env
    server = RawStdio(environ, root / "stdio.log")
    try:
        assert server.initialize("2025-11-25")["result"]["protocolVersion"] == "2025-11-25"
        listed = server.request(1, "tools/list")["result"]["tools"]
        assert [t["name"] for t in listed] == NAMES and all(t["outputSchema"] == OUTPUT_SCHEMAS[t["name"]] for t in listed)
        assert all(t["annotations"]["readOnlyHint"] and not t["annotations"]["openWorldHint"] for t in listed)
        answers = {i: server.request(10 + i, "tools/call", {"name": tool, "arguments": args})["result"] for i, (tool, args) in enumerate(CALLS)}
        check_answers(answers, listed)
        missing = server.request(99, "tools/call", {"name": "get", "arguments": {"file": "notes/deploi.md"}})["result"]
        assert missing["isError"] is True and "structuredContent" not in missing  # an error need not validate: it has none
    finally:
        server.close()


@pytest.mark.parametrize(("version", "fields"), [
    ("2024-11-05", {"name", "description", "inputSchema"}),
    ("2025-03-26", {"name", "description", "inputSchema", "annotations"}),
    ("2025-06-18", {"name", "title", "description", "inputSchema", "outputSchema", "annotations"}),
])
def test_stdio_lists_what_the_negotiated_version_defines(env: tuple[dict[str, str], Path], version: str, fields: set[str]) -> None:
    environ, root = env
    server = RawStdio(environ, root / f"stdio-{version}.log")
    try:
        assert server.initialize(version)["result"]["protocolVersion"] == version
        assert [set(t) for t in server.request(1, "tools/list")["result"]["tools"]] == [fields] * 4
    finally:
        server.close()


def test_http_answers_validate_and_the_header_says_the_version(env: tuple[dict[str, str], Path]) -> None:
    environ, root = env
    with http_server(environ, root / "http.log") as server:
        port = server.port
        new = {**ACCEPT, "MCP-Protocol-Version": "2025-11-25"}

        def rpc(msg_id: int, method: str, params: dict[str, Any] | None = None, headers: dict[str, str | None] = new) -> Any:
            status, body = request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": msg_id, "method": method, "params": params or {}}, headers)
            assert status == 200, body
            return body["result"]

        listed = rpc(1, "tools/list")["tools"]
        assert all(t["outputSchema"] == OUTPUT_SCHEMAS[t["name"]] and t["title"] == TITLES[t["name"]] for t in listed)
        # No header: the spec's assumption, 2025-03-26 (annotations, no title or outputSchema).
        assert [set(t) for t in rpc(2, "tools/list", headers=ACCEPT)["tools"]] == [{"name", "description", "inputSchema", "annotations"}] * 4
        assert [set(t) for t in rpc(3, "tools/list", headers={**ACCEPT, "MCP-Protocol-Version": "2024-11-05"})["tools"]] == [{"name", "description", "inputSchema"}] * 4
        answers = {i: rpc(10 + i, "tools/call", {"name": tool, "arguments": args}) for i, (tool, args) in enumerate(CALLS)}
        check_answers(answers, listed)


def test_the_sdk_client_lists_the_annotations_and_validates_every_answer(env: tuple[dict[str, str], Path]) -> None:
    """The MCP SDK's client reads the annotations and checks each structured answer against
    the outputSchema itself (it raises on a mismatch)."""
    pytest.importorskip("mcp")
    from tests.support.mcp import run_session, stdio_connect

    environ, root = env
    errlog = open(root / "sdk.log", "w+")  # noqa: SIM115

    async def body(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {"tools": (await s.list_tools()).tools}
        out["calls"] = [await s.call_tool(tool, args) for tool, args in CALLS]
        return out

    try:
        r = run_session(stdio_connect(environ, errlog), body)
    finally:
        errlog.close()
    tools = {t.name: t for t in r["tools"]}
    assert list(tools) == NAMES
    for name, t in tools.items():
        a = t.annotations
        assert (a.title, a.read_only_hint, a.destructive_hint, a.idempotent_hint, a.open_world_hint) == (TITLES[name], True, False, True, False)
        assert t.title == TITLES[name] and t.output_schema == OUTPUT_SCHEMAS[name]
    assert all(not c.is_error and c.structured_content for c in r["calls"])
    assert r["calls"][3].structured_content["verdict"] == NOTHING_RELEVANT
