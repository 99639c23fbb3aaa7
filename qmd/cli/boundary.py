"""The CLI's one error boundary: every outcome of a command as the documented exit code.

Exit codes: 0 ok, 1 a QmdError (message + hint) or a refusal of the environment that
reached the top (permission denied, a read-only file system: the path to fix and the chmod
that fixes it; a full disk or a spent quota: the file, its file system and where to free
space; never "this is a bug"), 2 usage, 3 unexpected (traceback written under the
state dir's logs/), 130 on Ctrl-C.

Both entry paths end here: the typer app (main.py) and the lean path (fast.py), which runs
a command the way typer's `Command.main` does (`run_command`), so a command behaves the
same whichever path parsed its arguments. Nothing here imports typer: its exceptions can
only be raised once it is loaded, and are recognised then.
"""

from __future__ import annotations

import sys

from qmd.cli.shared import err
from qmd.core.errors import QmdError

TYPE_CHECKING = False
if TYPE_CHECKING:
    from collections.abc import Callable


def guarded(body: Callable[[], int]) -> int:
    """Run `body` and map every outcome to the documented exit code."""
    try:
        return body()
    except QmdError as exc:
        from qmd.core.text import line_safe

        # inert on a terminal: a message may name what a cloned config or a file name holds (`\r`, `\e[2K`)
        err(f"Error: {line_safe(exc.message, newlines=True)}")
        if exc.cli_hint:  # the command line's fix, not the Python API's
            err(f"hint: {line_safe(exc.cli_hint, newlines=True)}")
        return 1
    except KeyboardInterrupt:
        err("Interrupted.")
        return 130
    except BrokenPipeError:
        return 0
    except Exception as exc:  # the boundary for everything unexpected
        code = _typer_outcome(exc)
        if code is not None:
            return code
        from qmd.core.fileio import denial

        refused = denial(exc)
        if refused is not None:  # a mode, an owner, a read-only mount or a full disk: the environment's, not a bug
            err(f"Error: {refused[0]}")
            err(f"hint: {refused[1]}")
            return 1
        where = _crash_log(exc)
        err(f"Unexpected error: {type(exc).__name__}: {exc}")
        err(f"hint: this is a bug; the traceback is in {where}")
        return 3


def _typer_outcome(exc: Exception) -> int | None:
    """The exit code of typer's own exceptions (a usage error is 2); None for any other."""
    if "typer" not in sys.modules:
        return None
    import typer
    from typer._click import exceptions as click_exc  # typer vendors click

    if isinstance(exc, typer.Exit):
        return int(exc.exit_code or 0)
    if isinstance(exc, click_exc.ClickException):
        exc.show()
        return 2
    if isinstance(exc, typer.Abort):
        err("Interrupted.")
        return 130
    return None


def usage_error(exc: BaseException) -> bool:
    """Whether `exc` is a usage error of typer's (a bad option value: click shows it with the usage line)."""
    if "typer" not in sys.modules:
        return False
    from typer._click import exceptions as click_exc

    return isinstance(exc, click_exc.UsageError)


def run_command(command: Callable[[], object]) -> int:
    """Call a command's function as typer's `Command.main(standalone_mode=False)` does.

    EOF on stdin aborts ("Interrupted.", 130, after typer's blank line), Ctrl-C is a
    silent 130, a broken pipe is exit 1 with the streams made quiet for the shutdown flush;
    the return value is the exit code when it is an int.
    """
    import errno

    try:
        result = command()
    except EOFError:
        sys.stderr.write("\n")
        sys.stderr.flush()
        err("Interrupted.")
        return 130
    except KeyboardInterrupt:
        return 130
    except OSError as exc:
        if exc.errno != errno.EPIPE:
            raise
        from typer._click.utils import PacifyFlushWrapper

        sys.stdout = PacifyFlushWrapper(sys.stdout)
        sys.stderr = PacifyFlushWrapper(sys.stderr)
        sys.exit(1)
    return result if isinstance(result, int) else 0


def _crash_log(exc: BaseException) -> str:
    import os
    import time
    import traceback

    from qmd.core.paths import state_dir

    folder = state_dir() / "logs"
    path = folder / f"crash-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}.log"
    try:
        folder.mkdir(parents=True, exist_ok=True)
        path.write_text("qmd " + " ".join(sys.argv[1:]) + "\n\n" + "".join(traceback.format_exception(exc)), encoding="utf-8", errors="backslashreplace")
        return str(path)
    except OSError:
        try:
            path.unlink(missing_ok=True)  # created but not written (a full disk): no empty log to mislead whoever looks
        except OSError:
            pass
        return "(could not write a crash log; traceback follows)\n" + "".join(traceback.format_exception(exc))
