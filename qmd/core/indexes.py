"""Every index qmd serves, read from its config alone: no index file or database is opened.

The indexes are the `*.yml` configs of the config dir (except `models.yml`), keyed by name,
then the project-local `.qmd/index.yml` configs qmd has used (`local_configs`), keyed by the
path of the config (which `resolve_index` and `open_index` take). `read_index` reads one
config once, with its trust decision (qmd/core/trust.py), and says which collections
`update` indexes and where: a project-local config's relative paths taken from the project
root, and, while it is not trusted, its update commands and its collections outside the
project left out (`gated`). The updater routes a commit by this, the guard's folder cache
(qmd/index/folder_cache.py) is written from it, and the `Store` opened after it reuses the config
(`Store(..., config=...)`) instead of reading it again.
"""

from __future__ import annotations

import os
from pathlib import Path

from qmd.core.config import CollectionConfig, Config
from qmd.core.paths import IndexPaths, StateLayout, config_dir, resolve_index
from qmd.core.records import record

TYPE_CHECKING = False
if TYPE_CHECKING:
    from qmd.core.errors import QmdError
    from qmd.core.trust import Decision


def local_configs() -> list[Path]:
    """The project-local configs (`.qmd/index.yml`) qmd has used that still exist, from
    `<state>/local-indexes.json`: the updater, the guard and doctor serve them too."""
    import json

    try:
        with open(StateLayout.current().local_indexes, encoding="utf-8") as fh:
            data = json.load(fh)
    except (OSError, ValueError):
        return []
    paths = data.get("configs") if isinstance(data, dict) else None
    return [Path(p) for p in paths or [] if isinstance(p, str) and os.path.isfile(p)]


def sources() -> list[tuple[Path, str]]:
    """(config, key) of every index the harness serves: the config dir's (keyed by name),
    then the project-local ones qmd has used (keyed by the path of their `.qmd/index.yml`)."""
    try:
        named = [(p, p.stem) for p in sorted(config_dir().glob("*.yml")) if p.name != "models.yml" and p.is_file()]
    except OSError:
        named = []
    return named + [(p, str(p)) for p in local_configs()]


def index_keys() -> list[str]:
    """The key of every index the harness serves (see `sources`)."""
    return [key for _, key in sources()]


def gated(config_path: Path, colls: dict[str, CollectionConfig], decision: Decision) -> dict[str, CollectionConfig]:
    """The collections of a config as `update` reads them (changed in place): for a
    project-local config, relative paths taken from the project root and, when it is not
    trusted, no update commands and no collection outside the project."""
    if not decision.local:
        return colls
    from qmd.core.trust import collection_path

    outside = {name for name, _ in decision.gated.paths}
    out: dict[str, CollectionConfig] = {}
    for name, coll in colls.items():
        if decision.skipped and name in outside:
            continue
        coll.path = collection_path(str(coll.path), config_path)
        if decision.skipped:
            coll.update = None
        out[name] = coll
    return out


@record(frozen=True)
class ConfiguredIndex:
    """One index as its config says: read once, with the config's trust decision."""

    key: str  # the index's name, or the path of a project-local config
    config: Config  # `config.path` is the config file
    decision: Decision

    def paths(self) -> IndexPaths:
        """The index's files (`resolve_index` of its key)."""
        return resolve_index(self.key)

    def collections(self) -> dict[str, CollectionConfig]:
        """Collection name → its config, paths as `update` reads them (see `gated`)."""
        return gated(self.config.path, self.config.collections(), self.decision)

    def refused(self) -> QmdError | None:
        """Why no command may use this index's file (an untrusted project whose
        `.qmd/index.sqlite` leads outside it), or None."""
        if not (self.decision.gated.index_file and self.decision.skipped):
            return None
        from qmd.core.trust import index_file_error

        return index_file_error(self.config.path, self.decision.gated.index_file)


def read_index(key: str, config_path: Path | None = None) -> ConfiguredIndex:
    """The index `key` (a name, or a project-local config's path) from its config (default:
    where `resolve_index` puts it); ConfigError when the config cannot be read."""
    from qmd.core.trust import decide

    path = config_path if config_path is not None else resolve_index(key).config_path
    config = Config.load(path)
    return ConfiguredIndex(key, config, decide(path, config.raw))
