"""Where qmd keeps things: config, index, models and harness state (env + XDG)."""

from __future__ import annotations

import os
import re
import stat
from qmd.core.records import record
from pathlib import Path

from qmd.core.errors import QmdError

DEFAULT_INDEX = "index"
_INDEX_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._-]{0,63}$")


def within(path: str, folder: str) -> bool:
    """`path` is `folder` or below it, compared as spelled (give both real or both normalised)."""
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def _xdg(var: str, fallback: str) -> Path:
    value = os.environ.get(var)
    if value:
        return Path(value)
    return Path.home() / fallback


def config_dir() -> Path:
    """`$QMD_CONFIG_DIR`, else `$XDG_CONFIG_HOME/qmd`, else `~/.config/qmd`."""
    explicit = os.environ.get("QMD_CONFIG_DIR")
    return Path(explicit) if explicit else _xdg("XDG_CONFIG_HOME", ".config") / "qmd"


TRUST_FILE = "trusted.json"


def trust_file_path() -> Path:
    """`<config dir>/trusted.json`, the approvals of project-local configs (qmd/core/trust.py),
    beside the user's own configs, never in a project. Here, not there: a server stats it
    before every request, and the trust module imports hashlib."""
    return config_dir() / TRUST_FILE


def cache_dir() -> Path:
    """`$XDG_CACHE_HOME/qmd`, else `~/.cache/qmd`: indexes live here."""
    return _xdg("XDG_CACHE_HOME", ".cache") / "qmd"


def models_dir() -> Path:
    """`$QMD_MODELS_DIR`, else `<cache>/models`."""
    explicit = os.environ.get("QMD_MODELS_DIR")
    return Path(explicit) if explicit else cache_dir() / "models"


def state_dir() -> Path:
    """`$QMD_STATE_DIR`, else `$XDG_STATE_HOME/qmd`, else `~/.local/state/qmd`."""
    explicit = os.environ.get("QMD_STATE_DIR")
    return Path(explicit) if explicit else _xdg("XDG_STATE_HOME", ".local/state") / "qmd"


def check_index_name(name: str) -> str:
    """Return `name` if it is a valid index name, else raise a QmdError naming the rule."""
    if not _INDEX_NAME.match(name):
        raise QmdError(
            f"invalid index name {name!r}",
            "use letters, digits, '.', '_' or '-' (at most 64 characters)",
        )
    return name


@record(frozen=True)
class IndexPaths:
    """The files that make up one index, and why this one was chosen.

    `source`: `default` (no `--index`, no project-local config), `named` (`--index NAME`),
    or `local` (a `.qmd/index.yml` found from the working directory upward, as the original's
    `qmd init` makes: config and `index.sqlite` side by side in the project's `.qmd/`).
    """

    name: str
    index_path: Path
    config_path: Path
    source: str = "default"

    @property
    def local(self) -> bool:
        return self.source == "local"

    @property
    def key(self) -> str:
        """What names this index to `resolve_index` from anywhere: the name, or for a
        project-local index the absolute path of its config (the harness keys them so)."""
        return str(self.config_path) if self.local else self.name

    @property
    def project_root(self) -> Path | None:
        """The folder holding `.qmd/` of a project-local index (None for the others)."""
        return self.config_path.parent.parent if self.local else None

    def reason(self) -> str:
        """One line for `qmd status`: which index is in use and why."""
        if self.local:
            return f"project-local index of {self.project_root} ({self.config_path} found from the working directory; --index NAME selects a named one)"
        if self.source == "named":
            return f"index '{self.name}' (--index {self.name})"
        return f"index '{self.name}' (the default: no --index, no .qmd/index.yml above the working directory)"


LOCAL_DIR = ".qmd"
LOCAL_CONFIG_NAMES = ("index.yaml", "index.yml")  # the original looks for index.yaml first
LOCAL_INDEX_FILE = "index.sqlite"


def is_local_config(path: str | os.PathLike[str]) -> bool:
    """A project-local config: `index.yml`/`index.yaml` inside a folder named `.qmd` (the
    original's `isLocalConfigPath`). Configs in the config dir never are."""
    absolute = Path(os.path.abspath(path))
    return absolute.parent.name == LOCAL_DIR and absolute.name in LOCAL_CONFIG_NAMES


LOCAL_PREFIX = "local-"


def project_identity(config_path: str | os.PathLike[str]) -> str:
    """Who a project-local config is: the real path of the project it was reached from (the
    folder holding `.qmd/`) joined with `.qmd/<file>`. The same project reached through a
    linked parent folder is the same; a project whose `.qmd` links to another project's is
    not that other project (its index belongs to the other)."""
    absolute = os.path.abspath(config_path)
    root = os.path.realpath(os.path.dirname(os.path.dirname(absolute)))
    return os.path.join(root, LOCAL_DIR, os.path.basename(absolute))


def is_local_key(index: str) -> bool:
    """`index` is the key of a project-local index (the path of its `.qmd/index.yml`)."""
    return os.sep in index and is_local_config(index)


def server_name(index: str) -> str:
    """The name of an index's files beside other indexes' (its MCP server's PID, lock and
    log files, its kept MCP instructions): the index name, or `local-<12 hex of
    sha256(real path of its config)>` for a project-local index, whose name (`index`) the
    home index also carries (a symlinked way into the project names the same files)."""
    if not is_local_key(index):
        return index
    import hashlib

    digest = hashlib.sha256(os.path.realpath(index).encode("utf-8", "surrogatepass")).hexdigest()
    return LOCAL_PREFIX + digest[:12]


def index_name(index: str) -> str:
    """The index name of a key (a project-local index is named `index`, as the original's):
    what its token file is named after (`qmd token` run inside the project uses it)."""
    return local_index(index).name if is_local_key(index) else index


def find_local_config(start: str | os.PathLike[str] | None = None) -> Path | None:
    """`.qmd/index.yaml` or `.qmd/index.yml` in `start` (default: the working directory) or
    the nearest folder above it that has one; None when there is none.

    A folder this user cannot look into (`sudo -u alice qmd …` started in /root, a working
    folder at mode 000) cannot hold a project index they could use: it is passed over, as is
    someone else's `.qmd` they may not read. Their own `.qmd` they may not read is a QmdError
    naming it and the chmod: searching another index instead, or adding a collection to it,
    would quietly do the wrong thing."""
    try:
        folder = Path(os.path.abspath(start if start is not None else os.getcwd()))
    except OSError:  # the working directory was deleted
        return None
    while True:
        for name in LOCAL_CONFIG_NAMES:
            candidate = folder / LOCAL_DIR / name
            try:
                if stat.S_ISREG(os.stat(candidate).st_mode):
                    return candidate
            except PermissionError as exc:
                _unreadable_local_dir(folder / LOCAL_DIR, exc)
                break  # not this user's, or the folder cannot be looked into: look further up
            except (OSError, ValueError):  # none here (missing, not a folder, a link loop)
                continue
        if folder.parent == folder:
            return None
        folder = folder.parent


def _unreadable_local_dir(local: Path, exc: PermissionError) -> None:
    """Raise for this user's own `.qmd` they may not read; return for one of someone else's,
    or in a folder they cannot look into (see `find_local_config`)."""
    try:
        owner = os.lstat(local).st_uid
    except OSError:  # its folder cannot be looked into: nothing there is theirs to use
        return
    if owner != os.geteuid():
        return
    raise QmdError(
        f"cannot look into the project-local index folder {local}: {exc.strerror or exc}",
        f"make it accessible to you (chmod u+rwx {local}), or choose another index with --index NAME",
    )


def local_index(config_path: str | os.PathLike[str]) -> IndexPaths:
    """The project-local index whose config is `config_path` (its database beside it)."""
    config = Path(os.path.abspath(config_path))
    return IndexPaths(DEFAULT_INDEX, config.parent / LOCAL_INDEX_FILE, config, "local")


def resolve_index(name: str | None = None, cwd: str | os.PathLike[str] | None = None) -> IndexPaths:
    """The index a command uses.

    1. `--index NAME` (`name`): that named index, wherever the command runs; a `name` that is
       the path of a project-local config (how the harness keys those) is that index.
    2. else a project-local `.qmd/index.yml` (or `.yaml`) found from `cwd` (default: the
       working directory) upward: its `index.sqlite` beside it, as the original's `qmd init`.
    3. else the default index `index`.

    Named and default indexes live in the cache dir (`INDEX_PATH` overrides the file) with
    their config in the config dir.
    """
    if name is not None and os.sep in name and is_local_config(name):
        return local_index(name)
    if name is None:
        found = find_local_config(cwd)
        if found is not None:
            return local_index(found)
    source = "default" if name is None else "named"
    name = check_index_name(name or DEFAULT_INDEX)
    explicit = os.environ.get("INDEX_PATH")
    index_path = Path(explicit) if explicit else cache_dir() / f"{name}.sqlite"
    return IndexPaths(name, index_path.expanduser(), config_dir() / f"{name}.yml", source)


QUEUE_DIRS = ("tmp", "new", "cur", "failed")


@record(frozen=True)
class StateLayout:
    """Every path of the harness state dir (design §7), computed from its root.

    The updater, the hooks, the guard, the MCP daemon and doctor all find their files here,
    so each path is spelled once.
    """

    root: Path

    @classmethod
    def current(cls) -> StateLayout:
        """The layout of `state_dir()` (`$QMD_STATE_DIR`, else XDG), made absolute."""
        return cls(Path(os.path.abspath(state_dir())))

    # --- the reindex queue and the updater ---

    @property
    def queue(self) -> Path:
        return self.root / "queue"

    def q(self, name: str) -> Path:
        """`queue/tmp`, `queue/new`, `queue/cur` or `queue/failed`."""
        return self.queue / name

    @property
    def lock(self) -> Path:
        """The updater's global lock."""
        return self.root / "updater.lock"

    @property
    def holder(self) -> Path:
        """Who holds the updater lock: written by the holder, read by anyone who finds it busy."""
        return self.root / "updater.lock.json"

    @property
    def health(self) -> Path:
        """The health flag."""
        return self.root / "health.json"

    @property
    def failures(self) -> Path:
        return self.root / "failures"

    @property
    def stats(self) -> Path:
        return self.root / "updater" / "stats.json"

    @property
    def working(self) -> Path:
        """What the lock holder is updating or embedding right now; left behind only by a death."""
        return self.root / "updater" / "working.json"

    @property
    def repos(self) -> Path:
        """The repositories `qmd hooks install` enrolled."""
        return self.root / "hooks" / "repos.json"

    # --- logs ---

    @property
    def logs(self) -> Path:
        return self.root / "logs"

    @property
    def updater_log(self) -> Path:
        return self.logs / "updater.log"

    @property
    def hooks_log(self) -> Path:
        return self.logs / "hooks.log"

    # --- the agent guard ---

    @property
    def guard(self) -> Path:
        return self.root / "guard"

    @property
    def guard_folders(self) -> Path:
        """The knowledge-folder cache the guard reads (rewritten on every config save)."""
        return self.guard / "folders.json"

    @property
    def guard_blocks(self) -> Path:
        return self.guard / "blocks.jsonl"

    @property
    def guard_errors(self) -> Path:
        return self.guard / "errors.log"

    # --- MCP HTTP servers, doctor ---

    def mcp_pid_file(self, index: str) -> Path:
        return self.root / f"mcp-{index}.json"

    def mcp_lock(self, index: str) -> Path:
        return self.root / f"mcp-{index}.lock"

    def mcp_log(self, index: str) -> Path:
        return self.logs / f"mcp-{index}.log"

    @property
    def local_indexes(self) -> Path:
        """The project-local indexes (`.qmd/index.yml`) qmd has used: the updater, guard and
        doctor serve these beside the config dir's."""
        return self.root / "local-indexes.json"

    @property
    def doctor(self) -> Path:
        return self.root / "doctor"

    def ensure_queue(self) -> None:
        """Create queue/{tmp,new,cur,failed}; a QmdError naming the fix when something is in the way."""
        for name in QUEUE_DIRS:
            try:
                self.q(name).mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise QmdError(
                    f"cannot create the queue folder {self.q(name)}: {exc.strerror or exc}",
                    f"move away whatever is in the way under {self.root} (or set QMD_STATE_DIR to a writable folder)",
                ) from exc
