"""An index poisoned by an earlier `qmd import` that lied about its vectors' dims (refused
since d0a89be; issue 31): vectors stored under the embed model's fingerprint with other dims
than the model makes. Every vsearch and embed exited 3 on it and `rebuild` kept them; now
vsearch and query say so in one line naming `qmd embed`, doctor reports it, and `qmd embed`
recreates the vector table and embeds every document again."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import qmd
from tests.support.paths import REPO

NOTES = REPO / "examples" / "notes"


def _poison(dims: int) -> int:
    """Store one `dims`-long vector per document under the configured model's fingerprint, as
    the import before d0a89be did for a file claiming that fingerprint; returns the model's dims."""
    from qmd.backends.rows import ChunkVector
    from qmd.index.embedding import fingerprint
    from qmd.llm.embedder import Embedder
    import os

    probe = Embedder(Path(os.environ["QMD_EMBED_MODEL"]))
    store = qmd.open_index()
    try:
        backend = store.backend
        model = backend.ensure_vector_model(fingerprint(probe), probe.info.name, dims)
        batch = [(h, [ChunkVector(h, 0, 0, 10, 3, [0.1] * dims)]) for h, _ in backend.pending_embeddings(model.id, ["notes"])]
        assert backend.write_vectors(model, batch) == len(batch) > 0
    finally:
        store.close()
    return probe.dims


@pytest.fixture
def poisoned(tmp_path: Path, minilm_gguf: Path, monkeypatch: pytest.MonkeyPatch, cli, index_backend: str) -> int:  # type: ignore[no-untyped-def]
    monkeypatch.setenv("QMD_EMBED_MODEL", str(minilm_gguf))
    for role in ("RERANK", "GENERATE"):
        monkeypatch.setenv(f"QMD_{role}_MODEL", str(tmp_path / "none.gguf"))
    shutil.copytree(NOTES, tmp_path / "notes")
    assert cli("collection", "add", str(tmp_path / "notes"), "--name", "notes")[0] == 0
    return _poison(192)


@pytest.mark.slow
def test_a_poisoned_index_says_so_and_embed_recovers_it(poisoned: int, cli) -> None:  # type: ignore[no-untyped-def]
    dims = poisoned
    code, _, err = cli("vsearch", "database storage")
    assert code == 1 and f"have 192 dims but the model makes {dims}" in err and "qmd embed" in err and err.count("Error") == 1, err
    code, out, err = cli("query", "database storage", "--json")
    assert code == 0 and "have 192 dims" in err, (out, err)

    from tests.doctor.test_doctor import doctor

    code, report = doctor()
    found = [c for c in report["checks"] if c["name"] == "vector dims [index]"]
    assert code == 2 and len(found) == 1 and found[0]["status"] == "fail" and "192 dims" in found[0]["detail"] and "qmd embed" in found[0]["fix"], found
    code, report = doctor("--fix")  # doctor --fix embeds again
    repaired = [c.get("repaired") for c in report["checks"] if c["name"] == "vector dims [index]"]
    assert len(repaired) == 1 and "recreated the vector table and embedded" in str(repaired[0]), report["checks"]
    with qmd.open_index() as store:
        assert store.vector_dims_mismatch() is None

    code, out, err = cli("embed")
    assert code == 0, (out, err)
    code, out, err = cli("vsearch", "database storage", "--json")
    assert code == 0 and json.loads(out), (out, err)
    store = qmd.open_index()
    try:
        assert store.vector_dims_mismatch() is None
    finally:
        store.close()


@pytest.mark.slow
def test_a_poisoned_index_is_not_exported_until_embed_recovers_it(poisoned: int, cli, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    """The export carried the 192-dim vectors under the model's fingerprint: every importer with
    the model refused the file, one without it (--force-model) was poisoned the same way. Now
    it is refused in one line naming the fix, nothing written, and exports once embedded again."""
    from qmd.store.bundle import read_bundle

    dims = poisoned
    out = tmp_path / "out"
    out.mkdir()
    for extra in ([], ["--json"]):
        code, said, err = cli("export", str(out / "notes.qmd.gz"), *extra)
        assert code == 1 and "have 192 dims" in err and "qmd embed" in err and "qmd doctor --fix" in err and err.count("Error") == 1, (said, err)
        assert said == "" and list(out.iterdir()) == []  # no file, no temporary left behind
    code, said, err = cli("embed")
    assert code == 0, (said, err)
    code, said, err = cli("export", str(out / "notes.qmd.gz"))
    assert code == 0 and "embedded" in err, err
    bundle = read_bundle(out / "notes.qmd.gz")
    assert bundle.model is not None and bundle.model.dims == dims and bundle.vectors
    assert all(len(c.vector) == dims for _, chunks in bundle.vectors.values() for c in chunks)
