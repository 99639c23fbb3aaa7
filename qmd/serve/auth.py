"""Bearer tokens for the HTTP server: the token file, and who a request is.

`qmd token add NAME [--collection C]…` makes a token, prints it once and keeps only its
SHA-256 in `<config dir>/<index>.tokens.json` (beside the index's `<index>.yml`; mode 0600,
replaced atomically by qmd/core/fileio.py):

    {"version": 1, "tokens": [{"name": "alice", "sha256": "<64 hex>", "collections": ["notes"] | null, "created_at": "…"}]}

A token is `qmd_` + 43 URL-safe characters (32 random bytes): no salt or slow hash is
needed, as nobody can enumerate 2^256 candidates against a stolen hash.

The server (`Authenticator`, one per HTTP server) asks for `Authorization: Bearer <token>`
on every route while the token file exists (even with every token revoked), and always when
it listens on an address other than loopback or admits other host names (QMD_ALLOWED_HOSTS:
a reverse proxy brings the network to it), unless it was started with `--no-auth`.
Deleting the file under a running server that had one closes the server (503 on every
route, one line in its log) instead of opening it; restart it to serve without tokens. The
file is re-read when it changes (one `stat` per request), so `add` and `revoke` take effect
on the next request. The presented
token is hashed and compared with every stored hash by `hmac.compare_digest`; it is never
logged (the request log names the token by its NAME). A file that cannot be read refuses
every request (503) until it is fixed: the server fails closed.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Callable
import json
import os
import re
import secrets
from dataclasses import dataclass
from pathlib import Path

from qmd.core.errors import QmdError

VERSION = 1
TOKEN_PREFIX = "qmd_"
NAME_RE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._@-]{0,63}$")
REALM = 'Bearer realm="qmd"'
MAX_FILE = 16 * 1024 * 1024  # ~100k tokens; a file beyond is not one qmd wrote


def tokens_path(index: str) -> Path:
    """The token file of `index`: beside its config (`<config dir>/<index>.tokens.json`)."""
    from qmd.core.paths import config_dir

    return config_dir() / f"{index}.tokens.json"


def digest(token: str) -> str:
    return hashlib.sha256(token.encode("utf-8", "surrogatepass")).hexdigest()


@dataclass(frozen=True)
class TokenEntry:
    """One stored token: its name, the SHA-256 of the secret, the collections it may read
    (None: every collection), when it was made."""

    name: str
    sha256: str
    collections: tuple[str, ...] | None
    created_at: str

    def to_json(self) -> dict[str, object]:
        return {"name": self.name, "sha256": self.sha256, "collections": list(self.collections) if self.collections is not None else None, "created_at": self.created_at}

    @property
    def scope(self) -> frozenset[str] | None:
        return frozenset(self.collections) if self.collections is not None else None


def _bad(path: Path, why: str) -> QmdError:
    return QmdError(f"the token file {path} is unreadable: {why}", f"fix or delete it (`qmd token add` writes a new one); while it is broken the HTTP server refuses every request")


def load(path: Path) -> list[TokenEntry] | None:
    """The tokens in `path`; None when there is no file; a QmdError when it is malformed."""
    from qmd.core.fileio import open_regular

    try:
        with open_regular(path) as fh:  # a FIFO there blocked open() (the server, qmd token) for ever
            data = fh.read(MAX_FILE + 1)
        if len(data) > MAX_FILE:
            raise _bad(path, f"over {MAX_FILE // (1024 * 1024)} MB")
        raw = data.decode("utf-8")
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise _bad(path, exc.strerror or type(exc).__name__) from exc
    except UnicodeDecodeError as exc:  # was an HTTP 500 on every request and exit 3 from `qmd token`
        raise _bad(path, "not UTF-8 text") from exc
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise _bad(path, "not JSON") from exc
    if not isinstance(data, dict) or data.get("version") != VERSION or not isinstance(data.get("tokens"), list):
        raise _bad(path, f'expected {{"version": {VERSION}, "tokens": [...]}}')
    out: list[TokenEntry] = []
    for item in data["tokens"]:
        if not isinstance(item, dict):
            raise _bad(path, "a token entry is not an object")
        name, sha, colls, created = item.get("name"), item.get("sha256"), item.get("collections"), item.get("created_at", "")
        if not isinstance(name, str) or not isinstance(sha, str) or not re.fullmatch(r"[0-9a-f]{64}", sha):
            raise _bad(path, "a token entry needs a name and a sha256 of 64 hex digits")
        if colls is not None and not (isinstance(colls, list) and all(isinstance(c, str) for c in colls)):
            raise _bad(path, f"the collections of '{name}' must be a list of names or null")
        out.append(TokenEntry(name, sha, tuple(colls) if colls is not None else None, str(created)))
    return out


def save(path: Path, entries: list[TokenEntry]) -> None:
    from qmd.core.fileio import write_json

    write_json(path, {"version": VERSION, "tokens": [e.to_json() for e in entries]}, mode=0o600, keep_read_only=True)


def check_name(name: str) -> str:
    if not NAME_RE.match(name):
        raise QmdError(f"'{name[:80]}' is not a token name", "use letters, digits, '.', '_', '@' or '-' (at most 64), e.g. alice or ci-bot")
    return name


def add(path: Path, name: str, collections: list[str] | None) -> tuple[str, TokenEntry]:
    """Make a token named `name` (unique in the file), store its hash; (the token, its entry)."""
    from qmd.core.clock import now_iso

    check_name(name)
    entries = load(path) or []
    if any(e.name == name for e in entries):
        raise QmdError(f"a token named '{name}' exists already", f"revoke it first (qmd token revoke {name}) or choose another name")
    token = TOKEN_PREFIX + secrets.token_urlsafe(32)
    entry = TokenEntry(name, digest(token), tuple(dict.fromkeys(collections)) if collections else None, now_iso())
    save(path, [*entries, entry])
    return token, entry


def revoke(path: Path, name: str) -> TokenEntry:
    """Remove the token `name`; the file stays (an empty list still asks every request for a token)."""
    entries = load(path) or []
    kept = [e for e in entries if e.name != name]
    if len(kept) == len(entries):
        known = ", ".join(e.name for e in entries)
        raise QmdError(f"no token named '{name}'", f"tokens: {known}" if known else "there are no tokens (qmd token add NAME)")
    save(path, kept)
    return next(e for e in entries if e.name == name)


# --- the server's side ----------------------------------------------------------------------


@dataclass(frozen=True)
class Verdict:
    """The outcome for one request: ok (with the token's name and scope), or the refusal."""

    ok: bool
    status: int = 200
    name: str = ""  # the token's name, for the log ("" when no token was needed)
    scope: frozenset[str] | None = None  # the collections it may read; None: every one
    reason: str = ""  # for the log line; never holds the token
    error: str = ""
    hint: str = ""
    presented: bool = False  # an Authorization header came with the request


OPEN = Verdict(True)


def bearer(header: str | None) -> str | None:
    """The token of an `Authorization: Bearer <token>` header (the scheme in any case), else None."""
    if not header:
        return None
    scheme, _, token = header.strip().partition(" ")
    token = token.strip()
    return token if scheme.lower() == "bearer" and token else None


class Authenticator:
    """Checks each request's bearer token against the token file of one index.

    `required`: ask for a token even when the file does not exist (a server on an address
    other than loopback). The file is re-read when its (mtime, size, inode) changes.
    """

    def __init__(self, path: Path, *, required: bool, log: Callable[[str], None] | None = None) -> None:
        self.path = path
        self.required = required
        self.log = log
        self._key: tuple[int, int, int] | None | bool = False  # False: never read
        self._entries: list[TokenEntry] | None = None
        self._error: QmdError | None = None
        self._had_tokens = False  # a token file was seen: its deletion closes the server, never opens it
        self._refresh()  # tokens present at start count, even if the file goes before the first request

    def _refresh(self) -> None:
        try:
            st = os.stat(self.path)
            key: tuple[int, int, int] | None = (st.st_mtime_ns, st.st_size, st.st_ino)
        except FileNotFoundError:
            key = None
        except OSError:
            key = (0, 0, 0)  # unreadable: load() says why
        if key == self._key:
            return
        self._key = key
        try:
            self._entries, self._error = load(self.path), None
        except QmdError as exc:
            self._entries, self._error = None, exc
        if self._entries is not None or self._error is not None:
            self._had_tokens = True
        if self.log is not None and key is None and self._had_tokens:
            self.log(f"the token file {self.path} was deleted: every request is refused (503) until tokens exist again (qmd token add NAME) or the server is restarted with --no-auth")

    def active(self) -> bool:
        """Whether requests need a token now."""
        self._refresh()
        return self.required or self._had_tokens or self._entries is not None or self._error is not None

    def entries(self) -> list[TokenEntry]:
        self._refresh()
        return list(self._entries or [])

    def check(self, header: str | None) -> Verdict:
        """The verdict for a request carrying `header` (its Authorization header, or None)."""
        self._refresh()
        if self._error is not None:
            return Verdict(False, 503, reason="token file unreadable", error="this server cannot check tokens: its token file is unreadable", hint="the server's owner must fix it (qmd token list says why)", presented=header is not None)
        if self._entries is None and self._had_tokens:
            return Verdict(
                False, 503, reason="token file deleted", error="this server's token file was deleted: it serves nobody until tokens exist again",
                hint="the server's owner: qmd token add NAME, or restart the server with --no-auth to serve without tokens", presented=header is not None,
            )
        if not self.required and self._entries is None:
            return OPEN
        token = bearer(header)
        if token is None:
            why = "no token" if header is None else "not a Bearer token"
            return Verdict(False, 401, reason=f"401 {why}", error="this server needs a token: send Authorization: Bearer <token>", hint="ask its owner for one (qmd token add NAME on the server)", presented=header is not None)
        wanted = digest(token)
        found: TokenEntry | None = None
        for entry in self._entries or []:  # every hash is compared: the time does not tell which matched
            if hmac.compare_digest(wanted, entry.sha256) and found is None:
                found = entry
        if found is None:
            return Verdict(False, 401, reason="401 unknown token", error="the token is not valid here (unknown or revoked)", hint="ask the server's owner for a new one (qmd token list shows the names)", presented=True)
        return Verdict(True, 200, name=found.name, scope=found.scope, reason=f"token {found.name}", presented=True)
