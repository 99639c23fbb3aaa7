"""Models in the MCP server: loaded once, released after QMD_MODEL_IDLE_S idle, reloaded on
the next search (tiny llama.cpp models, real stdio handshake)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest

from tests.support.mcp import make_env, run_session, setup_index, stdio_connect
from tests.support.run import run_qmd

pytest.importorskip("mcp")


@pytest.mark.slow
def test_models_are_released_when_idle_and_reloaded(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    env = make_env(tmp_path, {
        "QMD_EMBED_MODEL": str(tiny_models["embed"]),
        "QMD_RERANK_MODEL": str(tiny_models["rerank"]),
        "QMD_MODEL_IDLE_S": "1",
    })
    setup_index(tmp_path, env)
    embedded = run_qmd("embed", timeout=300, env=env)
    assert embedded.returncode == 0, embedded.stderr
    errlog = open(tmp_path / "stderr.log", "w+")  # noqa: SIM115
    question = {"query": "how do we roll back a deploy", "limit": 3}

    async def body(s: Any) -> dict[str, Any]:
        out: dict[str, Any] = {}
        out["first"] = await s.call_tool("query", question)
        out["loaded"] = (await s.call_tool("status", {})).structured_content["server"]
        out["again"] = await s.call_tool("query", {"query": "pg_restore database", "limit": 3})
        out["still"] = (await s.call_tool("status", {})).structured_content["server"]["models_loaded"]
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            out["idle"] = (await s.call_tool("status", {})).structured_content["server"]["models_loaded"]
            if not out["idle"]:
                break
            time.sleep(0.25)
        out["second"] = await s.call_tool("query", question)
        out["reloaded"] = (await s.call_tool("status", {})).structured_content["server"]["models_loaded"]
        return out

    r = run_session(stdio_connect(env, errlog), body)
    first = r["first"].structured_content
    assert not r["first"].is_error and first["results"]
    assert [n.split(":")[0] for n in first["notices"]] == ["expansion skipped"]  # vectors and rerank ran
    assert sorted(r["loaded"]["models_loaded"]) == ["embed", "rerank"] and r["loaded"]["model_idle_s"] == 1.0
    assert sorted(r["still"]) == ["embed", "rerank"]  # kept across requests
    assert r["idle"] == []
    assert r["second"].structured_content["results"] == first["results"]
    assert "embed" in r["reloaded"]
    errlog.seek(0)
    log = errlog.read()
    assert "released idle models (embed, rerank)" in log
