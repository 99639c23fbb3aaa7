"""The MCP query tool and POST /query with the confidence (issue 28): each result's confidence
and below_threshold, the threshold and the unmatched words in the structured answer, the
opening sentence when no hit reaches the threshold, minConfidence, and what the server's
instructions and tool list say of it. No model is local here: query ranks by BM25 alone."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import qmd
from qmd.search.confidence import THRESHOLD
from qmd.serve.answers import NOTHING_RELEVANT
from qmd.serve.arguments import ArgError, parse_query_args
from qmd.serve.catalog import TOOLS
from qmd.serve.service import ToolService
from tests.support.mcp import write_notes


@pytest.fixture
def service(tmp_path: Path) -> Iterator[ToolService]:
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(write_notes(tmp_path), name="notes")
    svc = ToolService(store, "index", idle_s=0, log=lambda line: None).start()
    yield svc
    svc.close()


def test_a_confident_answer_has_its_confidence_and_no_warning(service: ToolService) -> None:
    out = service.call("query", {"query": "pg_restore fresh database"})
    assert not out.is_error and out.structured is not None
    rows = out.structured["results"]
    assert rows[0]["file"] == "qmd://notes/runbooks/postgres.md"
    assert list(rows[0])[-2:] == ["confidence", "below_threshold"] and rows[0]["below_threshold"] is False
    assert rows[0]["confidence"] >= THRESHOLD and out.structured["threshold"] == THRESHOLD and out.structured["unmatched"] == []
    assert "verdict" not in out.structured
    assert not out.text.startswith(NOTHING_RELEVANT)
    assert f"#{rows[0]['docid'][1:]} confidence {round(rows[0]['confidence'] * 100)}% qmd://notes/runbooks/postgres.md:" in out.text


def test_no_confident_hit_opens_the_answer_with_a_warning(service: ToolService) -> None:
    out = service.call("query", {"query": "zzzqqq balancer"})
    assert not out.is_error and out.structured is not None
    rows = out.structured["results"]
    assert rows and all(r["below_threshold"] is True for r in rows)
    assert out.text.splitlines()[0] == NOTHING_RELEVANT == "No note answers this with confidence; the closest hits follow — verify before citing."
    assert out.structured["verdict"] == NOTHING_RELEVANT  # clients that hand the model only the structured answer
    assert out.structured["unmatched"] == ["zzzqqq"] and "No note contains: 'zzzqqq'." in out.text
    assert "(a best guess)" in out.text
    relaxed = service.call("query", {"query": "zzzqqq balancer", "minConfidence": 0})
    assert relaxed.structured is not None and "verdict" not in relaxed.structured and not relaxed.text.startswith(NOTHING_RELEVANT)
    assert all(r["below_threshold"] is False for r in relaxed.structured["results"])


def test_post_query_carries_the_same(service: ToolService) -> None:
    status, body, _ = service.rest_query({"query": "zzzqqq balancer"})
    assert status == 200 and body["verdict"] == NOTHING_RELEVANT and body["unmatched"] == ["zzzqqq"] and body["threshold"] == THRESHOLD
    assert body["results"] and all(0.0 <= r["confidence"] <= 1.0 and r["below_threshold"] for r in body["results"])
    status, body, _ = service.rest_query({"query": "zzzqqq balancer", "minConfidence": 2})
    assert status == 400 and body["error"] == "minConfidence must be between 0 and 1, got 2"


@pytest.mark.parametrize(("value", "message"), [(2, "minConfidence must be between 0 and 1"), (-1, "between 0 and 1"), ("lots", "minConfidence must be a number")])
def test_min_confidence_is_checked(value: object, message: str) -> None:
    with pytest.raises(ArgError) as info:
        parse_query_args({"query": "a", "minConfidence": value})
    assert message in info.value.message
    assert parse_query_args({"query": "a", "minConfidence": "0.5"}).min_confidence == 0.5
    assert parse_query_args({"query": "a"}).min_confidence is None


def test_the_tool_list_and_the_instructions_say_what_it_means(service: ToolService) -> None:
    query = next(t for t in TOOLS if t["name"] == "query")
    schema = query["inputSchema"]["properties"]["minConfidence"]
    assert (schema["type"], schema["minimum"], schema["maximum"]) == ("number", 0, 1) and "best guess" in schema["description"]
    assert "confidence" in query["description"]
    text = service.instructions()
    assert "No note answers this with confidence" in text and "confidence (0-1" in text
