"""A minimal MCP server on the `mcp` SDK (MCPServer, stdio), for bench/mcp_sdk_bench.py.

One `query` tool answered by the same qmd core as `qmd mcp` (qmd.serve.service.ToolService
over the default index), so the only difference from qmd's own server is the protocol layer.
The Store opens on the first call, as `qmd mcp` answers the handshake before its index is
open. Run: python bench/_sdk_server.py (the SDK serves 2025-11-25 and 2026-07-28 on stdio).
"""

from __future__ import annotations

from typing import Any

from mcp.server.mcpserver import MCPServer
from mcp.types import CallToolResult, TextContent

from qmd.core.paths import resolve_index
from qmd.serve.service import ToolService
from qmd.store.store import Store

server = MCPServer("qmd-sdk", instructions="Search the user's notes with the query tool.")
_service: list[ToolService] = []


def _tools() -> ToolService:
    if not _service:
        paths = resolve_index(None)
        _service.append(ToolService(Store(paths.index_path, paths.config_path), paths.name, idle_s=0))
    return _service[0]


@server.tool()
def query(searches: list[dict[str, str]] | None = None, query: str | None = None, limit: int = 10) -> CallToolResult:
    """Search the notes: a plain question, or typed sub-queries {type: lex|vec|hyde, query}."""
    args: dict[str, Any] = {"limit": limit}
    if searches is not None:
        args["searches"] = searches
    if query is not None:
        args["query"] = query
    out = _tools().call("query", args)
    return CallToolResult(content=[TextContent(type="text", text=out.text)], structured_content=out.structured, is_error=out.is_error)


if __name__ == "__main__":
    server.run()
