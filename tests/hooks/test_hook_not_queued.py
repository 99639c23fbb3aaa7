"""The line a commit prints when its request cannot be written names a fix that reaches the
index the repository routes to (`qmd update --embed`, named before, updated the default index)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.run import bound_by_modes, local_env, run_qmd


def test_the_not_queued_line_names_the_index_the_repo_routes_to(isolated_home: Path, tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    repo.mkdir()
    env = local_env()
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    (repo / "a.md").write_text("# A\n\nalpha\n")
    for argv in (("--index", "work", "collection", "add", ".", "--name", "repo"), ("--index", "work", "hooks", "install", ".")):
        done = run_qmd(*argv, env=env, cwd=repo)
        assert done.returncode == 0, done.stderr
    queue = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "queue"
    (queue / "tmp").mkdir(parents=True, exist_ok=True)
    (queue / "new").mkdir(parents=True, exist_ok=True)
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    (queue / "tmp").chmod(0o555)
    try:
        done = subprocess.run(bound_by_modes(["git", "commit", "-qm", "one"]), cwd=repo, env=env, capture_output=True, text=True)
    finally:
        (queue / "tmp").chmod(0o755)
    assert done.returncode == 0, done.stderr
    line = done.stderr.strip()
    assert "was not queued" in line, line
    assert line.endswith(f"run: qmd updater run --repo '{repo}'"), line  # `qmd update --embed` updated index 'index', not 'work'
    done = run_qmd("updater", "run", "--repo", str(repo), env=env, cwd=repo)  # the fix it names reaches index 'work'
    assert done.returncode == 0, done.stderr
    found = run_qmd("--index", "work", "search", "alpha", env=env, cwd=repo)
    assert "qmd://repo/a.md" in found.stdout, found.stdout + found.stderr

