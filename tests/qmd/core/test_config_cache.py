"""The parsed-config cache never serves a stale or wrong config: a copy is used only when
the file's text is the text it was parsed from (whatever the file's times say), so it is
written at once, a saved config's included; a corrupt copy or an unwritable cache dir only
costs a YAML parse."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from qmd.core import config
from qmd.core.config import Config, config_cache_path

YAML = "collections:\n  notes:\n    path: /tmp/{}\n"


@pytest.fixture
def path(tmp_path: Path) -> Path:
    target = tmp_path / "cfg" / "index.yml"
    target.parent.mkdir()
    target.write_text(YAML.format("aaaa"))
    return target


def _folder(path: Path) -> str:
    return str(Config.load(path).collections()["notes"].path)


def test_a_config_is_read_from_its_cached_copy(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert _folder(path) == "/tmp/aaaa"
    cache = config_cache_path(path)
    assert cache.is_file() and cache.parent.parent == Path(os.environ["XDG_CACHE_HOME"]) / "qmd"
    assert json.loads(cache.read_text())["raw"] == {"collections": {"notes": {"path": "/tmp/aaaa"}}}
    monkeypatch.setattr(config, "_yaml", lambda: (_ for _ in ()).throw(AssertionError("parsed the YAML")))
    assert _folder(path) == "/tmp/aaaa"


def test_edit_then_read_within_the_same_second(path: Path) -> None:
    """A copy made a moment ago, then a same-size edit in the same timestamp tick (coarse
    file systems): the text differs, so the edit is seen."""
    assert _folder(path) == "/tmp/aaaa"
    assert config_cache_path(path).exists()  # no 2 s wait: the copy names its text
    stat = path.stat()
    path.write_text(YAML.format("bbbb"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))  # same size, same mtime
    assert _folder(path) == "/tmp/bbbb"


def test_a_touched_file_keeps_its_copy(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """New times, same text (a `touch`, a checkout): the copy still serves."""
    assert _folder(path) == "/tmp/aaaa"
    path.write_text(YAML.format("aaaa"))
    monkeypatch.setattr(config, "_yaml", lambda: (_ for _ in ()).throw(AssertionError("parsed the YAML")))
    assert _folder(path) == "/tmp/aaaa"


def test_a_same_size_change_with_the_old_mtime_is_seen(path: Path) -> None:
    """In place, same size, mtime put back (rsync --inplace -t, tar): the ctime tells."""
    assert _folder(path) == "/tmp/aaaa"
    stat = path.stat()
    with open(path, "r+", encoding="utf-8") as fh:
        fh.write(YAML.format("cccc"))
    os.utime(path, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    after = path.stat()
    assert (after.st_size, after.st_mtime_ns, after.st_ino) == (stat.st_size, stat.st_mtime_ns, stat.st_ino)
    assert _folder(path) == "/tmp/cccc"


def test_a_replaced_file_is_seen(path: Path) -> None:
    """An editor's save (new inode by rename) of the same size."""
    assert _folder(path) == "/tmp/aaaa"
    stat = path.stat()
    other = path.with_name("new.yml")
    other.write_text(YAML.format("dddd"))
    os.utime(other, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    other.replace(path)
    assert _folder(path) == "/tmp/dddd"


@pytest.mark.parametrize("garbage", ["", "{", "[]", "null", '{"version": 1}', '{"version": 1, "identity": [], "raw": {}}', "\x00\xff"])
def test_a_corrupt_copy_is_ignored_and_rewritten(path: Path, garbage: str) -> None:
    assert _folder(path) == "/tmp/aaaa"
    cache = config_cache_path(path)
    cache.write_text(garbage, encoding="utf-8", errors="surrogateescape")
    assert _folder(path) == "/tmp/aaaa"
    assert json.loads(cache.read_text())["raw"]["collections"]["notes"]["path"] == "/tmp/aaaa"


def test_a_copy_of_another_config_is_never_used(path: Path, tmp_path: Path) -> None:
    """Copies are per path, and each names the file it was made from."""
    other = tmp_path / "other" / "index.yml"
    other.parent.mkdir()
    other.write_text(YAML.format("eeee"))
    assert _folder(path) == "/tmp/aaaa" and _folder(other) == "/tmp/eeee"
    assert config_cache_path(path) != config_cache_path(other)
    config_cache_path(path).write_bytes(config_cache_path(other).read_bytes())
    assert _folder(path) == "/tmp/aaaa"


def test_an_unwritable_cache_dir_costs_only_a_parse(path: Path) -> None:
    folder = config_cache_path(path).parent
    folder.parent.mkdir(parents=True, exist_ok=True)
    folder.write_text("a file where the folder should be")
    assert _folder(path) == "/tmp/aaaa"
    path.write_text(YAML.format("ffff"))
    assert _folder(path) == "/tmp/ffff"


def test_what_json_cannot_hold_exactly_is_not_cached(path: Path) -> None:
    """Number keys would come back as text, dates not at all: such a config is parsed each time."""
    path.write_text("collections:\n  2024:\n    path: /tmp/x\nupdater:\n  since: 2024-01-02\n")
    assert str(Config.load(path).collections()["2024"].path) == "/tmp/x"
    assert not config_cache_path(path).exists()


def test_a_saved_config_is_read_back_as_saved(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Saving keeps the parse of what it wrote: the next load (another process's) reads no YAML."""
    cfg = Config.load(path)
    cfg.global_context = "all my notes"
    cfg.save()
    monkeypatch.setattr(config, "_yaml", lambda: (_ for _ in ()).throw(AssertionError("parsed the YAML")))
    assert Config.load(path).global_context == "all my notes"
    assert not path.with_name(f".{path.name}.json").exists()  # no copy beside the config any more


def test_a_missing_config_is_empty(tmp_path: Path) -> None:
    assert Config.load(tmp_path / "nope.yml").raw == {}
