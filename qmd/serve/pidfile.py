"""An HTTP server's files in the state dir: its PID file and its single-instance lock.

One server per index. The server holds `<state>/mcp-{index}.lock` (flock: the kernel
releases it when the process dies, however it dies) for its whole life, and writes
`<state>/mcp-{index}.json` = {pid, started_at, host, port, index, argv, build_id, key} once
its socket is bound (mode 0600: `key` is the secret with which it proves who it is,
qmd/serve/proof.py). A PID file whose lock nobody holds is stale.

`index` is an index's key (`IndexPaths.key`): its name, or for a project-local index the
absolute path of its `.qmd/index.yml` (what `--index` and the harness take). A local index
is named `local-<12 hex of sha256(real path of its config)>` in those file names, so its
server runs beside the home index's (whose name, `index`, a local index also carries).
"""

from __future__ import annotations

import json
import os
from dataclasses import asdict, dataclass
from pathlib import Path

from qmd.core.errors import QmdError
from qmd.core.fileio import write_json
from qmd.core.locks import FileLockHandle, is_locked, try_lock
from qmd.core.paths import DEFAULT_INDEX, LOCAL_PREFIX, StateLayout, is_local_key, server_name  # the name in an index's files (the kept MCP instructions use it too)


def stop_hint(index: str) -> str:
    """The `qmd mcp stop` line for the server of `index`."""
    if index == DEFAULT_INDEX:
        return "qmd mcp stop"
    if is_local_key(index):
        from qmd.core.paths import local_index

        return f"qmd mcp stop (inside {local_index(index).project_root}; anywhere: qmd mcp stop --index {index})"
    return f"qmd mcp stop --index {index}"


def pid_path(index: str) -> Path:
    """`<state>/mcp-{name}.json` (`server_name`)."""
    return StateLayout.current().mcp_pid_file(server_name(index))


def lock_path(index: str) -> Path:
    """`<state>/mcp-{name}.lock`."""
    return StateLayout.current().mcp_lock(server_name(index))


def log_path(index: str) -> Path:
    """`<state>/logs/mcp-{name}.log`: what a detached server writes."""
    return StateLayout.current().mcp_log(server_name(index))


@dataclass
class PidInfo:
    """The PID file (design §7): who serves this index, where, and which build."""

    pid: int
    started_at: str
    host: str
    port: int
    index: str
    argv: list[str]
    build_id: str
    key: str = ""  # the server's secret for /hello (qmd/serve/proof.py); the file is 0600

    @property
    def url(self) -> str:
        return f"http://{connect_host(self.host)}:{self.port}"


def connect_host(bind_host: str) -> str:
    """The address a local client uses to reach a server bound to `bind_host`."""
    host = bind_host.strip()
    if host in ("", "0.0.0.0", "*"):
        return "127.0.0.1"
    if host in ("::", "[::]"):
        return "[::1]"
    return f"[{host}]" if ":" in host and not host.startswith("[") else host


def load_pid_file(path: Path) -> PidInfo | None:
    """The PID file at `path`, or None if absent or malformed (a malformed file is treated as stale)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        info = PidInfo(
            pid=int(data["pid"]), started_at=str(data["started_at"]), host=str(data["host"]), port=int(data["port"]),
            index=str(data["index"]), argv=[str(a) for a in data["argv"]], build_id=str(data["build_id"]),
            key=str(data.get("key") or ""),
        )
    except (OSError, ValueError, KeyError, TypeError):
        return None
    return info if info.pid > 0 and 0 < info.port < 65536 else None


def read_pid_file(index: str) -> PidInfo | None:
    """The PID file of `index`, or None if there is none or it is malformed."""
    return load_pid_file(pid_path(index))


def write_pid_file(path: Path, info: PidInfo) -> None:
    """Atomically, mode 0600 (it holds the server's secret): a reader never sees half a file."""
    write_json(path, asdict(info), indent=2, mode=0o600)


def remove_pid_file(path: Path, pid: int | None = None) -> bool:
    """Remove the PID file (only if it records `pid`, when given); True if removed."""
    if pid is not None:
        info = load_pid_file(path)
        if info is not None and info.pid != pid:
            return False
    try:
        path.unlink()
    except FileNotFoundError:
        return False
    return True


def served_indexes() -> list[str]:
    """The indexes that have a PID file in the state dir (running or stale), sorted: by
    name, a project-local one by its key (the config path its PID file records; an
    unreadable one by its file name, which still finds the file to clean up)."""
    try:
        files = sorted(StateLayout.current().root.glob("mcp-*.json"))
    except OSError:
        return []
    out = []
    for path in files:
        name = path.name[len("mcp-"):-len(".json")]
        if name.startswith(LOCAL_PREFIX):
            info = load_pid_file(path)
            if info is not None and server_name(info.index) == name:
                name = info.index
        out.append(name)
    return sorted(out)


# --- the single-instance lock ---------------------------------------------------------


class InstanceLock:
    """Held by a running server for its whole life: `acquire()` refuses a second one."""

    def __init__(self, index: str) -> None:
        self.index = index
        self.path = lock_path(index)
        self._handle: FileLockHandle | None = None

    def acquire(self) -> InstanceLock:
        """Take the lock, or raise the QmdError that names the running server."""
        self._handle = try_lock(self.path)
        if self._handle is None:
            raise already_running(self.index, read_pid_file(self.index))
        return self

    def release(self) -> None:
        if self._handle is not None:
            self._handle.release()
            self._handle = None


def lock_is_held(index: str) -> bool:
    """Whether some process (a running server) holds the index's server lock."""
    return is_locked(lock_path(index))


def already_running(index: str, info: PidInfo | None) -> QmdError:
    """The error for a second server of `index` (with where the first one answers)."""
    where = f" at {info.url}/mcp (pid {info.pid})" if info is not None else ""
    return QmdError(f"an MCP server for index '{index}' is already running{where}", f"use it, or stop it first: {stop_hint(index)}")
