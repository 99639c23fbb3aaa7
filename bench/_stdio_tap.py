"""Run a stdio JSON-RPC server between two taps that time every line: `_stdio_tap.py LOG -- CMD...`.

What the client sends and the server answers passes through unchanged; each line is also
written to LOG (JSON lines: `{"t": ms since CMD was started, "dir": "in"|"out", "line": text}`).
The first record, `{"t": 0, "dir": "start"}`, is the moment CMD was spawned, so the times are
the server's own: from its process start to each answer. The tap's exit code is CMD's.
Used by bench/mcp_client_timeline.py as the command a real agent client starts.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time


def main() -> int:
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--":
        sys.exit("usage: _stdio_tap.py LOG -- CMD [ARGS...]")
    log_path, cmd = args[0], args[2:]
    lock = threading.Lock()
    with open(log_path, "a", encoding="utf-8") as log:

        def record(started: float, direction: str, line: bytes) -> None:
            with lock:
                log.write(json.dumps({"t": (time.perf_counter() - started) * 1000, "dir": direction, "line": line.decode("utf-8", "replace").rstrip("\n")}) + "\n")
                log.flush()

        started = time.perf_counter()
        proc = subprocess.Popen(cmd, stdin=subprocess.PIPE, stdout=subprocess.PIPE)
        assert proc.stdin is not None and proc.stdout is not None
        record(started, "start", b"")
        child_in = proc.stdin

        def pump_in() -> None:
            try:
                for line in iter(sys.stdin.buffer.readline, b""):
                    record(started, "in", line)
                    child_in.write(line)
                    child_in.flush()
            except (BrokenPipeError, OSError):
                pass
            finally:
                try:
                    child_in.close()
                except OSError:
                    pass

        threading.Thread(target=pump_in, daemon=True).start()
        out = sys.stdout.buffer
        for line in iter(proc.stdout.readline, b""):
            record(started, "out", line)
            try:
                out.write(line)
                out.flush()
            except (BrokenPipeError, OSError):
                break
        return proc.wait()


if __name__ == "__main__":
    sys.exit(main())
