"""A model is its whole file: other weights under the same name, size and header re-embed;
a model that returns NaN or infinite values is an error, and nothing of it is stored."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import pytest

import qmd
from qmd import harness
from qmd.llm.convert import import_bert
from tests.support.tinybert import write_tiny_bert
from tests.support.run import run_qmd


def _big_tiny_bert(folder: Path, out: Path) -> Path:
    """A tiny BERT whose GGUF is over 1 MiB (so its first MiB is not the whole file)."""
    return import_bert(write_tiny_bert(folder, hidden=192, layers=3, heads=4), out, "f32", name="tiny-wide").path


def test_other_weights_with_the_same_name_size_and_first_mib_are_another_model(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    model = _big_tiny_bert(tmp_path / "src", tmp_path / "models" / "embed.gguf")
    size = model.stat().st_size
    assert size > (1 << 20) + 4096
    monkeypatch.setenv("QMD_EMBED_MODEL", str(model))
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    assert run_qmd("embed").returncode == 0
    with qmd.open_index() as store:
        assert store.vector_status().pending_documents == 0
    # Same file name, same size, same first MiB: only weights near the end differ.
    data = bytearray(model.read_bytes())
    for i in range(len(data) - 2048, len(data) - 16, 4):
        data[i] ^= 0x01
    swapped = tmp_path / "swapped.gguf"
    swapped.write_bytes(bytes(data))
    os.replace(swapped, model)
    assert model.stat().st_size == size and model.read_bytes()[: 1 << 20] == bytes(data[: 1 << 20])
    with qmd.open_index() as store:
        assert store.vector_status().pending_documents == 4  # nothing of the old weights counts
    proc = run_qmd("embed")
    assert proc.returncode == 0, proc.stderr
    assert "Embedded 4 documents" in proc.stderr and "0 were already embedded" in proc.stderr
    digests = json.loads((harness.cache_dir() / "model-digests.json").read_text())
    assert os.path.realpath(model) in digests  # hashed once per (size, mtime, inode), then remembered


def _nan_model(tmp_path: Path) -> Path:
    from safetensors.numpy import load_file, save_file
    import numpy as np

    folder = write_tiny_bert(tmp_path / "nan-src")
    tensors = load_file(str(folder / "model.safetensors"))
    tensors["embeddings.LayerNorm.weight"] = np.full_like(tensors["embeddings.LayerNorm.weight"], np.nan)
    save_file(tensors, str(folder / "model.safetensors"))
    return import_bert(folder, tmp_path / "nan.gguf", "f32", name="tiny-nan").path


def test_a_model_returning_nan_is_an_embed_error_and_stores_nothing(tmp_path: Path, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("QMD_EMBED_MODEL", str(_nan_model(tmp_path)))
    assert run_qmd("collection", "add", str(notes), "--name", "notes").returncode == 0
    proc = run_qmd("embed")
    assert proc.returncode == 1, proc.stderr
    assert "returned NaN or infinite values" in proc.stderr and "hint: " in proc.stderr and "Traceback" not in proc.stderr
    with qmd.open_index() as store:
        status = store.vector_status()
        assert status.chunks == 0 and status.pending_documents == 4
    proc = run_qmd("vsearch", "rollback")
    assert proc.returncode == 1 and "Unexpected error" not in proc.stderr, proc.stderr


def test_the_digest_cache_notices_a_changed_file(tmp_path: Path) -> None:
    from qmd.core.fileio import file_digest

    cache = tmp_path / "digests.json"
    f = tmp_path / "m.bin"
    f.write_bytes(b"a" * 100)
    first = file_digest(f, cache)
    assert file_digest(f, cache) == first
    shutil.copyfile(tmp_path / "m.bin", tmp_path / "copy.bin")
    f.write_bytes(b"b" * 100)  # same size, new content and mtime
    os.utime(f, ns=(f.stat().st_atime_ns, f.stat().st_mtime_ns + 1_000_000))
    assert file_digest(f, cache) != first
