"""The token file and the check of each request (qmd/serve/auth.py), without a server."""

from __future__ import annotations

import json
import os
import stat
from pathlib import Path

import pytest

from qmd.core.errors import QmdError
from qmd.serve.auth import Authenticator, add, bearer, digest, load, revoke


def test_add_stores_only_the_hash_atomically_with_mode_0600(tmp_path: Path) -> None:
    path = tmp_path / "cfg" / "index.tokens.json"
    assert load(path) is None
    token, entry = add(path, "alice", ["notes", "notes", "docs"])
    assert token.startswith("qmd_") and len(token) == 47
    assert entry.sha256 == digest(token) and entry.collections == ("notes", "docs")
    assert stat.S_IMODE(path.stat().st_mode) == 0o600 and token not in path.read_text()
    assert [e.name for e in load(path) or []] == ["alice"]
    assert not list(path.parent.glob(".*.tmp"))
    with pytest.raises(QmdError, match="exists already"):
        add(path, "alice", None)
    with pytest.raises(QmdError, match="is not a token name"):
        add(path, "a b", None)
    other, _ = add(path, "bob", None)
    assert other != token
    assert revoke(path, "alice").name == "alice"
    assert [e.name for e in load(path) or []] == ["bob"]
    with pytest.raises(QmdError, match="no token named 'alice'"):
        revoke(path, "alice")


@pytest.mark.parametrize("text", ["{nope", "[]", '{"version": 2, "tokens": []}', '{"version": 1, "tokens": [{"name": "a", "sha256": "xyz"}]}', '{"version": 1, "tokens": [{"name": "a", "sha256": "' + "0" * 64 + '", "collections": "notes"}]}'])
def test_a_malformed_file_is_an_error(tmp_path: Path, text: str) -> None:
    path = tmp_path / "t.json"
    path.write_text(text)
    with pytest.raises(QmdError, match="unreadable"):
        load(path)
    verdict = Authenticator(path, required=False).check("Bearer qmd_x")
    assert (verdict.ok, verdict.status) == (False, 503)  # fails closed


def test_a_token_file_that_is_not_utf8_fails_closed_with_one_line() -> None:
    """Bytes that are not UTF-8 were a UnicodeDecodeError: HTTP 500 on every request, exit 3 from qmd token."""
    from qmd.serve.auth import tokens_path
    from tests.support.run import run_qmd

    path = tokens_path("index")
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"\xff\xfe not text")
    with pytest.raises(QmdError, match="unreadable: not UTF-8"):
        load(path)
    verdict = Authenticator(path, required=False).check("Bearer qmd_x")
    assert (verdict.ok, verdict.status) == (False, 503)
    proc = run_qmd("token", "list")
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and "not UTF-8" in proc.stderr, proc.stderr


@pytest.mark.parametrize(("header", "token"), [
    (None, None), ("", None), ("Bearer", None), ("Bearer  ", None), ("Basic abc", None), ("Bearer abc", "abc"), ("bearer abc ", "abc"), ("BEARER  abc", "abc"),
])
def test_bearer_header(header: str | None, token: str | None) -> None:
    assert bearer(header) == token


def test_authenticator_follows_the_file(tmp_path: Path) -> None:
    path = tmp_path / "t.json"
    open_auth, strict = Authenticator(path, required=False), Authenticator(path, required=True)
    assert open_auth.check(None).ok and not open_auth.active()
    assert strict.check(None).status == 401 and strict.active()
    token, _ = add(path, "alice", ["notes"])
    for auth in (open_auth, strict):
        assert auth.check(None).status == 401
        assert auth.check("Bearer qmd_wrong").status == 401 and auth.check("Bearer qmd_wrong").presented
        ok = auth.check(f"Bearer {token}")
        assert ok.ok and ok.name == "alice" and ok.scope == frozenset({"notes"}) and token not in ok.reason
    revoke(path, "alice")
    assert open_auth.check(f"Bearer {token}").status == 401  # an empty file still asks for a token
    os.unlink(path)  # deleting the file closes both: it never opens a server that had tokens
    assert open_auth.check(None).status == 503 and strict.check(None).status == 503
    assert Authenticator(path, required=False).check(None).ok  # a server started without a file is open on loopback
    add(path, "bob", None)
    primed = Authenticator(path, required=False)  # tokens at start count even before the first request
    os.unlink(path)
    assert primed.check(None).status == 503


def test_same_size_rewrite_is_seen(tmp_path: Path) -> None:
    """The (mtime, size, inode) key: an atomic rewrite is a new inode even at the same size and second."""
    path = tmp_path / "t.json"
    auth = Authenticator(path, required=False)
    a, _ = add(path, "aaaa", None)
    assert auth.check(f"Bearer {a}").ok
    revoke(path, "aaaa")
    b, _ = add(path, "bbbb", None)
    assert json.loads(path.read_text())["tokens"][0]["name"] == "bbbb"
    assert not auth.check(f"Bearer {a}").ok and auth.check(f"Bearer {b}").ok


def test_a_token_file_that_is_a_fifo_fails_closed_and_never_blocks(tmp_path: Path) -> None:
    """A FIFO at the token file's place blocked open() for ever: `qmd token list` and a starting
    HTTP server hung, and a running server stopped answering. Now: one line and exit 1, and the
    running server refuses (503) at once."""
    import subprocess

    from tests.support.mcp import add_token, free_port, http_server, make_env, request, setup_index, spawn_http, stop_process
    from tests.support.run import run_qmd

    env = make_env(tmp_path)
    setup_index(tmp_path, env)
    path = Path(env["XDG_CONFIG_HOME"]) / "qmd" / "index.tokens.json"
    token = add_token(env, "alice")
    accept = {"Accept": "application/json, text/event-stream", "Authorization": f"Bearer {token}"}
    tools = {"jsonrpc": "2.0", "id": 1, "method": "tools/list"}
    with http_server(env, tmp_path / "server.log", timeout=60) as server:
        assert request(server.port, "POST", "/mcp", tools, accept, timeout=20)[0] == 200
        path.unlink()
        os.mkfifo(path)
        status, body = request(server.port, "POST", "/mcp", tools, accept, timeout=20)
        assert status == 503, (status, body)
    proc = run_qmd("token", "list", env=env, timeout=60)
    assert proc.returncode == 1 and proc.stderr.startswith("Error: ") and "not a regular file" in proc.stderr, proc.stderr
    starting = spawn_http(env, free_port(), tmp_path / "start.log")
    try:
        assert starting.wait(timeout=60) == 1
    except subprocess.TimeoutExpired:
        raise AssertionError("the server hung on the FIFO at start") from None
    finally:
        stop_process(starting)
    assert "not a regular file" in (tmp_path / "start.log").read_text()
