"""The hybrid `query` pipeline through real llama.cpp on tiny models, and its degrade paths."""

from __future__ import annotations

import json
import re
from pathlib import Path

import apsw
import pytest

import qmd
from qmd.llm.generator import Generator, parse_expansion
from qmd.llm.reranker import CrossEncoder, YesNoReranker
from qmd.search.fusion import blend
from qmd.search.typed import SubQuery
from tests.support.paths import BENCH_DATA
from tests.support.run import qmd_env, run_qmd

NOTES = {
    "deploy.md": "# Deploy\n\nBlue green deploys. To roll back, flip the load balancer back to blue.\n",
    "postgres.md": "# Postgres\n\nRestore the database from the nightly dump with pg_restore.\n",
    "redis.md": "# Redis\n\nThe cache stampede: keys expired at once and the database fell over.\n",
    "kafka.md": "# Kafka\n\nConsumer lag grows when a partition is stuck; restart the consumer.\n",
    "tls.md": "# TLS\n\nRotate the wildcard certificate before it expires.\n",
}


@pytest.fixture
def store(tmp_path: Path) -> qmd.Store:
    root = tmp_path / "notes"
    root.mkdir()
    for name, text in NOTES.items():
        (root / name).write_text(text)
    s = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    s.add_collection(root, name="notes")
    return s


@pytest.fixture
def models(tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
    monkeypatch.setenv("QMD_RERANK_MODEL", str(tiny_models["rerank"]))
    monkeypatch.setenv("QMD_GENERATE_MODEL", str(tiny_models["llama"]))
    return tiny_models


def test_no_models_degrades_to_bm25_and_says_so(store: qmd.Store, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(tmp_path / "missing.gguf"))
    result = store.query("restore the database dump")
    assert result.hits and result.hits[0].path == "postgres.md"
    assert result.stages.vector == 0 and result.stages.bm25 == 1
    assert result.stages.rerank == "skipped: no rerank model" and result.stages.expand == "skipped: no generate model"
    assert [h.score for h in result.hits] == pytest.approx([1 / r for r in range(1, len(result.hits) + 1)])
    assert len(result.notices) == 3 and any("vector search skipped" in n for n in result.notices)


def test_full_pipeline_with_tiny_models(store: qmd.Store, models: dict[str, Path]) -> None:
    store.embed()
    result = store.query("how do we roll back a deploy", explain=True, limit=5)
    assert result.stages.vector >= 1 and result.stages.bm25 >= 1 and result.stages.rerank == 5
    assert str(result.stages.expand).endswith("dropped)")
    assert {h.path for h in result.hits} == set(NOTES)
    for hit in result.hits:
        e = hit.explain
        assert e is not None and 0.0 <= e["rerank"] <= 1.0
        assert hit.score == pytest.approx(blend(e["rrf_rank"], e["rerank"]), abs=1e-6)
        assert e["rrf"] == pytest.approx(sum(x["rrf"] for x in e["lists"]) + e["bonus"], abs=1e-5)
        assert 0.0 <= e["bonus"] <= 0.05 + 1e-9  # scaled by the evidence of the entry that earned it
    assert [h.score for h in result.hits] == sorted((h.score for h in result.hits), reverse=True)
    assert result.searches[0] == {"type": "query", "query": "how do we roll back a deploy"}
    assert set(result.timings_ms) >= {"probe", "expand", "embed", "vector", "bm25", "fusion", "rerank", "total"}


def test_second_identical_query_calls_no_model(store: qmd.Store, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    store.embed()
    calls = {"rerank": 0, "expand": 0}
    real_scores, real_expand = CrossEncoder.scores, Generator.expand

    def scores(self, query, docs):  # type: ignore[no-untyped-def]
        calls["rerank"] += len(docs)
        return real_scores(self, query, docs)

    def expand(self, query):  # type: ignore[no-untyped-def]
        calls["expand"] += 1
        return real_expand(self, query)

    monkeypatch.setattr(CrossEncoder, "scores", scores)
    monkeypatch.setattr(Generator, "expand", expand)
    first = store.query("cache stampede database", explain=True)
    assert calls == {"rerank": 5, "expand": 1}
    again = qmd.Store(store.index_path, store.config_path)
    second = again.query("cache stampede database", explain=True)
    assert calls == {"rerank": 5, "expand": 1}
    assert [(h.path, round(h.score, 9)) for h in first.hits] == [(h.path, round(h.score, 9)) for h in second.hits]


def test_busy_index_never_fails_a_query(store: qmd.Store, models: dict[str, Path]) -> None:
    store.embed()
    blocker = apsw.Connection(str(store.index_path))
    blocker.execute("BEGIN IMMEDIATE")  # another writer holds the lock: cache writes must give up
    try:
        result = store.query("rotate certificate", limit=3)
        assert result.hits[0].path == "tls.md"
    finally:
        blocker.execute("ROLLBACK")
        blocker.close()


def test_typed_queries_route_by_type(store: qmd.Store, models: dict[str, Path]) -> None:
    store.embed()
    lex = store.query("lex: pg_restore", explain=True, rerank=False)
    assert lex.stages.vector == 0 and lex.stages.bm25 == 1 and lex.stages.expand is None
    assert lex.hits[0].path == "postgres.md" and lex.hits[0].explain["lists"][0]["list"] == "lex#1"
    mixed = store.query("vec: bring the database back\nlex: pg_restore\nhyde: Run pg_restore on the dump.", explain=True, rerank=False)
    assert (mixed.stages.vector, mixed.stages.bm25) == (2, 1)
    weights = {x["list"]: x["rrf"] * (60 + x["rank"]) for h in mixed.hits for x in h.explain["lists"]}
    assert weights["vec#1"] == pytest.approx(2.0, rel=1e-4) and weights["lex#2"] == pytest.approx(1.0, rel=1e-4)
    assert weights["hyde#3"] == pytest.approx(1.0, rel=1e-4)
    with pytest.raises(qmd.QmdError, match="line 2"):
        store.query("lex: x\nnope: y")


def test_strong_keyword_match_skips_expansion(store: qmd.Store, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    root = Path(store.collection("notes").path)
    for i in range(40):  # a corpus big enough for a rare term to score as a strong match
        (root / f"filler{i}.md").write_text(f"# Filler {i}\n\nnothing to see in note number {i}\n")
    (root / "postgres.md").write_text("# pg_restore\n\npg_restore pg_restore: restore the dump with pg_restore.\n")
    store.update()
    assert store.search("pg_restore", limit=2)[0].score >= 0.85
    monkeypatch.setattr(Generator, "expand", lambda self, q: pytest.fail("expansion should be skipped"))
    result = store.query("pg_restore", rerank=False)
    assert result.stages.strong_signal is True and result.stages.expand == "skipped: strong keyword match"
    with_intent = store.query("pg_restore", intent="databases", expand=False, rerank=False)
    assert with_intent.stages.strong_signal is False  # intent disables the shortcut


def test_a_generate_model_not_trained_for_expansion_is_used_only_when_forced(store: qmd.Store, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_GENERATE_MODEL", str(models["llama_generic"]))
    store.embed()
    auto = store.query("how do we roll back a deploy", rerank=False)
    assert auto.stages.expand == "skipped: tiny-llama is not trained for query expansion"
    assert any("force it with --expand" in n for n in auto.notices) and len(auto.searches) == 1
    forced = store.query("how do we roll back a deploy", rerank=False, expand=True)
    assert str(forced.stages.expand).endswith("dropped)") and not any("trained" in n for n in forced.notices)
    typed = store.query("expand: how do we roll back a deploy", rerank=False)  # an explicit expand: line asks for it
    assert str(typed.stages.expand).endswith("dropped)")
    assert store.query("how do we roll back a deploy", rerank=False, expand=False).stages.expand == "off"


def test_expansion_always_parses_and_is_cached(tiny_models: dict[str, Path]) -> None:
    generator = Generator(tiny_models["llama"], 1)
    for question in ("how do we undo a bad release?", "postgres", "東京 travel", "x" * 300):
        lines = generator.expand(question)
        assert lines and all(isinstance(s, SubQuery) and s.type in ("lex", "vec", "hyde") and s.text for s in lines)
    assert parse_expansion("lex: a\nbogus\nvec: b\nvec: b\nhyde:\n") == [SubQuery("lex", "a"), SubQuery("vec", "b")]


def test_yes_no_reranker_plumbing(tiny_models: dict[str, Path]) -> None:
    ranker = YesNoReranker(tiny_models["llama"], 1)
    docs = ["flip the load balancer back to blue", "bread recipe", "x" * 5000, ""]
    scores = ranker.scores("undo a release", docs)
    assert len(scores) == 4 and all(0.0 <= s <= 1.0 for s in scores)
    assert ranker.scores("undo a release", docs[1:2]) == pytest.approx(scores[1:2])  # one at a time, order kept


def test_query_cli_json_carries_stages(store: qmd.Store, models: dict[str, Path]) -> None:
    store.embed()
    env = {"INDEX_PATH": str(store.index_path), "QMD_CONFIG_DIR": str(store.config_path.parent)}
    proc = run_qmd("query", "rotate the certificate", "--json", "--explain", "--no-rerank", env=qmd_env(env))
    assert proc.returncode == 0, proc.stderr
    rows = json.loads(proc.stdout)
    assert rows[0]["file"] == "qmd://notes/tls.md" and rows[0]["match"] == "hybrid"
    assert rows[0]["stages"]["rerank"] == "off" and "explain" in rows[0]
    assert "Timings:" in proc.stderr
    bad = run_qmd("query", "lex: a\nfoo: b", env=qmd_env(env))
    assert bad.returncode == 1 and "line 2" in bad.stderr


@pytest.mark.parametrize(
    ("name", "typed", "label"),
    [
        ("bm25:query", False, "keywords (original query)"),
        ("vec:query", False, "vectors (original query)"),
        ("lex#2", False, "keywords (expansion 2)"),
        ("vec#1", False, "vectors (expansion 1)"),
        ("hyde#3", False, "vectors of a hypothetical answer (expansion 3)"),
        ("lex#1", True, "keywords (your line 1)"),
        ("vec#2", True, "vectors (your line 2)"),
        ("feedback:bm25", False, "keywords (feedback words from the top hits)"),
        ("vector-winner", False, "clear vector winner (moved first)"),
    ],
)
def test_fusion_lists_have_readable_names(name: str, typed: bool, label: str) -> None:
    from qmd.search.hybrid import list_label

    assert list_label(name, typed) == label


def test_explain_lines_say_rerank_and_score_in_words() -> None:
    from qmd.cli.formats import explain_lines

    e = {"lists": [{"list": "bm25:query", "label": "keywords (original query)", "rank": 1, "rrf": 0.032787}], "bonus": 0.05,
         "rrf": 0.082787, "rrf_rank": 1, "rerank": None, "blend_weight": None, "score": 1.0}
    assert explain_lines(e, "skipped: no rerank model") == [
        "Explain: fused rank 1, RRF 0.0828 (lists 0.0328 + top-rank bonus 0.0500)",
        "  keywords (original query): rank 1, +0.0328",
        "  rerank: skipped (no reranker)",
        "  score: 100% = 1 / fused rank 1",
    ]
    assert explain_lines(e, "off")[2] == "  rerank: off (--no-rerank)"
    assert explain_lines(dict(e, rrf_rank=41.0, score=1 / 41), 40)[2:] == ["  rerank: not reranked (outside the top 40 candidates)", "  score: 2% = 1 / fused rank 41"]
    reranked = dict(e, rerank=0.5, blend_weight=0.75, score=0.875)
    assert explain_lines(reranked, 5)[2:] == ["  rerank: 0.5000", "  score: 88% = 75% × 1/1 + 25% × rerank 0.5000"]


def test_query_explain_prints_each_hit_explanation_under_it(store: qmd.Store, models: dict[str, Path]) -> None:
    """`--explain` printed `rerank None → 1.0` and list names like `bm25:query` after all the
    hits (on stderr); now under each hit's score, in words, as the original places it."""
    store.embed()
    env = qmd_env({"INDEX_PATH": str(store.index_path), "QMD_CONFIG_DIR": str(store.config_path.parent)})
    proc = run_qmd("query", "restore the database dump", "--explain", "-n", "3", env=env)
    assert proc.returncode == 0, proc.stderr
    blocks = proc.stdout.split("\n\nqmd://")
    assert len(blocks) == 3
    for block in blocks:
        lines = block.split("\n")
        at = next(i for i, line in enumerate(lines) if line.startswith("Confidence:"))  # where the original prints its score (issue 28)
        assert lines[at + 1].startswith("Explain: fused rank "), block
        explained = lines[at + 1 : lines.index("", at)]
        assert any(line.startswith(("  keywords (", "  vectors (")) for line in explained), explained
        assert re.fullmatch(r"  rerank: 0\.\d{4}", explained[-3]) and re.fullmatch(r"  score: \d+% = \d+% × 1/\d+ \+ \d+% × rerank 0\.\d{4}", explained[-2]), explained
        assert re.fullmatch(r"  confidence: \d+% from words held .*, rerank 0\.\d+", explained[-1]), explained  # and what the confidence read
    assert "None" not in proc.stdout + proc.stderr and "bm25:query" not in proc.stdout + proc.stderr
    assert "Timings:" in proc.stderr and "qmd://" not in proc.stderr  # the explanations are under the hits, not after them
    plain = run_qmd("query", "restore the database dump", "-n", "3", env=env).stdout
    assert re.sub(r"^(Explain: .*|  .*: rank \d+, \+\d\.\d{4}|  rerank: .*|  score: .*|  confidence: .*)\n", "", proc.stdout, flags=re.MULTILINE) == plain
    off = run_qmd("query", "restore the database dump", "--explain", "--no-rerank", "-n", "1", env=env)
    assert "  rerank: off (--no-rerank)\n  score: 100% = 1 / fused rank 1\n" in off.stdout
    rows = json.loads(run_qmd("query", "restore the database dump", "--explain", "--json", "-n", "1", env=env).stdout)
    assert set(rows[0]["explain"]) == {"lists", "bonus", "rrf", "rrf_rank", "rerank", "blend_weight", "score", "confidence"}  # the keys kept, and the confidence's evidence
    assert set(rows[0]["explain"]["confidence"]) >= {"coverage", "first", "rerank"}
    assert all(set(x) == {"list", "label", "rank", "rrf"} for x in rows[0]["explain"]["lists"])  # a readable label added


def test_vsearch_expand_fuses_vector_lists_only(store: qmd.Store, models: dict[str, Path]) -> None:
    store.embed()
    result = store.query("roll back a deploy", keyword=False, rerank=False, explain=True)
    assert result.stages.bm25 == 0 and result.stages.vector >= 1
    assert all(x["list"].startswith(("vec", "hyde")) for h in result.hits for x in h.explain["lists"])
    assert all(s["type"] != "lex" for s in result.searches)


@pytest.mark.slow
@pytest.mark.skipif(not (BENCH_DATA / "qmd-eval" / "eval-docs").is_dir(), reason=f"qmd-eval fixture not found under {BENCH_DATA} (set QMD_BENCH_DATA)")
def test_hybrid_on_the_original_fixture_with_minilm(tmp_path: Path, minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """End to end with the imported MiniLM: RRF of BM25 and vectors on qmd-eval (no reranker here)."""
    monkeypatch.setenv("QMD_EMBED_MODEL", str(minilm_gguf))
    monkeypatch.setenv("QMD_RERANK_MODEL", str(tmp_path / "none.gguf"))
    monkeypatch.setenv("QMD_GENERATE_MODEL", str(tmp_path / "none.gguf"))
    store = qmd.Store(tmp_path / "eval.sqlite")
    store.add_collection(BENCH_DATA / "qmd-eval" / "eval-docs", name="eval-docs")
    store.embed()
    deep = [json.loads(line) for line in (BENCH_DATA / "qmd-eval" / "eval-deep-research.jsonl").read_text().splitlines() if line.strip()]
    firsts = [store.query(q["query"], limit=5).hits[0].path for q in deep]
    hit1 = sum(1 for q, path in zip(deep, firsts) if q["expected_doc"] in path)
    assert hit1 >= 23, f"hybrid hit@1 {hit1}/25"
    example = json.loads((BENCH_DATA / "qmd-eval" / "example.json").read_text())["queries"]
    for q in example:
        paths = [h.path for h in store.query(q["query"], limit=5).hits]
        assert any(f in paths[0] for f in q["expected_files"]), (q["query"], paths[:3])  # MRR = 1.0


def test_repeated_sub_queries_are_embedded_and_searched_once(store: qmd.Store, models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    """The same vec/hyde/lex text (case, spacing and punctuation aside) is embedded and searched
    once; each line still counts as its own list in fusion. The distinct vector texts are
    embedded in one call and searched in one `nearest_many` (one pass over the vectors)."""
    from qmd.llm.embedder import Embedder

    store.embed()
    calls = {"embedded": 0, "embed calls": 0, "nearest": 0, "passes": 0}
    backend = type(store.backend)
    real_embed, real_many = Embedder.embed, backend.nearest_many

    def embed(self, texts):  # type: ignore[no-untyped-def]
        calls["embedded"] += len(texts)
        calls["embed calls"] += 1
        return real_embed(self, texts)

    def many(self, model, queries, *args, **kwargs):  # type: ignore[no-untyped-def]
        calls["nearest"] += len(queries)
        calls["passes"] += 1
        return real_many(self, model, queries, *args, **kwargs)

    def alone(self, *args, **kwargs):  # type: ignore[no-untyped-def]
        raise AssertionError("a sub-query searched on its own")

    monkeypatch.setattr(Embedder, "embed", embed)
    monkeypatch.setattr(backend, "nearest_many", many)
    monkeypatch.setattr(backend, "nearest_documents", alone)
    lines = "vec: bring the database back\nvec: Bring the database  back!\nlex: pg_restore\nhyde: bring the database back\nlex: PG_RESTORE.\nvec: restore a dump"
    result = store.query(lines, rerank=False, explain=True, limit=10)
    assert calls == {"embedded": 3, "embed calls": 1, "nearest": 3, "passes": 1}  # 4 vector lines, 3 distinct inputs (a hyde line is a passage)
    assert (result.stages.vector, result.stages.bm25) == (3, 1)
    named = {x["list"] for h in result.hits for x in h.explain["lists"]}
    assert {"vec#1", "vec#2", "lex#3", "hyde#4", "lex#5", "vec#6"} <= named
    for h in result.hits:  # a repeated line ranks its documents where the first put them
        ranks = {x["list"]: x["rank"] for x in h.explain["lists"]}
        assert ranks.get("vec#1") == ranks.get("vec#2") and ranks.get("lex#3") == ranks.get("lex#5")

    calls.update({k: 0 for k in calls})
    from qmd.store.models import Models

    monkeypatch.setattr(Models, "expand", lambda self, q, g=None: [SubQuery("vec", q.upper() + "?"), SubQuery("lex", q), SubQuery("vec", "other words")])
    plain = store.query("restore the database", rerank=False, expand=True)
    assert calls == {"embedded": 2, "embed calls": 1, "nearest": 2, "passes": 1}  # the expansion repeating the question shares its list
    assert (plain.stages.vector, plain.stages.bm25) == (2, 1)
