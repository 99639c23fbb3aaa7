"""qmd/core/fileio.py on a full disk: `denial` (the CLI boundary's one line for an environment
that refuses) also names a full file system (ENOSPC) or a spent quota (EDQUOT): the file being
written, the mount point, and `df -h` where to free space; `write_bytes` gives a full disk's
error the target's name and leaves nothing behind; `KeptFile` puts a file back without room."""

from __future__ import annotations

import errno
import os
from pathlib import Path

import pytest

from qmd.core.config import Config
from qmd.core.errors import ConfigError
from qmd.core.fileio import KeptFile, denial, mount_point, write_bytes, write_text
from tests.support.diskfull import fill, small_disk


def test_a_full_disk_names_the_file_its_mount_and_df(tmp_path: Path) -> None:
    target = tmp_path / "sub" / "index.yml"
    mount = mount_point(tmp_path)
    assert os.path.ismount(mount)
    message, hint = denial(OSError(errno.ENOSPC, "No space left on device", str(target)), "cannot save the config X") or ("", "")
    assert message == f"cannot save the config X: cannot write {target}: No space left on device (the file system at {mount} is full)"
    assert hint == f"free space on {mount} (see: df -h {tmp_path}), then run the command again"
    message, hint = denial(OSError(errno.EDQUOT, "Disk quota exceeded", str(target))) or ("", "")
    assert message == f"cannot write {target}: Disk quota exceeded (your disk quota on {mount} is used up)" and "quota" in hint and f"df -h {tmp_path}" in hint
    message, hint = denial(OSError(errno.ENOSPC, "No space left on device")) or ("", "")  # a write() says no file
    assert "No space left on device" in message and "df -h" in hint


def test_writes_on_a_full_disk_name_their_file_and_leave_nothing(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 1):
        assert mount_point(disk / "no" / "such") == str(disk)
        old = disk / "kept.json"
        old.write_text("{}\n")
        fill(disk)
        with pytest.raises(OSError) as caught:
            write_bytes(old, b"x" * 100_000)
        assert caught.value.errno == errno.ENOSPC and caught.value.filename == str(old)
        refused = denial(caught.value)
        assert refused is not None and f"the file system at {disk} is full" in refused[0] and f"df -h {disk}" in refused[1]
        assert old.read_text() == "{}\n" and sorted(p.name for p in disk.iterdir()) == [".filler", "kept.json"]
        config = Config(disk / "index.yml", {"collections": {}})
        with pytest.raises(ConfigError) as error:
            config.save()
        assert f"free space on {disk}" in (error.value.hint or "") and "QMD_CONFIG_DIR" not in (error.value.hint or "")


def test_a_kept_file_goes_back_without_room(tmp_path: Path) -> None:
    disk = tmp_path / "disk"
    with small_disk(disk, 1):
        config, new = disk / "imp.yml", disk / "new.yml"
        config.write_text("collections:\n  a: {}\n")
        config.chmod(0o640)
        kept, fresh = KeptFile(config), KeptFile(new)
        write_text(config, "collections:\n  a: {}\n  notes: {}\n")
        write_text(new, "collections: {}\n")
        fill(disk)
        kept.restore()
        fresh.restore()
        kept.drop()
        fresh.drop()
        assert config.read_text() == "collections:\n  a: {}\n" and config.stat().st_mode & 0o777 == 0o640
        assert not new.exists() and sorted(p.name for p in disk.iterdir()) == [".filler", "imp.yml"]
        again = KeptFile(config)
        again.drop()  # the change stands: the link is gone, the file stays
        assert sorted(p.name for p in disk.iterdir()) == [".filler", "imp.yml"]
