"""The MCP SDK's own client against qmd's server, both revisions (issue 30): `mcp.Client` in
"legacy" mode (initialize, 2025-11-25), "auto" (server/discover, which qmd answers, so
2026-07-28) and pinned to "2026-07-28" (no handshake at all), over stdio and over Streamable
HTTP with a bearer token. Every tool, the prompt, resources (not offered: -32601), each
structured answer validated against the outputSchema the server advertised, and the same
answers in both revisions. qmd keeps its own protocol layer (bench/mcp_sdk_bench.py says why);
this is what shows an SDK client still gets the protocol it expects."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("mcp", reason="the MCP SDK (the dev extra) is not installed: pip install -e '.[dev]'")
jsonschema = pytest.importorskip("jsonschema", reason="jsonschema (the dev extra) is not installed")
version = pytest.importorskip("mcp_types.version", reason="this mcp SDK has no protocol-version registry (mcp >= 2.3 speaks 2026-07-28)")

from mcp.shared.exceptions import MCPError  # noqa: E402

from qmd.serve.catalog import TITLES  # noqa: E402
from qmd.serve.outputs import OUTPUT_SCHEMAS  # noqa: E402
from tests.support.mcp import http_connect, run_client, served_index, stdio_connect  # noqa: E402

MODERN = "2026-07-28"
MODES = {"legacy": "2025-11-25", "auto": MODERN, MODERN: MODERN}  # mode → the version it ends on with qmd
CALLS: list[tuple[str, dict[str, Any]]] = [
    ("query", {"searches": [{"type": "lex", "query": "rollback"}]}),
    ("query", {"query": "load balancer", "rerank": False}),
    ("get", {"file": "notes/runbooks/deploy.md", "lineNumbers": True}),
    ("get", {"file": "qmd://notes/runbooks/deploy.md:5:2"}),
    ("multi_get", {"pattern": "notes/runbooks/*.md"}),
    ("status", {}),
]

if MODERN not in getattr(version, "MODERN_PROTOCOL_VERSIONS", ()):
    pytest.skip(f"this mcp SDK does not speak {MODERN} (mcp >= 2.3 does)", allow_module_level=True)


class Served:
    def __init__(self, root: Path, env: dict[str, str], port: int, token: str) -> None:
        self.root, self.env, self.port, self.token = root, env, port, token


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    """One index, a token (so the HTTP server wants one on every route), the HTTP server."""
    root = tmp_path_factory.mktemp("mcp-sdk-client")
    with served_index(root, token="agent") as server:
        assert server.token is not None
        yield Served(root, server.env, server.port, server.token)


async def everything(c: Any) -> dict[str, Any]:
    """What an agent's client does in a session, through the SDK's own calls."""
    out: dict[str, Any] = {"version": c.protocol_version, "info": c.server_info, "caps": c.server_capabilities, "discover": c.session.discover_result}
    out["tools"] = (await c.list_tools()).tools
    out["calls"] = [await c.call_tool(tool, args) for tool, args in CALLS]
    out["missing"] = await c.call_tool("get", {"file": "notes/deploi.md"})
    out["prompts"] = (await c.list_prompts()).prompts
    out["prompt"] = await c.get_prompt("search-first")
    for method in ("list_resources", "list_resource_templates"):
        try:
            await getattr(c, method)()
            out[method] = None
        except MCPError as exc:
            out[method] = exc.error.code
    try:
        await c.call_tool("nosuch", {})
        out["nosuch"] = None
    except MCPError as exc:
        out["nosuch"] = exc.error.message
    return out


def check_session(r: dict[str, Any], mode: str) -> None:
    assert r["version"] == MODES[mode]
    if mode != MODERN:  # a pinned version asks nothing, so it knows neither server info nor capabilities
        caps = r["caps"]
        assert r["info"].name == "qmd"
        assert caps.tools is not None and caps.prompts is not None and caps.resources is None and caps.logging is None
    if mode == "auto":  # the SDK asked server/discover and took qmd's answer
        found = r["discover"]
        assert found.supported_versions[0] == MODERN and "2025-11-25" in found.supported_versions
        assert (found.ttl_ms, found.cache_scope) == (60_000, "private") and "4 markdown documents" in (found.instructions or "")
    tools = {t.name: t for t in r["tools"]}
    assert list(tools) == ["query", "get", "multi_get", "status"]
    for name, t in tools.items():
        assert t.title == TITLES[name] and t.output_schema == OUTPUT_SCHEMAS[name] and t.annotations.read_only_hint
    for (tool, args), res in zip(CALLS, r["calls"], strict=True):
        assert not res.is_error and res.content[0].text, (tool, args, res)
        schema = tools[tool].output_schema
        errors = [e.message for e in jsonschema.validators.validator_for(schema)(schema).iter_errors(res.structured_content)]
        assert not errors, (tool, args, errors)
    lex = r["calls"][0].structured_content["results"]
    assert {x["file"] for x in lex} == {"qmd://notes/runbooks/deploy.md", "qmd://notes/meetings/2024-03-01.md"}
    assert r["calls"][3].structured_content["text"] == "## Rollback\n"
    assert r["calls"][5].structured_content["documents"] == 4
    assert r["missing"].is_error and r["missing"].structured_content is None and "qmd://notes/runbooks/deploy.md" in r["missing"].content[0].text
    assert [p.name for p in r["prompts"]] == ["search-first"]
    assert "4 markdown documents" in r["prompt"].messages[0].content.text
    assert r["list_resources"] == r["list_resource_templates"] == -32601  # resources are not offered
    assert r["nosuch"] is not None and "Unknown tool: 'nosuch'" in r["nosuch"]


def comparable(r: dict[str, Any]) -> list[Any]:
    """The answers without what differs between two sessions (the freshness's age, notices said once)."""
    return [{k: v for k, v in res.structured_content.items() if k not in ("freshness", "notices", "server")} for res in r["calls"]]


@pytest.mark.parametrize("mode", list(MODES))
def test_sdk_client_over_stdio(served: Served, mode: str) -> None:
    errlog = open(served.root / f"stdio-{mode}.log", "w+")  # noqa: SIM115
    try:
        r = run_client(stdio_connect(served.env, errlog), everything, mode)
    finally:
        errlog.close()
    check_session(r, mode)


@pytest.mark.parametrize("mode", list(MODES))
def test_sdk_client_over_http_with_a_token(served: Served, mode: str) -> None:
    r = run_client(http_connect(served.port, served.token), everything, mode)
    check_session(r, mode)
    log = (served.root / "server.log").read_text()
    assert "POST /mcp 200" in log and "token agent tools/list" in log and served.token not in log


def test_both_revisions_give_the_same_answers(served: Served) -> None:
    errlog = open(served.root / "stdio-same.log", "w+")  # noqa: SIM115
    try:
        legacy = run_client(stdio_connect(served.env, errlog), everything, "legacy")
        modern = run_client(stdio_connect(served.env, errlog), everything, MODERN)
    finally:
        errlog.close()
    over_http = run_client(http_connect(served.port, served.token), everything, MODERN)
    assert comparable(legacy) == comparable(modern) == comparable(over_http)


@pytest.mark.parametrize("mode", list(MODES))
def test_sdk_client_without_the_token_is_refused(served: Served, mode: str) -> None:
    """No token, any revision: the server refuses (401) and the SDK client fails; nothing is served."""
    async def body(c: Any) -> Any:
        return await c.call_tool("query", {"searches": [{"type": "lex", "query": "rollback"}]})

    before = (served.root / "server.log").read_text().count("POST /mcp 200")
    with pytest.raises(ExceptionGroup) as caught:  # the SDK turns the 401 into an MCPError inside its task groups
        run_client(http_connect(served.port), body, mode)
    assert caught.group_contains(MCPError, depth=2)
    after = (served.root / "server.log").read_text()
    assert after.count("POST /mcp 200") == before and "POST /mcp 401" in after
