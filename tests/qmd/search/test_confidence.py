"""The confidence of every hit (issue 28): present and in [0, 1] for search, vsearch and query,
in every output format; the threshold and its flags; the nothing-relevant line; the words of
the question no note holds; --min-confidence and the config key. A real index, embedded with
all-MiniLM-L6-v2 (the model the coefficients were fitted with, beside EmbeddingGemma)."""

from __future__ import annotations

import csv
import io
import json
import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import qmd
from qmd.core.errors import QmdError
from qmd.search.confidence import THRESHOLD, content_words, coverage, stems

Cli = Callable[..., tuple[int, str, str]]

NOTES = {
    "postgres-restore.md": "# Postgres restore\n\nRestore the orders database from the nightly pg_dump with pg_restore into a fresh instance.\n",
    "deploy-rollback.md": "# Deploy rollback\n\nTo roll back a bad release, flip the load balancer back to the blue pool. Nothing gets redeployed.\n",
    "redis-stampede.md": "# Redis cache stampede\n\nKeys expired at once and the database fell over; add jitter to the TTLs.\n",
    "kafka-lag.md": "# Kafka consumer lag\n\nLag grows when a partition is stuck; restart the consumer group. Nothing else helps.\n",
    "tls-rotation.md": "# TLS certificate rotation\n\nRotate the wildcard certificate two weeks before it expires, with certbot.\n",
    "oncall.md": "# On-call handbook\n\nAcknowledge a page within five minutes; escalate to the secondary after fifteen.\n",
    "onboarding.md": "# Onboarding\n\nNew engineers enable disk encryption and get a hardware key on day one.\n",
    "dns-outage.md": "# DNS outage postmortem\n\nCoreDNS ran out of memory; internal lookups failed for an hour.\n",
    "feature-flags.md": "# Feature flag policy\n\nRelease flags live at most 30 days; experiment flags at most 90 days.\n",
    "offsite.md": "# Tokyo offsite\n\nThe team meets in Tokyo in October; the hotel is booked near Shibuya station.\n",
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory, minilm_gguf: Path) -> Iterator[dict[str, Path]]:
    """Ten notes, indexed and embedded once for the module (no rerank or generate model)."""
    root = tmp_path_factory.mktemp("confidence")
    notes = root / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    mp = pytest.MonkeyPatch()
    for var, value in (("QMD_EMBED_MODEL", minilm_gguf), ("QMD_RERANK_MODEL", root / "none-r.gguf"), ("QMD_GENERATE_MODEL", root / "none-g.gguf")):
        mp.setenv(var, str(value))
    store = qmd.Store(root / "idx" / "index.sqlite", root / "idx" / "index.yml")
    store.add_collection(notes, name="notes")
    store.embed()
    store.close()
    yield {"index": root / "idx" / "index.sqlite", "config": root / "idx" / "index.yml", "root": root, "embed": minilm_gguf}
    mp.undo()


def models(world: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The module's models (each test starts without any: the suite's isolated_home)."""
    root = world["root"]
    for var, value in (("QMD_EMBED_MODEL", world["embed"]), ("QMD_RERANK_MODEL", root / "none-r.gguf"), ("QMD_GENERATE_MODEL", root / "none-g.gguf")):
        monkeypatch.setenv(var, str(value))


@pytest.fixture
def store(world: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> Iterator[qmd.Store]:
    models(world, monkeypatch)
    s = qmd.Store(world["index"], world["config"])
    yield s
    s.close()


@pytest.fixture
def on_cli(world: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The CLI reads the module's index (its config as the default index's)."""
    models(world, monkeypatch)
    monkeypatch.setenv("INDEX_PATH", str(world["index"]))
    monkeypatch.setenv("QMD_CONFIG_DIR", str(world["config"].parent))
    monkeypatch.setenv("QMD_SERVER", "off")


def ok(cli: Cli, *args: str) -> tuple[str, str]:
    code, out, err = cli(*args)
    assert code == 0, f"qmd {' '.join(args)} exited {code}: {err}"
    return out, err


# --- the evidence ------------------------------------------------------------------------


def test_words_are_stemmed_as_the_index_stems_them() -> None:
    assert stems("Restoring replicas") == ["restor", "replica"]
    words = content_words("How many replicas does the orders-db have?")
    assert [w.text for w in words] == ["replicas", "orders", "db"]  # stop-words and the "how many" out
    assert coverage(words, "Two replica nodes hold the order tables") == pytest.approx(2 / 3)  # stems, as prefixes


# --- every method, every hit ----------------------------------------------------------------


def test_every_hit_of_every_method_has_a_confidence(store: qmd.Store) -> None:
    question = "how do we roll back a bad release?"
    for hits in (store.search(question), store.vsearch(question).hits, store.query(question, rerank=False).hits):
        assert hits
        for hit in hits:
            assert hit.confidence is not None and 0.0 <= hit.confidence <= 1.0
            assert hit.evidence and 0.0 <= hit.evidence["coverage"] <= 1.0
        assert hits[0].path == "deploy-rollback.md"


def test_a_right_answer_is_confident_and_nonsense_is_not(store: qmd.Store) -> None:
    found = store.search("pg_restore nightly pg_dump")
    assert found[0].path == "postgres-restore.md" and found[0].confidence is not None and found[0].confidence >= THRESHOLD
    result = store.query("restore the orders database from the nightly dump", rerank=False)
    assert result.hits[0].path == "postgres-restore.md" and not result.hits[0].below(result.threshold)
    # The symptom: the any-term fill of a nonsense word scores high, and is no answer.
    nonsense = store.search("zzzqqq nothing")
    assert nonsense and max(h.score for h in nonsense) > 0.5
    assert all(h.below(THRESHOLD) for h in nonsense)


def test_query_first_hits_all_score_1_and_their_confidence_tells_them_apart(store: qmd.Store) -> None:
    nonsense = store.query("zzzqqq nothing", rerank=False)
    answer = store.query("restore the orders database from the nightly dump", rerank=False)
    assert nonsense.hits[0].score == answer.hits[0].score == 1.0  # without a reranker query's first hit always scores 1.0
    assert nonsense.hits[0].confidence is not None and answer.hits[0].confidence is not None
    assert answer.hits[0].confidence - nonsense.hits[0].confidence > 0.2
    assert nonsense.unmatched == ["zzzqqq"] and answer.unmatched == []


def test_the_confidence_does_not_change_the_ranking(store: qmd.Store) -> None:
    for question in ("rollback load balancer", "certificate expires", "zzzqqq nothing"):
        hits = store.search(question, limit=10)
        assert [h.score for h in hits] == sorted((h.score for h in hits), reverse=True)
        one = store.search(question, limit=1)
        assert [(h.path, h.confidence) for h in one] == [(h.path, h.confidence) for h in hits[:1]]  # -n does not move it


def test_words_no_note_holds_are_named(store: qmd.Store) -> None:
    from qmd.core.requests import QueryRequest, SearchRequest

    assert store.query("zzzqqq rollback", rerank=False).unmatched == ["zzzqqq"]
    assert store.answer(SearchRequest("zzzqqq quuxly rollback")).unmatched == ["zzzqqq", "quuxly"]
    assert store.answer(SearchRequest("zzzqqq rollback", vector=True)).unmatched == ["zzzqqq"]
    assert store.answer(QueryRequest("rollback the deploy", rerank=False)).unmatched == []


def probes(monkeypatch: pytest.MonkeyPatch, store: qmd.Store) -> list[str]:
    """The words `unmatched_words` asks the index for (its one-row, one-term keyword searches)."""
    asked: list[str] = []
    cls = type(store.backend)
    real = cls.bm25

    def counted(self: object, query: Any, limit: int | None, *args: Any, **kwargs: Any) -> Any:
        if limit == 1 and len(query.terms) == 1 and not query.negated:
            asked.append(query.terms[0].text)
        return real(self, query, limit, *args, **kwargs)

    monkeypatch.setattr(cls, "bm25", counted)
    return asked


def test_only_the_words_no_shown_hit_holds_are_searched_for(store: qmd.Store, monkeypatch: pytest.MonkeyPatch) -> None:
    """A word a shown hit holds (where the index holds it too) is matched without a search:
    the hits name the same unmatched words with one search for each word they lack."""
    from qmd.core.requests import QueryRequest, SearchRequest

    asked = probes(monkeypatch, store)
    assert store.answer(SearchRequest("zzzqqq quuxly rollback balancer")).unmatched == ["zzzqqq", "quuxly"]
    assert asked == ["zzzqqq", "quuxly"]  # was one search per content word: rollback and balancer too
    asked.clear()
    assert store.answer(SearchRequest("Rollback the balancer?")).unmatched == []  # all-terms hits: no search at all
    assert asked == []
    assert store.answer(SearchRequest("zzzqqq rollback", vector=True)).unmatched == ["zzzqqq"]
    assert asked == ["zzzqqq"]
    asked.clear()
    assert store.answer(QueryRequest("zzzqqq rollback balancer", rerank=False)).unmatched == ["zzzqqq"]
    assert asked == ["zzzqqq"]


def test_a_word_only_the_front_matter_yaml_holds_is_still_searched_for(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The index holds the front matter's values, not its YAML: a word a hit's raw text holds
    only there (`title:`) counts for its coverage, and is still searched for (none holds it)."""
    from qmd.core.requests import SearchRequest

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "widgets.md").write_text("---\ntitle: Widget guide\n---\nWidgets spin clockwise.\n")
    (notes / "cjk.md").write_text("# 東京の会議\n\nmeeting notes\n")
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        s.add_collection(notes, name="notes")
        asked = probes(monkeypatch, s)
        found = s.answer(SearchRequest("title widgets"))
        assert [h.path for h in found.hits] == ["widgets.md"] and found.unmatched == ["title"]
        assert asked == ["title"]
        asked.clear()
        assert s.answer(SearchRequest("meeting zzzqqq")).unmatched == ["zzzqqq"]
        assert asked == ["meeting", "zzzqqq"]  # a note with CJK: the index splits its runs, so its words are searched for
    finally:
        s.close()


def test_the_threshold_comes_from_the_request_the_config_or_the_default(store: qmd.Store, world: dict[str, Path]) -> None:
    from qmd.core.requests import SearchRequest

    assert store.answer(SearchRequest("rollback")).threshold == THRESHOLD
    assert store.answer(SearchRequest("rollback", min_confidence=0.9)).threshold == 0.9
    assert store.query("rollback", rerank=False, min_confidence=0.0).threshold == 0.0
    config = world["config"]
    before = config.read_text()
    try:
        config.write_text(before + "search:\n  min_confidence: 0.55\n")
        store.refresh_config()
        assert store.answer(SearchRequest("rollback")).threshold == 0.55
        config.write_text(before + "search:\n  min_confidence: 2\n")
        with pytest.raises(QmdError, match="min_confidence' must be a number from 0 to 1"):
            store.refresh_config()
            store.answer(SearchRequest("rollback"))
    finally:
        config.write_text(before)
        store.refresh_config()


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan")])
def test_a_threshold_outside_0_1_is_refused(store: qmd.Store, bad: float) -> None:
    with pytest.raises(QmdError, match="minimum confidence must be a number from 0 to 1"):
        store.search("rollback", min_confidence=bad)


# --- the CLI, every format ---------------------------------------------------------------------


def test_every_format_carries_the_confidence(on_cli: None, cli: Cli) -> None:
    rows = json.loads(ok(cli, "search", "rollback load balancer", "--json")[0])
    assert rows and list(rows[0])[-3:] == ["match", "confidence", "below_threshold"]
    conf = rows[0]["confidence"]
    assert 0.0 <= conf <= 1.0 and rows[0]["below_threshold"] is (conf < THRESHOLD)
    table = list(csv.DictReader(io.StringIO(ok(cli, "search", "rollback load balancer", "--csv")[0])))
    assert list(table[0])[-2:] == ["confidence", "below_threshold"] and round(float(table[0]["confidence"]), 2) == conf
    files = list(csv.reader(io.StringIO(ok(cli, "search", "rollback load balancer", "--files")[0])))
    assert files[0][:3] == [rows[0]["docid"], f"{rows[0]['score']:.2f}", rows[0]["file"]] and files[0][5] == f"{conf:.2f}"
    assert f' confidence="{conf:.2f}"' in ok(cli, "search", "rollback load balancer", "--xml")[0]
    assert f"**confidence:** {conf:.2f}\n" in ok(cli, "search", "rollback load balancer", "--md")[0]
    terminal = ok(cli, "search", "rollback load balancer")[0]
    assert re.search(rf"^Confidence: +{round(conf * 100)}%$", terminal, re.MULTILINE) and "\nScore:" not in terminal
    for command in ("vsearch", "query"):
        hits = json.loads(ok(cli, command, "how do we roll back a bad release", "--json")[0])
        assert hits and all(0.0 <= h["confidence"] <= 1.0 and isinstance(h["below_threshold"], bool) for h in hits)
        assert all(h["score"] == pytest.approx(h["score"]) for h in hits)  # the score is still there, its meaning unchanged


def test_nothing_relevant_is_said_before_the_best_guesses(on_cli: None, cli: Cli) -> None:
    out, err = ok(cli, "search", "zzzqqq nothing")
    first = out.splitlines()[0]
    assert re.fullmatch(rf"No note answers this with confidence \(best \d+% < {round(THRESHOLD * 100)}%\); closest hits:", first), out
    assert f"(below {round(THRESHOLD * 100)}%: a best guess)" in out
    assert "Note: no note contains 'zzzqqq'" in err
    rows = json.loads(ok(cli, "search", "zzzqqq nothing", "--json")[0])
    assert rows and all(r["below_threshold"] is True and r["unmatched"] == ["zzzqqq"] for r in rows)
    files = ok(cli, "search", "zzzqqq nothing", "--files")[0].splitlines()
    assert files and all(line.endswith(",[below-threshold]") for line in files)
    assert all(r["below_threshold"] == "true" for r in csv.DictReader(io.StringIO(ok(cli, "search", "zzzqqq nothing", "--csv")[0])))
    _, err = ok(cli, "search", "zzzqqq nothing", "--json")
    assert "no note answers this with confidence" in err  # said on stderr where stdout is for scripts
    # A threshold of 0 calls every hit an answer: no line, no flag.
    out, _ = ok(cli, "search", "zzzqqq nothing", "--min-confidence", "0")
    assert not out.startswith("No note answers") and "best guess" not in out
    assert all(r["below_threshold"] is False for r in json.loads(ok(cli, "search", "zzzqqq nothing", "--json", "--min-confidence", "0")[0]))


def test_a_confident_answer_has_no_nothing_relevant_line(on_cli: None, cli: Cli) -> None:
    out, err = ok(cli, "search", "pg_restore nightly pg_dump")
    assert out.startswith("qmd://notes/postgres-restore.md:") and "No note answers" not in out + err


@pytest.mark.parametrize("command", ["search", "vsearch", "query"])
def test_a_bad_min_confidence_is_one_line(on_cli: None, cli: Cli, command: str) -> None:
    code, out, err = cli(command, "rollback", "--min-confidence", "2")
    assert (code, out) == (1, "") and err.splitlines()[0] == "Error: the minimum confidence must be a number from 0 to 1, not 2.0"
    code, out, err = cli(command, "rollback", "--min-confidence", "lots")
    assert (code, out) == (2, "") and "--min-confidence" in err.splitlines()[-1]


def test_the_sample_of_chunk_vectors_on_each_backend(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, index_backend: str) -> None:
    """What a cosine means in an index is read from a fixed sample of its chunk vectors: the
    same ones on every call, at most the size asked, each of the model's dimensions."""
    from qmd.search.confidence import vector_sample, vector_scale
    from qmd.search.vector import current_model

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in NOTES.items():
        (notes / name).write_text(text)
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    try:
        s.add_collection(notes, name="notes")
        s.embed()
        model = current_model(s.backend, s.embedder())
        sample = [list(v) for v in s.backend.vector_sample(model, 256)]
        assert len(sample) == s.vector_status().chunks and all(len(v) == model.dims for v in sample)
        assert [list(v) for v in s.backend.vector_sample(model, 256)] == sample
        assert len(s.backend.vector_sample(model, 3)) == 3
        scale = vector_scale(vector_sample(s.backend, model), sample[0])
        assert scale is not None and scale.z(1.0) > scale.z(scale.mean) == 0.0
        hits = s.vsearch("rollback load balancer").hits
        assert hits and all(h.confidence is not None and 0.0 <= h.confidence <= 1.0 for h in hits)
    finally:
        s.close()


def test_the_sample_is_read_once_until_the_index_changes(tmp_path: Path, tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, index_backend: str) -> None:
    """A Store reads the sample of chunk vectors once, and again after the index changed
    (its own write or another connection's): the scale is always the fresh sample's."""
    from qmd.search.confidence import vector_sample, vector_scale
    from qmd.search.vector import current_model

    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    notes = tmp_path / "notes"
    notes.mkdir()
    for name, text in list(NOTES.items())[:8]:
        (notes / name).write_text(text)
    paths = (tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    s = qmd.Store(*paths)
    try:
        s.add_collection(notes, name="notes")
        s.embed()
        reads: list[int] = []
        cls = type(s.backend)
        real = cls.vector_sample

        def counted(self: object, model: Any, size: int) -> Any:
            rows = real(self, model, size)
            reads.append(len(rows))
            return rows

        monkeypatch.setattr(cls, "vector_sample", counted)
        model = current_model(s.backend, s.embedder())
        q = list(s.embedder().embed_query("rollback"))

        def fresh() -> object:
            return vector_scale(vector_sample(s.backend, model), q)

        first = s._reader.scale(model, q)
        s.vsearch("rollback load balancer")
        s.query("rollback load balancer", rerank=False, expand=False)
        assert len(reads) == 1  # one read for the three
        assert first == fresh() and first is not None
        reads_before = reads[0]
        reads.clear()
        for name, text in list(NOTES.items())[8:]:  # this Store's own write
            (notes / name).write_text(text)
        s.update()
        s.embed()
        assert s._reader.scale(model, q) == fresh() != first and len(reads) == 2 and reads[0] > reads_before  # read again (and by fresh())
        sizes = list(reads)
        other = qmd.Store(*paths)  # another connection's write
        try:
            (notes / "offsite.md").unlink()
            other.update()
            other.cleanup()
        finally:
            other.close()
        reads.clear()
        assert s._reader.scale(model, q) == fresh() and len(reads) == 2 and reads[0] < sizes[-1]
    finally:
        s.close()
