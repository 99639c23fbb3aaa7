"""What one drain of one queued commit reads: one Store opened, each config read once, failures/ listed once.

The counters wrap the real functions (they call through unchanged): the run does all it
does, and the test counts how often it opens a Store, loads a config, lists failures/.
"""

from __future__ import annotations

import logging
import os
from collections import Counter
from pathlib import Path

import pytest

import qmd
from qmd import harness
from qmd.core.config import Config
from tests.support.harness import commit, make_repo, state  # noqa: F401 - fixture


def _count_reads(monkeypatch: pytest.MonkeyPatch, layout: harness.StateLayout) -> Counter[str]:
    counts: Counter[str] = Counter()
    store_init, config_load, listdir = qmd.Store.__init__, Config.load.__func__, os.listdir

    def counted_init(self: qmd.Store, *args: object, **kwargs: object) -> None:
        counts["store"] += 1
        store_init(self, *args, **kwargs)  # type: ignore[arg-type]

    def counted_load(cls: type[Config], path: Path) -> Config:
        counts["config"] += 1
        return config_load(cls, path)

    def counted_listdir(path: str | os.PathLike[str] = ".") -> list[str]:
        counts["failures"] += Path(path) == layout.failures
        return listdir(path)

    monkeypatch.setattr(qmd.Store, "__init__", counted_init)
    monkeypatch.setattr(Config, "load", classmethod(counted_load))
    monkeypatch.setattr(os, "listdir", counted_listdir)
    return counts


@pytest.mark.parametrize("indexes", [1, 2])
def test_one_commit_opens_one_store_and_reads_each_config_and_the_failures_once(state: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, indexes: int) -> None:
    from updater import spool
    from updater.run import drain

    repo = make_repo(tmp_path / "notes", {"intro.md": "# Intro\n"})
    with qmd.open_index(None) as store:
        store.add_collection(repo, name="notes")
    if indexes == 2:  # another index the commit does not touch: routing reads its config, nothing opens it
        with qmd.open_index("other") as store:
            store.add_collection(make_repo(tmp_path / "other"), name="other")
    layout = harness.StateLayout.current()
    commit(repo, "a.md", "# A\n\nfresh words\n")
    spool.enqueue(layout, str(repo), "post-commit")
    counts = _count_reads(monkeypatch, layout)
    result = drain(layout, logging.getLogger("test-updater"))
    assert result.succeeded_repos == [str(repo)] and result.documents_updated == 1
    assert result.embed_skipped == {"index": result.embed_skipped["index"]}  # no embedding model: skipped, not failed
    assert counts == {"store": 1, "config": indexes, "failures": 1}
