"""The first tool call of a real agent session, timed inside the session (issue 31).

The real Claude Code and Codex from npm (the pinned ones of tests/support/npm_clients.py;
the newest Claude Code too with QMD_TEST_NEWEST_CLIENTS=1), each driven by the fake model
API of the real-client tests (its first turn calls qmd's `query`), start `qmd mcp` as a user's
registration does (`qmd mcp install`), in a home set up as install.sh leaves it (the notes
indexed, `models.yml` naming the embedder, no model named by the environment). The
registered command runs qmd between two taps (bench/_stdio_tap.py) that time every line from
the server's spawn: when the handshake (`initialize` or `server/discover`) is answered, when
the first `tools/call` arrives and when it is answered. The first run of each client is a
server's first start (no kept instructions); the rest are later starts.

    python bench/mcp_client_timeline.py [--runs 4] [--client claude --client codex]
"""

from __future__ import annotations

import argparse
import json
import shutil
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from _common import INSTALL_EMBEDDER  # noqa: E402
from tests.clients.test_real_clients import LABELS, QMD, fake_for, install, launcher_venv, make_box, run_client  # noqa: E402

TAP = Path(__file__).resolve().parent / "_stdio_tap.py"
HANDSHAKES = ("initialize", "server/discover")


def timeline(log: Path) -> dict[str, Any] | None:
    """From one server's tap log: the handshake's method and answer time, the first call's arrival and answer (ms from spawn)."""
    records = [json.loads(line) for line in log.read_text().splitlines() if line.strip()]
    sent: dict[Any, float] = {}
    received: list[tuple[float, dict[str, Any]]] = []
    for rec in records:
        try:
            message = json.loads(rec["line"]) if rec["dir"] in ("in", "out") else None
        except ValueError:
            continue
        if not isinstance(message, dict):
            continue
        if rec["dir"] == "in" and "method" in message:
            received.append((rec["t"], message))
        elif rec["dir"] == "out" and "id" in message and "method" not in message:
            sent.setdefault(message["id"], rec["t"])
    shake = next(((t, m) for t, m in received if m["method"] in HANDSHAKES and m.get("id") in sent), None)
    call = next(((t, m) for t, m in received if m["method"] == "tools/call" and m.get("id") in sent), None)
    if shake is None or call is None:
        return None
    return {"handshake": shake[1]["method"], "answered": sent[shake[1]["id"]], "call_in": call[0], "call_out": sent[call[1]["id"]],
            "methods": [m["method"] for _, m in received]}


def session(label: str, runs: int, root: Path) -> list[dict[str, Any]] | str:
    try:
        box = make_box(root, label)
    except BaseException as exc:  # pytest.skip's exception: npm or the client is missing
        if isinstance(exc, KeyboardInterrupt):
            raise
        return f"skipped: {exc}"
    for role in ("EMBED", "RERANK", "GENERATE"):  # a home install.sh set up names no model in the environment
        box.env.pop(f"QMD_{role}_MODEL", None)
    subprocess.run([sys.executable, "-c", INSTALL_EMBEDDER], env=box.env, check=True, capture_output=True, timeout=60)
    logs = root / "timeline"
    logs.mkdir()
    script = f'#!/bin/sh\nif [ "$*" = mcp ]; then exec "{sys.executable}" "{TAP}" "{logs}/$$.jsonl" -- "{QMD}" "$@"; fi\nexec "{QMD}" "$@"\n'
    python = launcher_venv(root / "tap-venv", script)
    fake = fake_for(box)
    out: list[dict[str, Any]] = []
    try:
        install(box, fake, qmd=(str(python), "-m", "qmd"))
        for i in range(runs):
            for old in logs.glob("*.jsonl"):
                old.unlink()
            run = run_client(box, fake)
            found = [t for t in (timeline(p) for p in sorted(logs.glob("*.jsonl"))) if t is not None]
            if run.returncode != 0 or not found:
                out.append({"run": i, "error": f"exit {run.returncode}; servers with a call: {len(found)}; stderr: {run.stderr[-300:]}"})
                continue
            out.append({"run": i, **found[0]})
    finally:
        fake.stop()
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--runs", type=int, default=4, help="client runs per client (the first is a server's first start)")
    ap.add_argument("--client", action="append", choices=sorted(LABELS), help="default: claude, codex, claude-newest")
    args = ap.parse_args()
    root = Path(tempfile.mkdtemp(prefix="qmd-bench-timeline-"))
    try:
        for label in args.client or ["claude", "codex", "claude-newest"]:
            result = session(label, args.runs, root / label)
            if isinstance(result, str):
                print(f"{label}: {result}")
                continue
            for r in result:
                if "error" in r:
                    print(f"{label} run {r['run']}: {r['error']}")
                    continue
                start = "first start" if r["run"] == 0 else "later start"
                print(f"{label} run {r['run']} ({start}): {r['handshake']} answered at {r['answered']:.1f} ms; first tools/call arrived at "
                      f"{r['call_in']:.1f} ms, answered {r['call_out'] - r['call_in']:.1f} ms later (at {r['call_out']:.1f} ms); requests: {' '.join(r['methods'][:6])}")
            later = [r for r in result if "error" not in r and r["run"] > 0]
            if later:
                shake, cost = statistics.median(r["answered"] for r in later), statistics.median(r["call_out"] - r["call_in"] for r in later)
                print(f"{label}, later starts (p50 of {len(later)}): handshake answered at {shake:.1f} ms; first call answered {cost:.1f} ms after it arrived "
                      f"({cost / shake:.2f}x the handshake); it arrived {statistics.median(r['call_in'] - r['answered'] for r in later):.0f} ms after the handshake's answer")
    finally:
        shutil.rmtree(root, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
