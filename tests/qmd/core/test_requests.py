"""The request records of the search commands: what they accept, and what a Store refuses
rather than searching more than was asked (an empty restriction, a string for a list)."""

from __future__ import annotations

from pathlib import Path

import pytest

import qmd
from qmd.core.errors import QmdError
from qmd.core.records import FrozenInstanceError
from qmd.core.requests import QueryRequest, SearchRequest, from_json, json_fields, to_json


def test_every_field_has_a_json_form_and_a_round_trip() -> None:
    for kind in (SearchRequest, QueryRequest):
        assert set(json_fields(kind)) == set(kind.__match_args__)
    for request in (SearchRequest("x", 3, ("a", "b"), 0.5, vector=True), QueryRequest("y", candidates=7, expand=False, filter='{"k": 1}')):
        assert from_json(to_json(request)) == request


@pytest.mark.parametrize("fields", [
    {"text": "x", "limit": True}, {"text": "x", "limit": 1.5}, {"text": "x", "collections": "notes"}, {"text": "x", "collections": [1]},
    {"text": 5}, {"text": "x", "nope": 1}, {"text": "x", "vector": True},
])
def test_from_json_refuses_what_is_not_the_record(fields: dict[str, object]) -> None:
    with pytest.raises(ValueError):
        from_json({"command": "search", "request": fields})


def test_a_record_is_frozen() -> None:
    with pytest.raises(FrozenInstanceError):
        SearchRequest("x").limit = 3  # type: ignore[misc]


@pytest.fixture
def store(tmp_path: Path, notes: Path) -> qmd.Store:
    s = qmd.Store(tmp_path / "index.sqlite", tmp_path / "index.yml")
    s.add_collection(notes, name="notes")
    s.add_collection(notes / "runbooks", name="n")
    s.update()
    return s


@pytest.mark.parametrize("settings", [
    {"collections": "notes"}, {"limit": True}, {"limit": "5"}, {"limit": 2.5}, {"min_score": None}, {"full": "no"}, {"nope": 1},
])
def test_a_wrong_type_is_a_type_error_naming_the_field(store: qmd.Store, settings: dict[str, object]) -> None:
    for search in (store.search, store.query):
        with pytest.raises(TypeError):
            search("rollback", **settings)


@pytest.mark.parametrize("settings", [{"collections": []}, {"collections": ()}, {"filter": ""}, {"filter": "  "}, {"since": ""}, {"until": " "}, {"snippet_chars": 0}])
def test_an_empty_restriction_is_refused_not_dropped(store: qmd.Store, settings: dict[str, object]) -> None:
    """An empty list of collections or a blank filter would search the whole index."""
    for search in (store.search, store.query):
        with pytest.raises(QmdError):
            search("rollback", **settings)
    with pytest.raises(QmdError):
        store.answer(SearchRequest("rollback", **settings))  # type: ignore[arg-type]


def test_a_list_of_names_is_the_collections_and_answer_takes_only_records(store: qmd.Store) -> None:
    assert {h.collection for h in store.search("rollback", collections=["n"])} == {"n"}
    assert {h.collection for h in store.answer(SearchRequest("rollback", collections=("n",))).hits} == {"n"}
    for wrong in ("rollback", None, {"text": "rollback"}):
        with pytest.raises(TypeError, match="SearchRequest or a QueryRequest"):
            store.answer(wrong)  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="vsearch"):
        store.search(SearchRequest("rollback", vector=True))
    with pytest.raises(TypeError, match="QueryRequest"):
        store.query(SearchRequest("rollback"))  # type: ignore[arg-type]
