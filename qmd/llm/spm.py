"""Read a SentencePiece `tokenizer.model` without the sentencepiece package.

The file is a protobuf `ModelProto` (sentencepiece_model.proto): field 1 repeats
`SentencePiece {1: piece (string), 2: score (float), 3: type (enum)}` and field 3 is the
`NormalizerSpec` (3: add_dummy_prefix, 4: remove_extra_whitespaces; both default true).
Only those fields are read; every other field is skipped by its wire type.
The piece types use the same numbers as GGUF's token types (NORMAL 1, UNKNOWN 2,
CONTROL 3, USER_DEFINED 4, UNUSED 5, BYTE 6).
"""

from __future__ import annotations

import struct
from dataclasses import dataclass
from pathlib import Path

NORMAL, UNKNOWN, CONTROL, USER_DEFINED, UNUSED, BYTE = 1, 2, 3, 4, 5, 6


@dataclass(frozen=True)
class SentencePieceModel:
    pieces: list[str]
    scores: list[float]
    types: list[int]
    add_dummy_prefix: bool
    remove_extra_whitespaces: bool


def _varint(buf: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(buf):
            raise ValueError("truncated varint")
        byte = buf[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _fields(buf: bytes) -> list[tuple[int, int, int | bytes]]:
    """(field number, wire type, value) of every field of one message, in order."""
    out: list[tuple[int, int, int | bytes]] = []
    pos, end = 0, len(buf)
    while pos < end:
        key, pos = _varint(buf, pos)
        field, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(buf, pos)
        elif wire == 1:
            value, pos = buf[pos : pos + 8], pos + 8
        elif wire == 2:
            size, pos = _varint(buf, pos)
            value, pos = buf[pos : pos + size], pos + size
        elif wire == 5:
            value, pos = buf[pos : pos + 4], pos + 4
        else:
            raise ValueError(f"unsupported protobuf wire type {wire}")
        if pos > end:
            raise ValueError("truncated field")
        out.append((field, wire, value))
    return out


def read_model(path: Path) -> SentencePieceModel:
    """The vocabulary and normaliser flags of the SentencePiece model at `path` (ValueError if unreadable)."""
    data = Path(path).read_bytes()
    pieces: list[str] = []
    scores: list[float] = []
    types: list[int] = []
    add_dummy_prefix = remove_extra = True
    for field, wire, value in _fields(data):
        if field == 1 and wire == 2 and isinstance(value, bytes):
            piece, score, kind = "", 0.0, NORMAL
            for sub, sub_wire, sub_value in _fields(value):
                if sub == 1 and sub_wire == 2 and isinstance(sub_value, bytes):
                    piece = sub_value.decode("utf-8")
                elif sub == 2 and sub_wire == 5 and isinstance(sub_value, bytes):
                    score = struct.unpack("<f", sub_value)[0]
                elif sub == 3 and sub_wire == 0 and isinstance(sub_value, int):
                    kind = sub_value
            pieces.append(piece)
            scores.append(score)
            types.append(kind)
        elif field == 3 and wire == 2 and isinstance(value, bytes):
            for sub, sub_wire, sub_value in _fields(value):
                if sub == 3 and sub_wire == 0:
                    add_dummy_prefix = bool(sub_value)
                elif sub == 4 and sub_wire == 0:
                    remove_extra = bool(sub_value)
    if not pieces:
        raise ValueError(f"{path} holds no SentencePiece pieces")
    return SentencePieceModel(pieces, scores, types, add_dummy_prefix, remove_extra)


# --- writing (tests build tiny tokenizers with it) -------------------------------------------


def _key(field: int, wire: int) -> bytes:
    return _enc_varint(field << 3 | wire)


def _enc_varint(value: int) -> bytes:
    out = bytearray()
    while True:
        byte = value & 0x7F
        value >>= 7
        if value:
            out.append(byte | 0x80)
        else:
            out.append(byte)
            return bytes(out)


def _bytes_field(field: int, payload: bytes) -> bytes:
    return _key(field, 2) + _enc_varint(len(payload)) + payload


def write_model(path: Path, pieces: list[tuple[str, float, int]], *, add_dummy_prefix: bool = False) -> Path:
    """Write a minimal BPE SentencePiece model (pieces as (text, score, type))."""
    body = bytearray()
    for piece, score, kind in pieces:
        msg = _bytes_field(1, piece.encode("utf-8")) + _key(2, 5) + struct.pack("<f", score) + _key(3, 0) + _enc_varint(kind)
        body += _bytes_field(1, msg)
    body += _bytes_field(2, _key(3, 0) + _enc_varint(2))  # TrainerSpec.model_type = BPE
    body += _bytes_field(3, _key(3, 0) + _enc_varint(int(add_dummy_prefix)) + _key(4, 0) + _enc_varint(0))
    Path(path).write_bytes(bytes(body))
    return Path(path)
