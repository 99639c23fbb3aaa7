"""Store.unconfigured_embedding: a setup without vectors (nothing chosen, the built-in default
never downloaded) is skipped by the updater, not failed; a config naming exactly the built-in
default (what `qmd init` writes) is that setup too, a missing custom model is not."""

from __future__ import annotations

from pathlib import Path

import qmd
from qmd.core.defaults import BUILTIN


def store_with(tmp_path: Path, models: str) -> qmd.Store:
    folder = tmp_path / "idx"
    folder.mkdir(exist_ok=True)
    (folder / "index.yml").write_text(f"collections: {{}}\n{models}")
    return qmd.Store(folder / "index.sqlite", folder / "index.yml")


def test_the_built_in_default_named_in_a_config_counts_as_unconfigured(tmp_path: Path) -> None:
    with store_with(tmp_path, "") as s:
        assert s.unconfigured_embedding() is not None  # nothing chosen, nothing downloaded
    with store_with(tmp_path, "models:\n" + "".join(f"  {role}: {uri}\n" for role, uri in BUILTIN.items())) as s:
        reason = s.unconfigured_embedding()
        assert reason is not None and "not downloaded" in reason
    with store_with(tmp_path, f"models:\n  embed: {tmp_path / 'custom.gguf'}\n") as s:
        assert s.unconfigured_embedding() is None  # a chosen model that is missing is an error to report
