"""Origin and Host checks for the HTTP server (pure; applied to every route).

Binding to loopback keeps remote machines out but not a web page: a page on
`evil.example` can re-point its name at 127.0.0.1 (DNS rebinding), and the browser then
sends the page's requests to this server. The only signals a server sees are the
`Origin` header (sent by browsers on cross-origin and on POST requests) and the `Host`
header (the name the browser thinks it is talking to). So:

- an `Origin` whose host is not loopback is refused (403), unless listed in
  `QMD_ALLOWED_ORIGINS`; a missing `Origin` is allowed (curl, SDK clients, agents);
- a `Host` that is not loopback or the bind address is refused (421), unless listed in
  `QMD_ALLOWED_HOSTS`.

Both variables take a comma-separated list; `*` allows everything of that kind.
qmd applies this one check to `/mcp`, `/query`, `/search` and `/health` alike.
"""

from __future__ import annotations

import ipaddress
import os
from dataclasses import dataclass, field
from urllib.parse import urlsplit

WILDCARD_BINDS = frozenset({"", "0.0.0.0", "::", "[::]", "*"})


def _bare(host: str) -> str:
    return host.strip().lower().removeprefix("[").removesuffix("]")


def is_loopback(hostname: str) -> bool:
    """localhost, *.localhost, 127.0.0.0/8, ::1 (and ::ffff:127.x). Not 0.0.0.0."""
    name = _bare(hostname)
    if name == "localhost" or name.endswith(".localhost"):
        return True
    try:
        addr = ipaddress.ip_address(name)
    except ValueError:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        addr = addr.ipv4_mapped
    return addr.is_loopback


def split_host(host: str) -> tuple[str, int | None] | None:
    """`name`, `name:port`, `[::1]:port` → (hostname, port); None if malformed."""
    try:
        parts = urlsplit("//" + host.strip())
        port = parts.port
    except ValueError:
        return None
    if not parts.hostname or parts.username is not None or parts.path or parts.query or parts.fragment:
        return None
    return parts.hostname.lower(), port


def normalise_origin(origin: str) -> str | None:
    """`scheme://host[:port]` in lower case, or None for anything else (incl. `null`)."""
    try:
        parts = urlsplit(origin.strip())
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.path not in ("", "/"):
        return None
    host = parts.hostname.lower()
    if ":" in host:
        host = f"[{host}]"
    return f"{parts.scheme}://{host}" + (f":{port}" if port is not None else "")


def _env_list(name: str) -> list[str]:
    return [item.strip() for item in os.environ.get(name, "").split(",") if item.strip()]


@dataclass(frozen=True)
class Verdict:
    status: int  # 200 = allowed, 403 = bad Origin, 421 = bad Host
    reason: str = ""
    hint: str = ""

    @property
    def ok(self) -> bool:
        return self.status == 200


ALLOWED = Verdict(200)


@dataclass
class Guard:
    """What one server accepts. Build it with `Guard.for_bind(host)`."""

    bind_host: str = "127.0.0.1"
    allowed_origins: set[str] = field(default_factory=set)
    allowed_hosts: set[str] = field(default_factory=set)  # "name" or "name:port", lower case
    any_origin: bool = False
    any_host: bool = False

    @classmethod
    def for_bind(cls, bind_host: str, origins: list[str] | None = None, hosts: list[str] | None = None) -> Guard:
        """The guard of a server bound to `bind_host`; lists default to the environment."""
        origins = _env_list("QMD_ALLOWED_ORIGINS") if origins is None else origins
        hosts = _env_list("QMD_ALLOWED_HOSTS") if hosts is None else hosts
        guard = cls(bind_host=bind_host, any_origin="*" in origins, any_host="*" in hosts)
        guard.allowed_origins = {o for o in (normalise_origin(x) for x in origins if x != "*") if o}
        guard.allowed_hosts = {_bare(h) if h.startswith("[") and h.endswith("]") else h.strip().lower() for h in hosts if h != "*"}
        bind = _bare(bind_host)
        if bind not in WILDCARD_BINDS and not is_loopback(bind):
            guard.allowed_hosts.add(bind)  # a concrete interface: its own address is legitimate
        return guard

    def names_beyond_loopback(self) -> list[str]:
        """The Host names this guard admits besides loopback's (`*` for any): a reverse proxy
        forwarding them brings the network to a server bound to loopback."""
        if self.any_host:
            return ["*"]
        out = []
        for entry in sorted(self.allowed_hosts):
            parsed = split_host(entry)
            name = parsed[0] if parsed is not None else entry
            if not is_loopback(name) and _bare(name) not in WILDCARD_BINDS and _bare(name) != _bare(self.bind_host):
                out.append(entry)
        return out

    def check_origin(self, origin: str | None) -> Verdict:
        if origin is None or self.any_origin:
            return ALLOWED
        normal = normalise_origin(origin)
        if normal is not None:
            hostname = urlsplit(normal).hostname or ""
            if is_loopback(hostname) or normal in self.allowed_origins:
                return ALLOWED
        return Verdict(403, f"Origin not allowed: {origin[:200]}", "requests from web pages are refused; to allow this origin set QMD_ALLOWED_ORIGINS")

    def check_host(self, host: str | None) -> Verdict:
        if host is None or self.any_host:
            return ALLOWED
        parsed = split_host(host)
        if parsed is not None:
            name, port = parsed
            if is_loopback(name) or name in self.allowed_hosts or (port is not None and f"{_fmt_host(name)}:{port}" in self.allowed_hosts):
                return ALLOWED
        return Verdict(421, f"Host not allowed: {host[:200]}", "use http://127.0.0.1:PORT or http://localhost:PORT; to allow this name set QMD_ALLOWED_HOSTS")

    def check(self, origin: str | None, host: str | None) -> Verdict:
        """Origin first (403), then Host (421); a missing header passes that check."""
        verdict = self.check_origin(origin)
        return verdict if not verdict.ok else self.check_host(host)


def _fmt_host(name: str) -> str:
    return f"[{name}]" if ":" in name else name
