"""One error family for everything qmd reports to a person or an agent."""

from __future__ import annotations

from collections.abc import Callable


class QmdError(Exception):
    """An expected failure: a message saying what went wrong and a hint naming the fix.

    `hint` names the fix for whoever called: the Python API's (`api_hint`, e.g.
    `exist_ok=True`) when one is given, else the command's. `cli_hint` is always the command
    line's (`qmd collection remove NAME`): the CLI's error boundary prints that one.
    """

    def __init__(self, message: str, hint: str | None = None, *, api_hint: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.hint = api_hint or hint
        self.cli_hint = hint

    def __str__(self) -> str:
        return self.message if not self.hint else f"{self.message} (hint: {self.hint})"


class NotFoundError(QmdError):
    """A collection, document or context that does not exist."""


class ConfigError(QmdError):
    """A config file that cannot be read, parsed or written."""


class IndexBusyError(QmdError):
    """The index's writer lock is held by another process."""


class IndexAccessError(QmdError):
    """The index's files are sound, but the environment refuses this user reading or writing
    one of them (a mode, an owner, a read-only mount, a full disk): never damage, never a rebuild.

    `command` is the shell command that fixes it (a chmod; `df -h` for a full disk), for
    doctor's fix column; `hint` replaces the "make … to you" one built from `able`; `repair`
    (doctor --fix) is set when it is safe: only the -wal/-shm are refused, they and the index
    are this user's, and the index is readable and writable: they get the index's mode."""

    def __init__(
        self, message: str, command: str, able: str, repair: Callable[[], str] | None = None, *, owner: bool = True, hint: str | None = None,
    ) -> None:
        super().__init__(message, hint or f"make {able} to you ({command})" + (", or run qmd as the user who owns it" if owner else ""))
        self.command = command
        self.repair = repair


class IndexDamagedError(QmdError):
    """The index file is damaged (corrupt pages, a cut-short or foreign file): rebuild it."""
