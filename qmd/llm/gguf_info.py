"""Read a GGUF file's header (metadata keys) without llama.cpp, fast and lean."""

from __future__ import annotations

import struct
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any, BinaryIO

from qmd.core.errors import QmdError

MAGIC = b"GGUF"
RANK_POOLING = 4  # `{arch}.pooling_type` of cross-encoders (llama.cpp's LLAMA_POOLING_TYPE_RANK)
# value type → struct format (scalars); 8 = string, 9 = array
_SCALARS = {0: "<B", 1: "<b", 2: "<H", 3: "<h", 4: "<I", 5: "<i", 6: "<f", 7: "<?", 10: "<Q", 11: "<q", 12: "<d"}
_SKIP_ARRAYS_OVER = 64  # token lists etc.: skipped, only their length is kept


def looks_like_gguf(head: bytes, *, partial: bool = False) -> bool:
    """Whether `head`, the first bytes of a file, start with the GGUF magic.

    With `partial` (the first block of a download), fewer than four bytes pass when they
    are a prefix of the magic.
    """
    if partial:
        return head[: len(MAGIC)] == MAGIC[: len(head)]
    return head[: len(MAGIC)] == MAGIC


def has_gguf_magic(path: Path) -> bool:
    """Whether the file at `path` starts with the GGUF magic (False when it cannot be read)."""
    try:
        with open(path, "rb") as fh:
            head = fh.read(len(MAGIC))
    except OSError:
        return False
    return looks_like_gguf(head)


def _read(fh: BinaryIO, fmt: str) -> Any:
    size = struct.calcsize(fmt)
    data = fh.read(size)
    if len(data) != size:
        raise EOFError
    return struct.unpack(fmt, data)[0]


def _string(fh: BinaryIO) -> str:
    n = _read(fh, "<Q")
    data = fh.read(n)
    if len(data) != n:
        raise EOFError
    return data.decode("utf-8", "replace")


def _value(fh: BinaryIO, vtype: int) -> Any:
    if vtype in _SCALARS:
        return _read(fh, _SCALARS[vtype])
    if vtype == 8:
        return _string(fh)
    if vtype == 9:
        itype = _read(fh, "<I")
        count = _read(fh, "<Q")
        if count > _SKIP_ARRAYS_OVER:
            if itype in _SCALARS:
                fh.seek(struct.calcsize(_SCALARS[itype]) * count, 1)
            elif itype == 8:
                for _ in range(count):
                    fh.seek(_read(fh, "<Q"), 1)
            else:
                for _ in range(count):
                    _value(fh, itype)
            return f"<array of {count}>"
        return [_value(fh, itype) for _ in range(count)]
    raise ValueError(f"unknown GGUF value type {vtype}")


def read_metadata(path: Path) -> dict[str, Any]:
    """All metadata keys of a GGUF file (long arrays summarised). Raises QmdError if not GGUF."""
    try:
        with open(path, "rb") as fh:
            if not looks_like_gguf(fh.read(len(MAGIC))):
                raise QmdError(f"{path} is not a GGUF model file", "download it again (qmd pull) or point the config at a .gguf file")
            _read(fh, "<I")  # version
            _read(fh, "<Q")  # tensor count
            n_kv = _read(fh, "<Q")
            meta: dict[str, Any] = {}
            for _ in range(n_kv):
                key = _string(fh)
                meta[key] = _value(fh, _read(fh, "<I"))
            return meta
    except (OSError, EOFError, ValueError, struct.error) as exc:
        raise QmdError(f"cannot read the model file {path}: {exc or 'truncated'}", "download it again (qmd pull) or re-import it") from exc


@dataclass
class ModelInfo:
    """What qmd needs to know about a GGUF model before loading it."""

    path: Path
    arch: str
    name: str
    context_length: int
    embedding_length: int | None
    pooling: int | None
    meta: dict[str, Any] = field(default_factory=dict, repr=False)

    def usable_context(self, cap: int = 2048) -> int:
        """n_ctx to load with: at most `cap`, never above the training context.

        llama.cpp aborts the whole process (uncatchable) when n_ctx exceeds it.
        """
        return max(1, min(self.context_length, cap))

    @cached_property
    def identity(self) -> str:
        """Name, size and the sha256 of the whole file: other weights under the same name,
        size and header are another model (their vectors never mix). The digest is cached
        by (size, mtime, inode) in `<cache>/model-digests.json`, so a file is read once."""
        from qmd.core.fileio import file_digest
        from qmd.core.paths import cache_dir

        size = self.path.stat().st_size
        return f"{self.name}:{size}:{file_digest(self.path, cache_dir() / 'model-digests.json')[:16]}"


def model_info(path: Path) -> ModelInfo:
    """What the header of the GGUF file at `path` says (QmdError when it is not one)."""
    meta = read_metadata(path)
    arch = str(meta.get("general.architecture", "unknown"))
    ctx = meta.get(f"{arch}.context_length")
    emb = meta.get(f"{arch}.embedding_length")
    pooling = meta.get(f"{arch}.pooling_type")
    return ModelInfo(
        path=path,
        arch=arch,
        name=str(meta.get("general.name") or path.stem),
        context_length=int(ctx) if isinstance(ctx, int) else 512,
        embedding_length=int(emb) if isinstance(emb, int) else None,
        pooling=int(pooling) if isinstance(pooling, int) else None,
        meta=meta,
    )
