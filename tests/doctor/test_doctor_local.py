"""`qmd doctor` inside a project with a project-local index (`.qmd/index.yml`): a dedicated
check names the index in use and why, fails loudly on an empty, unreadable or missing-target
index file, and reports gated fields nobody approved as a warning whose fix is `qmd trust`."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from tests.support.run import local_project, qmd_at

LOCAL = ("project-local index", "project-local index file", "project-local trust")


@pytest.fixture
def project(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A project with a built local index; doctor runs from its docs folder."""
    root = local_project(tmp_path / "proj")
    for var in ("QMD_TRUST_LOCAL_CONFIG", "QMD_TRUST_UPDATE_HOOKS"):
        monkeypatch.delenv(var, raising=False)
    monkeypatch.chdir(root / "docs")
    return root


def local_checks(index: str | None = None) -> dict[str, Any]:
    """The index group's project-local checks, run in this process on a fresh Context."""
    from doctor import local
    from doctor.context import Context

    return {r.name: r for r in local.check(Context.create(index, quick=True))}


def test_a_healthy_local_index_is_named_with_why(project: Path) -> None:
    found = local_checks()
    assert list(found) == list(LOCAL)
    assert all(r.status.value == "ok" for r in found.values()), [(r.name, r.detail) for r in found.values()]
    assert f"{project}/.qmd/index.yml (found from the working directory upward)" in found["project-local index"].detail
    assert "the updater, guard and doctor serve it" in found["project-local index"].detail
    assert "bytes, readable" in found["project-local index file"].detail
    assert "nothing to approve" in found["project-local trust"].detail


def test_outside_a_project_there_is_no_local_check(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    assert local_checks() == {}
    assert local_checks("index") == {}


def test_index_given_as_the_config_path_checks_that_index(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from doctor.context import Context

    monkeypatch.chdir(tmp_path)
    config = str(project / ".qmd" / "index.yml")
    ctx = Context.create(config, quick=True)
    assert ctx.indexes == [config] and ctx.primary == config
    found = local_checks(config)
    assert "(chosen with --index)" in found["project-local index"].detail


@pytest.mark.slow
def test_an_empty_index_file_fails_loudly_and_doctor_exits_2(project: Path) -> None:
    (project / ".qmd" / "index.sqlite").write_bytes(b"")
    found = local_checks()
    check = found["project-local index file"]
    assert check.status.value == "fail" and "EMPTY (0 bytes)" in check.detail and "rebuild" in (check.fix or "")
    proc = qmd_at(project / "docs", "doctor", "--json", "--quick")
    assert proc.returncode == 2, proc.stdout + proc.stderr
    report = json.loads(proc.stdout)
    by_name = {c["name"]: c for c in report["checks"]}
    assert by_name["project-local index file"]["status"] == "fail" and by_name["project-local index file"]["group"] == "index"
    assert by_name["project-local index"]["status"] == "ok"


def test_a_dangling_symlink_and_a_folder_in_its_place_fail(project: Path, tmp_path: Path) -> None:
    index = project / ".qmd" / "index.sqlite"
    index.unlink()
    index.symlink_to(tmp_path / "gone.sqlite")
    assert "dangling symlink" in local_checks()["project-local index file"].detail
    index.unlink()
    index.mkdir()
    check = local_checks()["project-local index file"]
    assert check.status.value == "fail" and "is not a file" in check.detail


def test_gated_fields_pending_approval_warn_and_name_qmd_trust(project: Path, tmp_path: Path) -> None:
    outside = tmp_path / "outside"
    outside.mkdir()
    config = project / ".qmd" / "index.yml"
    config.write_text(config.read_text().replace("collections:\n", f"collections:\n  away:\n    path: {outside}\n", 1).replace("    path: docs\n", f"    path: docs\n    update: touch {tmp_path / 'MARKER'}\n", 1))
    check = local_checks()["project-local trust"]
    assert check.status.value == "warn", check.detail
    assert "pending approval" in check.detail and "1 update command(s)" in check.detail and "1 collection(s) outside the project (away:" in check.detail
    assert check.fix.startswith(f"qmd --index {config} trust")
    assert qmd_at(project, "trust").returncode == 0
    check = local_checks()["project-local trust"]
    assert check.status.value == "ok" and check.detail.startswith("approved (qmd trust)")
    assert not (tmp_path / "MARKER").exists()


def test_a_local_index_the_harness_does_not_know_is_a_warning(project: Path) -> None:
    registry = Path(os.environ["XDG_STATE_HOME"]) / "qmd" / "local-indexes.json"
    registry.write_text(json.dumps({"configs": []}))
    check = local_checks()["project-local index"]
    assert check.status.value == "warn" and "not known to the harness" in check.detail
    assert check.fix.startswith(f"qmd --index {project / '.qmd' / 'index.yml'} update")
    assert qmd_at(project, "update").returncode == 0
    assert local_checks()["project-local index"].status.value == "ok"


def _models(proc: subprocess.CompletedProcess[str]) -> dict[str, dict[str, Any]]:
    report = json.loads(proc.stdout)
    return {c["name"]: c for c in report["checks"] if c["group"] == "models"}


def test_a_fresh_qmd_init_project_passes_the_models_check_as_the_home_index_does(tmp_path: Path, isolated_home: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`qmd init` writes the built-in default URIs into `.qmd/index.yml`; naming a default
    is not configuring a custom model, so not downloaded reads exactly as it does for a
    home index that names no model (rerank, generate: ok; embed: a warning), and doctor exits 0."""
    from qmd import harness

    root = tmp_path / "fresh"
    root.mkdir()
    assert qmd_at(root, "init").returncode == 0
    written = (root / ".qmd" / "index.yml").read_text()
    assert all(f"{role}: {uri}" in written for role, uri in harness.BUILTIN_MODELS.items()), written
    proc = qmd_at(root, "doctor", "--quick", "--json")
    local = _models(proc)
    assert [c for c in local.values() if c["status"] == "fail"] == []
    assert local["embed model"]["fix"] == f"qmd --index {root / '.qmd' / 'index.yml'} pull"  # these rows are the local index's

    # the home index of another fresh HOME, no model configured anywhere
    other = tmp_path / "other-home"
    other.mkdir()
    monkeypatch.setenv("HOME", str(other))
    for var, sub in (("XDG_CONFIG_HOME", ".config"), ("XDG_CACHE_HOME", ".cache"), ("XDG_STATE_HOME", ".local/state"), ("XDG_DATA_HOME", ".local/share")):
        monkeypatch.setenv(var, str(other / sub))
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "notes").mkdir(parents=True)
    (elsewhere / "notes" / "a.md").write_text("# A\n\nalpha\n")
    assert qmd_at(elsewhere, "collection", "add", "notes", "--name", "notes").returncode == 0
    home = qmd_at(elsewhere, "doctor", "--quick", "--json")
    assert home.returncode == 0, home.stdout + home.stderr
    unconfigured = _models(home)
    assert unconfigured["embed model"]["fix"] == "qmd pull"

    for role in ("rerank", "generate"):
        got, want = local[f"{role} model"], unconfigured[f"{role} model"]
        assert (got["status"], got["detail"], got["fix"]) == (want["status"], want["detail"], want["fix"]), (got, want)
        assert got["status"] == "ok" and got["fix"] is None and got["detail"].startswith("not downloaded (query skips"), got
    assert local["embed model"]["status"] == unconfigured["embed model"]["status"] == "warn"
    assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.parametrize("custom", ["hf:someone/custom-GGUF/custom-q8_0.gguf", "/nowhere/custom-rerank.gguf"])
def test_a_missing_custom_model_in_a_local_config_still_fails(tmp_path: Path, isolated_home: Path, custom: str) -> None:
    from qmd import harness

    root = tmp_path / "custom"
    root.mkdir()
    assert qmd_at(root, "init").returncode == 0
    config = root / ".qmd" / "index.yml"
    config.write_text(config.read_text().replace(harness.BUILTIN_MODELS["rerank"], custom))
    assert qmd_at(root, "trust").returncode == 0  # approved, so the custom model is the one used
    proc = qmd_at(root, "doctor", "--quick", "--json")
    rerank = _models(proc)["rerank model"]
    assert rerank["status"] == "fail" and f"{custom} (config) is configured but" in rerank["detail"], rerank
    assert rerank["fix"] == f"qmd --index {config} models list"
    assert proc.returncode == 2, proc.stdout + proc.stderr


@pytest.mark.slow
def test_a_project_s_collection_folders_are_checked_from_the_project_not_the_working_directory(project: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """`docs` in a project's config is the project's docs folder, wherever doctor runs."""
    config = str(project / ".qmd" / "index.yml")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    proc = qmd_at(elsewhere, "doctor", "--json", "--quick", "--index", config)
    checks = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}
    docs = checks[f"collection docs [{config}]"]
    assert docs["status"] == "ok" and str(project / "docs") in docs["detail"], docs
    (elsewhere / "docs").mkdir()  # a folder of that name here says nothing about the project's
    import shutil

    shutil.rmtree(project / "docs")
    proc = qmd_at(elsewhere, "doctor", "--json", "--quick", "--index", config)
    docs = {c["name"]: c for c in json.loads(proc.stdout)["checks"]}[f"collection docs [{config}]"]
    assert docs["status"] == "fail" and "is gone" in docs["detail"], docs
