"""What the hook cannot finish it leaves in queue/tmp as its trace: a request whose rename
failed stays whole there (it was deleted, so only hooks.log remembered the commit), and the
updater queues it, with its repository, once the queue is usable again."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import qmd
from tests.support.harness import commit, git, make_repo, queue_files
from tests.support.run import run_qmd


def test_a_request_the_hook_could_not_move_into_the_queue_is_kept_and_indexed_later(cli, state: Path, tmp_path: Path) -> None:  # type: ignore[no-untyped-def]
    repo = make_repo(tmp_path / "notes")
    paths = qmd.resolve_index(None)
    with qmd.Store(paths.index_path, paths.config_path) as store:
        store.add_collection(repo, name="notes")
    assert cli("hooks", "install", str(repo))[0] == 0
    new = state / "queue" / "new"
    new.parent.mkdir(parents=True, exist_ok=True)
    (state / "queue" / "tmp").mkdir(exist_ok=True)
    new.write_text("a file where queue/new should be\n")
    assert commit(repo, "kept.md", "# Kept\n\nquokkaparade\n").returncode == 0
    head = git(repo, "rev-parse", "HEAD").stdout.strip()
    assert "NOT queued: cannot move it into" in (state / "logs" / "hooks.log").read_text()
    [left] = queue_files(state, "tmp")
    request = json.loads((state / "queue" / "tmp" / left).read_text())
    assert request["repo"] == str(repo) and request["commit"] == head and request["event"] == "post-commit"

    new.unlink()  # the cause is gone
    then = time.time() - 120
    os.utime(state / "queue" / "tmp" / left, (then, then))
    proc = run_qmd("updater", "run", "--json")
    assert proc.returncode == 0, proc.stderr
    result = json.loads(proc.stdout)
    assert result.get("lost") == {left: [str(repo)]} and result["succeeded_repos"] == [str(repo)], result
    assert queue_files(state, "tmp") == queue_files(state, "new") == queue_files(state, "cur") == []
    with qmd.Store(paths.index_path, paths.config_path) as store:
        assert [h.uri for h in store.search("quokkaparade")] == ["qmd://notes/kept.md"]
