"""Moved to `updater.registry` (the updater owns the queue); kept for callers not yet switched."""

from updater.registry import editing, load

__all__ = ["editing", "load"]
