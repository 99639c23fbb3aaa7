"""Stream one member out of a zip cut byte-wise into volumes (7-Zip's `x.zip.001`, `.002`, …).

Such volumes are plain slices of one zip file, so the last volumes alone hold the end of
central directory; its offsets are absolute in the whole archive, and the offset of the
first volume at hand follows from where that record sits in them. A member can then be
read from the volumes at hand when its local header lies in them: nothing is installed,
no volume is joined on disk, and only one block is in memory at a time. The member is
written through a temporary file next to the target, checked (size, CRC-32, sha256), and
renamed into place only when every check passes.
"""

from __future__ import annotations

import hashlib
import itertools
import os
import struct
import zlib
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from qmd.core.errors import QmdError
from qmd.core.fileio import replace_file

_EOCD = b"PK\x05\x06"
_ZIP64_EOCD = b"PK\x06\x06"
_ZIP64_LOCATOR = b"PK\x06\x07"
_CENTRAL = b"PK\x01\x02"
_LOCAL = b"PK\x03\x04"
_BLOCK = 1 << 20
_TAIL = 22 + 0xFFFF + 20 + 56  # EOCD with the longest comment, zip64 locator and record


@dataclass(frozen=True)
class Volume:
    """One slice of the archive: a name for messages, its size, and how to open it for reading."""

    name: str
    size: int
    open: Callable[[], IO[bytes]]


@dataclass(frozen=True)
class Member:
    """A member's central-directory entry (offsets absolute in the whole archive)."""

    name: str
    method: int  # 0 stored, 8 deflated
    compressed_size: int
    size: int
    crc: int
    header_offset: int


class Span:
    """The volumes at hand, read as one byte range (offset 0 = the first volume's first byte)."""

    def __init__(self, volumes: Sequence[Volume]) -> None:
        self.volumes = list(volumes)
        self.size = sum(v.size for v in self.volumes)

    def stream(self, offset: int, length: int, block: int = _BLOCK) -> Iterator[bytes]:
        """`length` bytes from `offset`, in blocks, crossing volumes in order."""
        if offset < 0 or offset + length > self.size:
            raise QmdError(f"the volumes end before byte {offset + length:,} of the range they should hold", None)
        start = 0
        for vol in self.volumes:
            end = start + vol.size
            if length > 0 and offset < end:
                with vol.open() as fh:
                    if offset > start:
                        fh.seek(offset - start)
                    take = min(length, end - offset)
                    while take > 0:
                        data = fh.read(min(block, take))
                        if not data:
                            raise QmdError(f"volume {vol.name} is shorter than its {vol.size:,} bytes", None)
                        take -= len(data)
                        offset += len(data)
                        length -= len(data)
                        yield data
            start = end

    def read(self, offset: int, length: int) -> bytes:
        return b"".join(self.stream(offset, length))


def _fail(message: str) -> QmdError:
    return QmdError(message, None)


def _end_record(span: Span) -> tuple[int, int, int]:
    """(central directory offset in the archive, its size, the archive offset of the span's first byte)."""
    tail_at = max(0, span.size - _TAIL)
    tail = span.read(tail_at, span.size - tail_at)
    pos = tail.rfind(_EOCD)
    while pos >= 0 and (pos + 22 > len(tail) or pos + 22 + struct.unpack_from("<H", tail, pos + 20)[0] != len(tail)):
        pos = tail.rfind(_EOCD, 0, pos)
    if pos < 0:
        raise _fail("the last volume holds no zip end record: are these the archive's last volumes, in order?")
    cd_size, cd_offset = struct.unpack_from("<II", tail, pos + 12)
    follows = pos  # where the central directory ends, within the tail
    if cd_offset == 0xFFFFFFFF or cd_size == 0xFFFFFFFF:
        loc = pos - 20
        if loc < 0 or tail[loc:loc + 4] != _ZIP64_LOCATOR:
            raise _fail("the zip end record says zip64 but no zip64 locator precedes it")
        rec = tail.rfind(_ZIP64_EOCD, 0, loc)
        if rec < 0 or rec + 56 > loc:
            raise _fail("the zip64 end record is missing")
        cd_size, cd_offset = struct.unpack_from("<QQ", tail, rec + 40)
        follows = rec
    base = cd_offset + cd_size - (tail_at + follows)
    if base < 0:
        raise _fail("the volumes are longer than the archive their end record describes")
    return cd_offset, cd_size, base


def _zip64_fields(extra: bytes, wanted: list[bool]) -> list[int]:
    """The zip64 extra field's values for the 32-bit fields that overflowed (in order)."""
    at = 0
    while at + 4 <= len(extra):
        tag, size = struct.unpack_from("<HH", extra, at)
        if tag == 1:
            if size < 8 * sum(wanted) or at + 4 + size > len(extra):
                raise _fail("a zip64 member's zip64 extra field is too short for its sizes and offset: the volumes are damaged")
            values = [struct.unpack_from("<Q", extra, at + 4 + 8 * i)[0] for i in range(sum(wanted))]
            return values
        at += 4 + size
    raise _fail("a zip64 member has no zip64 extra field")


def find_member(span: Span, name: str) -> tuple[Member, int]:
    """The member called `name` and the archive offset of the span's first byte."""
    cd_offset, cd_size, base = _end_record(span)
    if cd_offset < base:
        raise _fail("the central directory starts in a volume that is not at hand")
    cd = span.read(cd_offset - base, cd_size)
    at = 0
    while at + 46 <= len(cd) and cd[at:at + 4] == _CENTRAL:
        (flags, method, crc, csize, usize, nlen, xlen, clen, hoff) = struct.unpack_from("<8xHH4xIIIHHH8xI", cd, at)
        entry = cd[at + 46:at + 46 + nlen].decode("utf-8" if flags & 0x800 else "cp437", "replace")  # a bad name is just not ours
        extra = cd[at + 46 + nlen:at + 46 + nlen + xlen]
        at += 46 + nlen + xlen + clen
        if entry != name:
            continue
        if flags & 1:
            raise _fail(f"{name} is encrypted in the archive")
        big = [usize == 0xFFFFFFFF, csize == 0xFFFFFFFF, hoff == 0xFFFFFFFF]
        if any(big):
            values = iter(_zip64_fields(extra, big))
            usize = next(values) if big[0] else usize
            csize = next(values) if big[1] else csize
            hoff = next(values) if big[2] else hoff
        return Member(entry, method, csize, usize, crc, hoff), base
    raise _fail(f"the archive has no member {name}")


def _inflated(inflate: zlib._Decompress, block: bytes | None, label: str) -> Iterator[bytes]:
    """`block` inflated (None: the rest), a block of output at a time: a zip bomb's 1000-fold
    block is never held whole, and the caller stops it at the declared size."""
    try:
        data = inflate.decompress(block, _BLOCK) if block is not None else inflate.flush(_BLOCK)
        while data:
            yield data
            if not inflate.unconsumed_tail:
                return
            data = inflate.decompress(inflate.unconsumed_tail, _BLOCK)
    except zlib.error as exc:
        raise _fail(f"{label} does not inflate ({exc}): the volumes are damaged; nothing written") from None


def extract_member(
    volumes: Sequence[Volume], name: str, dest: Path, *, size: int, sha256: str,
    progress: Callable[[int, int], None] | None = None,
) -> Path:
    """Write member `name` to `dest` when it is `size` bytes with this `sha256`; else raise
    QmdError and leave nothing behind. `progress(done, total)` gets the bytes written."""
    span = Span(volumes)
    member, base = find_member(span, name)
    label = Path(name).name
    if member.size != size:
        raise _fail(f"{label} in the volumes is {member.size:,} bytes, not the expected {size:,}: nothing written")
    if member.method not in (0, 8):
        raise _fail(f"{label} uses zip compression method {member.method}; only stored (0) and deflated (8) are read")
    start = member.header_offset - base
    if start < 0:
        raise _fail(f"{label} starts in a volume that is not at hand")
    head = span.read(start, 30)
    if head[:4] != _LOCAL:
        raise _fail(f"no local header where the central directory puts {label}: the volumes are not in order")
    nlen, xlen = struct.unpack_from("<HH", head, 26)
    inflate = zlib.decompressobj(-15) if member.method == 8 else None
    digest, crc, written = hashlib.sha256(), 0, 0
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = dest.with_name(f".{dest.name}.{os.getpid()}.tmp")
    try:
        with open(tmp, "wb") as fh:
            blocks: Iterator[bytes | None] = span.stream(start + 30 + nlen + xlen, member.compressed_size)
            for block in itertools.chain(blocks, (None,)) if inflate else blocks:  # None: flush the inflater
                for data in _inflated(inflate, block, label) if inflate else (block or b"",):
                    if written + len(data) > size:
                        raise _fail(f"{label} holds more than its {size:,} bytes: the volumes are damaged; nothing written")
                    digest.update(data)
                    crc = zlib.crc32(data, crc)
                    written += len(data)
                    fh.write(data)
                    if progress and data:
                        progress(written, size)
            fh.flush()
            os.fsync(fh.fileno())
        if written != size or crc != member.crc:
            raise _fail(f"{label} came out {written:,} bytes with a bad CRC: the volumes are damaged; nothing written")
        if digest.hexdigest() != sha256.lower():
            raise _fail(f"{label} has sha256 {digest.hexdigest()}, expected {sha256}: nothing written")
        replace_file(tmp, dest)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    return dest
