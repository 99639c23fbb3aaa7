"""`interrupts_deferred` (qmd/core/cancel.py) holds Ctrl-C, SIGTERM and SIGHUP back over steps
that must happen together, then delivers them. SIGTERM (what `timeout`, `kill` and agent
harnesses send) was not held: it ended `collection rename` between the index and the config,
which then named the collection differently, searches found nothing under either name, and
the next update dropped and re-indexed every row, vectors lost (the session 21 red team)."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.run import qmd_env

# Each script starts from an interactive run's dispositions: a shell's background job (CI run
# with `&`) starts with SIGINT ignored, and a child inherits that.
DEFAULTS = "signal.signal(signal.SIGINT, signal.default_int_handler); signal.signal(signal.SIGTERM, signal.SIG_DFL); signal.signal(signal.SIGHUP, signal.SIG_DFL)\n"


def test_a_sigterm_inside_waits_for_the_block_then_ends_the_process() -> None:
    code = (
        "import os, signal, time\n"
        f"{DEFAULTS}"
        "from qmd.core.cancel import interrupts_deferred\n"
        "with interrupts_deferred():\n"
        "    os.kill(os.getpid(), signal.SIGTERM)\n"
        "    time.sleep(0.2)\n"
        "    print('the block ended', flush=True)\n"
        "print('after the block', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=qmd_env())
    assert proc.returncode == -signal.SIGTERM and proc.stdout == "the block ended\n", (proc.returncode, proc.stdout, proc.stderr)


def test_a_ctrl_c_inside_is_raised_after_the_block_and_a_handler_still_runs() -> None:
    code = (
        "import os, signal\n"
        f"{DEFAULTS}"
        "from qmd.core.cancel import interrupts_deferred\n"
        "signal.signal(signal.SIGHUP, lambda *a: print('hup handled', flush=True))\n"
        "try:\n"
        "    with interrupts_deferred():\n"
        "        os.kill(os.getpid(), signal.SIGINT)\n"
        "        os.kill(os.getpid(), signal.SIGHUP)\n"
        "        print('the block ended', flush=True)\n"
        "except KeyboardInterrupt:\n"
        "    print('interrupted after', flush=True)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=qmd_env())
    assert proc.returncode == 0 and proc.stdout == "the block ended\nhup handled\ninterrupted after\n", (proc.stdout, proc.stderr)


def _signalled(notes: Path, step: str, change: str, signum: int) -> int:
    """Run `change` (a Store call) on an index of `notes` in a fresh interpreter, `signum`
    sent to it right after the Collections method `step` (the first of the two steps) is
    done; its exit status."""
    code = (
        "import os, signal, sys\n"
        f"{DEFAULTS}"
        "import qmd\n"
        "from qmd.store.collections import Collections\n"
        "store = qmd.open_index(None)\n"
        f"store.add_collection({str(notes)!r}, name='notes')\n"
        f"first = Collections.{step}\n"
        "def signalled(self, *args):\n"
        "    done = first(self, *args)\n"
        f"    os.kill(os.getpid(), {int(signum)})  # the signal lands between the two steps\n"
        "    return done\n"
        f"Collections.{step} = signalled\n"
        "try:\n"
        f"    store.{change}\n"
        "except KeyboardInterrupt:\n"
        "    sys.exit(130)\n"
    )
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60, env=qmd_env())
    assert proc.returncode in (-signal.SIGTERM, 130), proc.stderr
    return proc.returncode


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_rename_signalled_between_its_index_and_its_config_does_both(isolated_home: Path, notes: Path, signum: int) -> None:
    _signalled(notes, "_rename_rows", "rename_collection('notes', 'renamed')", signum)
    import qmd

    with qmd.open_index(None) as store:
        assert list(store.config.collections()) == ["renamed"]
        assert len(store.ls("renamed")) == store.status().documents > 0  # the rows under the config's name, none left under the old one


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_a_remove_signalled_between_its_index_and_its_config_does_both(isolated_home: Path, notes: Path, signum: int) -> None:
    """SIGTERM ended `collection remove` after its rows were dropped: the config still listed
    the collection, with no documents (4 in 40 runs; the session 21 red team)."""
    _signalled(notes, "_drop", "remove_collection('notes')", signum)
    import qmd

    with qmd.open_index(None) as store:
        assert list(store.config.collections()) == [] and store.status().documents == 0
