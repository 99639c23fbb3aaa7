"""`qmd mcp` (stdio) message by message: the spec's errors, batches, hostile lines, a clean
stdout, progress and cancellation. A real subprocess; no SDK in between."""

from __future__ import annotations

import json
import os
import subprocess
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import RawStdio, make_env, setup_index, slow_rerank_env
from tests.support.run import command, run_qmd


@pytest.fixture
def env(tmp_path: Path) -> dict[str, str]:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    return env


@pytest.fixture
def server(env: dict[str, str], tmp_path: Path) -> Iterator[RawStdio]:
    s = RawStdio(env, tmp_path / "stderr.log")
    yield s
    s.close()


def log_of(tmp_path: Path) -> str:
    return (tmp_path / "stderr.log").read_text(errors="replace")


@contextmanager
def bare_server(env: dict[str, str], tmp_path: Path) -> Iterator[subprocess.Popen[bytes]]:
    """`qmd mcp` with its pipes in the test's hands (no reader thread: the test closes stdout
    itself), stderr to stderr.log; killed at the end if still running."""
    with open(tmp_path / "stderr.log", "ab") as err:
        proc = subprocess.Popen(command("mcp"), env=env, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=err)
        try:
            assert proc.stdin is not None and proc.stdout is not None
            yield proc
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            if proc.stdin is not None and not proc.stdin.closed:
                proc.stdin.close()


def test_initialize_negotiates_and_advertises_only_what_is_served(server: RawStdio) -> None:
    init = server.initialize("2025-06-18")["result"]
    assert init["protocolVersion"] == "2025-06-18"
    assert init["capabilities"] == {"tools": {"listChanged": False}, "prompts": {"listChanged": False}}
    assert init["serverInfo"]["name"] == "qmd" and "4 markdown documents" in init["instructions"]
    assert server.request(1, "initialize", {"protocolVersion": "1999-01-01", "capabilities": {}})["result"]["protocolVersion"] == "2025-11-25"
    assert server.request(2, "ping")["result"] == {}
    tools = server.request(3, "tools/list")["result"]["tools"]
    assert [t["name"] for t in tools] == ["query", "get", "multi_get", "status"]
    for t in tools:  # each property one plain type, every schema closed
        schema = t["inputSchema"]
        assert schema["type"] == "object" and schema["additionalProperties"] is False
        assert all("type" in p and "anyOf" not in p for p in schema["properties"].values())
        assert t["annotations"]["readOnlyHint"] is True
    prompts = server.request(4, "prompts/list")["result"]["prompts"]
    assert [p["name"] for p in prompts] == ["search-first"]
    got = server.request(5, "prompts/get", {"name": "search-first", "arguments": {"question": "how do we roll back?"}})["result"]
    text = got["messages"][0]["content"]["text"]
    assert '"type": "lex"' in text and '"type": "vec"' in text and '"type": "hyde"' in text
    assert text.endswith("Question: how do we roll back?") and "4 markdown documents" in text


def test_unknown_names_are_the_specs_errors_with_one_log_line(server: RawStdio, tmp_path: Path) -> None:
    server.initialize()
    cases = [
        ("resources/list", None, -32601, "Method not found"),
        ("logging/setLevel", {"level": "debug"}, -32601, "Method not found"),
        ("no/such", {}, -32601, "Method not found"),
        ("tools/call", {"name": "delete_everything", "arguments": {}}, -32602, "Unknown tool"),
        ("tools/call", {"name": "query", "arguments": "rollback"}, -32602, "must be an object"),
        ("prompts/get", {"name": "nope"}, -32602, "Unknown prompt"),
        ("tools/list", [1, 2], -32602, "takes an object"),
    ]
    for i, (method, params, code, words) in enumerate(cases, start=10):
        reply = server.request(i, method, params)
        assert reply["id"] == i and reply["error"]["code"] == code and words in reply["error"]["message"], reply
    # bad arguments are a tool result the model reads, not a protocol error
    bad = server.request(30, "tools/call", {"name": "query", "arguments": {"query": "x", "collection": "notes"}})["result"]
    assert bad["isError"] is True and "did you mean 'collections'" in bad["content"][0]["text"]
    assert server.request(31, "ping")["result"] == {}  # alive after every error
    assert server.close() == 0
    log = log_of(tmp_path)
    assert "Traceback" not in log
    assert sum(1 for line in log.splitlines() if "rpc error" in line) == len(cases)


def test_malformed_messages_batches_and_notifications(server: RawStdio) -> None:
    server.initialize()
    server.write("{not json")
    assert server.next()["error"]["code"] == -32700
    server.write("5")
    assert server.next()["error"]["code"] == -32600
    server.send({"jsonrpc": "1.0", "id": 7, "method": "ping"})
    assert server.next() == {"jsonrpc": "2.0", "id": 7, "error": {"code": -32600, "message": 'Invalid Request: needs "jsonrpc": "2.0" and a string "method"'}}
    server.send({"jsonrpc": "2.0", "id": True, "method": "ping"})
    assert server.next()["error"]["code"] == -32600
    server.write("[]")
    assert server.next()["error"]["code"] == -32600
    server.send([{"jsonrpc": "2.0", "id": "a", "method": "ping"}, {"jsonrpc": "2.0", "method": "notifications/initialized"}, {"jsonrpc": "2.0", "id": "b", "method": "tools/list"}])
    batch = server.next()
    assert [m["id"] for m in batch] == ["a", "b"] and "tools" in batch[1]["result"]
    server.send({"jsonrpc": "2.0", "method": "notifications/whatever", "params": {}})  # no reply
    server.send({"jsonrpc": "2.0", "id": 99, "result": {}})  # a response to nothing: ignored
    server.write("")  # a blank line
    assert server.request(8, "ping") == {"jsonrpc": "2.0", "id": 8, "result": {}}


def test_an_oversized_line_and_nul_bytes_are_refused_and_the_server_goes_on(server: RawStdio) -> None:
    server.initialize()
    server.write(b'{"jsonrpc": "2.0", "id": 1, "method": "ping", "params": {"x": "' + b"a" * (5 * 1024 * 1024) + b'"}}')
    reply = server.next()
    assert reply["id"] is None and reply["error"]["code"] == -32700 and "over" in reply["error"]["message"]
    server.write(b'{"jsonrpc": "2.0", "id": 2, "method": "ping"\x00}')
    assert server.next()["error"]["code"] == -32700
    nul = server.request(3, "tools/call", {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "roll\u0000back"}]}})
    assert "result" in nul  # an answer (results or a tool error), never a crash
    assert server.request(4, "ping")["result"] == {}


def test_stdout_carries_only_protocol_messages(server: RawStdio, env: dict[str, str]) -> None:
    server.initialize()
    for i, (tool, args) in enumerate([
        ("query", {"searches": [{"type": "lex", "query": "rollback"}]}),
        ("get", {"file": "notes/runbooks/deploy.md"}),
        ("multi_get", {"pattern": "notes/runbooks/*.md"}),
        ("status", {}),
    ]):
        reply = server.request(100 + i, "tools/call", {"name": tool, "arguments": args})
        assert reply["result"]["isError"] is False, reply
        assert reply["result"]["structuredContent"]
    server.close()
    assert server.raw and all(json.loads(line) for line in server.raw)


def test_structured_answers_stand_alone(env: dict[str, str], tmp_path: Path) -> None:
    """Clients hand the model only structuredContent: it says in words when the index may be
    stale, and each notice once."""
    state = Path(env["QMD_STATE_DIR"])
    state.mkdir(parents=True, exist_ok=True)
    (state / "health.json").write_text(json.dumps({"raised": True, "since": "2026-01-01T00:00:00Z", "failures": [{"error": "disk full"}]}))
    s = RawStdio(env, tmp_path / "stderr.log")
    try:
        s.initialize()
        args = {"name": "query", "arguments": {"query": "rollback"}}
        first = s.request(1, "tools/call", args)["result"]["structuredContent"]
        second = s.request(2, "tools/call", args)["result"]["structuredContent"]
    finally:
        s.close()
    fresh = first["freshness"]
    assert fresh["health"] == "raised" and "health flag: raised since" in fresh["summary"] and "may be stale" in fresh["warning"]
    assert first["notices"] and any(n.startswith("vector search skipped") for n in first["notices"])
    assert "notices" not in second and second["freshness"]["warning"] == fresh["warning"]


def test_a_config_that_cannot_be_read_answers_initialize_with_the_fix(env: dict[str, str], tmp_path: Path) -> None:
    config = Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.yml"
    config.write_text("collections: [unclosed\n")
    s = RawStdio(env, tmp_path / "stderr.log")
    reply = s.request(0, "initialize", {"protocolVersion": "2025-06-18", "capabilities": {}})
    assert reply["error"]["code"] == -32603 and "qmd cannot serve" in reply["error"]["message"] and "index.yml" in reply["error"]["message"]
    assert s.close() == 1
    assert "index.yml" in log_of(tmp_path) and "Traceback" not in log_of(tmp_path)


def cpu_seconds(pid: int) -> float:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def test_a_cancelled_query_stops_reranking_and_frees_the_server(tmp_path: Path) -> None:
    """A query reranking 200 long notes with a deliberately slow yes/no reranker (minutes
    uncancelled) is cancelled once its progress says reranking began: no answer for it, the
    next query is answered, and nothing keeps burning CPU for nobody."""
    env = slow_rerank_env(tmp_path)
    s = RawStdio(env, tmp_path / "stderr.log")
    try:
        s.initialize()
        s.send({"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
            "name": "query", "arguments": {"query": "rollback procedure", "candidateLimit": 200}, "_meta": {"progressToken": "p1"}}})
        progress, _ = s.until(lambda m: m.get("method") == "notifications/progress" and "reranking" in m["params"].get("message", ""), timeout=120)
        assert progress["params"]["progressToken"] == "p1"
        cancelled_at = time.monotonic()
        s.send({"jsonrpc": "2.0", "method": "notifications/cancelled", "params": {"requestId": "slow", "reason": "user gave up"}})
        fast = {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}], "rerank": False, "limit": 3}}
        s.send({"jsonrpc": "2.0", "id": "next", "method": "tools/call", "params": fast})
        reply, before = s.until(lambda m: m.get("id") == "next", timeout=60)
        waited = time.monotonic() - cancelled_at
        assert len(reply["result"]["structuredContent"]["results"]) == 3
        assert all(m.get("id") != "slow" for m in before)  # a cancelled request gets no answer
        idle_from = cpu_seconds(s.proc.pid)
        time.sleep(1.0)  # measuring, not synchronising: is any work left running?
        burned = cpu_seconds(s.proc.pid) - idle_from
        assert burned < 0.2, f"the server used {burned:.2f} s of CPU in 1 s after the cancelled query's successor was answered"
        assert s.request("ping", "ping")["result"] == {}
    finally:
        s.close()
    log = log_of(tmp_path)
    assert "tools/call query cancelled by the client" in log, log
    assert "Traceback" not in log
    assert waited < 60


def test_calls_piped_in_before_stdin_closes_are_answered(env: dict[str, str], tmp_path: Path) -> None:
    """`printf '…' | qmd mcp | jq`: the writer is done before the answers are; they still come
    (the end of stdin once cancelled every call, so a script got only `initialize` back)."""
    lines = [
        {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "sh", "version": "1"}}},
        {"jsonrpc": "2.0", "method": "notifications/initialized"},
        {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "rollback"}], "limit": 2}}},
        {"jsonrpc": "2.0", "id": 3, "method": "tools/call", "params": {"name": "status", "arguments": {}}},
    ]
    proc = run_qmd("mcp", env=env, input="".join(json.dumps(m) + "\n" for m in lines), timeout=120)
    assert proc.returncode == 0, proc.stderr
    answers = {m["id"]: m for m in map(json.loads, proc.stdout.splitlines())}
    assert set(answers) == {1, 2, 3}
    assert answers[2]["result"]["structuredContent"]["results"] and answers[3]["result"].get("isError") is not True
    # more calls than the queue holds (64): the reader waits for room instead of refusing them
    many = [lines[0], lines[1]] + [{**lines[2], "id": 100 + i} for i in range(150)]
    proc = run_qmd("mcp", env=env, input="".join(json.dumps(m) + "\n" for m in many))
    replies = [json.loads(line) for line in proc.stdout.splitlines()]
    assert proc.returncode == 0 and len(replies) == 151
    assert all("result" in r and not r["result"].get("isError") for r in replies), [r for r in replies if "error" in r][:2]


def test_an_agent_that_quits_mid_query_does_not_keep_the_server_busy(tmp_path: Path) -> None:
    """stdin and stdout both closed (the agent exited) during a minutes-long rerank: the call is
    cancelled and the server exits at once, not after the drain's 30 s."""
    env = slow_rerank_env(tmp_path)
    with bare_server(env, tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        for m in (
            {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}},
            {"jsonrpc": "2.0", "id": "slow", "method": "tools/call", "params": {
                "name": "query", "arguments": {"query": "rollback procedure", "candidateLimit": 200}, "_meta": {"progressToken": "p"}}},
        ):
            proc.stdin.write((json.dumps(m) + "\n").encode())
        proc.stdin.flush()
        while b"reranking" not in proc.stdout.readline():
            pass
        quit_at = time.monotonic()
        proc.stdout.close()
        proc.stdin.close()
        assert proc.wait(timeout=60) == 0
        assert time.monotonic() - quit_at < 15


def test_a_client_that_closes_stdout_but_not_stdin_stops_the_server(env: dict[str, str], tmp_path: Path) -> None:
    """The reader waits on stdin; an agent that quit leaving our stdin open must not leave a
    server running forever (it once did: only a new line on stdin woke it)."""
    with bare_server(env, tmp_path) as proc:
        assert proc.stdin is not None and proc.stdout is not None
        proc.stdin.write(b'{"jsonrpc":"2.0","id":1,"method":"initialize","params":{"protocolVersion":"2025-06-18","capabilities":{},"clientInfo":{"name":"t","version":"1"}}}\n')
        proc.stdin.flush()
        assert b'"id":1' in proc.stdout.readline()
        closed_at = time.monotonic()
        proc.stdout.close()
        assert proc.wait(timeout=30) == 0
        assert time.monotonic() - closed_at < 10
    assert "closed its end of stdout" in log_of(tmp_path)
