"""qmd's MCP server against real peers from npm: the MCP conformance suite's applicable
server scenarios over HTTP, and the MCP Inspector CLI, whose answers must agree over stdio
and HTTP; both negotiate 2025-11-25 (the server's log says so). Pinned and installed by
tests/support/npm_clients.py (skipped without npm)."""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import served_index
from tests.support.npm_clients import node22, npm_bin
from tests.support.run import command

# The scenarios of conformance 0.1.16 (`conformance list --server`: 32, none for 2026-07-28,
# whose spec version the suite does not know) that apply to a server offering tools and
# prompts. The others call the suite's own reference tools and prompts (test_simple_text,
# test_image_content, test_simple_prompt…), or need resources, logging/setLevel or
# completion/complete, which qmd does not advertise. The two SSE scenarios check only a
# server that hands out sessions: against stateless JSON they pass with 0 checks, kept so
# that a change to sessions is checked. docs/agents.md has the whole table.
SCENARIOS = ["server-initialize", "ping", "tools-list", "prompts-list", "dns-rebinding-protection", "server-sse-polling", "server-sse-multiple-streams"]


class Served:
    def __init__(self, env: dict[str, str], port: int, root: Path) -> None:
        self.env, self.port, self.root = env, port, root


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    root = tmp_path_factory.mktemp("mcp-peers")
    with served_index(root) as server:
        yield Served(server.env, server.port, root)


@pytest.mark.parametrize("scenario", SCENARIOS)
def test_conformance_scenario(served: Served, scenario: str) -> None:
    node, suite = node22(), npm_bin("conformance")
    proc = subprocess.run(
        [str(node), str(suite), "server", "--url", f"http://127.0.0.1:{served.port}/mcp", "--scenario", scenario],
        capture_output=True, text=True, timeout=120, env=served.env, stdin=subprocess.DEVNULL,
    )
    out = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    assert proc.returncode == 0 and re.search(r"Passed: (\d+)/\1, 0 failed", out), out[-3000:]
    log = (served.root / "server.log").read_text()
    assert re.search(r"initialize conformance-\S+ \S+ asked 2025-11-25, serving 2025-11-25", log), log[-2000:]


INSPECTOR_CALLS: list[list[str]] = [
    ["--method", "tools/list"],
    ["--method", "prompts/list"],
    ["--method", "prompts/get", "--prompt-name", "search-first", "--prompt-args", "question=how do we roll back?"],
    ["--method", "tools/call", "--tool-name", "query", "--tool-arg", "query=rollback"],
    ["--method", "tools/call", "--tool-name", "query", "--tool-arg", 'searches=[{"type":"lex","query":"pg_restore"}]', "limit=2"],
    ["--method", "tools/call", "--tool-name", "get", "--tool-arg", "file=notes/runbooks/deploy.md", "fromLine=5", "maxLines=2"],
    ["--method", "tools/call", "--tool-name", "get", "--tool-arg", "file=runbooks/deploi.md"],
    ["--method", "tools/call", "--tool-name", "multi_get", "--tool-arg", "pattern=notes/runbooks/*.md"],
    ["--method", "tools/call", "--tool-name", "status"],
    ["--method", "tools/call", "--tool-name", "query", "--tool-arg", "query=rollback", "collection=notes"],
    ["--method", "tools/call", "--tool-name", "drop_tables"],
    ["--method", "resources/list"],
]


def _normal(text: str) -> str:
    """An answer without what differs between two servers a moment apart: ages, and the
    notices, which each server says once (a stdio server per call, the HTTP one once)."""
    try:
        answer = json.loads(text)
    except ValueError:
        return text
    if isinstance(answer, dict) and isinstance(answer.get("structuredContent"), dict):
        answer["structuredContent"].pop("notices", None)
        answer["structuredContent"].get("freshness", {}).pop("age_s", None)
        answer["structuredContent"].get("server", {}).pop("build_id", None)  # changes with every edit of the source
        for part in answer.get("content", []):
            part["text"] = "\n".join(line for line in part["text"].split("\n") if not line.startswith("Note: "))
    return re.sub(r"updated (\d+[smhd]|just now|\S+) ago", "updated AGO", json.dumps(answer, sort_keys=True))


def _inspect(target: list[str], call: list[str], env: dict[str, str]) -> tuple[int, str]:
    cli = npm_bin("mcp-inspector-cli").resolve()
    # The CLI reads its own package.json through a path relative to the working directory.
    proc = subprocess.run(
        [str(node22()), str(cli.parent / "index.js"), *target, *call], cwd=cli.parent,
        capture_output=True, text=True, timeout=120, env=env, stdin=subprocess.DEVNULL,
    )
    noise = "inspector v1 is deprecated"
    lines = [line for line in (proc.stdout + proc.stderr).splitlines() if line.strip() and noise not in line and "Upgrade:" not in line and "security fixes only" not in line]
    return proc.returncode, _normal("\n".join(lines))


@pytest.mark.slow
def test_inspector_cli_agrees_over_stdio_and_http(served: Served) -> None:
    stdio = command("mcp")
    http = [f"http://127.0.0.1:{served.port}/mcp"]
    answers: list[tuple[int, str]] = []
    for call in INSPECTOR_CALLS:
        over_stdio, over_http = _inspect(stdio, call, served.env), _inspect(http, call, served.env)
        assert over_stdio == over_http, f"{call}:\nstdio: {over_stdio}\nhttp:  {over_http}"
        answers.append(over_stdio)
    by_call = dict(zip((" ".join(c) for c in INSPECTOR_CALLS), answers))

    def result(call: list[str]) -> Any:
        code, text = by_call[" ".join(call)]
        assert code == 0, text
        return json.loads(text)

    assert [t["name"] for t in result(INSPECTOR_CALLS[0])["tools"]] == ["query", "get", "multi_get", "status"]
    assert "initialize inspector-cli 1.0.3 asked 2025-11-25, serving 2025-11-25" in (served.root / "server.log").read_text()
    assert result(INSPECTOR_CALLS[2])["messages"][0]["content"]["text"].endswith("Question: how do we roll back?")
    hits = result(INSPECTOR_CALLS[3])["structuredContent"]["results"]
    assert "qmd://notes/runbooks/deploy.md" in {h["file"] for h in hits}
    assert result(INSPECTOR_CALLS[5])["structuredContent"]["text"] == "## Rollback\n"
    missing = result(INSPECTOR_CALLS[6])
    assert missing["isError"] and "qmd://notes/runbooks/deploy.md" in missing["content"][0]["text"]
    assert result(INSPECTOR_CALLS[9])["isError"]
    for failing in (INSPECTOR_CALLS[10], INSPECTOR_CALLS[11]):
        code, text = by_call[" ".join(failing)]
        assert code != 0 and ("-32602" in text or "-32601" in text), text
