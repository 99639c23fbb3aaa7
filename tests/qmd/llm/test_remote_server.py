"""Remote model endpoints against a real OpenAI-compatible server: llama-cpp-python's own
(`python -m llama_cpp.server`) serving the tiny test models and MiniLM on loopback.

Parity with in-process embedding of the same file, token counts from the server's
tokenizer, index + embed + vsearch + query end to end (library and CLI), re-embedding when
the endpoint changes, a server that dies, another model under the same URI (wrong dims), an
API key, grammar-constrained expansion, and doctor's check. Every server is stopped by its
test or at the end of the session.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

import qmd
from qmd.core.errors import QmdError
from qmd.llm.embedder import Embedder
from qmd.llm.generator import Generator
from qmd.llm.gguf_info import model_info
from qmd.llm.models import parse_remote
from qmd.llm.remote.embedder import RemoteEmbedder
from qmd.llm.remote.generator import RemoteGenerator
from qmd.llm.remote.http import EndpointError
from tests.support.paths import BENCH_DATA
from tests.qmd.llm.remote_support import LlamaServer, llama_server, server_available
from tests.support import tinybert
from tests.support.run import run_qmd

pytestmark = pytest.mark.slow

TEXTS = [
    "how do we undo a bad release", "flip the load balancer back to blue", "zzz unknownword, rollback. 東京!", "a",
    "Nightly pg_dump to object storage.\n\nRun pg_restore against a fresh database.", "x " * 60, "émigré naïve café ½ ünïcödé",
]


def ctx_args(model: Path) -> list[str]:
    """A context no larger than the model's training context, one batch holding all of it (as qmd loads it)."""
    n = str(min(model_info(model).context_length, 2048))
    return ["--n_ctx", n, "--n_batch", n, "--n_ubatch", n]


@pytest.fixture(scope="session")
def embed_server(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server_available()
    with llama_server(tiny_models["embed"], tmp_path_factory.mktemp("srv") / "embed.log", "--model_alias", "tiny", *ctx_args(tiny_models["embed"])) as server:
        yield server


@pytest.fixture(scope="session")
def llama_gen_server(tiny_models: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Iterator[LlamaServer]:
    server_available()
    with llama_server(tiny_models["llama"], tmp_path_factory.mktemp("srv") / "llama.log", "--model_alias", "tiny-llama", "--n_ctx", "512", embedding=False) as server:
        yield server


def write_config(path: Path, embed: object, **roles: object) -> Path:
    """Set the config's models (the rest of the file, its collections, kept)."""
    import yaml

    path.parent.mkdir(parents=True, exist_ok=True)
    raw = (yaml.safe_load(path.read_text()) or {}) if path.exists() else {}
    raw["models"] = {"embed": embed, **roles}
    path.write_text(yaml.safe_dump(raw, sort_keys=False))
    return path


def remote_embed(server: LlamaServer, **options: object) -> dict[str, object]:
    """The config mapping of the tiny embedder served remotely, chunked as the local file is (64 tokens)."""
    return {"uri": server.uri("tiny"), "family": "bert", "context": 64, **options}


def cosine(a: list[float], b: list[float]) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


# --- parity ------------------------------------------------------------------------------------


def test_remote_vectors_match_in_process_embedding(embed_server: LlamaServer, tiny_models: dict[str, Path]) -> None:
    remote = RemoteEmbedder(parse_remote(embed_server.uri("tiny"), {"batch": 3}))
    local = Embedder(tiny_models["embed"], 1)
    ours, theirs = remote.embed(TEXTS), local.embed(TEXTS)
    worst = min(cosine(a, b) for a, b in zip(ours, theirs))
    print(f"\ntiny BERT: remote vs in-process, {len(TEXTS)} texts, worst cosine {worst:.6f}")
    assert worst >= 0.999 and remote.dims == local.dims == 32
    assert all(abs(float(np.linalg.norm(v)) - 1.0) < 1e-6 for v in ours)  # the server's raw vectors, normalised here
    q = "how do we undo a bad release"
    assert cosine(remote.embed_query(q), local.embed_query(q)) >= 0.999
    local.close()
    remote.close()


def test_server_token_counts_match_the_local_tokenizer(embed_server: LlamaServer, tiny_models: dict[str, Path]) -> None:
    remote = RemoteEmbedder(parse_remote(embed_server.uri("tiny")))
    local = Embedder(tiny_models["embed"], 1)
    assert [remote.count_tokens(t) for t in TEXTS] == [local.count_tokens(t) for t in TEXTS]
    assert remote.tokenizer.kind == "llama-cpp-python"
    cut = remote.fit("rollback release " * 40, 20)
    assert 14 <= local.count_tokens(cut) <= 20  # cut once by the text's density: under the limit, near it
    local.close()


@pytest.mark.skipif(not (BENCH_DATA / "minilm-reference" / "reference.json").exists(), reason="MiniLM reference vectors not found (set QMD_BENCH_DATA)")
def test_minilm_served_remotely_matches_in_process_and_sentence_transformers(minilm_gguf: Path, tmp_path: Path) -> None:
    reference = json.loads((BENCH_DATA / "minilm-reference" / "reference.json").read_text())
    local = Embedder(minilm_gguf)  # QMD_THREADS, 1 in the suite, as the server below
    with llama_server(minilm_gguf, tmp_path / "minilm.log", "--model_alias", "all-minilm", *ctx_args(minilm_gguf)) as server:
        remote = RemoteEmbedder(parse_remote(server.uri("all-minilm")))
        vs_local, vs_st, count = 1.0, 1.0, 0
        for group, texts in reference["texts"].items():
            ours, mine = remote.embed(texts), local.embed(texts)
            for text, r, l, st in zip(texts, ours, mine, reference["vectors"][group]):
                vs_local = min(vs_local, cosine(r, l))
                vs_st = min(vs_st, cosine(r, st))
                count += 1
        counts_equal = all(remote.count_tokens(t) == local.count_tokens(t) for ts in reference["texts"].values() for t in ts)
    print(f"\nMiniLM: {count} texts, remote vs in-process worst cosine {vs_local:.6f}, remote vs sentence-transformers {vs_st:.6f}")
    assert count == 68 and vs_local >= 0.999 and vs_st >= 0.999 and counts_equal
    local.close()


# --- index, embed, vsearch, query ---------------------------------------------------------------


def test_index_embed_vsearch_and_query_through_the_server(embed_server: LlamaServer, tiny_models: dict[str, Path], tmp_path: Path, notes: Path) -> None:
    remote_cfg = write_config(tmp_path / "remote" / "index.yml", remote_embed(embed_server))
    local_cfg = write_config(tmp_path / "local" / "index.yml", str(tiny_models["embed"]))
    results = {}
    for name, cfg in (("remote", remote_cfg), ("local", local_cfg)):
        with qmd.Store(cfg.parent / "index.sqlite", cfg) as store:
            store.add_collection(str(notes), name="notes")
            store.update()
            seen: list[qmd.EmbedProgress] = []
            report = store.embed(progress=seen.append)
            assert report.documents == 4 and report.chunks >= 4 and seen and (seen[-1].documents_done, seen[-1].documents) == (4, 4)
            assert seen[-1].chunks_done == seen[-1].chunks == report.chunks
            assert store.embed().documents == 0  # nothing left: no request, no write
            hits = store.vsearch("undo a bad release: flip the load balancer", limit=4).hits
            answer = store.query("undo a bad release", rerank=False, expand=False)
            results[name] = ([(h.uri, round(h.score, 3)) for h in hits], [h.uri for h in answer.hits], store.vector_status())
    remote, local = results["remote"], results["local"]
    assert remote[0] == local[0] and remote[1] == local[1]  # the same ranking and scores as in-process
    assert remote[2].chunks == local[2].chunks and remote[2].fingerprint != local[2].fingerprint  # same chunks, another vector space
    assert remote[2].model == "tiny"


def test_the_cli_embeds_and_searches_through_the_server(embed_server: LlamaServer, tmp_path: Path, notes: Path, isolated_home: Path) -> None:
    paths = qmd.resolve_index("index")
    write_config(paths.config_path, remote_embed(embed_server))

    def run(*args: str) -> subprocess.CompletedProcess[str]:
        done = run_qmd(*args)
        assert done.returncode == 0, (args, done.stdout, done.stderr)
        return done

    run("collection", "add", str(notes), "--name", "notes")
    embedded = run("embed")
    assert "4" in embedded.stdout + embedded.stderr
    hits = json.loads(run("vsearch", "flip the load balancer back to blue", "--json").stdout)
    assert hits and hits[0]["file"].endswith("deploy.md")
    status = run("status").stdout
    assert embed_server.uri("tiny") in status


def test_switching_endpoints_re_embeds(embed_server: LlamaServer, tmp_path: Path, notes: Path) -> None:
    cfg = write_config(tmp_path / "index.yml", remote_embed(embed_server))
    with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
        store.add_collection(str(notes), name="notes")
        store.embed()
        first = store.vector_status()
        assert first.pending_documents == 0
    # The same server under another name is another endpoint: its vectors are not assumed comparable.
    other = remote_embed(embed_server)
    other["uri"] = str(other["uri"]).replace("127.0.0.1", "localhost")
    write_config(cfg, other)
    with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
        second = store.vector_status()
        assert second.fingerprint != first.fingerprint and second.pending_documents == 4 and second.chunks == 0
        assert store.embed().documents == 4
        models = store.check(quick=True).vector_models
        assert len(models) == 2 and all(n == 4 for _, _, n in models)
    # Back to the first endpoint, with options that only change how it is reached: its
    # vectors were kept, nothing to embed.
    write_config(cfg, remote_embed(embed_server, timeout_s=5, retries=0, batch=2))
    with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
        back = store.vector_status()
        assert back.fingerprint == first.fingerprint and back.pending_documents == 0 and store.embed().documents == 0


# --- failures ------------------------------------------------------------------------------------


def test_a_server_that_dies_fails_closed(tiny_models: dict[str, Path], tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    server = LlamaServer(tiny_models["embed"], tmp_path / "dies.log", "--model_alias", "tiny", *ctx_args(tiny_models["embed"]))
    try:
        cfg = write_config(tmp_path / "index.yml", remote_embed(server, retries=1, timeout_s=10))
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            store.add_collection(str(notes), name="notes")
            store.embed()
            assert store.vsearch("rollback", limit=2).hits
            server.stop()
            # A local model file of the same weights is at hand; it is never used instead.
            monkeypatch.setenv("QMD_EMBED_MODEL", str(tiny_models["embed"]))
            with pytest.raises(EndpointError) as exc:
                store.vsearch("rollback", limit=2)
            assert "does not answer" in exc.value.message and "never falls back to a local model" in str(exc.value.hint)
            with pytest.raises(EndpointError):
                store.query("how to roll back", rerank=False, expand=False)
            (notes / "new.md").write_text("# New\n\nA note written while the server is down.\n")
            store.update()
            with pytest.raises(EndpointError):
                store.embed()
            vs = store.vector_status()
            assert vs.pending_documents == 1 and vs.embedded_documents == 4  # nothing half-written
            assert store.search("written while the server is down").__len__() == 1  # keyword search is unaffected
    finally:
        server.stop()


def test_another_model_under_the_same_uri_is_refused(tiny_models: dict[str, Path], tmp_path: Path, notes: Path) -> None:
    wide = tinybert.write_tiny_bert(tmp_path / "src-wide", seed=13, hidden=48)
    from qmd.llm.convert import import_bert

    wide_gguf = import_bert(wide, tmp_path / "wide.gguf", "f32", name="tiny-wide").path
    with llama_server(tiny_models["embed"], tmp_path / "a.log", "--model_alias", "tiny", *ctx_args(tiny_models["embed"])) as first:
        port = first.port
        cfg = write_config(tmp_path / "index.yml", remote_embed(first))
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            store.add_collection(str(notes), name="notes")
            store.embed()
    with llama_server(wide_gguf, tmp_path / "b.log", "--model_alias", "tiny", *ctx_args(wide_gguf), port=port):
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            with pytest.raises(QmdError) as exc:
                store.vsearch("rollback")
            assert "returned 48-dim vectors, but the index's vectors for this endpoint and model have 32" in exc.value.message
            assert "dims: 48" in str(exc.value.hint)
            (notes / "new.md").write_text("# New\n\nAnother note.\n")
            store.update()
            with pytest.raises(QmdError, match="48-dim"):
                store.embed()
            assert store.vector_status().pending_documents == 1
            probe = store.probe_model("embed")
            assert probe.status == "fail" and "48-dim" in probe.detail
        # Pinning the new model's dims names a new vector space: everything is embedded again.
        write_config(cfg, remote_embed(first, dims=48))
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            assert store.vector_status().pending_documents == 5
            assert store.embed().documents == 5
            # served from the new space, the new note with it (a random tiny model ranks nothing in particular:
            # with section units the runbook's sections outscore it on some seeds)
            assert any(h.uri.endswith("new.md") for h in store.vsearch("another note", limit=10).hits)


def test_an_api_key_from_the_named_variable(tiny_models: dict[str, Path], tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with llama_server(tiny_models["embed"], tmp_path / "key.log", "--model_alias", "tiny", "--api_key", "s3cret-key", *ctx_args(tiny_models["embed"])) as server:
        cfg = write_config(tmp_path / "index.yml", remote_embed(server, api_key_env="QMD_TEST_GPU_KEY"))
        monkeypatch.delenv("QMD_TEST_GPU_KEY", raising=False)
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            store.add_collection(str(notes), name="notes")
            with pytest.raises(EndpointError) as exc:
                store.embed()
            assert exc.value.status == 401 and "$QMD_TEST_GPU_KEY" in str(exc.value.hint) and "is not set" in str(exc.value.hint)
            assert store.vector_status().embedded_documents == 0
        monkeypatch.setenv("QMD_TEST_GPU_KEY", "s3cret-key")
        with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
            assert store.embed().documents == 4
        index_bytes = (tmp_path / "index.sqlite").read_bytes()
        assert b"s3cret-key" not in index_bytes and b"QMD_TEST_GPU_KEY" not in index_bytes  # never stored in the index


# --- generate ------------------------------------------------------------------------------------

LINE = re.compile(r"(lex|vec|hyde): [^\n\r: ][^\n\r]{0,150}")


@pytest.mark.parametrize("api", ["completions", "chat"])
def test_expansion_through_the_server_obeys_the_grammar(llama_gen_server: LlamaServer, api: str) -> None:
    generator = RemoteGenerator(parse_remote(llama_gen_server.uri("tiny-llama"), {"api": api, "tuned": True}))
    route, body = generator.body("how do we undo a bad release")
    answer = generator.endpoint.post(route, body)
    choice = answer["choices"][0]
    text = choice["message"]["content"] if api == "chat" else choice["text"]
    lines = text.split("\n")
    assert lines[-1] == "" or choice["finish_reason"] == "length"
    assert all(LINE.fullmatch(line) for line in lines[:-1]) and lines[:-1], text  # only the grammar's lines: a random model obeys it
    assert generator.grammar and generator.expand("postgres restore")


def test_query_expands_through_the_server(llama_gen_server: LlamaServer, embed_server: LlamaServer, tiny_models: dict[str, Path], tmp_path: Path, notes: Path) -> None:
    gen = {"uri": llama_gen_server.uri("tiny-llama"), "api": "completions"}
    cfg = write_config(tmp_path / "index.yml", remote_embed(embed_server), generate=gen)
    with qmd.Store(tmp_path / "index.sqlite", cfg) as store:
        store.add_collection(str(notes), name="notes")
        store.embed()
        result = store.query("undo a bad release", rerank=False, expand=True, explain=True)
        assert "lines" in str(result.stages.expand), result.stages
        assert (result.stages.vector or 0) >= 1
        again = store.query("undo a bad release", rerank=False, expand=True)
        assert [h.uri for h in again.hits] == [h.uri for h in result.hits]  # the expansion came from the cache
    local = Generator(tiny_models["llama"], 1)
    assert local.tuned and RemoteGenerator(parse_remote(llama_gen_server.uri("tiny-llama"), {"tuned": True})).tuned


# --- doctor --------------------------------------------------------------------------------------


def test_doctor_checks_the_endpoint(embed_server: LlamaServer, tiny_models: dict[str, Path], notes: Path, tmp_path: Path) -> None:
    from doctor.context import Context
    from doctor.models import check

    paths = qmd.resolve_index("index")
    write_config(paths.config_path, remote_embed(embed_server))
    with qmd.open_index("index") as store:
        store.add_collection(str(notes), name="notes")
        store.embed()
    results = {r.name: r for r in check(Context.create("index"))}
    embed = results["embed model"]
    assert embed.status.value == "ok", embed
    assert "answers" in embed.detail and "serves tiny" in embed.detail and "32-dim vectors, as the index's vectors for it" in embed.detail
    assert results["vectors [index]"].status.value == "ok"
    # A name the server does not serve: llama-cpp-python answers any name, so doctor warns.
    write_config(paths.config_path, remote_embed(embed_server) | {"uri": embed_server.uri("embeddinggemma")})
    embed = {r.name: r for r in check(Context.create("index"))}["embed model"]
    assert embed.status.value == "warn" and "lists only 'tiny'" in embed.detail
    # Nothing listening there.
    dead = remote_embed(embed_server) | {"uri": "openai:http://127.0.0.1:9/v1#tiny"}
    write_config(paths.config_path, dead)
    embed = {r.name: r for r in check(Context.create("index"))}["embed model"]
    assert embed.status.value == "fail" and "does not answer" in embed.detail and embed.fix
