"""The YAML config is validated on load: a wrong type is one line naming the key and the file
(exit 1, nothing changed in the index); an unknown key is a did-you-mean warning."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import yaml

import qmd

Cli = Callable[..., tuple[int, str, str]]


def _config() -> Path:
    return qmd.resolve_index(None).config_path


def _edit(change: Callable[[dict[str, Any]], None]) -> None:
    path = _config()
    raw = yaml.safe_load(path.read_text())
    change(raw)
    path.write_text(yaml.safe_dump(raw))


def _coll(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw["collections"]["notes"].__setitem__(key, value)


def _top(key: str, value: object) -> Callable[[dict[str, Any]], None]:
    return lambda raw: raw.__setitem__(key, value)


@pytest.mark.parametrize(
    ("change", "key"),
    [
        (_coll("pattern", [1, 2]), "pattern"),
        (_coll("pattern", 5), "pattern"),
        (_coll("pattern", ""), "pattern"),
        (_coll("ignore", [1]), "ignore"),
        (_coll("ignore", {"a": 1}), "ignore"),
        (_coll("includeByDefault", "maybe"), "includeByDefault"),
        (_coll("embed", "nope"), "embed"),
        (_coll("path", 42), "path"),
        (_coll("update", ["git", "pull"]), "update"),
        (_coll("path", "\x00notes"), "path"),  # once ValueError: embedded null byte, exit 3
        (_coll("update", "git pull\x00; rm -rf ~"), "update"),
        (_coll("context", ["a"]), "context"),
        (_coll("context", {"/": 3}), "context"),
        (_top("global_context", [1]), "global_context"),
        (_top("models", ["x"]), "models"),
        (_top("models", {"embed": 5}), "embed"),
    ],
)
def test_a_wrong_type_is_one_clear_error_and_the_index_is_untouched(cli: Cli, notes: Path, change: Callable[[dict[str, Any]], None], key: str) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    before = qmd.open_index().document_count()
    good = _config().read_text()
    _edit(change)
    for command in (("update",), ("search", "rollback"), ("status",)):
        code, out, err = cli(*command)
        assert code == 1, (command, code, err)
        first = err.splitlines()[0]
        assert first.startswith("Error: ") and f"'{key}'" in first and str(_config()) in err, err
        assert "hint: " in err and "Traceback" not in err
    _config().write_text(good)
    with qmd.open_index() as store:
        assert store.document_count() == before  # nothing was soft-deleted
        assert store.search("rollback")


def test_unknown_keys_are_named_with_a_did_you_mean_in_update_and_status(cli: Cli, notes: Path) -> None:
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    _edit(lambda raw: raw["collections"]["notes"].__setitem__("patern", "*.txt"))
    _edit(_top("modles", {"embed": "x.gguf"}))
    for command in (("update",), ("status",)):
        code, _, err = cli(*command)
        assert code == 0, err
        assert "unknown key 'patern'; did you mean 'pattern'?" in err, err
        assert "unknown key 'modles'; did you mean 'models'?" in err, err
    code, out, _ = cli("status", "--json")
    import json

    assert code == 0 and len(json.loads(out)["config_warnings"]) == 2


def test_a_cached_copy_of_a_bad_config_is_still_refused(cli: Cli, notes: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The parsed copy in the cache dir (written by an older qmd, say) is validated too."""
    from qmd.core import config

    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    path = _config()
    config.Config.load(path)
    cache = config.config_cache_path(path)
    import json

    data = json.loads(cache.read_text())
    data["raw"]["collections"]["notes"]["pattern"] = [1, 2]
    cache.write_text(json.dumps(data))
    code, _, err = cli("update")
    assert code == 1 and "'pattern'" in err


def test_yaml_1_2_scalars_and_yes_no_flags(cli: Cli, notes: Path) -> None:
    """The config reads YAML 1.2 as the original does: a collection named `off` and a context
    `no` are text (PyYAML's YAML 1.1 made them booleans: "name must be a string"), while
    `includeByDefault: no` and `embed: off` still mean false."""
    _config().parent.mkdir(parents=True, exist_ok=True)
    _config().write_text(f"collections:\n  off:\n    path: {notes}\n    includeByDefault: no\n    embed: off\n    context:\n      /: no\n")
    code, out, err = cli("update")
    assert code == 0, err
    with qmd.open_index() as store:
        coll = store.config.collections()["off"]
        assert (coll.include_by_default, coll.embed) == (False, False)
        assert coll.context == {"/": "no"}


def test_what_qmd_writes_it_reads_back_and_plain_names_stay_text(cli: Cli, notes: Path) -> None:
    """A collection named `1e3` (a float to YAML 1.2, text to 1.1) is written quoted: it once
    came back as the collection '1000.0' and the next update dropped the real one's documents.
    Names an older qmd wrote unquoted (`08:`, `0o17:`: text to YAML 1.1) or a person wrote
    (`1e3:`) stay those names: a plain key is its text."""
    assert cli("collection", "add", str(notes), "--name", "1e3")[0] == 0
    code, out, err = cli("update")
    assert code == 0 and "dropped" not in out + err and "1000.0" not in out + err, out + err
    code, out, _ = cli("search", "rollback")
    assert code == 0 and "qmd://1e3/" in out, out
    _config().write_text(f"collections:\n  1e3:\n    path: {notes}\n  08:\n    path: {notes}\n  0o17:\n    path: {notes}\n")
    code, out, err = cli("update")
    assert code == 0 and "dropped" not in out + err, out + err
    code, out, _ = cli("collection", "list")
    assert all(name in out for name in ("1e3", "08", "0o17")) and "1000.0" not in out and "\n8" not in out, out
    assert cli("collection", "rename", "08", "eight")[0] == 0
    assert "eight:" in _config().read_text() and "08:" not in _config().read_text()


def _alias_bomb(where: str) -> str:
    """A config of a few hundred bytes whose aliases expand to 10^9 values at `where`."""
    lines = ["a0: &a0 [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 9):
        lines.append(f"a{i}: &a{i} [" + ", ".join([f"*a{i - 1}"] * 10) + "]")
    return "\n".join(lines) + "\n" + where.replace("BOMB", "*a8") + "\n"


@pytest.mark.parametrize("where", [
    "collections:\n  notes:\n    path: NOTES\n    context:\n      /: BOMB",  # once a repr of 10^9 values in the error: a hang
    "collections:\n  notes:\n    path: NOTES\nsearch:\n  junk: BOMB",  # valid types: once json.dumps of the cached copy
])
def test_a_yaml_alias_bomb_in_the_config_is_one_clear_error_not_a_hang(notes: Path, where: str) -> None:
    from tests.support.run import run_qmd

    path = _config()
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(_alias_bomb(where.replace("NOTES", str(notes))))
    for command in (("ls",), ("status",)):
        proc = run_qmd(*command, timeout=60)
        assert proc.returncode == 1, (command, proc.returncode, proc.stderr[-500:])
        first = proc.stderr.splitlines()[0]
        assert first.startswith("Error: ") and str(path) in first and "alias" in first, proc.stderr
        assert "Traceback" not in proc.stderr
