"""The harness surface: what the harness packages (hooks/, updater/, doctor/, guards/) use of qmd
beyond the public API (`qmd`).

A library user needs none of it. The harness keeps its state in one folder (`StateLayout`,
`state_dir()`), writes files atomically (`write_json`, `write_text`, `replace_file`) and reads only regular files of a bounded size (`open_regular`, `read_regular`: a repository's link to /dev/zero), words an
OSError the environment is to blame for as a line and its fix (`denial`), takes
file locks (`lock_file`, `try_lock`), keeps PID records (`process_alive`,
`remove_own_record`), reads every index it serves from its config without opening it
(`index_keys`, `read_index`, `ConfiguredIndex`, `local_configs`, `local_trust`), rewrites the
guard's folder cache (`refresh_folder_cache`), and reports the build (`build_id`), the
built-in models and the code grammars (doctor). Together with `qmd`, `qmd.serve` and
`qmd.agents` it is all the harness may import of qmd (tests/qmd/test_architecture.py checks
it). Names are imported on first use, as in `qmd`: the guard's deny path takes the clock
only.
"""

from __future__ import annotations

TYPE_CHECKING = False

from qmd.core.lazy import lazy_exports

_EXPORTS = {
    # the state dir and the other folders
    "StateLayout": "core.paths",
    "QUEUE_DIRS": "core.paths",
    "state_dir": "core.paths",
    "config_dir": "core.paths",
    "cache_dir": "core.paths",
    "models_dir": "core.paths",
    "DEFAULT_INDEX": "core.paths",
    "within": "core.paths",
    # files, time, locks, processes
    "read_json": "core.fileio",
    "open_regular": "core.fileio",
    "read_regular": "core.fileio",
    "write_json": "core.fileio",
    "write_text": "core.fileio",
    "replace_file": "core.fileio",
    "denial": "core.fileio",
    "now_iso": "core.clock",
    "parse_iso": "core.clock",
    "age": "core.clock",
    "ago": "core.clock",
    "lock_file": "core.locks",
    "lock_folder": "core.locks",
    "try_lock": "core.locks",
    "is_locked": "core.locks",
    "FileLockHandle": "core.locks",
    "process_alive": "core.process",
    "remove_own_record": "core.process",
    # the indexes the harness serves, from their configs
    "index_keys": "core.indexes",
    "read_index": "core.indexes",
    "ConfiguredIndex": "core.indexes",
    "local_configs": "core.indexes",
    "local_trust": "index.folder_cache",
    "refresh_folder_cache": "index.folder_cache",
    "collect_folders": "index.folder_cache:collect",
    # what doctor reports
    "build_id": "core.buildinfo",
    "BUILTIN_MODELS": "core.defaults:BUILTIN",
    "grammar_status": "index.code_chunks",
    "language_of": "index.code_chunks",
    "GRAMMARS_INSTALL": "index.code_chunks",
}

__all__ = sorted(_EXPORTS)

__getattr__ = lazy_exports(__name__, _EXPORTS, base="qmd")


if TYPE_CHECKING:  # pragma: no cover - for type checkers and IDEs
    from qmd.core.buildinfo import build_id
    from qmd.core.clock import age, ago, now_iso, parse_iso
    from qmd.core.defaults import BUILTIN as BUILTIN_MODELS
    from qmd.core.fileio import denial, open_regular, read_json, read_regular, replace_file, write_json, write_text
    from qmd.core.indexes import ConfiguredIndex, index_keys, local_configs, read_index
    from qmd.core.locks import FileLockHandle, is_locked, lock_file, lock_folder, try_lock
    from qmd.core.paths import DEFAULT_INDEX, QUEUE_DIRS, StateLayout, cache_dir, config_dir, models_dir, state_dir, within
    from qmd.core.process import process_alive, remove_own_record
    from qmd.index.code_chunks import GRAMMARS_INSTALL, grammar_status, language_of
    from qmd.index.folder_cache import collect as collect_folders, local_trust, refresh_folder_cache
