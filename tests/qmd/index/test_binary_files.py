"""Binary content is told by more than NUL bytes (issue 25): real files through the real indexer.

Random bytes without a NUL, text of control characters, or a UTF-16 mark before garbage are
skipped with the reason (listed by `update` and `status`), as a file with NUL bytes is; text
in any shape people write (accents, CJK, emoji, Windows-1252 strays, ANSI colours, minified
code, UTF-16 with a byte order mark) is indexed and found.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest

import qmd
from qmd.index.indexer import decode_text

RNG = random.Random(25)


def random_bytes(n: int, low: int = 1, high: int = 255) -> bytes:
    """`n` random bytes in [low, high] (1-255: no NUL, the case a NUL probe misses)."""
    return bytes(RNG.randrange(low, high + 1) for _ in range(n)) if n < 10_000 else _fast_random(n, low, high)


def _fast_random(n: int, low: int, high: int) -> bytes:
    span = high - low + 1
    table = bytes(low + (i * span) // 256 for i in range(256))  # an even map of 0-255 onto [low, high]
    return RNG.randbytes(n).translate(table)


SKIPPED: dict[str, tuple[bytes, str]] = {
    # name: (content, the reason `update` and `status` give)
    "bin.py": (random_bytes(2 * 1024 * 1024), "binary file (10% control characters)"),
    "notes.md": (random_bytes(2 * 1024 * 1024), "binary file (10% control characters)"),
    "small-random.md": (random_bytes(400), "binary file ("),
    "high-bytes.md": (random_bytes(200_000, 0x20, 0xFF), "% invalid UTF-8, 0."),
    "controls.md": (("ok\x01\x02\x03" * 2000).encode(), "binary file (60% control characters)"),
    "utf8-controls.md": (("word \x10\x11\x12 é " * 3000).encode(), "binary file (27% control characters)"),
    "nul.md": (b"# Title\n\x00\x01 numbat\n", "binary file (NUL bytes)"),
    "fake-utf16.md": (b"\xff\xfe" + random_bytes(100_000, 0, 255), "binary file (a UTF-16 byte order mark, then "),
}

INDEXED: dict[str, tuple[bytes, str, str | None]] = {
    # name: (content, a word a search finds in it, the warning `update` gives or None)
    "accents.md": ("# Crème brûlée\n\nnaïve façade, déjà vu: gratinée\n".encode(), "gratinée", None),
    "cjk.md": ("# 検索\n\n日本語のテキストです。😀 emoji okapi 中文 한국어\n".encode(), "okapi", None),
    "cp1252.md": ("# Café\n\nthe naïve quokka said “hello” – 5 €\n".encode("cp1252"), "quokka", "invalid UTF-8 at byte 5"),
    "ansi.md": (
        "# Build log\n\n```\n\x1b[1;32m✓\x1b[0m compiled pangolin \x1b[31mfailed\x1b[0m\n"
        "\x1b]8;;https://example.com\x07link\x1b]8;;\x07 \x1b[2K\r100%\n```\n".encode(),
        "pangolin",
        None,
    ),
    "minified.js": (("var a=" + "+".join(f"f{i}(x)" for i in range(60_000)) + ";var capybara=1;").encode(), "capybara", None),
    "utf16.md": ("# Notes\n\nWindows wrote this wombat in UTF-16 é 日本\n".encode("utf-16"), "wombat", None),
    "utf16be.md": (b"\xfe\xff" + "# Big\n\nbig endian aardvark\n".encode("utf-16-be"), "aardvark", None),
    "manpage.txt": ("L\bLS\bS(1)\n\n       ls - list directory contents, narwhal\n\f\n".encode(), "narwhal", None),
    "mojibake.md": (("It’s the “best” café ‘ever’, said the ocelot. " * 200).encode().decode("latin-1").encode(), "ocelot", None),
    "cp1251.md": ("# Заметки\n\nтекст в кодировке cp1251 axolotl\n".encode("cp1251"), "axolotl", "invalid UTF-8 at byte 2"),
}


@pytest.fixture(scope="module")
def indexed(tmp_path_factory: pytest.TempPathFactory) -> tuple[qmd.Store, dict[str, str], dict[str, str]]:
    """Every file above in one folder, indexed by `Store.add_collection` (the `qmd update` path)."""
    home = tmp_path_factory.mktemp("binary")
    root = home / "notes"
    root.mkdir()
    for name, (content, *_) in {**SKIPPED, **INDEXED}.items():
        (root / name).write_bytes(content)
    store = qmd.Store(home / "idx" / "index.sqlite", home / "idx" / "index.yml")
    report = store.add_collection(root, name="notes", pattern="**/*")
    assert report is not None
    [coll] = report.collections
    return store, dict(coll.skipped), dict(coll.warnings)


@pytest.mark.parametrize("name", SKIPPED)
def test_binary_content_is_skipped_with_the_reason(indexed: tuple[qmd.Store, dict[str, str], dict[str, str]], name: str) -> None:
    store, skipped, _ = indexed
    reason = SKIPPED[name][1]
    assert name in skipped and reason in skipped[name], skipped.get(name)
    assert ("notes", name, "skipped", skipped[name]) in store.status().issues  # `qmd status` lists it and why
    assert name not in {e.path for e in store.ls("notes")}


@pytest.mark.parametrize("name", INDEXED)
def test_text_is_indexed_and_found(indexed: tuple[qmd.Store, dict[str, str], dict[str, str]], name: str) -> None:
    store, skipped, warnings = indexed
    _, word, warning = INDEXED[name]
    assert name not in skipped
    assert [h.path.rsplit("/", 1)[-1] for h in store.search(word)] == [name]
    if warning is None:
        assert name not in warnings
    else:
        assert warning in warnings[name]


def test_a_skipped_file_turned_into_text_is_indexed_on_the_next_update(tmp_path: Path) -> None:
    root = tmp_path / "notes"
    root.mkdir()
    target = root / "later.md"
    target.write_bytes(random_bytes(5000))
    store = qmd.Store(tmp_path / "idx" / "index.sqlite", tmp_path / "idx" / "index.yml")
    store.add_collection(root, name="notes")
    assert [i[2] for i in store.status().issues if i[1] == "later.md"] == ["skipped"]
    target.write_text("# Later\n\nnow it is text about a tapir\n")
    store.update()
    assert [h.path for h in store.search("tapir")] and not [i for i in store.status().issues if i[1] == "later.md"]


@pytest.mark.parametrize(
    ("data", "binary"),
    [
        (b"plain ascii\n", False),
        (b"", False),  # empty: its own reason
        (b"one BEL\x07 in a short line\n", False),
        (b"tab\tcr\r\nff\x0cvt\x0bbs\x08esc\x1b[0m\n", False),
        (b"a\x01" * 10, True),
        (b"\xff\xfe", False),  # a mark alone: an empty file
        (b"\xff\xfe\x00\xd8", True),  # a lone surrogate after the mark
        ("utf-32 text".encode("utf-32"), False),
    ],
    ids=["ascii", "empty", "bel", "whitespace-and-escapes", "soh", "bom-alone", "lone-surrogate", "utf-32"],
)
def test_decode_text_table(data: bytes, binary: bool) -> None:
    text, reason, _ = decode_text(data)
    assert (reason or "").startswith("binary file") == binary, (text, reason)


def test_a_binary_file_an_older_qmd_indexed_as_text_is_dropped_by_the_next_update(tmp_path: Path) -> None:
    """Rows written before binary detection went beyond NUL (meta_version < 3) are read again
    even though the file's size and time did not change: the binary one leaves the index."""
    import os

    import apsw

    notes = tmp_path / "notes"
    notes.mkdir()
    data = random_bytes(50_000)
    (notes / "blob.md").write_bytes(b"# Blob\n\n" + b"numbat " * 7_000)
    store = qmd.Store(tmp_path / "i.sqlite", tmp_path / "i.yml")
    try:
        store.add_collection(notes, name="n")
        st = (notes / "blob.md").stat()
        (notes / "blob.md").write_bytes(data[: st.st_size])  # what an older qmd indexed as text: same size, same time
        os.utime(notes / "blob.md", ns=(st.st_atime_ns, st.st_mtime_ns))
    finally:
        store.close()
    conn = apsw.Connection(str(tmp_path / "i.sqlite"))
    conn.execute("UPDATE documents SET meta_version = 2")
    conn.close()
    store = qmd.Store(tmp_path / "i.sqlite", tmp_path / "i.yml")
    try:
        report = store.update()
        assert report.totals["removed"] == 1 and report.totals["skipped"] == 1
        assert [i for i in store.status().issues if i[1] == "blob.md"][0][3].startswith("binary file (")
        assert store.search("numbat") == []
    finally:
        store.close()


@pytest.mark.parametrize("name", [b"caf\xe9.md", b"sub\xff/note.md"])
def test_a_file_name_that_is_not_utf8_is_skipped_not_a_crash(tmp_path: Path, name: bytes) -> None:
    """A Latin-1 file (or folder) name: that one file is skipped with the reason, the rest
    of the collection is indexed (every update used to stop with exit 3)."""
    import os

    notes = tmp_path / "notes"
    notes.mkdir()
    (notes / "ok.md").write_text("# Ok\n\nnumbat words\n")
    target = os.path.join(os.fsencode(notes), name)
    os.makedirs(os.path.dirname(target), exist_ok=True)
    with open(target, "wb") as fh:
        fh.write(b"# Latin\n\nnumbat too\n")
    store = qmd.Store(tmp_path / "i.sqlite", tmp_path / "i.yml")
    try:
        report = store.add_collection(notes, name="n")
        assert report is not None and report.totals["new"] == 1 and report.totals["skipped"] == 1
        issues = [i for i in store.status().issues if i[2] == "skipped"]
        assert len(issues) == 1 and "not valid UTF-8" in issues[0][3] and "\ufffd" in issues[0][1]
        assert [h.path for h in store.search("numbat")] == ["ok.md"]
    finally:
        store.close()
