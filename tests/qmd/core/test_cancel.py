"""Ctrl-C during `qmd embed` stops it even when the signal lands inside a C library's
callback into Python (llama.cpp's log hook), where Python prints "Exception ignored on
calling ctypes callback function" and drops the KeyboardInterrupt. CI once saw `qmd embed`
run to the end (exit 0) after such a SIGINT."""

from __future__ import annotations

import ctypes
import ctypes.util
import os
import signal
import time
from collections.abc import Iterator

import pytest

from qmd.core.cancel import checkpoint, interrupts_checked


@pytest.fixture(autouse=True)
def sigint_raises() -> Iterator[None]:
    """Python's own SIGINT handler for each test: a shell starts background jobs with SIGINT
    ignored, and these tests then saw no Ctrl-C at all (a CI started with `&`, 2026-12-02)."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    yield
    signal.signal(signal.SIGINT, previous)


def _sigint_inside_a_c_callback() -> None:
    """SIGINT delivered while libc's qsort calls a Python comparator: ctypes swallows the
    KeyboardInterrupt the handler raises there, as it does for llama.cpp's log callback."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"))
    compare = ctypes.CFUNCTYPE(ctypes.c_int, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int))
    sent: list[bool] = []

    def cmp(a, b):  # type: ignore[no-untyped-def]
        if not sent:
            sent.append(True)
            os.kill(os.getpid(), signal.SIGINT)
            time.sleep(0.05)  # the handler runs here, inside the callback
        return a[0] - b[0]

    values = (ctypes.c_int * 4)(3, 1, 2, 0)
    libc.qsort(values, 4, ctypes.sizeof(ctypes.c_int), compare(cmp))


@pytest.mark.filterwarnings("ignore::pytest.PytestUnraisableExceptionWarning")  # the swallowed interrupt, reproduced
def test_a_ctrl_c_swallowed_by_a_c_callback_stops_at_the_next_checkpoint() -> None:
    with interrupts_checked():
        _sigint_inside_a_c_callback()  # the KeyboardInterrupt is lost here...
        with pytest.raises(KeyboardInterrupt):
            checkpoint()  # ...and raised here
    checkpoint()  # outside the scope nothing is left over


def test_outside_the_scope_a_checkpoint_never_raises_for_a_signal() -> None:
    with pytest.raises(KeyboardInterrupt):
        os.kill(os.getpid(), signal.SIGINT)
        time.sleep(1)
    checkpoint()
