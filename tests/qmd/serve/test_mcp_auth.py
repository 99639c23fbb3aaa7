"""The team server's tokens against the real `qmd mcp --http` process: 401/403 on every route,
a scoped token confined to its collections through every tool and route, token file changes
seen without a restart, tokens never in the log, and the refusal to serve beyond loopback
without a token."""

from __future__ import annotations

import json
import stat
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import add_token, free_port, http_server, make_env, request, served_index, setup_index, wait_health
from tests.support.run import run_qmd

ACCEPT = {"Accept": "application/json, text/event-stream"}
HR_SECRET = "HR-SECRET-SALARY-BANDS"
HR_NOTES = {
    "salaries.md": f"# Salary bands\n\n{HR_SECRET}: the rollback of the 2024 raise.\n",
    "ideas.md": f"# HR ideas\n\n{HR_SECRET} caching the load balancer of payroll.\n",
    "reviews/2024.md": f"# Reviews\n\n{HR_SECRET} kubernetes migration reviews.\n",
}
NOTES_DOCS = 4  # tests/support/mcp.py NOTES
WRONG = "qmd_" + "A" * 43


class Team:
    """One server over two collections (notes, hr) and its tokens: admin (every collection),
    alice (notes), bob (hr), revoked (was valid)."""

    def __init__(self, root: Path, env: dict[str, str], port: int, log: Path, proc: Any, tokens: dict[str, str], hr_docids: list[str]) -> None:
        self.root, self.env, self.port, self.log, self.proc, self.tokens, self.hr_docids = root, env, port, log, proc, tokens, hr_docids

    def call(self, method: str, path: str, body: Any = None, token: str | None = None, headers: dict[str, str | None] | None = None) -> tuple[int, Any]:
        hdrs: dict[str, str | None] = {**ACCEPT, **(headers or {})}
        if token is not None:
            hdrs["Authorization"] = f"Bearer {token}"
        return request(self.port, method, path, body, hdrs)

    def rpc(self, who: str, method: str, params: dict[str, Any] | None = None) -> dict[str, Any]:
        status, body = self.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 7, "method": method, "params": params or {}}, self.tokens[who])
        assert status == 200, (status, body)
        assert isinstance(body, dict) and "result" in body, body
        return body["result"]  # type: ignore[no-any-return]

    def tool(self, who: str, name: str, arguments: dict[str, Any]) -> dict[str, Any]:
        return self.rpc(who, "tools/call", {"name": name, "arguments": arguments})


def _leak_free(payload: Any, asked: str = "") -> None:
    """Nothing of the hr collection in `payload` beyond what the client sent (`asked`, echoed in errors)."""
    text = json.dumps(payload)
    for part in filter(None, (asked, *(p.strip() for p in asked.split(",")))):
        text = text.replace(json.dumps(part)[1:-1], "")
    for marker in (HR_SECRET, "Human resources", "Salary bands", "HR ideas", "qmd://hr", "salaries.md", "reviews/2024.md"):
        assert marker not in text, (marker, text[:600])


@pytest.fixture(scope="module")
def team(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Team]:
    root = tmp_path_factory.mktemp("mcp-auth")
    env = make_env(root)
    setup_index(root, env)
    hr = root / "hr"
    for rel, text in HR_NOTES.items():
        (hr / rel).parent.mkdir(parents=True, exist_ok=True)
        (hr / rel).write_text(text)
    assert run_qmd("collection", "add", str(hr), "--name", "hr", env=env).returncode == 0
    assert run_qmd("context", "add", "qmd://hr/", "Human resources: salaries and reviews", env=env).returncode == 0
    found = json.loads(run_qmd("search", HR_SECRET, "-c", "hr", "--json", "-n", "10", env=env).stdout)
    hr_docids = sorted(h["docid"].lstrip("#") for h in found)
    assert len(hr_docids) == 3
    tokens = {"admin": add_token(env, "admin"), "alice": add_token(env, "alice", "notes"), "bob": add_token(env, "bob", "hr"), "revoked": add_token(env, "gone")}
    assert run_qmd("token", "revoke", "gone", env=env).returncode == 0
    with http_server(env, root / "server.log") as server:
        yield Team(root, env, server.port, server.log, server.proc, tokens, hr_docids)


# --- the auth table ------------------------------------------------------------------------

INIT = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-11-25", "capabilities": {}, "clientInfo": {"name": "t", "version": "1"}}}
QUERY = {"searches": [{"type": "lex", "query": "rollback"}]}
ROUTES = {
    "GET /health": ("GET", "/health", None),
    "POST /mcp": ("POST", "/mcp", INIT),
    "POST /query": ("POST", "/query", QUERY),
    "POST /search": ("POST", "/search", QUERY),
    "POST /query collections=[hr]": ("POST", "/query", {**QUERY, "collections": ["hr"]}),
    "POST /search collections=[nope]": ("POST", "/search", {**QUERY, "collections": ["nope"]}),
    "GET /nowhere": ("GET", "/nowhere", None),
}
KINDS = ("none", "not bearer", "wrong", "revoked", "admin", "alice (notes)")
# route → status per token kind, in KINDS order
TABLE = {
    "GET /health": (200, 401, 401, 401, 200, 200),
    "POST /mcp": (401, 401, 401, 401, 200, 200),
    "POST /query": (401, 401, 401, 401, 200, 200),
    "POST /search": (401, 401, 401, 401, 200, 200),
    "POST /query collections=[hr]": (401, 401, 401, 401, 200, 403),
    "POST /search collections=[nope]": (401, 401, 401, 401, 400, 403),
    "GET /nowhere": (401, 401, 401, 401, 404, 404),
}


def _headers(team: Team, kind: str) -> dict[str, str | None]:
    value = {
        "none": None, "not bearer": "Basic YWRtaW46YWRtaW4=", "wrong": f"Bearer {WRONG}", "revoked": f"Bearer {team.tokens['revoked']}",
        "admin": f"Bearer {team.tokens['admin']}", "alice (notes)": f"Bearer {team.tokens['alice']}",
    }[kind]
    return {"Authorization": value} if value is not None else {}


def test_auth_table(team: Team) -> None:
    got = {}
    for route, (method, path, body) in ROUTES.items():
        got[route] = tuple(team.call(method, path, body, headers=_headers(team, kind))[0] for kind in KINDS)
    assert got == TABLE
    # the report's table, also in the test output (-s)
    print("\n| route | " + " | ".join(KINDS) + " |\n|---|" + "---|" * len(KINDS))
    for route, row in got.items():
        print(f"| {route} | " + " | ".join(map(str, row)) + " |")


def test_refusals_say_why_and_challenge(team: Team) -> None:
    status, body = team.call("POST", "/query", QUERY)
    assert status == 401 and "Authorization: Bearer" in body["error"] and "qmd token add" in body["hint"]
    status, body = team.call("POST", "/mcp", INIT, WRONG)
    assert status == 401 and "not valid" in body["error"]
    status, body = team.call("POST", "/query", {**QUERY, "collections": ["hr"]}, team.tokens["alice"])
    assert status == 403 and body["error"] == "collection 'hr' is not readable with this token" and body["hint"] == "this token reads: notes"
    # a collection that does not exist gets the same answer: nothing is revealed
    status, other = team.call("POST", "/query", {**QUERY, "collections": ["nope"]}, team.tokens["alice"])
    assert status == 403 and other["error"] == "collection 'nope' is not readable with this token"
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", team.port, timeout=10)
    conn.request("POST", "/mcp", body=json.dumps(INIT), headers={"Host": f"127.0.0.1:{team.port}", "Content-Type": "application/json", **ACCEPT})
    resp = conn.getresponse()
    resp.read()
    assert resp.status == 401 and resp.getheader("WWW-Authenticate") == 'Bearer realm="qmd"'
    conn.close()


def test_health_without_a_token_is_liveness_only(team: Team) -> None:
    status, body = team.call("GET", "/health")
    assert (status, body) == (200, {"status": "ok"})
    status, full = team.call("GET", "/health", token=team.tokens["admin"])
    assert status == 200 and set(full) == {"status", "uptime_s", "version", "build_id", "index", "documents"}
    assert full["documents"] == NOTES_DOCS + len(HR_NOTES)
    assert team.call("GET", "/health", token=team.tokens["alice"])[1]["documents"] == NOTES_DOCS
    assert team.call("GET", "/health", token=team.tokens["bob"])[1]["documents"] == len(HR_NOTES)


# --- the boundary ----------------------------------------------------------------------------


def test_scoped_instructions_and_status_show_only_their_collections(team: Team) -> None:
    init = team.rpc("alice", "initialize", INIT["params"])  # type: ignore[arg-type]
    _leak_free(init)
    assert f"over {NOTES_DOCS} markdown documents" in init["instructions"] and "- notes (4 docs)" in init["instructions"]
    assert "Human resources" not in init["instructions"]
    prompt = team.rpc("alice", "prompts/get", {"name": "search-first"})
    _leak_free(prompt)
    status = team.tool("alice", "status", {})
    _leak_free(status)
    sc = status["structuredContent"]
    assert [c["name"] for c in sc["collections"]] == ["notes"] and sc["documents"] == NOTES_DOCS
    assert sc["vectors"]["pending_documents"] in (0, NOTES_DOCS)
    full = team.tool("admin", "status", {})["structuredContent"]
    assert sorted(c["name"] for c in full["collections"]) == ["hr", "notes"] and full["documents"] == NOTES_DOCS + len(HR_NOTES)
    assert "Human resources" in team.rpc("admin", "initialize", INIT["params"])["instructions"]  # type: ignore[arg-type]
    bob = team.tool("bob", "status", {})["structuredContent"]
    assert [c["name"] for c in bob["collections"]] == ["hr"] and bob["documents"] == len(HR_NOTES)


def test_scoped_tokens_hold_on_the_2026_07_28_path(team: Team) -> None:
    meta = {"io.modelcontextprotocol/protocolVersion": "2026-07-28", "io.modelcontextprotocol/clientCapabilities": {}}
    v2026 = {"MCP-Protocol-Version": "2026-07-28"}
    status, body = team.call("POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "server/discover", "params": {"_meta": meta}}, team.tokens["alice"], {**v2026, "Mcp-Method": "server/discover"})
    assert status == 200 and "- notes (4 docs)" in body["result"]["instructions"]
    _leak_free(body)
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query", "arguments": {"searches": [{"type": "lex", "query": "salary"}], "collections": ["hr"]}, "_meta": meta}}
    status, body = team.call("POST", "/mcp", call, team.tokens["alice"], {**v2026, "Mcp-Method": "tools/call", "Mcp-Name": "query"})
    assert status == 200 and body["result"]["isError"] is True and body["result"]["resultType"] == "complete"
    _leak_free(body, "hr")
    status, body = team.call("POST", "/mcp", call, team.tokens["revoked"], {**v2026, "Mcp-Method": "tools/call", "Mcp-Name": "query"})
    assert status == 401


def test_scoped_query_reads_only_its_collections(team: Team) -> None:
    for who, prefix in (("alice", "qmd://notes/"), ("bob", "qmd://hr/")):
        for args in ({"query": "rollback load balancer kubernetes"}, {"searches": [{"type": "lex", "query": "rollback"}], "limit": 20}):
            rows = team.tool(who, "query", args)["structuredContent"]["results"]
            assert rows and all(r["file"].startswith(prefix) for r in rows), (who, rows)
            if who == "alice":
                _leak_free(rows)
        status, body = team.call("POST", "/search", {"query": "rollback", "limit": 20}, team.tokens[who])
        assert status == 200 and body["results"] and all(r["file"].startswith(prefix) for r in body["results"])
    both = team.tool("admin", "query", {"searches": [{"type": "lex", "query": "rollback"}], "limit": 20})["structuredContent"]["results"]
    assert {r["file"].split("/")[2] for r in both} == {"notes", "hr"}
    out = team.tool("alice", "query", {"query": "rollback", "collections": ["notes", "hr"]})
    assert out["isError"] and "collection 'hr' is not readable with this token" in out["content"][0]["text"]


@pytest.mark.parametrize("ref", [
    "qmd://hr/salaries.md", "hr/salaries.md", "salaries.md", "qmd://hr/salaries.md:1:2", "reviews/2024.md", "qmd://hr/../notes/ideas.md",
])
def test_scoped_get_cannot_name_the_other_collection(team: Team, ref: str) -> None:
    out = team.tool("alice", "get", {"file": ref})
    assert out["isError"], out
    _leak_free(out, ref)


def test_scoped_get_by_docid_of_the_other_collection(team: Team) -> None:
    for docid in team.hr_docids:
        for ref in (f"#{docid}", docid):
            out = team.tool("alice", "get", {"file": ref})
            assert out["isError"], out
            _leak_free(out, ref)
            assert docid not in json.dumps(out).replace(ref, "")
        assert not team.tool("bob", "get", {"file": f"#{docid}"})["isError"]
    # a path in both collections: the admin is told it is ambiguous, alice gets hers
    assert "several collections" in team.tool("admin", "get", {"file": "ideas.md"})["content"][0]["text"]
    mine = team.tool("alice", "get", {"file": "ideas.md"})
    assert not mine["isError"] and mine["structuredContent"]["file"] == "qmd://notes/ideas.md"


@pytest.mark.parametrize("pattern", [
    "hr/*.md", "hr/**/*.md", "qmd://hr/*.md", "qmd://hr/**", "qmd://hr/salaries.md", "notes/ideas.md, qmd://hr/salaries.md",
    "notes/ideas.md,hr/salaries.md", "*/salaries.md", "**/2024.md", "reviews/*.md",
])
def test_scoped_multi_get_cannot_reach_the_other_collection(team: Team, pattern: str) -> None:
    out = team.tool("alice", "multi_get", {"pattern": pattern})
    _leak_free(out, pattern)
    docs = (out.get("structuredContent") or {}).get("documents", [])
    assert all(d["file"].startswith("qmd://notes/") for d in docs if "docid" in d)  # a name it may not read: skipped, as if absent


def test_scoped_multi_get_of_docids_and_wide_globs(team: Team) -> None:
    asked = ", ".join("#" + d for d in team.hr_docids)
    out = team.tool("alice", "multi_get", {"pattern": asked})
    assert out["isError"]
    _leak_free(out, asked)
    for pattern in ("**/*.md", "qmd://*/**", "*.md, **/*.md"):
        out = team.tool("alice", "multi_get", {"pattern": pattern})
        _leak_free(out, pattern)
        if not out["isError"]:
            assert {d["file"] for d in out["structuredContent"]["documents"]} <= {f"qmd://notes/{p}" for p in ("runbooks/deploy.md", "runbooks/postgres.md", "meetings/2024-03-01.md", "ideas.md")}
    every = team.tool("admin", "multi_get", {"pattern": "**/*.md"})["structuredContent"]["documents"]
    assert any(d["file"].startswith("qmd://hr/") for d in every)


# --- the token file -------------------------------------------------------------------------


def test_token_file_holds_hashes_only_with_mode_0600(team: Team) -> None:
    path = Path(team.env["XDG_CONFIG_HOME"]) / "qmd" / "index.tokens.json"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    text = path.read_text()
    for token in team.tokens.values():
        assert token not in text and token[4:] not in text
    names = [t["name"] for t in json.loads(text)["tokens"]]
    assert names == ["admin", "alice", "bob"]
    listing = run_qmd("token", "list", env=team.env)
    assert listing.returncode == 0 and "alice" in listing.stdout and "notes" in listing.stdout and "every collection" in listing.stdout
    assert all(t not in listing.stdout for t in team.tokens.values())
    rows = json.loads(run_qmd("token", "list", "--json", env=team.env).stdout)
    assert [(r["name"], r["collections"]) for r in rows] == [("admin", None), ("alice", ["notes"]), ("bob", ["hr"])]
    again = run_qmd("token", "add", "alice", env=team.env)
    assert again.returncode == 1 and "exists already" in again.stderr
    bad = run_qmd("token", "add", "carol", "--collection", "nope", env=team.env)
    assert bad.returncode == 1 and "unknown collection 'nope'" in bad.stderr
    assert run_qmd("token", "revoke", "nobody", env=team.env).returncode == 1


def test_token_changes_apply_without_a_restart(team: Team) -> None:
    carol = add_token(team.env, "carol", "hr")
    status, body = team.call("POST", "/query", QUERY, carol)
    assert status == 200 and all(r["file"].startswith("qmd://hr/") for r in body["results"])
    assert run_qmd("token", "revoke", "carol", env=team.env).returncode == 0
    assert team.call("POST", "/query", QUERY, carol)[0] == 401
    assert team.call("POST", "/query", QUERY, team.tokens["alice"])[0] == 200


def test_the_log_names_tokens_never_holds_them(team: Team) -> None:
    team.call("POST", "/query", QUERY)
    team.call("POST", "/query", QUERY, team.tokens["alice"])
    team.call("POST", "/query", QUERY, WRONG)
    deadline = time.monotonic() + 10
    while "401 unknown token" not in team.log.read_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    log = team.log.read_text()
    assert "token alice" in log and "401 unknown token" in log and "401 no token" in log
    for token in (*team.tokens.values(), WRONG):
        assert token not in log and token[4:20] not in log


def test_stdio_is_unaffected_by_tokens(team: Team) -> None:
    from qmd.serve.probe import stdio

    shake = stdio(env=team.env, timeout=60)
    assert shake.ok, shake.error


def test_doctor_probe_sends_the_token(team: Team) -> None:
    from qmd.serve.probe import http

    assert not http(f"http://127.0.0.1:{team.port}/mcp").ok
    refused = http(f"http://127.0.0.1:{team.port}/mcp", token=WRONG)
    assert not refused.ok and "token was refused" in refused.error
    shake = http(f"http://127.0.0.1:{team.port}/mcp", token=team.tokens["alice"])
    assert shake.ok and shake.tools == ["get", "multi_get", "query", "status"]


# --- beyond loopback -------------------------------------------------------------------------


def _serve(env: dict[str, str], *args: str, timeout: float = 30) -> subprocess.CompletedProcess[str]:
    return run_qmd("mcp", "--http", *args, env=env, timeout=timeout)


def test_non_loopback_needs_a_token_or_no_auth(tmp_path: Path) -> None:
    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    port = free_port()
    refused = _serve(env, "--host", "0.0.0.0", "--port", str(port))
    assert refused.returncode == 1
    assert "refusing to serve index 'index' on 0.0.0.0 without tokens" in refused.stderr and "--no-auth" in refused.stderr
    daemon = run_qmd("mcp", "--http", "--daemon", "--host", "0.0.0.0", "--port", str(port), env=env, timeout=30)
    assert daemon.returncode == 1 and "without tokens" in daemon.stderr
    assert not (tmp_path / "state" / "mcp-index.json").exists()
    # --no-auth: served, unauthenticated, with the warning
    with http_server(env, tmp_path / "open.log", "--host", "0.0.0.0", "--no-auth") as server:
        assert request(server.port, "POST", "/query", QUERY)[0] == 200
    assert "unauthenticated" in server.log.read_text()
    # with a token: every route asks for it, even after the token file is gone
    token = add_token(env, "ci")
    with http_server(env, tmp_path / "auth.log", "--host", "0.0.0.0") as server:
        port = server.port
        assert server.health == {"status": "ok"}
        assert request(port, "POST", "/query", QUERY)[0] == 401
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 200
        (Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.tokens.json").unlink()
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 503
        assert request(port, "POST", "/query", QUERY)[0] == 503
    assert "behind TLS" in server.log.read_text()


def test_loopback_asks_for_tokens_once_the_file_exists(tmp_path: Path) -> None:
    with served_index(tmp_path) as server:
        env, port, proc = server.env, server.port, server.proc
        assert request(port, "POST", "/query", QUERY)[0] == 200  # no token file: loopback is open, as before
        token = add_token(env, "me")
        assert request(port, "POST", "/query", QUERY)[0] == 401
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 200
        assert run_qmd("token", "revoke", "me", env=env).returncode == 0  # an empty file still asks: nobody gets in
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 401
        path = Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.tokens.json"
        path.write_text("{broken")
        status, body = request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})
        assert status == 503 and "unreadable" in body["error"]
        path.unlink()  # deleting the file closes the server, it never opens it
        status, body = request(port, "POST", "/query", QUERY)
        assert status == 503 and "deleted" in body["error"] and "--no-auth" in body["hint"]
        assert request(port, "POST", "/mcp", {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}, ACCEPT)[0] == 503
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 503
        assert wait_health(port, proc) == {"status": "ok"}  # liveness still answers, and says nothing
        token = add_token(env, "again")  # tokens exist again: served with one
        assert request(port, "POST", "/query", QUERY, {"Authorization": f"Bearer {token}"})[0] == 200
        assert request(port, "POST", "/query", QUERY)[0] == 401
    assert (tmp_path / "server.log").read_text().count("was deleted: every request is refused (503)") == 1


def test_allowed_hosts_beyond_loopback_need_a_token_or_no_auth(tmp_path: Path) -> None:
    """The reverse-proxy setup of docs/team.md: bound to 127.0.0.1, QMD_ALLOWED_HOSTS naming the
    public name. The proxy brings the network: the server asks for tokens as if it listened there."""
    env = {**make_env(tmp_path), "QMD_ALLOWED_HOSTS": "notes.example.com"}
    setup_index(tmp_path, env)
    port = free_port()
    refused = _serve(env, "--port", str(port))
    assert refused.returncode == 1 and "without tokens" in refused.stderr and "QMD_ALLOWED_HOSTS=notes.example.com" in refused.stderr, refused.stderr
    with http_server(env, tmp_path / "open.log", "--no-auth") as server:
        assert request(server.port, "POST", "/query", QUERY, {"Host": "notes.example.com"})[0] == 200
    text = server.log.read_text()
    assert "QMD_ALLOWED_HOSTS names notes.example.com" in text and "unauthenticated" in text
    token = add_token(env, "proxy")
    with http_server(env, tmp_path / "auth.log") as server:
        assert request(server.port, "POST", "/query", QUERY, {"Host": "notes.example.com"})[0] == 401
        assert request(server.port, "POST", "/query", QUERY, {"Host": "notes.example.com", "Authorization": f"Bearer {token}"})[0] == 200
    # only loopback names allowed: nothing changes for a plain local server
    env["QMD_ALLOWED_HOSTS"] = "localhost,127.0.0.1"
    (Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.tokens.json").unlink()
    with http_server(env, tmp_path / "local.log") as server:
        assert request(server.port, "POST", "/query", QUERY)[0] == 200


def test_scoped_get_of_a_server_path_in_the_other_collection(team: Team) -> None:
    for ref in (str(team.root / "hr" / "salaries.md"), str(team.root / "hr"), "../hr/salaries.md"):
        out = team.tool("alice", "get", {"file": ref})
        assert out["isError"], out
        _leak_free(out, ref)
    assert not team.tool("bob", "get", {"file": str(team.root / "hr" / "salaries.md")})["isError"]


def test_a_scoped_token_cannot_tell_which_files_exist_and_sees_no_server_path(team: Team) -> None:
    """Every reference that finds no document the token may read gets the same answer: a
    file that exists on the server (the server's log, /etc/hostname, a note of another
    collection), one that does not, relative to the server's working directory or not."""
    existing = [str(team.log), "/etc/hostname", str(team.root / "hr" / "salaries.md"), "./server.log", "../mcp-auth0/server.log", "~/.bashrc", str(team.root)]
    missing = [str(team.root / "nothing-here.md"), "/etc/no-such-file", "./nothing.md", "../nowhere/x.md", "~/nothing.md", "nothing.md"]
    answers = set()
    for ref in existing + missing:
        out = team.tool("alice", "get", {"file": ref})
        assert out["isError"], (ref, out)
        answers.add(out["content"][0]["text"].replace(repr(ref), "REF"))
    assert len(answers) == 1, answers
    # a visible note is still found by its server path (what an unscoped client was told)
    assert not team.tool("alice", "get", {"file": str(team.root / "notes" / "ideas.md")})["isError"]
    status = team.tool("alice", "status", {})
    assert str(team.root) not in json.dumps(status), status
    assert str(team.root) in json.dumps(team.tool("admin", "status", {}))
