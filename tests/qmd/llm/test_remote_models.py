"""Remote model endpoints (`openai:BASE_URL#MODEL`) against a scripted fake server: URI and
options, no request before use, retries, timeouts, keys, answer checks, the tokenizer
dialects, the rerank shape llama-cpp-python's server lacks, expansion's grammar, the probe."""

from __future__ import annotations

import json
import math
import os
import time
from pathlib import Path
from typing import Any

import pytest

import qmd
from qmd.core.errors import QmdError
from qmd.llm.models import RemoteSpec, parse_remote, resolve_model
from qmd.llm.remote.embedder import RemoteEmbedder, guess_family
from qmd.llm.remote.generator import RemoteGenerator
from qmd.llm.remote.http import EndpointError
from qmd.llm.remote.probe import probe, serves
from qmd.llm.remote.reranker import RemoteReranker
from qmd.llm.remote.tokens import estimate_tokens
from qmd.llm.reranker import sigmoid
from tests.qmd.llm.remote_support import FakeServer, Reply, fake_server, free_port
from tests.support.run import run_qmd


def vectors(inputs: list[str], dims: int = 4) -> dict[str, Any]:
    """An /embeddings answer: a deterministic unnormalised vector per input, in reverse order."""
    data = [{"object": "embedding", "index": i, "embedding": [float(len(t) + 1), float(i + 1), 2.0, 0.5][:dims] + [1.0] * (dims - 4)} for i, t in enumerate(inputs)]
    return {"object": "list", "data": list(reversed(data)), "model": "fake"}


def embeddings_route(dims: int = 4) -> Any:
    def route(body: dict[str, Any]) -> Reply:
        inputs = body["input"] if isinstance(body["input"], list) else [body["input"]]
        return 200, {}, vectors(inputs, dims)

    return route


def spec(server: FakeServer, model: str = "fake", **options: object) -> RemoteSpec:
    return parse_remote(server.uri(model), options)


# --- URIs and options --------------------------------------------------------------------


@pytest.mark.parametrize(
    ("uri", "base", "model"),
    [
        ("openai:http://gpu-box:8080/v1#embeddinggemma", "http://gpu-box:8080/v1", "embeddinggemma"),
        ("openai:HTTP://GPU-Box:11434/v1/#nomic-embed-text:latest", "http://gpu-box:11434/v1", "nomic-embed-text:latest"),
        ("openai:https://api.example.com/v1#BAAI/bge-m3", "https://api.example.com/v1", "BAAI/bge-m3"),
        ("openai:http://[::1]:8080#m", "http://[::1]:8080", "m"),
    ],
)
def test_remote_uris(uri: str, base: str, model: str) -> None:
    parsed = parse_remote(uri)
    assert (parsed.base_url, parsed.model) == (base, model)
    assert parsed.uri == f"openai:{base}#{model}" and parsed.identity == parsed.uri


@pytest.mark.parametrize(
    ("uri", "said"),
    [
        ("openai:gpu-box:8080/v1#m", "bad remote model URI"),
        ("openai:http://gpu-box/v1", "bad remote model URI"),
        ("openai:http://gpu-box/v1#", "bad remote model URI"),
        ("openai:ftp://gpu-box/v1#m", "bad remote model URI"),
        ("openai:http://gpu-box:99999/v1#m", "bad remote model URI"),
        ("openai:http://gpu-box/v1?key=1#m", "bad remote model URI"),
        ("openai:http://me:sk-secret@gpu-box/v1#m", "holds credentials"),
    ],
)
def test_bad_remote_uris(uri: str, said: str) -> None:
    with pytest.raises(QmdError) as exc:
        parse_remote(uri)
    assert said in exc.value.message and exc.value.hint
    assert "sk-secret" not in str(exc.value.hint)


@pytest.mark.parametrize(
    ("options", "said"),
    [
        ({"api_key": "X"}, "unknown option 'api_key' (did you mean 'api_key_env'?)"),
        ({"timeout_s": -1}, "timeout_s must be a positive float"),
        ({"retries": 1.5}, "retries must be a non-negative int"),
        ({"dims": True}, "dims must be a positive int"),
        ({"family": "llama"}, "family must be one of bert, embeddinggemma, qwen3-embedding"),
        ({"api": "responses"}, "api must be one of chat, completions"),
        ({"api_key_env": "sk-abc123"}, "api_key_env must name an environment variable"),
    ],
)
def test_bad_remote_options(options: dict[str, object], said: str) -> None:
    with pytest.raises(QmdError) as exc:
        parse_remote("openai:http://h:1/v1#m", options, "models.embed")
    assert said in exc.value.message, exc.value.message


def test_options_and_identity() -> None:
    s = parse_remote("openai:http://h:1/v1#m", {"timeout_s": 5, "retries": 0, "batch": 8, "api_key_env": "GPU_KEY", "dims": 384})
    assert (s.timeout_s, s.retries, s.batch, s.api_key_env, s.dims) == (5.0, 0, 8, "GPU_KEY", 384)
    # Endpoint, model and pinned dims name the vector space; how it is reached does not.
    assert s.identity == "openai:http://h:1/v1#m@384"
    assert parse_remote("openai:http://h:1/v1#m", {"timeout_s": 9}).identity == parse_remote("openai:http://h:1/v1/#m").identity
    assert parse_remote("openai:http://h:2/v1#m").identity != parse_remote("openai:http://h:1/v1#m").identity


def test_family_from_the_name_or_the_config() -> None:
    assert [guess_family(m) for m in ("embeddinggemma:300m", "Qwen3-Embedding-0.6B", "all-minilm", "nomic-embed-text", "text-embedding-3-small")] == [
        "embeddinggemma", "qwen3-embedding", "bert", "bert", "bert"]
    gemma = RemoteEmbedder(parse_remote("openai:http://h:1/v1#embeddinggemma"))
    assert gemma.family.query("x") == "task: search result | query: x" and gemma.family.chunk_tokens == 900 and gemma.n_ctx == 2048
    e5 = RemoteEmbedder(parse_remote("openai:http://h:1/v1#multilingual-e5-small"))
    assert e5.family.query("x") == "query: x" and e5.family.chunk_tokens == 256 and e5.n_ctx == 512
    pinned = RemoteEmbedder(parse_remote("openai:http://h:1/v1#mystery", {"family": "embeddinggemma", "context": 1024}))
    assert pinned.family.name == "embeddinggemma" and pinned.n_ctx == 1024 and pinned.family.chunk_tokens == 900
    qwen = RemoteEmbedder(parse_remote("openai:http://h:1/v1#qwen3-embedding:0.6b"))
    assert qwen.family.name == "qwen3-embedding"


def test_the_config_mapping_form(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", "/somewhere/local.gguf")  # the config wins
    config = tmp_path / "index.yml"
    config.write_text("models:\n  embed:\n    uri: openai:http://gpu-box:8080/v1#embeddinggemma\n    api_key_env: GPU_BOX_KEY\n    timeout_s: 20\n  rerank: openai:http://gpu-box:8080/v1#bge-reranker\n")
    with qmd.Store(tmp_path / "index.sqlite", config) as store:
        ref = store.model("embed")
        assert ref.is_remote and ref.available and ref.source == "config"
        assert (ref.remote.api_key_env, ref.remote.timeout_s) == ("GPU_BOX_KEY", 20.0)
        status = {m.role: m for m in store.models()}
        assert status["embed"].path == "openai:http://gpu-box:8080/v1#embeddinggemma" and status["embed"].available
        assert status["rerank"].spec == "openai:http://gpu-box:8080/v1#bge-reranker"
    with pytest.raises(QmdError, match="has no uri"):
        resolve_model("embed", {"embed": {"api_key_env": "K"}})
    with pytest.raises(QmdError, match="for remote models only"):
        resolve_model("embed", {"embed": {"uri": "/x/model.gguf", "timeout_s": 3}})
    with pytest.raises(QmdError, match="served remotely"):
        from qmd.llm.models import require_local

        require_local(resolve_model("embed", {"embed": "openai:http://h:1/v1#m"}))


# --- no request before use; what a request looks like ------------------------------------------


def test_nothing_is_asked_before_a_role_is_used(tmp_path: Path, notes: Path) -> None:
    with fake_server({("POST", "/v1/embeddings"): embeddings_route()}) as fake:
        config = tmp_path / "index.yml"
        config.write_text(f"models:\n  embed: {fake.uri()}\n  rerank: {fake.uri('r')}\n  generate: {fake.uri('g')}\n")
        with qmd.Store(tmp_path / "index.sqlite", config) as store:
            store.add_collection(str(notes), name="notes")
            store.status()
            store.models()
            vs = store.vector_status()
            assert vs.fingerprint and vs.model == "fake" and vs.pending_documents == 4
            store.embedder(), store.reranker(), store.generator()
            assert store.search("rollback")
            assert fake.requests == []
        env = {**os.environ, "INDEX_PATH": str(tmp_path / "index.sqlite"), "QMD_CONFIG_DIR": str(tmp_path)}
        done = run_qmd("status", env=env, timeout=60)
        assert done.returncode == 0, done.stderr
        assert fake.requests == []
        assert "openai:" in done.stdout


def test_embed_requests_batches_and_normalises() -> None:
    with fake_server({("POST", "/v1/embeddings"): embeddings_route(), ("POST", "/tokenize"): lambda b: (200, {}, {"tokens": list(range(len(b["content"].split())))})}) as fake:
        embedder = RemoteEmbedder(spec(fake, batch=2))
        texts = ["a", "bb", "ccc", "dddd", "eeeee"]
        out = embedder.embed(texts)
        assert len(out) == 5 and embedder.dims == 4
        assert all(abs(math.sqrt(sum(x * x for x in v)) - 1.0) < 1e-9 for v in out)
        raw = [len(t) + 1.0 for t in texts]
        assert [round(v[0] / v[2], 6) for v in out] == [round(r / 2.0, 6) for r in raw]  # in input order, not the answer's
        posts = [b for m, p, _, b in fake.requests if p == "/v1/embeddings"]
        assert [len(b["input"]) for b in posts] == [2, 2, 1] and all(b["model"] == "fake" for b in posts)
        # One kept-alive connection: the server saw no Authorization without a configured key.
        assert all("authorization" not in h for _, _, h, _ in fake.requests)
        assert embedder.count_tokens("one two three") == 3 and embedder.tokenizer.kind == "llama.cpp"
        embedder.close()


def test_retries_with_backoff_then_success() -> None:
    calls: list[float] = []

    def flaky(body: dict[str, Any]) -> Reply:
        calls.append(time.monotonic())
        if len(calls) == 1:
            return 503, {}, {"error": {"message": "loading model"}}
        if len(calls) == 2:
            return 429, {"Retry-After": "1"}, {"error": "slow down"}
        return 200, {}, vectors(body["input"])

    with fake_server({("POST", "/v1/embeddings"): flaky}) as fake:
        out = RemoteEmbedder(spec(fake)).embed(["x"])
        assert len(out) == 1 and len(calls) == 3
        assert 0.4 <= calls[1] - calls[0] < 3 and 0.9 <= calls[2] - calls[1] < 3  # 0.5 s backoff, then Retry-After 1 s


def test_final_errors_are_not_retried_and_say_what_the_server_said() -> None:
    with fake_server({("POST", "/v1/embeddings"): lambda b: (400, {}, {"error": {"message": "input is too large to process"}})}) as fake:
        with pytest.raises(EndpointError) as exc:
            RemoteEmbedder(spec(fake)).embed(["x"])
        assert exc.value.status == 400 and "input is too large to process" in exc.value.message and fake.paths() == ["/v1/embeddings"]
    with fake_server({("POST", "/v1/embeddings"): lambda b: (500, {}, b"<html>boom</html>")}) as fake:
        with pytest.raises(EndpointError, match="answered 500: <html>boom</html>"):
            RemoteEmbedder(spec(fake, retries=1)).embed(["x"])
        assert fake.paths() == ["/v1/embeddings"] * 2  # bounded: 1 + retries attempts


def test_a_slow_server_times_out_within_the_bound() -> None:
    with fake_server({("POST", "/v1/embeddings"): embeddings_route()}) as fake:
        fake.delay["/v1/embeddings"] = 3.0
        started = time.monotonic()
        with pytest.raises(EndpointError) as exc:
            RemoteEmbedder(spec(fake, timeout_s=0.3, retries=1)).embed(["x"])
        took = time.monotonic() - started
        assert "did not answer within 0.3 s (2 attempts" in exc.value.message and "timeout_s" in str(exc.value.hint)
        assert took < 2.5, took  # 2 × 0.3 s + 0.5 s backoff, not the server's 3 s


def test_nothing_listening_fails_closed() -> None:
    port = free_port()
    embedder = RemoteEmbedder(parse_remote(f"openai:http://127.0.0.1:{port}/v1#m", {"retries": 1}))
    with pytest.raises(EndpointError) as exc:
        embedder.embed_query("anything")
    assert exc.value.status is None and "does not answer" in exc.value.message and "never falls back to a local model" in str(exc.value.hint)


def test_the_key_comes_from_the_named_variable(monkeypatch: pytest.MonkeyPatch) -> None:
    def guarded(body: dict[str, Any]) -> Reply:
        auth = fake.requests[-1][2].get("authorization")
        if auth != "Bearer s3cret-key":
            return 401, {}, {"error": {"message": "Invalid API Key", "type": "invalid_request_error"}}
        return 200, {}, vectors(body["input"])

    with fake_server({("POST", "/v1/embeddings"): guarded}) as fake:
        monkeypatch.delenv("QMD_TEST_GPU_KEY", raising=False)
        with pytest.raises(EndpointError) as exc:
            RemoteEmbedder(spec(fake, api_key_env="QMD_TEST_GPU_KEY")).embed(["x"])
        assert exc.value.status == 401 and "Invalid API Key" in exc.value.message
        assert "$QMD_TEST_GPU_KEY" in str(exc.value.hint) and "is not set" in str(exc.value.hint)
        with pytest.raises(EndpointError, match="401") as exc:
            RemoteEmbedder(spec(fake)).embed(["x"])
        assert "name it with api_key_env" in str(exc.value.hint)
        monkeypatch.setenv("QMD_TEST_GPU_KEY", "wrong")
        with pytest.raises(EndpointError) as exc:
            RemoteEmbedder(spec(fake, api_key_env="QMD_TEST_GPU_KEY")).embed(["x"])
        assert "refused the key in $QMD_TEST_GPU_KEY" in str(exc.value.hint) and "wrong" not in str(exc.value)
        monkeypatch.setenv("QMD_TEST_GPU_KEY", "s3cret-key")
        assert len(RemoteEmbedder(spec(fake, api_key_env="QMD_TEST_GPU_KEY")).embed(["x"])) == 1


@pytest.mark.parametrize(
    ("answer", "said"),
    [
        ({"data": []}, "answered 0 vectors for 1 inputs"),
        ({"nothing": 1}, "answered no vectors for 1 inputs"),
        ({"data": [{"index": 0, "embedding": "AAAA"}]}, "answered no vector"),
        ({"data": [{"index": 0, "embedding": [1.0, float("nan")]}]}, "NaN or infinite"),
        ({"data": [{"index": 0, "embedding": [0.0, 0.0]}]}, "zero vector"),
        ({"data": [{"index": 0, "embedding": [1.0, 2.0]}]}, "returned 2-dim vectors, but models.embed.dims says 3"),
    ],
)
def test_bad_embedding_answers_store_nothing(answer: dict[str, Any], said: str) -> None:
    body = json.dumps(answer).replace("NaN", "NaN").encode()
    with fake_server({("POST", "/v1/embeddings"): lambda b: (200, {}, body)}) as fake:
        with pytest.raises(QmdError) as exc:
            RemoteEmbedder(spec(fake, dims=3) if "dims" in said else spec(fake)).embed(["x"])
        assert said in exc.value.message, exc.value.message


def test_dims_against_the_index() -> None:
    with fake_server({("POST", "/v1/embeddings"): embeddings_route(dims=6)}) as fake:
        with pytest.raises(QmdError) as exc:
            RemoteEmbedder(spec(fake), known_dims=4).embed_query("x")
        assert "returned 6-dim vectors, but the index's vectors for this endpoint and model have 4" in exc.value.message
        assert "dims: 6" in str(exc.value.hint)
        asked = len(fake.requests)
        assert RemoteEmbedder(spec(fake, dims=6), known_dims=None).dims == 6  # pinned: a new vector space, no request
        assert len(fake.requests) == asked


# --- token counts ------------------------------------------------------------------------


def test_tokenizer_dialects_and_the_estimate() -> None:
    # llama-cpp-python: /tokenize is missing, /extras/tokenize/count counts the special tokens too.
    routes = {("POST", "/extras/tokenize/count"): lambda b: (200, {}, {"count": len(b["input"].split()) + 2})}
    with fake_server(routes) as fake:
        embedder = RemoteEmbedder(spec(fake))
        assert embedder.count_tokens("one two three") == 3 and embedder.tokenizer.kind == "llama-cpp-python"
        assert fake.paths() == ["/tokenize", "/extras/tokenize/count", "/extras/tokenize/count"]
        assert embedder.count_tokens("one two three") == 3 and len(fake.requests) == 3  # cached
        cut = embedder.fit("word " * 40, 10)
        assert embedder.count_tokens(cut) <= 10 and cut.startswith("word word")
        assert embedder.fit("short", 10) == "short" and fake.paths().count("/extras/tokenize/count") <= 6
    with fake_server({}) as fake:  # Ollama, vLLM, hosted APIs: no tokenizer route
        embedder = RemoteEmbedder(spec(fake))
        assert embedder.count_tokens("abcdef") == 2 and embedder.tokenizer.kind == "estimate"
        assert estimate_tokens("東京") == 2 and estimate_tokens("1234") == 4 and estimate_tokens("") == 0
        assert estimate_tokens(embedder.fit("x" * 1000, 100)) <= 100


# --- rerank: the documented shape (llama-cpp-python's server has no /v1/rerank) ---------------


def rerank_route(scores: dict[str, float], seen: list[dict[str, Any]]) -> Any:
    def route(body: dict[str, Any]) -> Reply:
        seen.append(body)
        results = [{"index": i, "relevance_score": scores[d]} for i, d in enumerate(body["documents"])]
        results.sort(key=lambda r: -r["relevance_score"])  # best first, as Jina/Cohere/llama.cpp answer
        return 200, {}, {"model": body["model"], "results": results[: body["top_n"]], "usage": {"total_tokens": 1}}

    return route


def test_rerank_probabilities_and_logits() -> None:
    seen: list[dict[str, Any]] = []
    probs = {"a": 0.9, "b": 0.1, "c": 0.5, "d": 0.0, "e": 1.0}
    with fake_server({("POST", "/v1/rerank"): rerank_route(probs, seen)}) as fake:
        reranker = RemoteReranker(spec(fake, "bge-reranker", batch=2))
        assert reranker.scores("q", list("abcde")) == [0.9, 0.1, 0.5, 0.0, 1.0]
        assert [len(b["documents"]) for b in seen] == [2, 2, 1] and all(b["top_n"] == len(b["documents"]) and b["query"] == "q" and b["model"] == "bge-reranker" for b in seen)
    logits = {"a": 4.2, "b": -3.0, "c": 0.3}
    with fake_server({("POST", "/v1/rerank"): rerank_route(logits, [])}) as fake:
        assert RemoteReranker(spec(fake)).scores("q", list("abc")) == pytest.approx([sigmoid(4.2), sigmoid(-3.0), sigmoid(0.3)])
        assert RemoteReranker(spec(fake, scores="probability")).scores("q", list("abc")) == [1.0, 0.0, 0.3]
    with fake_server({("POST", "/v1/rerank"): rerank_route({"a": 0.2, "b": 0.7}, [])}) as fake:
        assert RemoteReranker(spec(fake, scores="logit")).scores("q", ["a", "b"]) == pytest.approx([sigmoid(0.2), sigmoid(0.7)])
        assert RemoteReranker(spec(fake, scores="logit")).info.identity != RemoteReranker(spec(fake)).info.identity  # caches apart


def test_rerank_answers_missing_documents_are_errors() -> None:
    def partial(body: dict[str, Any]) -> Reply:
        return 200, {}, {"results": [{"index": 0, "relevance_score": 0.5}, {"index": 7, "relevance_score": 0.5}]}

    with fake_server({("POST", "/v1/rerank"): partial}) as fake:
        with pytest.raises(EndpointError, match="scored 1 of 2 documents"):
            RemoteReranker(spec(fake)).scores("q", ["a", "b"])
    with fake_server({}) as fake:  # a server without the route (llama-cpp-python's)
        with pytest.raises(EndpointError) as exc:
            RemoteReranker(spec(fake)).scores("q", ["a"])
        assert exc.value.status == 404


def test_rerank_through_the_store_is_cached(tmp_path: Path, notes: Path) -> None:
    seen: list[dict[str, Any]] = []
    with fake_server({("POST", "/v1/rerank"): rerank_route({"x": 0.25, "y": 0.75}, seen)}) as fake:
        config = tmp_path / "index.yml"
        config.write_text(f"models:\n  rerank: {fake.uri('bge')}\n")
        with qmd.Store(tmp_path / "index.sqlite", config) as store:
            store.add_collection(str(notes), name="notes")
            assert store.rerank("q", ["x", "y"]) == [0.25, 0.75]
            assert store.rerank("q", ["y", "x"]) == [0.75, 0.25]
        assert len(seen) == 1


# --- generate: the grammar where the server takes it -------------------------------------------


def test_expansion_sends_the_grammar_and_parses_both_apis() -> None:
    lines = "lex: rollback release\nvec: how to undo a deploy\nhyde: Flip the balancer back.\n"

    def chat(body: dict[str, Any]) -> Reply:
        return 200, {}, {"choices": [{"index": 0, "message": {"role": "assistant", "content": lines}}]}

    def completion(body: dict[str, Any]) -> Reply:
        return 200, {}, {"choices": [{"index": 0, "text": lines}]}

    with fake_server({("POST", "/v1/chat/completions"): chat, ("POST", "/v1/completions"): completion}) as fake:
        for api in ("chat", "completions"):
            generator = RemoteGenerator(spec(fake, "qmd-query-expansion-1.7b", api=api))
            assert generator.tuned
            got = generator.expand("undo a release")
            assert [(s.type, s.text) for s in got] == [("lex", "rollback release"), ("vec", "how to undo a deploy"), ("hyde", "Flip the balancer back.")]
        bodies = [b for _, _, _, b in fake.requests]
        assert all("lex" in b["grammar"] and b["temperature"] == 0.0 and b["max_tokens"] == 220 for b in bodies)
        assert "undo a release" in bodies[0]["messages"][0]["content"] and "undo a release" in bodies[1]["prompt"]
        assert not RemoteGenerator(spec(fake, "gemma3:270m")).tuned and RemoteGenerator(spec(fake, "gemma3:270m", tuned=True)).tuned


def test_a_server_refusing_the_grammar_is_asked_without_it() -> None:
    def strict(body: dict[str, Any]) -> Reply:
        if "grammar" in body:
            return 400, {}, {"error": {"message": "Unrecognized request argument supplied: grammar"}}
        return 200, {}, {"choices": [{"message": {"content": "Sure! lex: rollback\nvec: undo release\nnonsense"}}]}

    with fake_server({("POST", "/v1/chat/completions"): strict}) as fake:
        generator = RemoteGenerator(spec(fake, "gpt"))
        assert [s.type for s in generator.expand("q")] == ["vec"]  # only well-formed lines are kept
        assert [s.type for s in generator.expand("q2")] == ["vec"]
        assert ["grammar" in b for _, _, _, b in fake.requests] == [True, False, False]  # remembered


# --- doctor's probe ----------------------------------------------------------------------------


def models_route(*ids: str) -> Any:
    return lambda body: (200, {}, {"object": "list", "data": [{"id": i, "object": "model"} for i in ids]})


def test_serves_matches_server_ids() -> None:
    assert serves("embeddinggemma", ["embeddinggemma:latest"]) and serves("embeddinggemma:latest", ["embeddinggemma:latest"])
    assert serves("tiny", ["/models/tiny.gguf"]) and serves("BAAI/bge-m3", ["BAAI/bge-m3"])
    assert not serves("embeddinggemma", ["nomic-embed-text:latest"]) and not serves("gemma", ["embeddinggemma"])


def test_probe_answers_serves_and_dims() -> None:
    routes = {("GET", "/v1/models"): models_route("embeddinggemma:latest", "qwen3:0.6b"), ("POST", "/v1/embeddings"): embeddings_route()}
    with fake_server(routes) as fake:
        good = spec(fake, "embeddinggemma")
        found = probe("embed", good, RemoteEmbedder(good), None)
        assert found.status == "ok" and "serves embeddinggemma" in found.detail and "4-dim vectors" in found.detail and found.dims == 4
        found = probe("embed", good, RemoteEmbedder(good, known_dims=4), 4)
        assert found.status == "ok" and "as the index's vectors" in found.detail
        found = probe("embed", good, RemoteEmbedder(good, known_dims=8), 8)
        assert found.status == "fail" and "returned 4-dim vectors, but the index's vectors for this endpoint and model have 8" in found.detail
        missing = spec(fake, "bge-m3")
        found = probe("embed", missing, RemoteEmbedder(missing), None)
        assert found.status == "fail" and "does not serve 'bge-m3'" in found.detail and "ollama pull bge-m3" in str(found.hint)
    with fake_server({("GET", "/v1/models"): models_route("/srv/other.gguf"), ("POST", "/v1/embeddings"): embeddings_route()}) as fake:
        s = spec(fake, "tiny")
        found = probe("embed", s, RemoteEmbedder(s), None)
        assert found.status == "warn" and "lists only '/srv/other.gguf'" in found.detail
    dead = parse_remote(f"openai:http://127.0.0.1:{free_port()}/v1#m")
    found = probe("embed", dead, RemoteEmbedder(dead), None)
    assert found.status == "fail" and "does not answer" in found.detail and found.ms < 5000


def test_probe_reranks_once_through_the_store(tmp_path: Path) -> None:
    routes = {("GET", "/v1/models"): models_route("bge-reranker"), ("POST", "/v1/rerank"): rerank_route({"qmd doctor probe": 3.0}, [])}
    with fake_server(routes) as fake:
        config = tmp_path / "index.yml"
        config.write_text(f"models:\n  rerank: {fake.uri('bge-reranker')}\n  generate: {fake.uri('qwen3')}\n")
        with qmd.Store(tmp_path / "index.sqlite", config) as store:
            found = store.probe_model("rerank")
            assert found.status == "ok" and "serves bge-reranker" in found.detail and "reranks (score 0.95)" in found.detail
            found = store.probe_model("generate")  # only asked whether it is served: generating is slow
            assert found.status == "warn" and "lists only 'bge-reranker'" in found.detail
        assert fake.paths() == ["/v1/models", "/v1/rerank", "/v1/models"]
