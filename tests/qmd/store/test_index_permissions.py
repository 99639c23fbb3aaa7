"""An index this user may not read or write is not a damaged one (design §7: one clear line naming
the fix, exit 1, nothing lost or half-written; never "damaged", never a rebuild, never exit 3).

The index file at 000 or 0200, at 0444, its -wal/-shm read-only, its folder read-only, its writer
lock read-only: every command names the file (or folder) that refuses and the chmod for it. qmd
runs with file modes binding (`bound_by_modes`: root without its DAC override)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.modes import everything, one_clear_error as _one_clear_error
from tests.support.modes import qmd_bound as qmd


def one_clear_error(code: int, out: str, err: str, fix: str) -> str:
    """One clear line naming `fix` (tests/support/modes.py), and never "damaged" or a rebuild."""
    line = _one_clear_error(code, out, err, fix)
    assert "is damaged" not in err and "doctor --fix" not in err and "rebuild" not in err and "cannot open the index" not in err, err
    return line




@pytest.fixture
def home(isolated_home: Path, notes: Path) -> Path:
    """The isolated home with the default index holding `notes` (collection 'notes')."""
    code, out, err = qmd("collection", "add", str(notes), "--name", "notes", cwd=isolated_home)
    assert code == 0, err
    return isolated_home


def index_of(home: Path) -> Path:
    return home / ".cache" / "qmd" / "index.sqlite"


def search_works(home: Path) -> None:
    code, out, err = qmd("search", "rollback", cwd=home)
    assert code == 0 and "qmd://notes/" in out, (code, out, err)


@pytest.fixture
def moded(home: Path) -> Iterator[list[tuple[Path, int]]]:
    """Paths the test gives a mode (path, mode): each set to 0644 (a folder 0755) afterwards."""
    changed: list[tuple[Path, int]] = []
    yield changed
    for path, _ in changed:
        if path.exists():
            path.chmod(0o755 if path.is_dir() else 0o644)


def chmod(moded: list[tuple[Path, int]], path: Path, mode: int) -> None:
    path.chmod(mode)
    moded.append((path, mode))


@pytest.mark.parametrize("mode", [0o000, 0o200])
@pytest.mark.parametrize("args", [("search", "rollback"), ("status",), ("ls", "notes"), ("update",), ("cleanup",)], ids=lambda a: a[0])
def test_an_index_this_user_cannot_read_is_named_with_its_chmod_not_called_damaged(home: Path, moded: list[tuple[Path, int]], mode: int, args: tuple[str, ...]) -> None:
    """Every command said "the index … is damaged … run: qmd doctor --fix", whose rebuild moves the
    intact file aside: a permission denial now says the file cannot be read by this user."""
    index = index_of(home)
    before = everything(index.parent)
    chmod(moded, index, mode)
    code, out, err = qmd(*args, cwd=home)
    line = one_clear_error(code, out, err, f"chmod u+rw {index}")
    assert f"the index {index} cannot be read by this user" in line, line
    assert everything(index.parent) == before
    index.chmod(0o644)
    search_works(home)


def _exported(home: Path) -> Path:
    file = home / "notes.qmd.gz"
    code, out, err = qmd("export", str(file), cwd=home)
    assert code == 0, err
    return file


WRITERS = {
    "update": ("update",),
    "cleanup": ("cleanup",),
    "collection-add": ("collection", "add", "{notes}", "--name", "more"),
    "rename": ("collection", "rename", "notes", "nn"),
    "remove": ("collection", "remove", "notes"),
    "import-replace": ("import", "{export}", "--collection", "notes={notes}", "--replace"),
}


@pytest.mark.parametrize("args", list(WRITERS.values()), ids=list(WRITERS))
def test_a_read_only_index_refuses_each_write_in_one_line_with_nothing_changed(home: Path, notes: Path, moded: list[tuple[Path, int]], args: tuple[str, ...]) -> None:
    """At 0444 each of these crashed with apsw.ReadOnlyError (exit 3, "this is a bug")."""
    (notes / "new.md").write_text("# New\n\nA rollback note added since.\n")
    export = _exported(home)
    index = index_of(home)
    config = home / ".config" / "qmd"
    before, config_before = everything(index.parent), everything(config)
    chmod(moded, index, 0o444)
    code, out, err = qmd(*(a.format(notes=notes, export=export) for a in args), cwd=home)
    line = one_clear_error(code, out, err, f"chmod u+rw {index}")
    assert f"the index {index} is read-only to this user" in line, line
    assert everything(config) == config_before  # a collection added, renamed or removed in the config only: none
    assert {k: v for k, v in everything(index.parent).items() if not k.endswith(("-wal", "-shm"))} == {k: v for k, v in before.items() if not k.endswith(("-wal", "-shm"))}
    index.chmod(0o644)
    code, out, err = qmd(*(a.format(notes=notes, export=export) for a in args), cwd=home)
    assert code == 0, (code, out, err)


def test_read_only_wal_and_shm_are_named_with_their_chmod(home: Path, moded: list[tuple[Path, int]]) -> None:
    """A -wal and -shm at 0444 beside an index at 0644 (a read of a 0444 index by an earlier
    qmd left them so): every update failed with apsw.ReadOnlyError, exit 3."""
    index = index_of(home)
    wal, shm = Path(f"{index}-wal"), Path(f"{index}-shm")
    for side in (wal, shm):
        side.touch()
        chmod(moded, side, 0o444)
    code, out, err = qmd("update", cwd=home)
    line = one_clear_error(code, out, err, f"chmod u+rw {wal} {shm}")
    assert "index.sqlite-wal and index.sqlite-shm are read-only to you" in line, line
    for side in (wal, shm):
        side.chmod(0o644)
    code, out, err = qmd("update", cwd=home)
    assert code == 0, err


def test_a_read_of_a_read_only_index_leaves_no_read_only_wal_behind(home: Path, notes: Path, moded: list[tuple[Path, int]]) -> None:
    """SQLite gives the -wal/-shm it creates the index's mode: a search of a 0444 index left
    them 0444, and once the index was made writable again (chmod 644) every update still failed
    with apsw.ReadOnlyError while doctor said all was well."""
    index = index_of(home)
    chmod(moded, index, 0o444)
    search_works(home)
    index.chmod(0o644)
    (notes / "new.md").write_text("# New\n\nA rollback note added since.\n")
    code, out, err = qmd("update", cwd=home)
    assert code == 0, (code, out, err)
    assert "1 new" in out + err


@pytest.mark.parametrize("args", [("search", "rollback"), ("status",), ("update",), ("cleanup",)], ids=lambda a: a[0])
def test_an_index_folder_this_user_cannot_write_in_is_named_not_called_broken(home: Path, moded: list[tuple[Path, int]], args: tuple[str, ...]) -> None:
    """The folder at 0500 (no -wal/-shm in it): every command said "cannot open the index: attempt
    to write a readonly database / hint: `qmd doctor` can rebuild a broken index"."""
    index = index_of(home)
    for side in (Path(f"{index}-wal"), Path(f"{index}-shm")):
        assert not side.exists()
    chmod(moded, index.parent, 0o500)
    code, out, err = qmd(*args, cwd=home)
    line = one_clear_error(code, out, err, f"chmod u+rwx {index.parent}")
    assert f"the index folder {index.parent} is not writable by this user" in line and "index.sqlite-wal" in line, line
    index.parent.chmod(0o755)
    search_works(home)


@pytest.mark.parametrize("mode", [0o444, 0o000])
@pytest.mark.parametrize("args", [("update",), ("cleanup",)], ids=lambda a: a[0])
def test_a_writer_lock_this_user_cannot_open_is_named_not_its_folder(home: Path, moded: list[tuple[Path, int]], mode: int, args: tuple[str, ...]) -> None:
    """`index.sqlite.lock` at 0444 or 000: update and cleanup said "cannot create the index folder
    …/.cache/qmd: Permission denied", though the folder was there."""
    lock = Path(f"{index_of(home)}.lock")
    assert lock.exists()
    chmod(moded, lock, mode)
    code, out, err = qmd(*args, cwd=home)
    line = one_clear_error(code, out, err, f"chmod u+rw {lock}")
    assert f"writer lock {lock}" in line and "cannot create the index folder" not in err, line
    search_works(home)  # readers never take the lock


def test_an_unreadable_index_is_not_moved_aside_by_rebuild(home: Path, moded: list[tuple[Path, int]]) -> None:
    """`qmd rebuild` of an index this user cannot read refuses; the file stays where it is."""
    index = index_of(home)
    before = everything(index.parent)
    chmod(moded, index, 0o000)
    code, out, err = qmd("rebuild", cwd=home)
    one_clear_error(code, out, err, f"chmod u+rw {index}")
    assert everything(index.parent) == before


@pytest.mark.parametrize("link", ["loop", "missing target"])
@pytest.mark.parametrize("args", [("update",), ("search", "rollback"), ("status",), ("ls",), ("collection", "list"), ("collection", "remove", "notes")], ids=" ".join)
def test_an_index_path_that_is_a_link_to_no_file_says_so(home: Path, notes: Path, link: str, args: tuple[str, ...]) -> None:
    """The index path a symlink that loops, or whose target is gone (an unmounted disk): update
    said "cannot be read by this user (permission denied)", search "has not been built", and
    `collection remove` dropped the collection from the config with exit 0 while its rows
    stayed in the index it could not reach (the session 21 red team). Every command now names
    the link, the config keeps the collection, and removing the link lets update build anew."""
    index = index_of(home)
    index.unlink()
    index.symlink_to(index.name if link == "loop" else str(home / "unmounted" / "index.sqlite"))
    config = (home / ".config" / "qmd" / "index.yml").read_text()
    code, out, err = qmd(*args, cwd=home)
    line = one_clear_error(code, out, err, f"rm {index}")
    assert "is a link that leads to no file" in line
    assert (home / ".config" / "qmd" / "index.yml").read_text() == config
    index.unlink()
    code, out, err = qmd("update", cwd=home)
    assert code == 0, err
    search_works(home)
