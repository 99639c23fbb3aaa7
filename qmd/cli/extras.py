"""`qmd init` and `--version`: what the original 2.8.3 offers beside search (the skill
commands: skills.py; completion: completion.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from qmd.cli.shared import out


def init(directory: Annotated[str | None, typer.Argument(help="The project folder (default: the working directory).")] = None) -> None:
    """Create a project-local index, as the original's `qmd init`: `.qmd/index.yml` (with the
    resolved model defaults) and `.qmd/index.sqlite`, used by every qmd command run inside."""
    import os
    from pathlib import Path

    from qmd.core.config import Config
    from qmd.core.errors import QmdError
    from qmd.core.paths import LOCAL_CONFIG_NAMES, LOCAL_DIR, local_index
    from qmd.index.folder_cache import register_local
    from qmd.llm.models import ROLES, resolve_model
    from qmd.store.store import Store

    root = Path(os.path.abspath(directory or os.getcwd()))
    if root.exists() and root.resolve() == Path.home().resolve():
        raise QmdError(
            "refusing to make a project-local index in your home folder",
            "run qmd init inside a project folder; your own index needs none (qmd collection add DIR)",
        )
    if not root.is_dir():
        raise QmdError(f"{root} is not a folder", "give the project folder: qmd init DIR")
    folder = root / LOCAL_DIR
    if folder.is_symlink():  # a cloned repository's `.qmd -> /elsewhere`: init wrote its config and index there
        raise QmdError(f"{folder} is a symbolic link (to {os.readlink(folder)}), not the folder qmd init makes", f"remove the link (rm {folder}), then: qmd init {root}")
    for path in (folder, *(folder / n for n in LOCAL_CONFIG_NAMES)):
        wrong = path.is_symlink() and not path.exists() or (path.exists() and path.is_dir() != (path == folder))
        if wrong:
            kind = "a broken link" if not path.exists() else "a folder" if path.is_dir() else "a file"
            raise QmdError(f"{path} is {kind}, not the {'folder' if path == folder else 'config file'} qmd init makes", f"move it aside, then: qmd init {root}")
    folder.mkdir(exist_ok=True)
    existing = [folder / n for n in LOCAL_CONFIG_NAMES if (folder / n).is_file()]
    config_path = existing[0] if existing else folder / "index.yml"
    if not existing:
        config = Config(config_path, {"collections": {}, "models": {role: resolve_model(role, None).spec for role in ROLES}})
        config.save()
        from qmd.core.trust import decide, record_trust

        decision = decide(config_path, config.raw)
        if decision.gated and not decision.allowed:  # your own custom defaults, written by you just now
            record_trust(config_path, decision.digest)
    ignore = folder / ".gitignore"
    if not os.path.lexists(ignore):  # a link there (dangling: write_text made its target, outside the project) is left alone
        ignore.write_text("# the index is rebuilt from the notes; the config travels with the repository\nindex.sqlite*\n*.lock\n")
    paths = local_index(config_path)
    with Store(paths.index_path, paths.config_path) as store:
        store.backend.open(create=True)
    register_local(config_path)
    out("ready to go with new local index\n")
    out(f"  config: {config_path}\n  index:  {paths.index_path}\n")
    out("Add the project's notes with: qmd collection add . --name NAME (run inside the project)\n")


def version_string() -> str:
    """`qmd <version> (<commit>)`, as the original prints its version and build commit."""
    from qmd.core.version import __version__

    commit = _commit()
    return f"qmd {__version__}" + (f" ({commit})" if commit else "")


def _commit() -> str:
    """The commit of the checkout qmd runs from (`-dirty` with changes under qmd/), else
    `source <digest>` (the build id's hash of the installed sources)."""
    import subprocess

    root = Path(__file__).resolve().parents[2]
    if (root / ".git").exists() and (root / "pyproject.toml").exists():
        def git(*args: str) -> str:
            return subprocess.run(["git", "-C", str(root), *args], capture_output=True, text=True, timeout=5, stdin=subprocess.DEVNULL).stdout.strip()

        try:
            head = git("rev-parse", "--short", "HEAD")
            if head:
                return f"{head}-dirty" if git("status", "--porcelain", "--untracked-files=no", "--", "qmd") else head
        except (OSError, subprocess.SubprocessError):
            pass
    from qmd.core.buildinfo import source_digest

    return "source " + source_digest()[:12]
