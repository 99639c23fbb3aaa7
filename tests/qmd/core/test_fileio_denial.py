"""qmd/core/fileio.py under a refusing environment: `denial` names the path to fix and its chmod
(the CLI boundary's one line for any permission error), `check_writable` probes without leaving
anything behind, and a kept mode stays readable to its owner."""

from __future__ import annotations

import errno
import stat
from pathlib import Path

import pytest

from qmd.core.errors import ConfigError
from qmd.core.config import Config
from qmd.core.fileio import check_writable, denial, write_bytes


def test_a_file_that_was_to_be_created_names_its_folder(tmp_path: Path) -> None:
    exc = PermissionError(errno.EACCES, "Permission denied", str(tmp_path / ".index.yml.1.tmp"))
    assert denial(exc) == (f"cannot create files in {tmp_path}: Permission denied", f"make it writable to you (chmod u+rwx {tmp_path}), or run qmd as the user who owns it")
    message, _ = denial(exc, "cannot save the config X") or ("", "")
    assert message == f"cannot save the config X: cannot create files in {tmp_path}: Permission denied"


def test_an_existing_file_or_folder_names_itself(tmp_path: Path) -> None:
    target = tmp_path / "folders.json"
    target.write_text("{}")
    assert denial(PermissionError(errno.EACCES, "Permission denied", str(target))) == (
        f"cannot read or write {target}: Permission denied", f"make it readable and writable to you (chmod u+rw {target}), or run qmd as the user who owns it")
    message, hint = denial(PermissionError(errno.EACCES, "Permission denied", str(tmp_path))) or ("", "")
    assert message == f"cannot read or write {tmp_path}: Permission denied" and f"chmod u+rwx {tmp_path}" in hint


def test_a_read_only_mount_says_so_and_other_errors_are_not_refusals(tmp_path: Path) -> None:
    message, hint = denial(OSError(errno.EROFS, "Read-only file system", str(tmp_path / "x"))) or ("", "")
    assert "Read-only file system" in message and "read-only file system" in hint and str(tmp_path) in hint
    assert denial(OSError(errno.EIO, "Input/output error", str(tmp_path))) is None
    assert denial(ValueError("x")) is None


def test_check_writable_leaves_nothing_behind_and_raises_what_a_write_would(tmp_path: Path) -> None:
    check_writable(tmp_path / "new" / "index.yml")
    assert list((tmp_path / "new").iterdir()) == []
    (tmp_path / "file").write_text("")
    with pytest.raises(OSError):
        check_writable(tmp_path / "file" / "index.yml")
    config = Config(tmp_path / "file" / "index.yml", {})
    with pytest.raises(ConfigError, match="cannot save the config"):
        config.check_writable()
    with pytest.raises(ConfigError, match="cannot save the config"):
        config.save()  # an OSError, not a crash: a QmdError naming the config


def test_a_kept_mode_stays_readable_to_its_owner(tmp_path: Path) -> None:
    target = tmp_path / "folders.json"
    target.write_text("{}")
    target.chmod(0o000)
    write_bytes(target, b"{}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o400
    target.chmod(0o640)
    write_bytes(target, b"{}\n")
    assert stat.S_IMODE(target.stat().st_mode) == 0o640
