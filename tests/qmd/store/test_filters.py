"""Metadata filters and date ranges: the grammar, typed matching, every operator and group,
metadata from both front-matter sources, dates, an exact top-k under a 1% filter (keyword
and vector), and a bad filter as one clear error on every surface."""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import qmd
from qmd.core.filters import Condition, DateRange, FilterError, Group, build, extract_metadata, parse_filter, parse_when
from qmd.backends.base import ChunkVector, DocRow, VectorModel
from qmd.backends.sqlite.backend import SqliteBackend
from tests.support.run import run_qmd

Cli = Callable[..., tuple[int, str, str]]
DAY_NS = 86400 * 10**9

DOCS = {
    # top-level keys only
    "a.md": "---\nowner: platform-team\nstatus: published\npriority: 3\ntags: [db, ops]\ndate: 2024-01-05\n---\n# Restore\npostgres restore\n",
    # the qmd: metadata: block wins over the top-level status
    "b.md": '---\nstatus: draft\npriority: "3"\nqmd:\n  metadata:\n    status: published\n    reviewed: true\n    score: 2.5\n---\n# Tuning\npostgres vacuum\n',
    # an array of several types, an updated date later than its date
    "c.md": "---\nstatus: archived\npriority: 1\ntags: [ops, 7, true]\ndate: 2023-06-01\nupdated: 2024-02-10\n---\n# Replicas\npostgres replicas\n",
    # no front matter at all
    "d.md": "# Plain\npostgres without metadata\n",
    # a boolean that is false, a nested mapping (not metadata), a number as a float
    "e.md": "---\nreviewed: false\npriority: 3.0\nowner:\n  team: infra\n---\n# Pooling\npostgres pooling\n",
}


@pytest.fixture
def store(tmp_path: Path) -> Iterator[qmd.Store]:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    old = time.time() - 400 * 86400  # d.md and e.md are dated by their mtime: make it old
    os.utime(root / "d.md", (old, old))
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    s.add_collection(root, name="notes")
    yield s
    s.close()


def found(store: qmd.Store, spec: object = None, since: str | None = None, until: str | None = None) -> list[str]:
    return sorted(h.path for h in store.search("postgres", limit=50, filter=spec, since=since, until=until))


def cond(key: str, op: str, value: object) -> dict[str, object]:
    return {"key": key, "operator": op, "value": value}


# --- metadata -------------------------------------------------------------------------------


def test_metadata_comes_from_top_level_keys_and_the_qmd_block_which_wins() -> None:
    meta = extract_metadata({"status": "draft", "n": 1, "when": __import__("datetime").date(2024, 1, 5), "nested": {"x": 1}, "none": None,
                             "qmd": {"metadata": {"status": "published", "topics": ["a", "b"]}}})
    assert meta == {"status": "published", "n": 1, "when": "2024-01-05", "topics": ["a", "b"]}


def test_front_matter_values_are_searchable_text(store: qmd.Store) -> None:
    assert [h.path for h in store.search("platform-team")] == ["a.md"]
    assert [h.path for h in store.search("infra")] == ["e.md"]  # a nested value is text, not metadata


def test_results_carry_their_metadata_in_json(store: qmd.Store) -> None:
    hits = {h.path: h for h in store.search("postgres", limit=10)}
    assert hits["b.md"].metadata == {"status": "published", "priority": "3", "reviewed": True, "score": 2.5}
    row = hits["a.md"].to_json()
    assert row["metadata"]["tags"] == ["db", "ops"] and row["metadata"]["priority"] == 3
    assert "metadata" not in hits["d.md"].to_json() and "metadata" not in hits["d.md"].to_json(mcp=True)
    assert hits["a.md"].to_json(mcp=True)["metadata"]["owner"] == "platform-team"


def test_metadata_keys_with_types_and_counts(store: qmd.Store) -> None:
    keys = store.metadata_keys("notes")
    assert ("priority", "number", 3) in keys and ("priority", "string", 1) in keys
    assert ("reviewed", "boolean", 2) in keys and ("tags", "string", 2) in keys and ("tags", "number", 1) in keys
    with pytest.raises(qmd.NotFoundError):
        store.metadata_keys("nope")


def test_metadata_follows_an_edited_file(store: qmd.Store, tmp_path: Path) -> None:
    spec = cond("status", "eq", "published")
    assert found(store, spec) == ["a.md", "b.md"]
    (tmp_path / "notes" / "a.md").write_text("---\nstatus: retired\n---\n# Restore\npostgres restore, longer now\n")
    store.update()
    assert found(store, spec) == ["b.md"]
    assert found(store, cond("status", "eq", "retired")) == ["a.md"]


def test_an_index_from_before_metadata_gets_it_on_the_next_update(store: qmd.Store, tmp_path: Path) -> None:
    import apsw

    conn = apsw.Connection(str(tmp_path / "idx" / "index.sqlite"))  # as the migration leaves an old index
    conn.execute("DELETE FROM document_meta; UPDATE documents SET metadata = NULL, meta_version = 0")
    conn.close()
    store.close()
    assert found(store, cond("status", "eq", "published")) == []
    report = store.update()
    assert report.totals["updated"] == 0 and report.totals["new"] == 0  # nothing changed on disk
    assert found(store, cond("status", "eq", "published")) == ["a.md", "b.md"]


# --- operators, typed ----------------------------------------------------------------------


@pytest.mark.parametrize(("spec", "expected"), [
    (cond("status", "eq", "published"), ["a.md", "b.md"]),
    (cond("priority", "eq", 3), ["a.md", "e.md"]),  # 3 and 3.0 are the same number
    (cond("priority", "eq", "3"), ["b.md"]),  # the string "3" is not the number 3
    (cond("reviewed", "eq", True), ["b.md"]),
    (cond("reviewed", "eq", False), ["e.md"]),
    (cond("reviewed", "eq", 1), []),  # true is not the number 1
    (cond("tags", "eq", 7), ["c.md"]),  # any element of an array
    (cond("tags", "eq", "7"), []),
    (cond("tags", "eq", True), ["c.md"]),
    (cond("status", "ne", "published"), ["c.md"]),  # a key must be present for ne
    (cond("priority", "ne", 3), ["b.md", "c.md"]),
    (cond("priority", "gt", 1), ["a.md", "e.md"]),  # b's "3" is a string: not compared with numbers
    (cond("priority", "gte", 1), ["a.md", "c.md", "e.md"]),
    (cond("priority", "lt", 3), ["c.md"]),
    (cond("priority", "lte", 3), ["a.md", "c.md", "e.md"]),
    (cond("score", "gt", 2), ["b.md"]),
    (cond("priority", "gt", "2"), ["b.md"]),  # strings compare with strings
    (cond("date", "gte", "2024-01-01"), ["a.md"]),  # ISO dates compare as text
    (cond("date", "lt", "2024-01-01"), ["c.md"]),
    (cond("status", "in", ["draft", "archived"]), ["c.md"]),
    (cond("priority", "in", [1, "3"]), ["b.md", "c.md"]),
    (cond("status", "nin", ["published"]), ["c.md"]),
    (cond("tags", "nin", ["db"]), ["c.md"]),
    (cond("tags", "all", ["ops", 7]), ["c.md"]),
    (cond("tags", "all", ["ops"]), ["a.md", "c.md"]),
    (cond("tags", "all", ["ops", "db", 7]), []),
    (cond("reviewed", "exists", True), ["b.md", "e.md"]),
    (cond("reviewed", "exists", False), ["a.md", "c.md", "d.md"]),
    (cond("owner", "exists", True), ["a.md"]),  # e's owner is a mapping: not metadata
])
def test_every_operator_typed(store: qmd.Store, spec: dict[str, object], expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert found(store, spec) == expected
    monkeypatch.setattr("qmd.backends.sqlite.fulltext.SMALL_SET", 0)  # the broad-filter plan: a probe per match
    assert found(store, spec) == expected
    assert found(store, json.dumps(spec)) == expected  # JSON text, as --filter gives it
    tree = parse_filter(spec)
    assert tree is not None and store.backend.count_matching(tree) == len(expected)  # the id-set form agrees with the row test


@pytest.mark.parametrize(("spec", "expected"), [
    ({"operator": "and", "operands": [cond("status", "eq", "published"), cond("priority", "eq", 3)]}, ["a.md"]),
    ({"and": [cond("status", "eq", "published"), cond("priority", "eq", 3)]}, ["a.md"]),
    ({"operator": "or", "operands": [cond("priority", "eq", 1), cond("reviewed", "eq", True)]}, ["b.md", "c.md"]),
    ({"or": [cond("priority", "eq", 1), cond("reviewed", "eq", True)]}, ["b.md", "c.md"]),
    ({"operator": "not", "operand": cond("status", "eq", "published")}, ["c.md", "d.md", "e.md"]),
    ({"not": cond("status", "eq", "published")}, ["c.md", "d.md", "e.md"]),
    # ne leaves out documents without the key; exists false inside an or brings them back
    ({"or": [cond("status", "ne", "published"), cond("status", "exists", False)]}, ["c.md", "d.md", "e.md"]),
    ({"and": [{"or": [cond("tags", "in", ["ops"]), cond("reviewed", "exists", True)]}, {"not": cond("priority", "gt", 2)}]}, ["b.md", "c.md"]),
    ({"not": {"not": cond("priority", "eq", 1)}}, ["c.md"]),
    # conjunctions with no part to drive from, and with the driver not first
    ({"and": [{"not": cond("priority", "eq", 1)}, cond("status", "ne", "published")]}, []),
    ({"and": [{"not": cond("status", "eq", "draft")}, cond("reviewed", "exists", False), cond("priority", "gte", 1)]}, ["a.md", "c.md"]),
    ({"and": [cond("tags", "nin", ["db"]), {"or": [cond("priority", "lt", 2), cond("priority", "gt", 5)]}]}, ["c.md"]),
    ({"and": [{"not": cond("reviewed", "eq", True)}, {"not": cond("priority", "eq", 3)}]}, ["c.md", "d.md"]),
])
def test_groups_combine(store: qmd.Store, spec: dict[str, object], expected: list[str], monkeypatch: pytest.MonkeyPatch) -> None:
    assert found(store, spec) == expected
    monkeypatch.setattr("qmd.backends.sqlite.fulltext.SMALL_SET", 0)
    assert found(store, spec) == expected
    tree = parse_filter(spec)
    assert tree is not None and store.backend.count_matching(tree) == len(expected)


def test_a_filter_composes_with_collections_and_min_score(store: qmd.Store) -> None:
    assert [h.path for h in store.search("postgres", collections=["notes"], filter=cond("priority", "eq", 1))] == ["c.md"]


# --- dates ---------------------------------------------------------------------------------


def test_dates_from_front_matter_date_or_updated_else_mtime(store: qmd.Store) -> None:
    assert found(store, since="2024-01-01", until="2024-01-31") == ["a.md"]
    assert found(store, since="2024-02-10", until="2024-02-10") == ["c.md"]  # the later of date and updated, a whole day
    assert found(store, since="7d") == ["b.md", "e.md"]  # dated by mtime: just written
    assert found(store, until="300d") == ["a.md", "c.md", "d.md"]  # d.md's mtime is 400 days ago
    assert found(store, cond("status", "eq", "published"), since="2w") == ["b.md"]


def test_parse_when() -> None:
    now = 1_700_000_000 * 10**9
    assert parse_when("7d", now) == now - 7 * DAY_NS
    assert parse_when("2w", now) == now - 14 * DAY_NS
    assert parse_when("12h", now) == now - 12 * 3600 * 10**9
    assert parse_when("2024-01-05", now) == 1704412800 * 10**9
    assert parse_when("2024-01-05", now, end=True) == 1704412800 * 10**9 + DAY_NS
    assert parse_when("2024-01-05T10:00:00Z", now) == (1704412800 + 36000) * 10**9
    for bad in ("yesterday", "7x", "2024-13-01", ""):
        with pytest.raises(qmd.QmdError):
            parse_when(bad, now)
    with pytest.raises(qmd.QmdError, match="not before"):
        build(None, "2024-02-01", "2024-01-01")


def test_dates_beyond_what_the_index_stores_are_clamped_not_a_crash(tmp_path: Path) -> None:
    """Epoch nanoseconds in 64 bits end at 1677 and 2262: a note dated 0001-01-01 stopped the
    whole update (OverflowError, exit 3), and so did --since 0001-01-01 / --until 9999-12-31 /
    --since 999999y on every search. They sort as the earliest and latest moments now."""
    root = tmp_path / "dated"
    root.mkdir()
    (root / "ancient.md").write_text("---\ndate: 0001-01-01\n---\n# Ancient\nalpha\n")
    (root / "far.md").write_text("---\ndate: 9999-12-31T23:59:59\nupdated: 1500-06-01\n---\n# Far\nalpha\n")
    (root / "now.md").write_text("---\ndate: 2024-05-01\n---\n# Now\nalpha\n")
    assert run_qmd("collection", "add", str(root), "--name", "dated").returncode == 0
    def files(*args: str) -> list[str]:
        proc = run_qmd("search", "alpha", "--json", *args)
        assert proc.returncode == 0, proc.stderr
        return sorted(h["file"].rsplit("/", 1)[1] for h in json.loads(proc.stdout))
    assert files() == ["ancient.md", "far.md", "now.md"]
    assert files("--since", "0001-01-01") == ["ancient.md", "far.md", "now.md"]
    assert files("--until", "9999-12-31") == ["ancient.md", "now.md"]  # far.md holds the last moment itself
    assert files("--until", "1700-01-01") == ["ancient.md"]
    assert files("--since", "2262-04-11") == ["far.md"]
    assert files("--since", "999999y") == ["ancient.md", "far.md", "now.md"]
    assert files("--since", "2024-01-01", "--until", "2025-01-01") == ["now.md"]
    assert parse_when("0001-01-01", 0) < parse_when("1677-09-22", 0) or parse_when("0001-01-01", 0) == -(2**63)


def test_a_filter_nested_past_what_json_decodes_is_one_error() -> None:
    leaf = json.dumps(cond("status", "eq", "published"))
    for depth in (20, 999, 5000):
        deep = '{"operator":"not","operand":' * depth + leaf + "}" * depth
        with pytest.raises(FilterError, match="nested more than 16"):
            parse_filter(deep)


# --- the grammar ---------------------------------------------------------------------------


def test_parse_builds_the_tree() -> None:
    assert parse_filter(cond("a", "in", [1, "x"])) == Condition("a", "in", (1, "x"))
    tree = parse_filter({"operator": "and", "operands": [cond("a", "eq", 1), {"not": cond("b", "exists", True)}]})
    assert tree == Group("and", (Condition("a", "eq", 1), Group("not", (Condition("b", "exists", True),))))
    assert parse_filter(None) is None and parse_filter("  ") is None
    both = build(cond("a", "eq", 1), "2024-01-01", None)
    assert isinstance(both, Group) and isinstance(both.items[1], DateRange)


BAD = [
    ("{", "not valid JSON"),
    ("[1]", "must be an object"),
    ('"x"', "must be an object"),
    ({}, "empty object"),
    ({"key": "a", "value": 1}, "no operator"),
    ({"key": "a", "operator": "eqq", "value": 1}, "unknown operator"),
    ({"key": "a", "operator": "eq"}, "needs a value"),
    ({"key": "", "operator": "eq", "value": 1}, "key must be"),
    ({"key": 5, "operator": "eq", "value": 1}, "key must be"),
    ({"key": "a", "operator": "eq", "value": 1, "extra": 2}, "unknown field"),
    ({"key": "a", "operator": "eq", "value": [1]}, "one value, not a list"),
    ({"key": "a", "operator": "eq", "value": None}, "string, a number or true/false"),
    ({"key": "a", "operator": "eq", "value": {"x": 1}}, "string, a number or true/false"),
    ({"key": "a", "operator": "gt", "value": True}, "not true/false"),
    ({"key": "a", "operator": "in", "value": 3}, "non-empty list"),
    ({"key": "a", "operator": "in", "value": []}, "non-empty list"),
    ({"key": "a", "operator": "all", "value": [[1]]}, "string, a number or true/false"),
    ({"key": "a", "operator": "exists", "value": "yes"}, "true or false"),
    ({"operator": "and", "operands": []}, "non-empty list"),
    ({"operator": "or", "operands": cond("a", "eq", 1)}, "non-empty list"),
    ({"operator": "not"}, "needs an operand"),
    ({"operator": "and", "operands": [cond("a", "eq", 1)], "x": 1}, "unknown field"),
    ({"and": [cond("a", "eq", 1)], "or": []}, "only field"),
    ({"and": [1]}, "must be an object"),
    ({"operator": "and", "operands": [{"key": "a", "operator": "eq"}]}, r"filter\.operands\[0\]: eq needs a value"),
    ({"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": {"not": cond("a", "eq", 1)}}}}}}}}}}}}}}}}}, "levels deep"),
]


@pytest.mark.parametrize(("spec", "message"), BAD)
def test_a_bad_filter_is_one_clear_error(spec: object, message: str) -> None:
    with pytest.raises(FilterError, match=message) as info:
        parse_filter(json.dumps(spec) if not isinstance(spec, str) else spec)
    assert info.value.message.startswith("bad filter: ") and info.value.hint


def test_a_bad_filter_on_every_store_call(store: qmd.Store) -> None:
    for call in (lambda: store.search("x", filter="{"), lambda: store.query("x", filter={"key": "a"}, rerank=False), lambda: store.vsearch("x", filter="[]")):
        with pytest.raises(FilterError):
            call()


# --- exact top-k under a selective filter --------------------------------------------------


@pytest.fixture
def many(tmp_path: Path) -> Iterator[qmd.Store]:
    """300 documents all about "rollback"; 3 of them (1%) are team: payments, and those rank last."""
    root = tmp_path / "many"
    root.mkdir()
    for i in range(300):
        team = "payments" if i in (7, 150, 299) else "core"
        body = "rollback " * (1 if team == "payments" else 5) + "filler text " * 20
        (root / f"n{i:03d}.md").write_text(f"---\nteam: {team}\nn: {i}\n---\n# Note {i}\n{body}\n")
    s = qmd.Store(tmp_path / "idx2" / "index.sqlite", tmp_path / "idx2" / "index.yml")
    s.add_collection(root, name="many")
    yield s
    s.close()


def test_keyword_top_k_is_exact_under_a_one_percent_filter(many: qmd.Store) -> None:
    unfiltered = many.search("rollback", limit=5)
    assert all("payments" != h.metadata["team"] for h in unfiltered if h.metadata)
    hits = many.search("rollback", limit=3, filter=cond("team", "eq", "payments"))
    assert sorted(h.path for h in hits) == ["n007.md", "n150.md", "n299.md"]
    every = {h.path: h.score for h in many.search("rollback", limit=None)}
    assert all(h.score == every[h.path] for h in hits)  # a filtered search scores as the unfiltered one
    hits = many.search("rollback", limit=10, filter=cond("n", "lt", 20))
    assert len(hits) == 10 and all(h.metadata and h.metadata["n"] < 20 for h in hits)
    # the any-term fill honours the filter too
    hits = many.search("rollback nonexistentword", limit=3, filter=cond("team", "eq", "payments"))
    assert sorted(h.path for h in hits) == ["n007.md", "n150.md", "n299.md"] and {h.match for h in hits} == {"any"}


def test_hybrid_query_filters_before_fusion(many: qmd.Store) -> None:
    result = many.query("rollback", limit=5, rerank=False, expand=False, filter=cond("team", "eq", "payments"))
    assert sorted(h.path for h in result.hits) == ["n007.md", "n150.md", "n299.md"]


def test_vector_top_k_is_exact_under_a_one_percent_filter(tmp_path: Path) -> None:
    """At the seam: 300 documents of 2 chunks each; the 3 matching ones are the farthest
    from the query, so an unfiltered KNN's first pages hold none of them."""
    notes = {f"d{i:03d}.md": f"---\nteam: {'payments' if i % 100 == 0 else 'core'}\n---\n# Doc {i}\ntext {i}\n" for i in range(300)}
    s, backend, model, rows = vector_index(tmp_path, notes, 4)
    import numpy as np

    rng = np.random.default_rng(3)  # no two distances tie
    batch = []
    for row in rows:
        i = int(row.path[1:4])
        v1, v2 = (rng.uniform(0.05, 1.0, 4) for _ in range(2))
        if i % 100 == 0:  # matching documents point away from the query [1, 0, 0, 0]
            v1[0] = v2[0] = -1.0
        batch.append((row.hash, [ChunkVector(row.hash, 0, 0, 5, 3, v1.tolist()), ChunkVector(row.hash, 1, 5, 10, 3, v2.tolist())]))
    backend.write_vectors(model, batch)
    where = parse_filter(cond("team", "eq", "payments"))
    assert where is not None
    near = backend.nearest_documents(model, [1.0, 0.0, 0.0, 0.0], 3, None, where)
    assert sorted(rows_by_id(rows)[d] for d, _, _ in near) == ["d000.md", "d100.md", "d200.md"]
    # the same as a brute-force ranking of the matching documents
    everything = backend.nearest_documents(model, [1.0, 0.0, 0.0, 0.0], None, None)
    matching = [d for d, _, _ in everything if rows_by_id(rows)[d] in ("d000.md", "d100.md", "d200.md")]
    assert [d for d, _, _ in near] == matching
    assert len(backend.nearest_documents(model, [1.0, 0.0, 0.0, 0.0], 10, None, where)) == 3  # all there are
    wide = backend.nearest_documents(model, [1.0, 0.0, 0.0, 0.0], 20, None, parse_filter(cond("team", "eq", "core")))
    assert len(wide) == 20 and "payments" not in {rows_by_id(rows)[d] for d, _, _ in wide}
    assert backend.nearest_documents(model, [1.0, 0.0, 0.0, 0.0], 5, ["other"], where) == []
    assert backend.count_matching(where) == 3
    # a broad filter takes the other plan (the unfiltered KNN, widened, each document tested): still exact
    import qmd.backends.sqlite.vectors as vectors

    core = parse_filter(cond("team", "eq", "core"))
    assert core is not None
    for q in ([1.0, 0.0, 0.0, 0.0], [0.0, 1.0, 0.0, 0.0], [0.3, 0.1, 0.9, 0.2], [-1.0, 0.2, 0.1, 0.0]):
        brute = [d for d, _, _ in backend.nearest_documents(model, q, None, None) if not rows_by_id(rows)[d].endswith(("000.md", "100.md", "200.md"))]
        for floor in (vectors.BROAD_FILTER_MIN, 1):
            vectors.BROAD_FILTER_MIN = floor
            try:
                assert [d for d, _, _ in backend.nearest_documents(model, q, 25, None, core)] == brute[:25]
                assert len(backend.nearest_documents(model, q, 3, None, where)) == 3
            finally:
                vectors.BROAD_FILTER_MIN = 2000
    s.close()


def vector_index(tmp_path: Path, notes: dict[str, str], dims: int) -> tuple[qmd.Store, SqliteBackend, VectorModel, list[DocRow]]:
    """A SQLite index of `notes` (name -> text) in one collection, with an empty vector space of `dims`."""
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in notes.items():
        (root / name).write_text(text)
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    s.add_collection(root, name="notes")
    backend = s.backend
    assert isinstance(backend, SqliteBackend)
    return s, backend, backend.ensure_vector_model("test-fp", "test", dims), backend.find(collection="notes")


def rows_by_id(rows: list[DocRow]) -> dict[int, str]:
    return {r.id: r.path for r in rows}


def test_vsearch_with_a_filter_through_the_store(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    root = tmp_path / "w"
    root.mkdir()
    for i in range(100):
        (root / f"w{i:03d}.md").write_text(f"---\nkind: {'rare' if i == 42 else 'common'}\n---\n# Note {i}\nthe database backup {i}\n")
    s = qmd.Store(tmp_path / "idx4" / "index.sqlite", tmp_path / "idx4" / "index.yml")
    s.add_collection(root, name="w")
    s.embed()
    result = s.vsearch("database backup", limit=5, filter=cond("kind", "eq", "rare"))
    assert [h.path for h in result.hits] == ["w042.md"] and result.hits[0].metadata == {"kind": "rare"}
    assert len(s.vsearch("database backup", limit=5, filter=cond("kind", "eq", "common")).hits) == 5
    s.close()


# --- surfaces ------------------------------------------------------------------------------


def test_cli_filter_since_until_and_bad_filters(cli: Cli, tmp_path: Path) -> None:
    root = tmp_path / "cli-notes"
    root.mkdir()
    for name, text in DOCS.items():
        (root / name).write_text(text)
    assert cli("collection", "add", str(root), "--name", "notes")[0] == 0
    code, out, _ = cli("search", "postgres", "--filter", '{"key":"priority","operator":"eq","value":3}', "--json")
    assert code == 0 and sorted(r["file"].rsplit("/", 1)[-1] for r in json.loads(out)) == ["a.md", "e.md"]
    assert all("metadata" in r for r in json.loads(out))
    code, out, _ = cli("search", "postgres", "--since", "2024-01-01", "--until", "2024-01-31", "--files")
    assert code == 0 and "a.md" in out and "b.md" not in out
    for args in (["search", "postgres"], ["vsearch", "postgres"], ["query", "postgres", "--no-rerank"]):
        code, out, err = cli(*args, "--filter", '{"key":"a","operator":"gt","value":true}')
        assert code == 1 and "bad filter" in err and "hint:" in err and out == "", (args, err)
        code, _, err = cli(*args, "--since", "someday")
        assert code == 1 and "--since" in err, (args, err)
    code, out, _ = cli("collection", "show", "notes")
    assert code == 0 and "Metadata:" in out and "priority" in out and "number 3, string 1" in out
    code, out, _ = cli("collection", "show", "notes", "--json")
    assert {"key": "reviewed", "type": "boolean", "documents": 2} in json.loads(out)["metadata"]


@pytest.fixture
def service(store: qmd.Store) -> Iterator[object]:
    from qmd.serve.service import ToolService

    svc = ToolService(store, "index", idle_s=0, log=lambda line: None).start()
    yield svc
    svc.close()


def test_mcp_and_http_filter(service) -> None:  # type: ignore[no-untyped-def]
    out = service.call("query", {"searches": [{"type": "lex", "query": "postgres"}], "rerank": False, "filter": cond("status", "eq", "published")})
    assert not out.is_error
    rows = out.structured["results"]
    assert sorted(r["file"].rsplit("/", 1)[-1] for r in rows) == ["a.md", "b.md"] and all(r["metadata"]["status"] == "published" for r in rows)
    out = service.call("query", {"searches": [{"type": "lex", "query": "postgres"}], "rerank": False, "filter": json.dumps(cond("priority", "eq", 1)), "since": "2024-02-01"})
    assert [r["file"].rsplit("/", 1)[-1] for r in out.structured["results"]] == ["c.md"]
    code, body, _ = service.rest_query({"searches": [{"type": "lex", "query": "postgres"}], "rerank": False, "filter": cond("tags", "all", ["ops", 7]), "until": "2030-01-01"})
    assert code == 200 and [r["file"].rsplit("/", 1)[-1] for r in body["results"]] == ["c.md"]


@pytest.mark.parametrize("args", [
    {"filter": {"key": "a", "operator": "nope", "value": 1}},
    {"filter": "{not json"},
    {"filter": [1]},
    {"since": "someday"},
    {"until": 5},
])
def test_a_bad_filter_is_an_mcp_error_and_an_http_400(service, args: dict[str, object]) -> None:  # type: ignore[no-untyped-def]
    request = {"searches": [{"type": "lex", "query": "postgres"}], "rerank": False, **args}
    out = service.call("query", request)
    assert out.is_error and "hint:" in out.text
    code, body, _ = service.rest_query(request)
    assert code == 400 and body["error"] and body["hint"]


def test_the_query_tool_schema_names_the_filter() -> None:
    from qmd.serve.catalog import INPUT_SCHEMAS

    props = INPUT_SCHEMAS["query"]["properties"]
    assert props["filter"]["type"] == "object" and props["since"]["type"] == "string" and props["until"]["type"] == "string"


def test_vector_results_past_sqlite_vecs_4096_row_knn(tmp_path: Path) -> None:
    """`vsearch --all` and a long `-n` on an index of more chunks than sqlite-vec's KNN may
    return (4096) once failed with "k value in knn query too large" (and then "too many SQL
    variables"): the same ranking as numpy's brute force, filtered or not."""
    import numpy as np

    n = 2100  # x 2 chunks = 4200 > 4096
    s, backend, model, rows = vector_index(tmp_path, {f"d{i:04d}.md": f"---\nodd: {str(i % 2 == 1).lower()}\n---\n# Doc {i}\n" for i in range(n)}, 8)
    rng = np.random.default_rng(5)
    vectors = {row.hash: rng.uniform(0.05, 1.0, (2, 8)).astype(np.float32) for row in rows}  # positive: no score clamps to 0
    backend.write_vectors(model, [(h, [ChunkVector(h, j, j * 5, j * 5 + 5, 3, v[j].tolist()) for j in range(2)]) for h, v in vectors.items()])
    query = rng.uniform(0.05, 1.0, 8).astype(np.float32)

    def cosine(v: np.ndarray) -> float:
        return float(np.max(v @ query / (np.linalg.norm(v, axis=1) * np.linalg.norm(query))))

    by_id = {row.id: row for row in rows}

    def agrees(found: list[tuple[int, float, tuple[int, int]]], wanted: list[int]) -> None:
        """The documents wanted, best first, each scored as numpy scores it (float32 ties aside)."""
        assert sorted(d for d, _, _ in found) == sorted(wanted)
        scores = [score for _, score, _ in found]
        assert scores == sorted(scores, reverse=True)
        assert max(abs(score - cosine(vectors[by_id[d].hash])) for d, score, _ in found) < 1e-5

    brute = sorted(by_id, key=lambda d: -cosine(vectors[by_id[d].hash]))
    everything = backend.nearest_documents(model, query.tolist(), None, None)
    agrees(everything, brute)
    assert len(backend.documents([d for d, _, _ in everything])) == n
    assert backend.nearest_documents(model, query.tolist(), 3000, None) == everything[:3000]
    assert backend.nearest_documents(model, query.tolist(), 20, None) == everything[:20]  # sqlite-vec's own KNN
    odd = parse_filter(cond("odd", "eq", True))
    assert odd is not None
    agrees(backend.nearest_documents(model, query.tolist(), None, None, odd), [d for d in brute if int(by_id[d].path[1:5]) % 2])
    s.close()


def test_front_matter_reads_yaml_1_2_as_the_original_and_older_rows_are_read_again(tmp_path: Path) -> None:
    """`draft: yes` is the string "yes" and `time: 10:30` the string "10:30" (YAML 1.2, the
    original's `yaml` package); PyYAML's YAML 1.1 made them True and the integer 630."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "m.md").write_text("---\ndraft: yes\nshipped: no\ntime: 10:30\nticket: 017\nreviewed: true\nsize: 1e3\n---\n# Standup\npostgres standup\n")
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        s.add_collection(root, name="notes")
        meta = {"draft": "yes", "shipped": "no", "time": "10:30", "ticket": 17, "reviewed": True, "size": 1000.0}
        assert s.search("standup")[0].metadata == meta
        assert found(s, cond("draft", "eq", "yes")) == ["m.md"] and found(s, cond("time", "eq", "10:30")) == ["m.md"]
        import apsw

        conn = apsw.Connection(str(tmp_path / "idx" / "index.sqlite"))  # a row as the YAML 1.1 reader wrote it
        conn.execute("""UPDATE documents SET metadata = '{"draft": true, "time": 630}', meta_version = 1""")
        conn.close()
        s.close()
        report = s.update()
        assert report.totals["updated"] == 0  # nothing changed on disk: only the metadata is read again
        assert s.search("standup")[0].metadata == meta
    finally:
        s.close()


BOMB = "---\na: &a [x, x, x, x, x, x, x, x, x]\n" + "".join(f"{chr(98 + i)}: &{chr(98 + i)} [*{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}, *{chr(97 + i)}]\n" for i in range(8)) + "---\n# Bomb\nzebra bomb\n"


@pytest.mark.parametrize(("name", "text"), [
    ("bad-date.md", "---\ndate: 2024-02-30\n---\n# Bad date\nzebra date\n"),  # ValueError in PyYAML's timestamp
    ("bad-tag.md", "---\nv: !!timestamp nope\n---\n# Bad tag\nzebra tag\n"),  # AttributeError
    ("self-alias.md", "---\nv: &a [*a]\n---\n# Self\nzebra self\n"),  # RecursionError when walked
    ("bomb.md", BOMB),  # 9**9 values once expanded: minutes of CPU, then TooBigError
])
def test_front_matter_that_cannot_be_metadata_is_text_not_a_crash(tmp_path: Path, name: str, text: str) -> None:
    """Each once stopped `update` with exit 3 and left the whole collection unindexed."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / name).write_text(text)
    (root / "good.md").write_text("---\nstatus: ok\n---\n# Good\nzebra good\n")
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        started = time.monotonic()
        s.add_collection(root, name="notes")
        assert time.monotonic() - started < 30
        assert sorted(h.path for h in s.search("zebra", limit=10)) == sorted([name, "good.md"])
        assert found(s, cond("status", "eq", "ok")) == []  # `found` searches "postgres": none here
        assert [h.path for h in s.search("zebra", filter=cond("status", "eq", "ok"))] == ["good.md"]
    finally:
        s.close()


def test_integers_past_64_bits_are_numbers_in_metadata_and_filters(tmp_path: Path) -> None:
    """`v: 99999999999999999999999` once failed the update (OverflowError writing the row), and
    the same number in a filter failed the search; both exit 3."""
    root = tmp_path / "notes"
    root.mkdir()
    (root / "big.md").write_text("---\nv: 99999999999999999999999\nw: 1" + "0" * 400 + "\n---\n# Big\nzebra big\n")
    assert run_qmd("collection", "add", str(root), "--name", "notes").returncode == 0
    done = run_qmd("search", "zebra", "--json", "--filter", '{"key": "v", "operator": "gt", "value": 10000000000000000000000}')
    assert done.returncode == 0, done.stderr
    assert [r["metadata"] for r in json.loads(done.stdout)] == [{"v": 1e23}]
    done = run_qmd("search", "zebra", "--filter", '{"key": "v", "operator": "eq", "value": 1' + "0" * 400 + "}")
    assert done.returncode == 1 and "beyond what can be compared" in done.stderr and "Traceback" not in done.stderr
