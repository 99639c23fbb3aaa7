"""A pytest plugin (registered in tests/conftest.py): lists the tests not marked `slow` that took
longer than SLOW_S, setup and teardown included, at the end of the run, so that `-m "not slow"`
stays the quick run. A list, not a failure: a loaded machine stretches every test."""

from __future__ import annotations

import os

import pytest

SLOW_S = float(os.environ.get("QMD_TEST_SLOW_S", "5"))
_spent: dict[str, float] = {}
_unmarked: set[str] = set()


def pytest_runtest_logreport(report: pytest.TestReport) -> None:
    _spent[report.nodeid] = _spent.get(report.nodeid, 0.0) + report.duration
    if report.when == "setup" and "slow" not in report.keywords:
        _unmarked.add(report.nodeid)


def pytest_terminal_summary(terminalreporter: pytest.TerminalReporter) -> None:
    over = sorted(((spent, node) for node, spent in _spent.items() if node in _unmarked and spent > SLOW_S), reverse=True)
    if over:
        terminalreporter.section(f"not marked slow, over {SLOW_S:g} s (mark them, or make them cheaper)")
        for spent, node in over:
            terminalreporter.write_line(f"{spent:6.1f}s {node}")
