"""Proof of identity between a running HTTP server and the local tools that find it by its PID file.

A PID file outlives its server (a crash, a reboot); its pid is then often reused and any
local process may listen on the recorded port. Before a local client sends it a query or a
token, or trusts its answer, the server must show it is the one that wrote the PID file:

1. at start the server draws a secret key (32 random bytes) and writes it into its PID
   file (mode 0600, in the state dir), nowhere else;
2. the client sends `POST /hello {"nonce": N}` (N: its own random hex); the server answers
   `{"proof": HMAC(key, "qmd-server\\0" + N), "nonce": S}` with S a one-time nonce of its own;
3. the client checks the proof against the key in the PID file (constant time) and only
   then, on the same connection, sends its request with `X-Qmd-Proof: S.HMAC(key,
   "qmd-client\\0" + S)`: the server knows a caller that can read its PID file (the same
   user), so the CLI never needs to send a bearer token to its own server.

An impostor learns a nonce and nothing else: no query, no token, and it cannot forge a
proof without the key. Each server nonce is good once, for NONCE_TTL_S seconds.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time

SERVER = b"qmd-server\0"
CLIENT = b"qmd-client\0"
HEADER = "x-qmd-proof"
NONCE_TTL_S = 60.0
MAX_NONCES = 4096


def new_key() -> str:
    """A server's secret key, hex."""
    return secrets.token_hex(32)


def new_nonce() -> str:
    return secrets.token_hex(16)


def sign(key: str, label: bytes, nonce: str) -> str:
    """HMAC-SHA256 of `label + nonce` under the hex `key`."""
    return hmac.new(bytes.fromhex(key), label + nonce.encode("ascii", "replace"), hashlib.sha256).hexdigest()


def valid_nonce(nonce: object) -> bool:
    return isinstance(nonce, str) and 16 <= len(nonce) <= 128 and all(c in "0123456789abcdef" for c in nonce)


def server_proves(key: str, client_nonce: str, proof: object) -> bool:
    """Whether `proof` is the server's answer to `client_nonce` under `key`."""
    return isinstance(proof, str) and hmac.compare_digest(sign(key, SERVER, client_nonce), proof)


def hello_body(nonce: str) -> bytes:
    """The body of `POST /hello` carrying the client's `nonce`."""
    return b'{"nonce": "' + nonce.encode("ascii") + b'"}'


def proven(key: str, nonce: str, status: int, answer: bytes) -> str | None:
    """The server's one-time nonce when its /hello answer (`status`, `answer`) to `nonce`
    proves it holds `key`; None when it does not (anything else listens on that port)."""
    import json

    try:
        reply = json.loads(answer) if status == 200 else None
    except ValueError:
        return None
    if not isinstance(reply, dict) or not server_proves(key, nonce, reply.get("proof")):
        return None
    server_nonce = reply.get("nonce")
    return server_nonce if isinstance(server_nonce, str) and valid_nonce(server_nonce) else None


def client_header(key: str, server_nonce: str) -> str:
    """The `X-Qmd-Proof` value a client sends after a verified /hello."""
    return f"{server_nonce}.{sign(key, CLIENT, server_nonce)}"


class Nonces:
    """The server's side: one-time nonces it handed out, each good for NONCE_TTL_S."""

    def __init__(self, key: str) -> None:
        self.key = key
        self._issued: dict[str, float] = {}
        self._lock = threading.Lock()

    def hello(self, client_nonce: str) -> dict[str, str]:
        """The /hello answer to `client_nonce` (checked with `valid_nonce` by the caller)."""
        mine = new_nonce()
        now = time.monotonic()
        with self._lock:
            if len(self._issued) >= MAX_NONCES:
                for nonce, at in sorted(self._issued.items(), key=lambda item: item[1])[: MAX_NONCES // 4]:
                    del self._issued[nonce]
            self._issued[mine] = now
        return {"proof": sign(self.key, SERVER, client_nonce), "nonce": mine}

    def accepts(self, header: str | None) -> bool:
        """Whether an `X-Qmd-Proof` header proves the caller holds the key (its nonce is then spent)."""
        if not header or "." not in header:
            return False
        nonce, _, mac = header.strip().partition(".")
        with self._lock:
            issued = self._issued.pop(nonce, None)
        if issued is None or time.monotonic() - issued > NONCE_TTL_S:
            return False
        return hmac.compare_digest(sign(self.key, CLIENT, nonce), mac)
