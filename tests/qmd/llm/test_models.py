"""The BERT → GGUF importer against a numpy oracle, MiniLM parity, and model plumbing."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from qmd.core.errors import QmdError
from qmd.llm.convert import gguf_name, import_bert
from qmd.llm.embedder import Embedder
from qmd.llm.families import family_for
from qmd.llm.gguf_info import model_info, read_metadata
from qmd.llm.generator import Generator
from qmd.llm.reranker import CrossEncoder, YesNoReranker, sigmoid
from qmd.llm.runtime import LlamaModel, threads
from tests.support import tinybert
from tests.support.paths import BENCH_DATA
from tests.support.models import write_stub_gguf
from tests.support.run import run_qmd

TEXTS = ["how do we undo a bad release", "flip the load balancer back to blue", "zzz unknownword, rollback. 東京!", "a"]


@pytest.mark.parametrize(
    ("hf", "gguf"),
    [
        ("embeddings.word_embeddings.weight", "token_embd.weight"),
        ("bert.embeddings.LayerNorm.bias", "token_embd_norm.bias"),
        ("encoder.layer.3.attention.self.key.weight", "blk.3.attn_k.weight"),
        ("bert.encoder.layer.0.output.LayerNorm.weight", "blk.0.layer_output_norm.weight"),
        ("encoder.layer.1.intermediate.dense.bias", "blk.1.ffn_up.bias"),
        ("bert.pooler.dense.weight", "cls.weight"),  # kept: llama.cpp's converter drops it
        ("classifier.weight", "cls.output.weight"),
        ("embeddings.position_ids", None),
    ],
)
def test_tensor_names(hf: str, gguf: str | None) -> None:
    assert gguf_name(hf) == gguf


@pytest.mark.parametrize("out_type", ["f32", "f16", "q8_0"])
def test_embedder_matches_numpy_forward_pass(tmp_path: Path, out_type: str) -> None:
    folder = tinybert.write_tiny_bert(tmp_path / "src")
    result = import_bert(folder, tmp_path / f"m-{out_type}.gguf", out_type)
    assert (result.kind, result.dims, result.pooling, result.max_tokens) == ("embed", 32, "mean", 64)
    embedder = Embedder(result.path, 1)
    vectors = embedder.embed(TEXTS)
    floor = 0.99999 if out_type == "f32" else 0.9995
    for text, vector in zip(TEXTS, vectors):
        ids = embedder.llm.tokenize(text.encode(), add_bos=True, special=False)
        assert ids[0] == 2 and ids[-1] == 3  # [CLS] … [SEP] in the tiny vocabulary
        expected = tinybert.embed(folder, ids)
        assert float(np.dot(vector, expected)) >= floor, text
    embedder.close()


def test_cross_encoder_keeps_the_pooler(tiny_models: dict[str, Path]) -> None:
    folder = tiny_models["rerank_src"]
    encoder = CrossEncoder(tiny_models["rerank"], 1)
    docs = ["flip the load balancer back to blue", "bread flour recipe", "restore postgres from backup dump", "", "x " * 300]
    logits = encoder.logits("how do we undo a bad release", docs * 3)  # several pairs per batch, in order
    expected = [tinybert.cross_logit(folder, encoder.pair_tokens("how do we undo a bad release", d)) for d in docs] * 3
    assert len(logits) == len(expected)
    for got, want in zip(logits, expected):
        assert abs(got - want) <= 5e-3 * max(1.0, abs(want))
    scores = encoder.scores("how do we undo a bad release", docs)
    assert all(0.0 <= s <= 1.0 for s in scores)
    assert scores == pytest.approx([sigmoid(x) for x in expected[: len(docs)]], abs=2e-3)
    # llama.cpp's own mapping (classifier as `cls`, no pooler) would apply tanh to the logit:
    assert any(abs(w) > 1.0 for w in expected)


def test_importer_metadata_and_family(tiny_models: dict[str, Path]) -> None:
    meta = read_metadata(tiny_models["embed"])
    assert meta["general.architecture"] == "bert"
    assert meta["bert.pooling_type"] == 1 and meta["qmd.kind"] == "embed"
    info = model_info(tiny_models["embed"])
    family = family_for(info)
    assert (family.name, family.chunk_tokens) == ("bert", 64)
    assert family.document("Title", "body") == "Title\n\nbody" and family.query("q") == "q"
    assert model_info(tiny_models["rerank"]).pooling == 4


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: (d / "config.json").write_text(json.dumps({"model_type": "llama"})), "only BERT-family"),
        (lambda d: (d / "vocab.txt").unlink(), "no vocab.txt"),
        (lambda d: [p.unlink() for p in d.glob("*.safetensors")], "no .safetensors"),
        (lambda d: (d / "vocab.txt").write_text((d / "vocab.txt").read_text() + "the\n"), "duplicate tokens"),
    ],
)
def test_importer_refuses_bad_folders(tmp_path: Path, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    folder = tinybert.write_tiny_bert(tmp_path / "src")
    setup(folder)
    with pytest.raises(QmdError, match=message):
        import_bert(folder, tmp_path / "out.gguf")
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.part").exists()


def test_not_a_gguf_is_a_clear_error(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"not a model at all")
    with pytest.raises(QmdError, match="not a GGUF"):
        Embedder(junk)


def test_reranker_is_not_an_embedder(tiny_models: dict[str, Path]) -> None:
    with pytest.raises(QmdError, match="reranker"):
        Embedder(tiny_models["rerank"])
    with pytest.raises(QmdError, match="not a cross-encoder"):
        CrossEncoder(tiny_models["embed"])


def test_context_is_clamped_to_the_training_context(tiny_models: dict[str, Path]) -> None:
    embedder = Embedder(tiny_models["embed"], 1)
    assert embedder.n_ctx == 128  # the tiny model's max_position_embeddings; asking more aborts llama.cpp
    long_query = "rollback " * 1000
    assert len(embedder.embed_query(long_query)) == 32  # cut to fit instead of a silent truncation


@pytest.mark.slow
@pytest.mark.skipif(not (BENCH_DATA / "minilm-reference" / "reference.json").exists(), reason="MiniLM reference vectors not found (set QMD_BENCH_DATA)")
def test_minilm_parity_with_sentence_transformers(minilm_gguf: Path) -> None:
    reference = json.loads((BENCH_DATA / "minilm-reference" / "reference.json").read_text())
    embedder = Embedder(minilm_gguf)  # QMD_THREADS (1 in the suite): two threads spin against each other on a busy machine
    worst = 1.0
    count = 0
    for group, texts in reference["texts"].items():
        ours = embedder.embed(texts)
        for text, mine, theirs in zip(texts, ours, reference["vectors"][group]):
            cosine = float(np.dot(mine, theirs) / np.linalg.norm(theirs))
            worst = min(worst, cosine)
            count += 1
            assert cosine >= 0.999, (group, text[:80], cosine)
    assert count == 68 and worst >= 0.999


def test_import_command_sets_the_installed_default(tmp_path: Path, tiny_models: dict[str, Path]) -> None:
    proc = run_qmd("models", "import", str(tiny_models["embed_src"]), "--out", str(tmp_path / "t.gguf"), "--type", "f16", "--set-default")
    assert proc.returncode == 0, proc.stderr
    assert "embed model, 32 dims" in proc.stderr
    listing = run_qmd("models", "list", "--json")
    rows = {r["role"]: r for r in json.loads(listing.stdout)}
    assert rows["embed"]["source"] == "installed" and rows["embed"]["available"] and rows["embed"]["path"] == str(tmp_path / "t.gguf")
    assert rows["rerank"]["source"] == "default" and not rows["rerank"]["available"]
    bad = run_qmd("models", "import", str(tmp_path / "nope"))
    assert bad.returncode == 1 and "is not a folder" in bad.stderr


def test_models_code_is_not_imported_by_keyword_search(tmp_path: Path) -> None:
    code = "import sys, qmd; s = qmd.Store(sys.argv[1]); print(s.models()[0].role); assert 'llama_cpp' not in sys.modules"
    proc = subprocess.run([sys.executable, "-c", code, str(tmp_path / "i.sqlite")], capture_output=True, text=True)
    assert proc.returncode == 0 and proc.stdout.strip() == "embed", proc.stderr


# ---------------------------------------------------------------------------------------
# The shared llama.cpp loader (qmd.llm.runtime): every role fails the same way


ROLES = [("embed", Embedder), ("rerank", CrossEncoder), ("llama", YesNoReranker), ("llama", Generator)]


@pytest.mark.parametrize(("model", "role"), ROLES)
def test_missing_llama_cpp_is_one_error_naming_the_fix(tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch, model: str, role: type[LlamaModel]) -> None:
    loaded = role(tiny_models[model], 1)  # reading the header needs no llama.cpp
    monkeypatch.setitem(sys.modules, "llama_cpp", None)  # `import llama_cpp` now raises ImportError
    with pytest.raises(QmdError, match="llama-cpp-python is not installed") as err:
        loaded.llm
    assert err.value.hint == "re-run ./install.sh"


@pytest.mark.parametrize("role", [Embedder, Generator, YesNoReranker])
def test_a_file_llama_cpp_cannot_load_is_one_error_naming_the_file(tmp_path: Path, role: type[LlamaModel]) -> None:
    broken = tmp_path / "broken.gguf"  # a valid header, but no layers: llama.cpp refuses it
    write_stub_gguf(broken)
    with pytest.raises(QmdError, match=re.escape(f"llama.cpp could not load {broken}")) as err:
        role(broken, 1).llm
    assert "qmd doctor" in (err.value.hint or "")


def test_threads_and_context_come_from_the_base(tiny_models: dict[str, Path], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_THREADS", "3")
    assert threads() == 3
    generator = Generator(tiny_models["llama"])
    assert generator.n_ctx == 512  # the tiny llama's training context, below MAX_CONTEXT
    assert LlamaModel(tiny_models["llama"], 1, max_context=64).n_ctx == 64
    monkeypatch.setenv("QMD_THREADS", "many")
    assert threads() >= 1


def test_close_frees_the_model_and_the_next_use_loads_it_again(tiny_models: dict[str, Path]) -> None:
    embedder = Embedder(tiny_models["embed"], 1)
    first = embedder.embed_query("rollback")
    embedder.close()
    assert embedder._llm is None
    embedder.close()  # twice is harmless
    assert embedder.embed_query("rollback") == pytest.approx(first)
    embedder.close()
