"""One error family for everything qmd reports to a person or an agent."""

from __future__ import annotations


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


class IndexDamagedError(QmdError):
    """The index file is damaged (corrupt pages, a cut-short or foreign file): rebuild it."""
