"""Git hooks that keep qmd fresh: `post-commit`, `post-merge` and `post-rewrite` queue a request.

The hook is POSIX sh and only enqueues (no Python, no index, no model, no network on the
commit path); the updater (`updater/`) does the work. Installation chains with whatever
was there the way pre-commit does: see `install.py`.
"""
