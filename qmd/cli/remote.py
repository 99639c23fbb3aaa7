"""The CLI uses the warm server: `qmd search|vsearch|query` asked of a running HTTP server.

A `qmd mcp --http` server keeps its models loaded; a shell command that loads the embed
model again pays the load (MiniLM ~0.3 s, EmbeddingGemma ~1 s) for a 5–45 ms query.
`ask` hands the command's request record (qmd/core/requests.py) to the index's server (POST
/cli, qmd/serve/cliroute.py) and returns its Outcome, the record an in-process run gives; the
command renders it with its own renderers, so stdout is the same bytes as an in-process run.

What decides (any doubt → None: the command runs in-process, never a wrong answer):

1. `--local`, or `QMD_SERVER=off`: in-process.
2. The index's PID file (`<state>/mcp-{index}.json`; a project-local index's is
   `mcp-local-<hash>.json`, of its config's path): absent → in-process. This open() is
   all a CLI call without a server pays (one failed system call; nothing more is imported).
3. Its `build_id` equals this installation's (qmd/core/buildinfo.py), and its pid is alive.
4. Whatever listens on the recorded host and port proves it is the server that wrote the
   PID file (qmd/serve/proof.py: POST /hello answered with an HMAC under the key only the
   0600 PID file holds) before anything else is sent: after a crash or a reboot the pid may
   be reused and any local process may hold the port, and it must receive neither the
   query nor a token, nor have its answer printed as qmd's. No bearer token is ever sent:
   on the same connection the CLI proves it read the PID file (X-Qmd-Proof).
5. POST /cli answers 200 within the time limits. The request carries this build id and
   this process's index identity (qmd/serve/identity.py: index path, database, config,
   models), and the server refuses (409) when either differs: a server of another index,
   or of the same name over other data, is not used. Busy for 2 s with another search
   (503), an error of the search itself (400: the in-process run prints it the same way),
   a timeout, a refused connection, an unreadable answer: in-process.

`QMD_SERVER=require` turns every "in-process" of steps 2–5 into an error naming why (exit 1),
for scripts that must not load models themselves; a 400 (the search's own error) is raised
as the server words it, message and hint, as the in-process run would. `QMD_SERVER_TIMEOUT_S` bounds the wait
for an answer (default 60 s; connecting: 1 s).
"""

from __future__ import annotations

import os

TYPE_CHECKING = False
if TYPE_CHECKING:
    from typing import Any

    from qmd.core.requests import Outcome, Request

CONNECT_TIMEOUT_S = 1.0
ANSWER_TIMEOUT_S = 60.0
MAX_ANSWER_BYTES = 256 * 1024 * 1024


def outcome_of(data: dict[str, Any]) -> Outcome:
    """The Outcome a server's JSON answer holds (KeyError, TypeError, ValueError when it is not one)."""
    from qmd.core.requests import Outcome
    from qmd.core.results import SearchHit

    why = data.get("why")
    return Outcome(
        [SearchHit(**h) for h in data["hits"]], dict(data["roots"]), list(data["notices"]), dict(data["stages"]), list(data["searches"]),
        dict(data["timings_ms"]), str(data["model"]), int(data["pending"]), None if why is None else dict(why),
        float(data["threshold"]), [str(w) for w in data["unmatched"]],
    )


def mode() -> str:
    """`QMD_SERVER`: auto (default: the server when one answers), off, or require."""
    value = os.environ.get("QMD_SERVER", "").strip().lower()
    if value in ("off", "0", "no", "local", "never"):
        return "off"
    return "require" if value in ("require", "required", "always") else "auto"


def ask(request: Request, local: bool = False) -> Outcome | None:
    """The server's outcome of `request`, or None: run it in-process (see the module docstring)."""
    how = "off" if local else mode()
    if how == "off":
        return None
    from qmd.cli.shared import STATE
    from qmd.core.paths import DEFAULT_INDEX, StateLayout, find_local_config, server_name

    # A project-local index is keyed by its config's path, as its server (`qmd mcp --http
    # --daemon` in the project) records itself; the identity check still decides.
    project = find_local_config() if STATE.index_name is None else None
    index = str(project) if project is not None else STATE.index_name or DEFAULT_INDEX
    why = ""
    try:
        with open(StateLayout.current().mcp_pid_file(server_name(index)), "rb") as fh:  # pidfile.pid_path, without importing it
            raw = fh.read(65536)
    except OSError:
        why = f"no HTTP server runs for index '{index}' (start one: qmd mcp --http --daemon" + (" in the project)" if project is not None else ")")
    else:
        answer, why = _ask(index, raw, request)
        if answer is not None:
            return answer
    if how == "require":
        from qmd.core.errors import QmdError

        raise QmdError(f"QMD_SERVER=require: {why}", "start or restart the server (qmd mcp --http --daemon), or unset QMD_SERVER to search in-process")
    return None


def _ask(index: str, raw: bytes, request: Request) -> tuple[Outcome | None, str]:
    import json

    from qmd.core.buildinfo import build_id
    from qmd.core.requests import to_json

    try:
        info = json.loads(raw)
        pid, host, port, server_build = int(info["pid"]), str(info["host"]), int(info["port"]), str(info["build_id"])
        key = str(info.get("key") or "")
        bytes.fromhex(key)
    except (ValueError, KeyError, TypeError):
        return None, f"the PID file of index '{index}' is unreadable"
    mine = build_id()
    if server_build != mine:
        return None, f"the server of index '{index}' runs build {server_build}, this qmd is {mine} (restart it: qmd mcp stop, then start it again)"
    if not key:
        return None, f"the PID file of index '{index}' holds no key to check the server with (restart it: qmd mcp stop, then start it again)"
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return None, f"the server of index '{index}' (pid {pid}) is gone"
    except OSError:
        pass  # another user's process (EPERM): it exists; the proof decides
    from qmd.serve.identity import index_identity

    body = {**to_json(request), "build_id": mine, "identity": index_identity(index)}
    try:
        data = json.dumps(body, ensure_ascii=True, allow_nan=False).encode("ascii")
    except ValueError:
        return None, "the request cannot be sent as JSON"
    status, payload = _post(host, port, "/cli", data, key)
    if status == 400 and mode() == "require":
        _raise_its_own(payload)  # the search's own error (a bad filter, an unknown collection), as in-process
    if status != 200:
        return None, f"the server of index '{index}' at {host}:{port} answered {_why(status, payload)}"
    try:
        return outcome_of(json.loads(payload)), ""
    except (ValueError, KeyError, TypeError) as exc:
        return None, f"the server's answer is unreadable ({type(exc).__name__})"


def _raise_its_own(payload: bytes) -> None:
    """Raise the QmdError a 400 answer carries (its message and hint), if it carries one."""
    import json

    from qmd.core.errors import QmdError

    try:
        answer = json.loads(payload)
        error, hint = answer["error"], answer.get("hint") or ""
    except (ValueError, KeyError, TypeError):
        return
    if isinstance(error, str) and isinstance(hint, str):
        raise QmdError(error, hint)


def _why(status: int, payload: bytes) -> str:
    if status == 0:
        return payload.decode("utf-8", "replace") or "nothing"
    try:
        import json

        error = json.loads(payload).get("error")
    except (ValueError, AttributeError):
        error = None
    return f"HTTP {status}" + (f": {error}" if isinstance(error, str) else "")


def _connect_host(bind_host: str) -> str:
    """The address a local client uses for a server bound to `bind_host` (pidfile.connect_host, unbracketed)."""
    host = bind_host.strip()
    if host in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "::1"
    return host.removeprefix("[").removesuffix("]")


def _timeout() -> float:
    try:
        value = float(os.environ.get("QMD_SERVER_TIMEOUT_S", ""))
    except ValueError:
        return ANSWER_TIMEOUT_S
    return value if value > 0 else ANSWER_TIMEOUT_S


def _post(bind_host: str, port: int, path: str, body: bytes, key: str) -> tuple[int, bytes]:
    """POST `body` to the server on (bind_host, port) after it proved it holds `key`, the
    secret of its PID file (qmd/serve/proof.py: /hello, then the request with X-Qmd-Proof,
    on one connection; no bearer token is sent): (status, body), or (0, why) when no proven
    answer could be had in time. Plain sockets: http.client costs ~10 ms to import."""
    import socket
    import time

    from qmd.serve.proof import client_header, hello_body, new_nonce, proven

    host = _connect_host(bind_host)
    netloc = f"[{host}]:{port}" if ":" in host else f"{host}:{port}"
    deadline = time.monotonic() + _timeout()
    try:
        with socket.create_connection((host, port), timeout=CONNECT_TIMEOUT_S) as sock:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
            reader = _Reader(sock, deadline)
            nonce = new_nonce()
            hello = hello_body(nonce)
            status, answer = reader.exchange(_head("/hello", netloc, len(hello), keep_alive=True) + hello)
            if status == 0:
                return 0, answer
            server_nonce = proven(key, nonce, status, answer)
            if server_nonce is None:
                return 0, f"no proof from whatever listens on {netloc} that it is the server which wrote the PID file (a stale PID file?): nothing was sent to it".encode()
            proof = f"X-Qmd-Proof: {client_header(key, server_nonce)}\r\n"
            return reader.exchange(_head(path, netloc, len(body), keep_alive=False, extra=proof) + body)
    except TimeoutError:
        return 0, b"no answer in time (QMD_SERVER_TIMEOUT_S)"
    except (OSError, ValueError, IndexError) as exc:
        return 0, f"no usable answer ({type(exc).__name__}: {exc})".encode()


def _head(path: str, netloc: str, length: int, *, keep_alive: bool, extra: str = "") -> bytes:
    connection = "keep-alive" if keep_alive else "close"
    return (
        f"POST {path} HTTP/1.1\r\nHost: {netloc}\r\nContent-Type: application/json\r\nContent-Length: {length}\r\n"
        f"Connection: {connection}\r\n{extra}\r\n"
    ).encode("ascii")


class _Reader:
    """Requests and answers (Content-Length framed) over one socket, within one deadline."""

    def __init__(self, sock: Any, deadline: float) -> None:
        self.sock, self.deadline, self.buf = sock, deadline, b""

    def exchange(self, request: bytes) -> tuple[int, bytes]:
        import time

        self.sock.sendall(request)
        length: int | None = None
        status = 0
        while True:
            if length is None and b"\r\n\r\n" in self.buf:
                header, _, self.buf = self.buf.partition(b"\r\n\r\n")
                lines = header.decode("latin-1").split("\r\n")
                status = int(lines[0].split()[1])
                fields = dict(line.split(":", 1) for line in lines[1:] if ":" in line)
                sizes = [v for k, v in fields.items() if k.strip().lower() == "content-length"]
                if len(sizes) != 1 or int(sizes[0]) > MAX_ANSWER_BYTES:
                    return 0, b"an answer without a usable Content-Length"
                length = int(sizes[0])
            if length is not None and len(self.buf) >= length:
                answer, self.buf = self.buf[:length], self.buf[length:]
                return status, answer
            left = self.deadline - time.monotonic()
            if left <= 0:
                return 0, b"no answer in time (QMD_SERVER_TIMEOUT_S)"
            self.sock.settimeout(left)
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return 0, b"the connection closed before the answer was complete"
            self.buf += chunk
