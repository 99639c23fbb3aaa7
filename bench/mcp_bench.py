"""MCP server latency: keyword queries through POST /query on tldr, and a hybrid query over MCP.

(a) the 42 keyword queries of bench/queries_keyword.txt as `{searches: [{type: lex}],
    rerank: false}` through POST /query of a warm `qmd --index tldr mcp --http` (one
    keep-alive connection, as an agent's HTTP client keeps), interleaved with the same
    queries through the in-process API (`store.query("lex: …", rerank=False)`) on the same
    index; the client is a minimal socket client (Python's http.client, and a new
    connection per request, are shown for information).               target: p50 <= 5 ms
    (The original answers such a request in about 2 ms on this machine.)
(b) a full hybrid query through MCP: `tools/call query` over Streamable HTTP with the
    SDK client (plain questions: BM25 probe, expansion if a generate model is local, BM25
    + vector lists, RRF, rerank if a rerank model is local), on every --embed-stride-th
    English tldr page embedded with all-MiniLM-L6-v2 (imported from PyPI), QMD_THREADS=1
    unless set; first call (loads the models) and warm p50, beside the same questions
    in-process. No target: the figure depends on which models are local (`--rerank`,
    `--generate` add them).
"""

from __future__ import annotations

import http.client
import json
import os
import re
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import qmd

from _common import BENCH, PYTHON, Report, Target, arg_parser, data_dir, import_minilm, isolated_home, ms, p50, percentile, timed

QUESTIONS = [
    "how do I make an archive of a folder",
    "show what programs are running",
    "create a new branch in version control",
    "see the output of a container",
    "how much space is left on the drive",
    "stop a program that hangs",
    "log in to a server without a password",
    "search for a file by name",
    "show my ip address",
    "run a command every night",
]


def load_queries(path: Path) -> list[str]:
    lines = (line.strip() for line in path.read_text(encoding="utf-8").splitlines())
    return [line for line in lines if line and not line.startswith("#")]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def start_server(index: str, log: Path, env: dict[str, str] | None = None) -> tuple[subprocess.Popen[bytes], int]:
    port = free_port()
    out = open(log, "ab")  # noqa: SIM115 - the child holds it
    proc = subprocess.Popen([PYTHON, "-m", "qmd", "--index", index, "mcp", "--http", "--port", str(port)], stdout=out, stderr=out, stdin=subprocess.DEVNULL, env=env)
    out.close()
    deadline = time.monotonic() + 120
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            sys.exit(f"the server exited ({proc.returncode}); see {log}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                conn.close()
                return proc, port
        except OSError:
            pass
        time.sleep(0.1)
    proc.kill()
    sys.exit(f"the server did not answer /health; see {log}")


def stop_server(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(timeout=15)
    except subprocess.TimeoutExpired:
        proc.kill()


def post_query(conn: http.client.HTTPConnection, body: bytes) -> dict[str, Any]:
    conn.request("POST", "/query", body=body, headers={"Content-Type": "application/json"})
    resp = conn.getresponse()
    data = resp.read()
    if resp.status != 200:
        sys.exit(f"POST /query answered {resp.status}: {data[:200]!r}")
    return _json_object(data)


def _json_object(data: bytes) -> dict[str, Any]:
    answer = json.loads(data)
    if not isinstance(answer, dict):
        sys.exit(f"expected a JSON object, got {data[:200]!r}")
    return answer


class RawClient:
    """A minimal keep-alive HTTP/1.1 client on a socket: the figure is the server's.

    (http.client parses each response's headers with the email package, ~0.3 ms a request
    on this machine; an agent's HTTP stack does not pay that.)
    """

    def __init__(self, port: int) -> None:
        self.port = port
        self.sock = socket.create_connection(("127.0.0.1", port))
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""

    def post(self, path: str, body: bytes) -> dict[str, Any]:
        head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{self.port}\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
        self.sock.sendall(head.encode() + body)
        while b"\r\n\r\n" not in self.buf:
            self.buf += self._recv()
        headers, _, rest = self.buf.partition(b"\r\n\r\n")
        found = re.search(rb"(?i)\r\ncontent-length: *(\d+)", headers)
        if found is None:
            sys.exit(f"POST {path}: no Content-Length in {headers[:200]!r}")
        length = int(found.group(1))
        while len(rest) < length:
            rest += self._recv()
        payload, self.buf = rest[:length], rest[length:]
        if not headers.startswith(b"HTTP/1.1 200"):
            sys.exit(f"POST {path} answered {headers[:40]!r}: {payload[:200]!r}")
        return _json_object(payload)

    def _recv(self) -> bytes:
        chunk = self.sock.recv(1 << 16)
        if not chunk:
            sys.exit("the server closed the connection")
        return chunk

    def close(self) -> None:
        self.sock.close()


def lex_body(q: str) -> bytes:
    return json.dumps({"searches": [{"type": "lex", "query": q}], "limit": 10, "rerank": False}).encode()


def keyword_latency(store: qmd.Store, port: int, queries: list[str], rounds: int) -> tuple[dict[str, list[float]], int]:
    """Per-request seconds (http, inproc, http_client, http_new_conn) after a warm-up pass; mismatches."""
    raw = RawClient(port)
    keep = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
    mismatches = 0
    for q in queries:  # warm-up, and the two sides must agree
        served = [r["file"] for r in raw.post("/query", lex_body(q))["results"]]
        local = [h.uri for h in store.query(f"lex: {q}", limit=10, rerank=False, snippet_chars=300).hits]
        mismatches += served != local
        post_query(keep, lex_body(q))
    times: dict[str, list[float]] = {"http": [], "inproc": [], "http_client": [], "http_new_conn": []}
    for r in range(rounds):
        for q in queries:
            body = lex_body(q)
            pair = [("http", lambda: raw.post("/query", body)), ("inproc", lambda: store.query(f"lex: {q}", limit=10, rerank=False, snippet_chars=300))]
            for side, fn in pair if r % 2 == 0 else reversed(pair):
                times[side].append(timed(fn))
            times["http_client"].append(timed(lambda: post_query(keep, body)))

            def fresh() -> None:
                conn = http.client.HTTPConnection("127.0.0.1", port, timeout=30)
                post_query(conn, body)
                conn.close()

            times["http_new_conn"].append(timed(fresh))
    raw.close()
    keep.close()
    return times, mismatches


def mcp_hybrid(port: int, questions: list[str], rounds: int, inproc: Any = None) -> dict[str, Any]:
    """Seconds of `tools/call query` over Streamable HTTP: the first call, then warm calls,
    each followed by `inproc(question)` (timed too) when given: interleaved baselines."""
    import anyio
    from mcp.client import ClientSession
    from mcp.client.streamable_http import streamable_http_client

    async def main() -> dict[str, Any]:
        async with streamable_http_client(f"http://127.0.0.1:{port}/mcp") as (read, write, *_):
            async with ClientSession(read, write) as session:
                await session.initialize()
                start = time.perf_counter()
                first = await session.call_tool("query", {"query": questions[0], "limit": 10})
                first_s = time.perf_counter() - start
                if first.is_error:
                    sys.exit(f"query failed: {first.content[0].text}")
                warm, local = [], []
                for _ in range(rounds):
                    for q in questions:
                        start = time.perf_counter()
                        res = await session.call_tool("query", {"query": q, "limit": 10})
                        warm.append(time.perf_counter() - start)
                        assert not res.is_error, res.content[0].text
                        if inproc is not None:
                            local.append(timed(lambda q=q: inproc(q)))
                return {"first_s": first_s, "warm_s": warm, "inproc_s": local, "notices": (first.structured_content or {}).get("notices", [])}

    return anyio.run(main)


def english_subset(tldr: Path, stride: int, dest: Path) -> int:
    """Every `stride`-th English tldr page (path-sorted), copied into `dest`."""
    pages = sorted(p for p in tldr.glob("pages/*/*.md") if not p.name.startswith("."))
    chosen = pages[::stride]
    for page in chosen:
        target = dest / page.parent.name / page.name
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(page.read_bytes())
    return len(chosen)


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5, help="timed passes over the keyword queries (default 5)")
    parser.add_argument("--hybrid-rounds", type=int, default=3, help="timed passes over the hybrid questions (default 3)")
    parser.add_argument("--embed-stride", type=int, default=20, help="embed every Nth English tldr page for (b) (default 20)")
    parser.add_argument("--skip-hybrid", action="store_true", help="only (a)")
    parser.add_argument("--skip-keyword", action="store_true", help="only (b)")
    parser.add_argument("--rerank", type=Path, help="a rerank-model GGUF for (b)")
    parser.add_argument("--generate", type=Path, help="a generate-model GGUF for (b)")
    args = parser.parse_args()
    data = data_dir()
    queries = load_queries(BENCH / "queries_keyword.txt")
    report = Report("mcp_bench")
    with isolated_home("mcp") as tmp:
        paths = qmd.resolve_index("tldr")
        print(f"temp dir {tmp}")
        store = qmd.Store(paths.index_path, paths.config_path)
        seconds = timed(lambda: store.add_collection(data / "tldr-pages", name="tldr", pattern="**/*.md"))
        print(f"  indexed tldr-pages ({store.document_count()} documents) in {seconds:.1f} s", flush=True)

        if args.skip_keyword:
            store.close()
        else:
            print(f"\n(a) {len(queries)} keyword queries x {args.rounds} rounds: POST /query vs in-process store.query, lex only, rerank off")
            proc, port = start_server("tldr", tmp / "server-tldr.log")
            try:
                times, mismatches = keyword_latency(store, port, queries, args.rounds)
            finally:
                stop_server(proc)
            store.close()
            http_s, inproc_s, fresh_s, client_s = times["http"], times["inproc"], times["http_new_conn"], times["http_client"]
            report.row("in-process store.query('lex: …') p50 / p95", f"{ms(p50(inproc_s))} / {ms(percentile(inproc_s, 95))}")
            report.row("POST /query (keep-alive) p50 / p95", f"{ms(p50(http_s))} / {ms(percentile(http_s, 95))}")
            report.row("POST /query overhead over in-process (p50s)", ms(p50(http_s) - p50(inproc_s)))
            report.row("(info) same through Python's http.client p50", ms(p50(client_s)))
            report.row("(info) http.client, new connection each p50", ms(p50(fresh_s)))
            report.row("queries whose served results differ from in-process", f"{mismatches} of {len(queries)}")
            report.target(Target("(a) POST /query lex p50", p50(http_s) * 1000, 5.0, "ms"))
            report.target(Target("(a) served results == in-process results", float(mismatches), 0.0, ""))
            report.data = {"http_s": http_s, "inproc_s": inproc_s, "http_client_s": client_s, "http_new_conn_s": fresh_s}

        if not args.skip_hybrid:
            print(f"\n(b) hybrid query through MCP on every {args.embed_stride}th English tldr page (MiniLM)")
            model = import_minilm(tmp / "models")
            # One llama.cpp thread unless told otherwise: on this shared 2-core machine, ggml's
            # thread barrier stalls a 2-thread query for ~1 s whenever another process holds a core.
            os.environ.setdefault("QMD_THREADS", "1")
            report.row("llama.cpp threads (QMD_THREADS)", os.environ["QMD_THREADS"])
            env = dict(os.environ, QMD_EMBED_MODEL=str(model))
            env["QMD_RERANK_MODEL"] = str(args.rerank or tmp / "no-rerank.gguf")
            env["QMD_GENERATE_MODEL"] = str(args.generate or tmp / "no-generate.gguf")
            os.environ.update({k: env[k] for k in ("QMD_EMBED_MODEL", "QMD_RERANK_MODEL", "QMD_GENERATE_MODEL")})
            sub = qmd.resolve_index("tldr-en")
            pages = english_subset(data / "tldr-pages", args.embed_stride, tmp / "tldr-en")
            with qmd.Store(sub.index_path, sub.config_path) as en:
                en.add_collection(tmp / "tldr-en", name="tldr-en")
                embed_s = timed(en.embed)
                print(f"  embedded {pages} pages in {embed_s:.0f} s", flush=True)
                for q in QUESTIONS:  # warm the in-process side too
                    en.query(q, limit=10)
                server_log = tmp / "server-tldr-en.log"
                proc, port = start_server("tldr-en", server_log, env)
                try:
                    hybrid = mcp_hybrid(port, QUESTIONS, args.hybrid_rounds, lambda q: en.query(q, limit=10, snippet_chars=300))
                finally:
                    stop_server(proc)
            warm, inproc_h = hybrid["warm_s"], hybrid["inproc_s"]
            # The server's own time per tools/call, from its request log (the rest is the client).
            served = [float(m.group(1)) / 1000 for m in re.finditer(r"POST /mcp 200 ([\d.]+)ms query ", server_log.read_text())][1:]
            report.row("stages skipped (no local model)", "; ".join(n.split(":")[0] for n in hybrid["notices"]) or "none")
            report.row("MCP query, first call (loads the models)", ms(hybrid["first_s"]))
            report.row("MCP query, warm p50 / p95", f"{ms(p50(warm))} / {ms(percentile(warm, 95))}")
            report.row("in-process store.query, same questions p50 (interleaved)", ms(p50(inproc_h)))
            report.row("MCP overhead over in-process (p50s)", ms(p50(warm) - p50(inproc_h)))
            report.row("  of which in the server (POST /mcp in its log) p50", ms(p50(served)))
            report.data.update({"hybrid_first_s": hybrid["first_s"], "hybrid_warm_s": warm, "hybrid_inproc_s": inproc_h, "hybrid_served_s": served, "embedded_pages": pages})
    return report.finish(args.json)


if __name__ == "__main__":
    sys.exit(main())
