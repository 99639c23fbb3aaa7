"""The line a commit prints when its request cannot be written names a fix that reaches the
index the repository routes to (`qmd update --embed`, named before, updated the default
index), once per commit."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from tests.support.modes import moded
from tests.support.run import bound_by_modes, local_env, run_qmd


def _enrolled_repo(tmp_path: Path, env: dict[str, str], *index: str) -> Path:
    """A git repository with one note, a collection of index `index` (default: the default one) and qmd's hooks, its note staged."""
    repo = tmp_path / "repo"
    repo.mkdir()
    subprocess.run(["git", "init", "-q", "."], cwd=repo, check=True, env=env)
    (repo / "a.md").write_text("# A\n\nalpha\n")
    for argv in (("collection", "add", ".", "--name", "repo"), ("hooks", "install", ".")):
        done = run_qmd(*index, *argv, env=env, cwd=repo)
        assert done.returncode == 0, done.stderr
    subprocess.run(["git", "add", "."], cwd=repo, check=True, env=env)
    return repo


def _commit_without_a_queue(repo: Path, env: dict[str, str], *args: str) -> str:
    """`git commit ARGS` while the queue's tmp folder is 0555 (modes binding); its stderr."""
    tmp = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "queue" / "tmp"
    tmp.mkdir(parents=True, exist_ok=True)
    with moded(tmp, 0o555, 0o755):
        done = subprocess.run(bound_by_modes(["git", "commit", "-q", *args]), cwd=repo, env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    return done.stderr


def test_the_not_queued_line_names_the_index_the_repo_routes_to(isolated_home: Path, tmp_path: Path) -> None:
    env = local_env()
    repo = _enrolled_repo(tmp_path, env, "--index", "work")
    line = _commit_without_a_queue(repo, env, "-m", "one").strip()
    assert "was not queued" in line, line
    assert line.endswith(f"run: qmd updater run --repo '{repo}'"), line  # `qmd update --embed` updated index 'index', not 'work'
    done = run_qmd("updater", "run", "--repo", str(repo), env=env, cwd=repo)  # the fix it names reaches index 'work'
    assert done.returncode == 0, done.stderr
    found = run_qmd("--index", "work", "search", "alpha", env=env, cwd=repo)
    assert "qmd://repo/a.md" in found.stdout, found.stdout + found.stderr


def test_an_amend_says_it_once(isolated_home: Path, tmp_path: Path) -> None:
    """`git commit --amend` runs post-commit and post-rewrite: the same line came twice for one commit."""
    env = local_env()
    repo = _enrolled_repo(tmp_path, env)
    subprocess.run(["git", "commit", "-qm", "one"], cwd=repo, check=True, env=env)
    err = _commit_without_a_queue(repo, env, "--amend", "-m", "two")
    assert len(err.strip().splitlines()) == 1 and "was not queued" in err, err
