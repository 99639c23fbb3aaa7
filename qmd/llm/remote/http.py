"""One OpenAI-compatible endpoint over HTTP: JSON in and out, timeouts, bounded retries.

stdlib `http.client` on one kept-alive connection per endpoint (a lock serialises its
use). A connection error, a timeout, 429 or a 5xx is retried `retries` times with
exponential backoff (0.5 s, 1 s, 2 s … at most 8 s, or the server's `Retry-After` up to
that); any other error status is final. The API key is read from the environment
variable the config names, at each request: it is never stored, logged or put in a message.
"""

from __future__ import annotations

import http.client
import json
import os
import threading
import time
from typing import Any
from urllib.parse import urlsplit

from qmd.core.cancel import checkpoint
from qmd.core.errors import QmdError
from qmd.llm.models import RemoteSpec

RETRY_STATUS = frozenset({408, 425, 429, 500, 502, 503, 504})
BACKOFF_S = 0.5
MAX_BACKOFF_S = 8.0
MAX_BODY = 256 << 20  # an answer larger than this is not an answer


class EndpointError(QmdError):
    """A request to a remote model failed; `status` is the HTTP status (None: no answer)."""

    def __init__(self, message: str, hint: str | None = None, status: int | None = None) -> None:
        super().__init__(message, hint)
        self.status = status


def _server_message(body: bytes) -> str:
    """The error text an OpenAI-style server put in its body (a JSON `error`/`detail`, else the text)."""
    text = body[:2000].decode("utf-8", "replace").strip()
    try:
        data = json.loads(text)
    except ValueError:
        return " ".join(text.split())[:300]
    if isinstance(data, dict):
        error = data.get("error", data.get("detail", data.get("message")))
        if isinstance(error, dict):
            error = error.get("message", error)
        if isinstance(error, list):  # FastAPI's validation errors
            error = "; ".join(str(e.get("msg", e)) if isinstance(e, dict) else str(e) for e in error)
        if error is not None:
            return " ".join(str(error).split())[:300]
    return " ".join(text.split())[:300]


class Endpoint:
    """The HTTP side of one `openai:BASE_URL#MODEL` role."""

    def __init__(self, spec: RemoteSpec, role: str) -> None:
        self.spec = spec
        self.role = role
        parts = urlsplit(spec.base_url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._prefix = parts.path.rstrip("/")
        # The server's own routes (llama.cpp's /tokenize, /health) sit beside /v1, not under it.
        self._root = self._prefix[: -len("/v1")] if self._prefix.endswith("/v1") else self._prefix
        self._conn: http.client.HTTPConnection | None = None
        self._lock = threading.Lock()
        self.timeout_s = spec.timeout_s  # per request; doctor shortens both
        self.retries = spec.retries

    @property
    def where(self) -> str:
        return self.spec.uri

    def _connection(self, timeout: float) -> http.client.HTTPConnection:
        if self._conn is None:
            if self._https:
                import ssl

                self._conn = http.client.HTTPSConnection(self._host, self._port, timeout=timeout, context=ssl.create_default_context())
            else:
                self._conn = http.client.HTTPConnection(self._host, self._port, timeout=timeout)
        self._conn.timeout = timeout
        if self._conn.sock is not None:
            self._conn.sock.settimeout(timeout)
        return self._conn

    def _drop(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def close(self) -> None:
        """Close the kept-alive connection (the next request opens another)."""
        with self._lock:
            self._drop()

    def _headers(self, has_body: bool) -> dict[str, str]:
        headers = {"Accept": "application/json", "User-Agent": "qmd"}
        if has_body:
            headers["Content-Type"] = "application/json"
        key_env = self.spec.api_key_env
        key = os.environ.get(key_env, "") if key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        return headers

    def post(self, route: str, body: dict[str, Any], *, root: bool = False, timeout: float | None = None, retries: int | None = None) -> Any:
        """POST `body` as JSON to `{base_url}{route}` (`root`: beside `/v1`), the decoded answer."""
        return self.request("POST", route, body, root=root, timeout=timeout, retries=retries)

    def get(self, route: str, *, root: bool = False, timeout: float | None = None, retries: int | None = None) -> Any:
        """GET `{base_url}{route}` (`root`: beside `/v1`), the decoded JSON answer."""
        return self.request("GET", route, None, root=root, timeout=timeout, retries=retries)

    def request(self, method: str, route: str, body: dict[str, Any] | None, *, root: bool = False, timeout: float | None = None, retries: int | None = None) -> Any:
        """One JSON request with the endpoint's timeout and retries; an EndpointError when it fails."""
        path = (self._root if root else self._prefix) + route
        data = None if body is None else json.dumps(body, ensure_ascii=False).encode("utf-8", "surrogatepass")
        timeout = self.timeout_s if timeout is None else timeout
        attempts = 1 + (self.retries if retries is None else retries)
        url = f"{self.spec.base_url.split('://', 1)[0]}://{self._host}{f':{self._port}' if self._port else ''}{path}"
        for attempt in range(attempts):
            checkpoint()
            last = attempt == attempts - 1
            try:
                status, headers, raw = self._send(method, path, data, timeout)
            except TimeoutError:
                if last:
                    raise EndpointError(
                        f"the {self.role} endpoint {url} did not answer within {timeout:g} s ({attempts} attempts; {self.where})",
                        f"check the server, or raise timeout_s under models.{self.role} in the index config",
                    ) from None
                self._pause(attempt, None)
                continue
            except (OSError, http.client.HTTPException) as exc:
                if last:
                    raise EndpointError(
                        f"the {self.role} endpoint {url} does not answer: {exc or type(exc).__name__} ({attempts} attempts)",
                        f"start the server, or fix models.{self.role} ({self.where}); qmd never falls back to a local model",
                    ) from None
                self._pause(attempt, None)
                continue
            if 200 <= status < 300:
                try:
                    return json.loads(raw)
                except ValueError:
                    raise EndpointError(f"the {self.role} endpoint {url} answered {status} with no JSON ({raw[:80]!r})", f"is {self.spec.base_url} an OpenAI-compatible API (it usually ends in /v1)?", status) from None
            if status in RETRY_STATUS and not last:
                self._pause(attempt, headers.get("retry-after"))
                continue
            raise self._status_error(url, status, raw)
        raise AssertionError("unreachable")

    def _send(self, method: str, path: str, data: bytes | None, timeout: float) -> tuple[int, dict[str, str], bytes]:
        with self._lock:
            for fresh in (False, True):
                conn = self._connection(timeout)
                reused = conn.sock is not None
                try:
                    conn.request(method, path, body=data, headers=self._headers(data is not None))
                    response = conn.getresponse()
                    raw = response.read(MAX_BODY + 1)
                except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                    self._drop()
                    if reused and not fresh:
                        continue  # the server closed a kept-alive connection: once more on a new one
                    raise
                except BaseException:
                    self._drop()
                    raise
                headers = {k.lower(): v for k, v in response.getheaders()}
                if response.will_close or len(raw) > MAX_BODY:
                    self._drop()
                if len(raw) > MAX_BODY:
                    raise http.client.HTTPException(f"answer over {MAX_BODY >> 20} MiB")
                return response.status, headers, raw
        raise AssertionError("unreachable")

    def _pause(self, attempt: int, retry_after: str | None) -> None:
        delay = min(BACKOFF_S * (2**attempt), MAX_BACKOFF_S)
        if retry_after and retry_after.strip().isdigit():
            delay = min(max(float(retry_after.strip()), delay), MAX_BACKOFF_S)
        deadline = time.monotonic() + delay
        while (left := deadline - time.monotonic()) > 0:  # a cancelled request stops waiting
            checkpoint()
            time.sleep(min(left, 0.1))

    def _status_error(self, url: str, status: int, raw: bytes) -> EndpointError:
        said = _server_message(raw)
        message = f"the {self.role} endpoint {url} answered {status}" + (f": {said}" if said else "")
        if status in (401, 403):
            env = self.spec.api_key_env
            if not env:
                hint = f"the server wants an API key: put it in an environment variable and name it with api_key_env under models.{self.role}"
            elif not os.environ.get(env):
                hint = f"the server wants an API key and ${env} (api_key_env under models.{self.role}) is not set: export {env}=…"
            else:
                hint = f"the server refused the key in ${env}: check it"
            return EndpointError(message, hint, status)
        if status == 404:
            return EndpointError(message, f"check the URI's base (it usually ends in /v1) and that the server serves {self.spec.model!r} ({self.where})", status)
        return EndpointError(message, f"check the server's log; the model is {self.where}", status)
