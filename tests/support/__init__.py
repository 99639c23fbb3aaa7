"""Helpers shared by the tests (fixtures live in conftest.py)."""
