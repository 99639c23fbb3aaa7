"""The git hook's sh, as the installer renders it from its template files: every placeholder
filled, the marker where `is_ours` looks, shipped as package data, and clean under shellcheck
(the Debian package `shellcheck`; the test skips, saying so, where it is not installed)."""

from __future__ import annotations

import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from hooks import script
from tests.support.paths import REPO

STATE = "/tmp/a state dir/with 'quotes' and @STATE@"  # spaces, quotes, a placeholder's look


def test_the_rendered_hook_fills_every_placeholder_once() -> None:
    text = script.hook_script("post-commit", STATE)
    assert text.startswith("#!/bin/sh\n") and text.splitlines()[1].startswith(script.MARKER) and script.is_ours(text)
    assert "@ENQUEUE@" not in text and "@EVENT@" not in text
    assert text.count("@STATE@") == 1  # the one inside the state dir's name, left as it was
    assert script.baked_state(text) == STATE and script.baked_state(script.husky_block("post-merge", STATE)) == STATE


def test_the_installed_state_dir_is_read_back_even_across_lines() -> None:
    """A state dir whose name holds a newline (the shell quotes it across two lines): `qmd
    hooks status` must still read it back, not call the hook stale."""
    for state in ("/tmp/two\nlines/state", "/tmp/$(touch x) `y` %Y %%\n'q'"):
        assert script.baked_state(script.hook_script("post-commit", state)) == state
        assert script.baked_state(script.husky_block("post-merge", state)) == state


def test_the_templates_ship_as_package_data() -> None:
    data = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    templates = sorted(p.name for p in (REPO / "hooks").glob("*-tmpl"))
    assert templates and sorted(data["hooks"]) == templates


def test_shellcheck_finds_nothing_in_the_hook_the_husky_block_or_install_sh(tmp_path: Path) -> None:
    shellcheck = shutil.which("shellcheck")
    if shellcheck is None:
        pytest.skip("shellcheck is not installed (Debian/Ubuntu: apt-get install shellcheck; macOS: brew install shellcheck)")
    hook = tmp_path / "post-commit"
    hook.write_text(script.hook_script("post-commit", STATE))
    husky = tmp_path / "post-merge"  # a husky hook file: no shebang, run by husky with `sh -e`
    husky.write_text(script.husky_block("post-merge", STATE))
    done = subprocess.run([shellcheck, "--shell=sh", str(hook), str(husky)], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
    done = subprocess.run([shellcheck, str(REPO / "install.sh")], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr
