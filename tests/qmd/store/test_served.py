"""The config says what may be served: a collection removed from the YAML by hand is never
served again (get by docid or path, multi-get, search), and update/cleanup drop its rows."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import yaml

import qmd

Cli = Callable[..., tuple[int, str, str]]


def _remove_by_hand(name: str) -> None:
    path = qmd.resolve_index(None).config_path
    raw = yaml.safe_load(path.read_text())
    del raw["collections"][name]
    path.write_text(yaml.safe_dump(raw))


def test_a_collection_removed_from_the_config_is_not_served(cli: Cli, notes: Path, tmp_path: Path) -> None:
    secret = tmp_path / "secret"
    secret.mkdir()
    (secret / "keys.md").write_text("# Keys\n\nThe launch code is zebra-7.\n")
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("collection", "add", str(secret), "--name", "secret")[0] == 0
    docid = cli("search", "zebra", "--files")[1].split(",")[0]
    assert docid.startswith("#")
    _remove_by_hand("secret")
    with qmd.open_index() as store:
        assert store.orphaned_collections() == ["secret"]  # rows still there: doctor can say so
    for args in (("get", docid), ("get", "keys.md"), ("get", str(secret / "keys.md")), ("multi-get", "secret/*.md"), ("multi-get", docid)):
        code, out, err = cli(*args)
        assert code == 1 and "zebra" not in out, (args, out, err)
    assert "zebra" not in cli("search", "zebra", "--json")[1]
    assert "zebra" not in cli("query", "lex: zebra", "--json")[1]

    code, _, err = cli("update")
    assert code == 0 and "secret: no longer in the config: dropped its 1 documents" in err, err
    with qmd.open_index() as store:
        assert store.orphaned_collections() == []
        assert all(c.name != "secret" for c in store.status().collections)


def test_cleanup_drops_rows_of_removed_collections_too(cli: Cli, notes: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    other.mkdir()
    (other / "a.md").write_text("# A\n\nalpha\n")
    assert cli("collection", "add", str(notes), "--name", "notes")[0] == 0
    assert cli("collection", "add", str(other), "--name", "other")[0] == 0
    _remove_by_hand("other")
    code, _, err = cli("cleanup")
    assert code == 0 and "other: no longer in the config" in err, err
    with qmd.open_index() as store:
        assert store.orphaned_collections() == []
