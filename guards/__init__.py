"""The agent guard: a fail-open PreToolUse hook that steers agents from grep sweeps of notes to qmd.

`qmd-guard` (`guards.hook:main`) is the hook itself: a lean console script that reads the
hook payload on stdin and the cached knowledge folders (`<state>/guard/folders.json`), and
prints a deny decision when a search would sweep a knowledge folder. `qmd guard …`
(`guards.cli:app`) explains decisions, summarises the block log and installs the hook.

This package imports nothing at import time: the hook pays only for what it uses.
"""
